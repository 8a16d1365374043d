"""The live event files: training output, GPU samples and job events written by the metrics thread and read back
with TensorBoard's own reader (its event accumulator), as the TensorBoard a user starts would read them.

The writer runs in its thread as in a job; each test ends it with `close` (bounded) and then reads the folder. A
fake NVML binding stands in for a GPU; without one the writer says so once and writes no GPU value."""

from __future__ import annotations

import itertools
import threading
from pathlib import Path
from types import SimpleNamespace

import pytest
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

from entrypoint.core.messages import Text
from entrypoint.report.gpus import GpuSample, Nvml, open_nvml
from entrypoint.report.metrics import Metrics
from entrypoint.report.steps import parse_step, seconds_per_step

OUTPUT = (
    "12:00:00.000 [I] step=0 loss=1.6075 lr=2.50e-08 grad_norm=1.67 time=19.1s\n"
    "Training:  10%|#         | 5/50 [00:01<00:09]\r"
    "12:00:02.000 [I] step=10 loss=0.9000 lr=2.50e-06 grad_norm=1.10 time=2.0s\n"
    "12:00:04.000 [I] step=20 loss=0.5000 lr=2.50e-06 grad_norm=0.90 time=4.0s\n"
    "Saved checkpoint at step 25 -> https://user:s3cretPASS@cfs.example/ckpt/25?X-Amz-Signature=abcdef123456\n"
)


class FakeNvml:
    """pynvml's calls for `count` GPUs; `fail` names queries the GPU does not support."""

    NVML_CLOCK_SM = 1
    NVML_TEMPERATURE_GPU = 0

    def __init__(self, count: int = 2, fail: tuple[str, ...] = (), init_error: str | None = None) -> None:
        self.count, self.fail, self.init_error, self.shut = count, fail, init_error, False

    def _check(self, name: str) -> None:
        if name in self.fail:
            raise RuntimeError("Not Supported")

    def nvmlInit(self) -> None:
        if self.init_error:
            raise RuntimeError(self.init_error)

    def nvmlShutdown(self) -> None:
        self.shut = True

    def nvmlDeviceGetCount(self) -> int:
        return self.count

    def nvmlDeviceGetHandleByIndex(self, index: int) -> int:
        return index

    def nvmlDeviceGetUtilizationRates(self, h: int) -> SimpleNamespace:
        self._check("utilization")
        return SimpleNamespace(gpu=90 + h)

    def nvmlDeviceGetMemoryInfo(self, h: int) -> SimpleNamespace:
        return SimpleNamespace(used=(1000 + h) * 2**20, total=143771 * 2**20)

    def nvmlDeviceGetPowerUsage(self, h: int) -> int:
        self._check("power")
        return 690_000

    def nvmlDeviceGetClockInfo(self, h: int, kind: int) -> int:
        return 1500

    def nvmlDeviceGetTemperature(self, h: int, kind: int) -> int:
        return 60 + h

    def nvmlDeviceGetCurrentClocksEventReasons(self, h: int) -> int:
        return 0x4


def read(folder: Path) -> EventAccumulator:
    accumulator = EventAccumulator(str(folder))
    accumulator.Reload()
    return accumulator


def scalars(acc: EventAccumulator, tag: str) -> list[tuple[int, float]]:
    return [(e.step, round(e.value, 4)) for e in acc.Scalars(tag)]


def texts(acc: EventAccumulator) -> str:
    if "events/text_summary" not in acc.Tags()["tensors"]:
        return ""
    return "\n".join(b.decode() for e in acc.Tensors("events/text_summary") for b in e.tensor_proto.string_val)


def writer(folder: Path | None, said: list[Text], **kwargs: object) -> Metrics:
    options: dict[str, object] = {"batch_size": 256, "interval_s": 0, "say": said.append, **kwargs}
    metrics = Metrics(folder, **options)
    metrics.start()
    return metrics


def test_training_scalars_saves_and_the_end_are_read_back_by_tensorboard(tmp_path: Path) -> None:
    said: list[Text] = []
    metrics = writer(tmp_path / "run", said)
    metrics.feed(OUTPUT[:50])  # a chunk boundary inside a line
    metrics.feed(OUTPUT[50:])
    metrics.close(0, "succeeded")
    acc = read(tmp_path / "run")
    assert scalars(acc, "train/loss") == [(0, 1.6075), (10, 0.9), (20, 0.5)]
    assert scalars(acc, "train/grad_norm") == [(0, 1.67), (10, 1.1), (20, 0.9)]
    assert [s for s, _ in scalars(acc, "train/lr")] == [0, 10, 20]
    assert scalars(acc, "train/interval_s") == [(0, 19.1), (10, 2.0), (20, 4.0)]
    # seconds per step from openpi's own `time` over the steps between lines; the first line includes start-up
    assert scalars(acc, "train/step_time_s") == [(10, 0.2), (20, 0.4)]
    assert scalars(acc, "train/samples_per_s") == [(10, 1280.0), (20, 640.0)]
    assert scalars(acc, "events/checkpoint") == [(25, 25.0)]
    assert scalars(acc, "events/exit_code") == [(25, 0.0)]
    shown = texts(acc)
    assert "checkpoint saved at step 25" in shown and "第 25 步的检查点已保存" in shown
    assert "ended with exit code 0 (succeeded)" in shown
    assert "s3cretPASS" not in shown and "abcdef123456" not in shown  # masked in this sink too
    assert said == [] and metrics.dropped == 0


def test_restarts_are_events_and_the_first_line_after_one_has_no_step_time(tmp_path: Path) -> None:
    """The supervisor sees the new attempt after attempt 0's last line (step 12) reached the writer."""
    metrics: Metrics

    def attempts() -> list[tuple[int, str | None]]:
        if metrics._last_step < 12:
            return [(0, None)]
        return [(0, "collective-error"), (1, None)]

    metrics = writer(tmp_path / "run", [], attempts=attempts)
    metrics.feed("step=10 loss=0.5 time=2.0s\nstep=12 loss=0.4 time=0.8s\n")
    metrics.feed("step=10 loss=0.45 time=30.0s\nstep=11 loss=0.44 time=0.4s\n")
    metrics.close(0, "succeeded")
    acc = read(tmp_path / "run")
    assert scalars(acc, "events/restart") == [(12, 1.0)]
    assert "restart 1: attempt 0 ended (collective-error)" in texts(acc)
    assert scalars(acc, "train/step_time_s") == [(12, 0.4), (11, 0.4)]  # no 30 s "step" across the restart


def test_gpu_samples_every_interval_per_gpu(tmp_path: Path) -> None:
    fake = FakeNvml(count=2, fail=("power",))
    clock = iter(float(t) for t in range(1000, 100_000, 6))  # 6 s pass at every look at the clock
    said: list[Text] = []
    metrics = writer(tmp_path / "run", said, interval_s=10, nvml=lambda: open_nvml(fake), clock=lambda: next(clock))
    metrics.feed("step=1 loss=0.5\n" * 3)
    metrics.close(0, "succeeded")
    acc = read(tmp_path / "run")
    tags = acc.Tags()["scalars"]
    for gpu in (0, 1):
        assert scalars(acc, f"gpu{gpu}/utilization_pct")[0][1] == 90.0 + gpu
        assert scalars(acc, f"gpu{gpu}/temperature_c")[0][1] == 60 + gpu
        assert scalars(acc, f"gpu{gpu}/memory_used_mib")[0][1] == 1000 + gpu
        assert scalars(acc, f"gpu{gpu}/throttle_reasons")[0][1] == 4
        assert scalars(acc, f"gpu{gpu}/sm_clock_mhz")[0][1] == 1500
        assert f"gpu{gpu}/power_w" not in tags  # a query the GPU does not support is left out, not fatal
    steps = [s for s, _ in scalars(acc, "gpu0/utilization_pct")]
    assert len(steps) >= 2 and all(b - a >= 10 for a, b in itertools.pairwise(steps)), steps
    assert fake.shut and said == []


@pytest.mark.parametrize(
    ("binding", "reason"),
    [
        pytest.param(
            FakeNvml(init_error="NVML Shared Library Not Found"), "NVML Shared Library Not Found", id="no-lib"
        ),
        pytest.param(FakeNvml(count=0), "NVML sees no GPU", id="no-gpu"),
    ],
)
def test_no_gpu_is_said_once_and_no_gpu_value_is_written(tmp_path: Path, binding: FakeNvml, reason: str) -> None:
    said: list[Text] = []
    metrics = writer(tmp_path / "run", said, interval_s=1, nvml=lambda: open_nvml(binding))
    metrics.feed("step=1 loss=0.5\n")
    metrics.close(0, "succeeded")
    assert len(said) == 1 and reason in said[0].en and "没有 GPU 采样" in said[0].zh
    assert not [t for t in read(tmp_path / "run").Tags()["scalars"] if t.startswith("gpu")]


def test_without_the_module_nvml_says_which_package(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(__import__("sys").modules, "pynvml", None)  # `import pynvml` raises ImportError
    found = open_nvml()
    assert isinstance(found, Text) and "nvidia-ml-py" in found.en


def test_an_unwritable_folder_is_said_once_and_training_output_still_flows(tmp_path: Path) -> None:
    blocker = tmp_path / "events"
    blocker.write_text("a file where the folder should be")
    said: list[Text] = []
    metrics = writer(blocker / "node0", said)
    metrics.feed(OUTPUT)
    metrics.close(0, "succeeded")
    assert len(said) == 1 and "cannot be written" in said[0].en and "VLA_TENSORBOARD_DIR" in said[0].en


class StuckFile:
    """An event file on storage that stopped answering: every write blocks until released."""

    def __init__(self, _folder: Path) -> None:
        self.release = threading.Event()

    def scalar(self, *_: object) -> None:
        self.release.wait(30)

    text = scalar

    def flush(self) -> None: ...

    def close(self) -> None:
        self.release.set()


def test_hung_storage_never_blocks_the_relay_and_close_is_bounded(tmp_path: Path) -> None:
    files: list[StuckFile] = []

    def stuck(folder: Path) -> StuckFile:
        files.append(StuckFile(folder))
        return files[-1]

    said: list[Text] = []
    metrics = writer(tmp_path / "run", said, sink=stuck)
    lines = "".join(f"step={i} loss=0.5\n" for i in range(6000))
    metrics.feed(lines)  # returns at once: the queue takes what it can, the rest is dropped and counted
    metrics.close(0, "succeeded", wait_s=0.5)
    files[0].release.set()
    assert metrics._thread is not None
    metrics._thread.join(10)  # released, it drains its queue and ends: nothing is left running
    assert not metrics._thread.is_alive() and metrics.dropped > 0
    assert [t.en.split(":")[0] for t in said] == ["TensorBoard event files in " + str(tmp_path / "run")]


def test_no_folder_means_no_thread_and_nothing_written(tmp_path: Path) -> None:
    metrics = writer(None, [])
    metrics.feed(OUTPUT)
    metrics.close(0, "succeeded")
    assert list(tmp_path.iterdir()) == []


OPENPI_VALUES = {"loss": 0.5, "lr": 1e-5, "grad_norm": 2.0, "time": 1.5}


@pytest.mark.parametrize(
    ("line", "step", "values"),
    [
        pytest.param("step=3 loss=0.5 lr=1e-05 grad_norm=2.0 time=1.5s", 3, OPENPI_VALUES, id="openpi"),
        pytest.param("12:00:01.250 [I] step=4 loss=nan", 4, {"loss": float("nan")}, id="nan-loss"),
        pytest.param("step=5 loss=0.1 api_key=123456789 token=99", 5, {"loss": 0.1}, id="secret-names-dropped"),
        pytest.param("step=6 loss=0.1 " + " ".join(f"k{i}={i}" for i in range(40)), 6, None, id="bounded"),
    ],
)
def test_progress_lines_as_numbers(line: str, step: int, values: dict[str, float] | None) -> None:
    parsed = parse_step(line)
    assert parsed is not None and parsed.step == step
    if values is None:
        assert len(parsed.values) == 16
        return
    assert set(parsed.values) == set(values)
    for name, value in values.items():
        assert parsed.values[name] == pytest.approx(value, nan_ok=True)


def test_seconds_per_step_falls_back_to_the_line_clock() -> None:
    first, second = parse_step("23:59:59.000 [I] step=10 loss=1"), parse_step("00:00:03.000 [I] step=14 loss=1")
    assert first is not None and second is not None
    assert seconds_per_step(second, first) == 1.0  # across midnight
    assert seconds_per_step(first, None) is None and seconds_per_step(first, second) is None


def test_a_gpu_sample_is_named_values() -> None:
    nvml = open_nvml(FakeNvml(count=1))
    assert isinstance(nvml, Nvml)
    (sample,) = nvml.sample()
    assert sample == GpuSample(
        0,
        {
            "utilization_pct": 90.0,
            "memory_used_mib": 1000.0,
            "memory_total_mib": 143771.0,
            "power_w": 690.0,
            "sm_clock_mhz": 1500.0,
            "temperature_c": 60.0,
            "throttle_reasons": 4.0,
        },
    )


def test_the_nvml_calls_exist_in_the_real_binding() -> None:
    """The fake above answers the calls `gpus.Nvml` makes; the real `pynvml` (nvidia-ml-py) must have them too."""
    import pynvml

    fake_calls = {name for name in vars(FakeNvml) if name.startswith(("nvml", "NVML_"))}
    missing = sorted(name for name in fake_calls if not hasattr(pynvml, name))
    assert not missing and len(fake_calls) == 12
