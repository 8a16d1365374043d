"""Stand-ins for the NVIDIA driver's interfaces, replaying a scenario: `pynvml.py` (nvidia-ml-py's module) and
`bin/nvidia-smi`. Build scenarios with `tests.support.health`; a child process finds them through `PYTHONPATH` /
`PATH` and the scenario file through `FAKE_NVML` / `FAKE_SMI`."""
