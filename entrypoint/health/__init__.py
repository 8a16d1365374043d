"""The node health gate: is this node fit to train, before GPU time is spent?

- `spec`      what the gate will run, decided with the plan (pure).
- `probe`     the passive tier's child: NVML (`pynvml`) or `nvidia-smi`, and the kernel log (`xid`).
- `active`    the active tier's child: bf16 matmul, host-to-device and device copy bandwidth, all-reduce (torch).
- `tiers`     starting and reading back both children, each bounded (`children`).
- `facts`     typed facts; `ports` RDMA ports against their peers; `sku` floors per GPU model.
- `verdict`   pure functions from facts to findings and table marks.
- `exchange`  the nodes' figures shared through the log folder; `table` the whole job's table.
- `gate`      the gate itself; `restart` its run before an in-job restart (the attempt shim) and the blame rule.
"""
