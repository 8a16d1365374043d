"""The active tier's worker: every GPU of the node measured at once, in one child process that imports torch once.

Run by the gate as a script file (standard library and torch only, so the training Python runs it whether or not the
launcher is installed there): `python active.py [--allreduce]`. It sees exactly the GPUs of its environment's
`CUDA_VISIBLE_DEVICES` (the gate never widens it) and prints one JSON object.

Per GPU, in one thread each (all GPUs at once, as training loads them): bf16 matmul throughput timed by the wall
clock over a batch (one matmul timed with CUDA events does not see a co-tenant: time-slicing hides it from the
kernel's own timing), pinned host-to-device bandwidth, device-to-device copy bandwidth. With `--allreduce` and two
GPUs or more: the node's all-reduce bus bandwidth through NCCL in this one process (`torch.cuda.nccl`). Each figure
is the median of a few repetitions after a warm-up (the first call after idle runs 7-10% slow).
"""

from __future__ import annotations

import json
import statistics
import sys
import threading
import time
from typing import Any

MATMUL_N = 8192
MATMUL_BATCH = 10
REPETITIONS = 3
H2D_BYTES = 256 << 20
D2D_BYTES = 1 << 30
ALLREDUCE_BYTES = 256 << 20


def _median_time(run: Any, sync: Any) -> float:
    run()  # warm-up
    sync()
    times = []
    for _ in range(REPETITIONS):
        start = time.perf_counter()
        run()
        sync()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def _identity(torch: Any, device: int) -> dict[str, Any]:
    props = torch.cuda.get_device_properties(device)
    uuid = getattr(props, "uuid", None)
    bus = None
    if all(hasattr(props, a) for a in ("pci_domain_id", "pci_bus_id", "pci_device_id")):
        bus = f"{props.pci_domain_id:08x}:{props.pci_bus_id:02x}:{props.pci_device_id:02x}.0"
    return {"device": device, "name": props.name, "uuid": f"GPU-{uuid}" if uuid is not None else None, "bus_id": bus}


def _matmul_tflops(torch: Any, device: int, sync: Any) -> float:
    a = torch.randn(MATMUL_N, MATMUL_N, device=device, dtype=torch.bfloat16)
    b = torch.randn(MATMUL_N, MATMUL_N, device=device, dtype=torch.bfloat16)
    c = torch.empty(MATMUL_N, MATMUL_N, device=device, dtype=torch.bfloat16)

    def batch() -> None:
        for _ in range(MATMUL_BATCH):
            torch.mm(a, b, out=c)

    return 2 * MATMUL_N**3 * MATMUL_BATCH / _median_time(batch, sync) / 1e12


def _h2d_gbps(torch: Any, device: int, sync: Any, pinned: Any) -> float:
    target = torch.empty(H2D_BYTES, dtype=torch.uint8, device=device)
    return H2D_BYTES / _median_time(lambda: target.copy_(pinned, non_blocking=True), sync) / 1e9


def _d2d_gbps(torch: Any, device: int, sync: Any) -> float:
    source = torch.empty(D2D_BYTES, dtype=torch.uint8, device=device)
    copy = torch.empty_like(source)
    return D2D_BYTES / _median_time(lambda: copy.copy_(source), sync) / 1e9


def measure(torch: Any, device: int, pinned: Any) -> dict[str, Any]:
    """One GPU's figures; an exception becomes the GPU's `error`."""
    result = _identity(torch, device)
    try:
        torch.cuda.set_device(device)

        def sync() -> None:
            torch.cuda.synchronize(device)

        result["tflops"] = round(_matmul_tflops(torch, device, sync), 1)
        result["h2d_gbps"] = round(_h2d_gbps(torch, device, sync, pinned), 1)
        result["d2d_gbps"] = round(_d2d_gbps(torch, device, sync), 1)
        torch.cuda.empty_cache()
    except Exception as error:  # a CUDA error on this GPU: the gate judges it
        result["error"] = f"{type(error).__name__}: {error}"[:400]
    return result


def allreduce(torch: Any, count: int) -> float:
    """Bus bandwidth (GB/s) of an all-reduce over `count` GPUs of this process, NCCL's definition: size / time x
    2(n-1)/n."""
    elements = ALLREDUCE_BYTES // 4
    tensors = [torch.ones(elements, device=d, dtype=torch.float32) for d in range(count)]

    def sync() -> None:
        for d in range(count):
            torch.cuda.synchronize(d)

    seconds = _median_time(lambda: torch.cuda.nccl.all_reduce(tensors), sync)
    return round(ALLREDUCE_BYTES / seconds / 1e9 * 2 * (count - 1) / count, 1)


def main(argv: list[str]) -> int:
    started = time.perf_counter()
    answer: dict[str, Any] = {"format": 1}
    try:
        import torch  # type: ignore[import-not-found, unused-ignore]  # the training image has it
    except Exception as error:  # not installed, or broken: the gate skips this tier
        answer.update(status="no-torch", error=f"{type(error).__name__}: {error}"[:300])
        print(json.dumps(answer), flush=True)
        return 0
    answer["import_s"] = round(time.perf_counter() - started, 3)
    answer["torch"] = str(torch.__version__)
    count = torch.cuda.device_count() if torch.cuda.is_available() else 0
    if count == 0:
        answer.update(status="no-cuda")
        print(json.dumps(answer), flush=True)
        return 0
    pinned = torch.empty(H2D_BYTES, dtype=torch.uint8).pin_memory()
    results: list[dict[str, Any]] = [{"device": d} for d in range(count)]

    def work(device: int) -> None:
        results[device] = measure(torch, device, pinned)

    threads = [threading.Thread(target=work, args=(d,), name=f"gpu{d}") for d in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    answer.update(status="ok", gpus=results)
    if "--allreduce" in argv and count >= 2 and not any("error" in r for r in results):
        try:
            answer["allreduce_gbps"] = allreduce(torch, count)
        except Exception as error:
            answer["allreduce_error"] = f"{type(error).__name__}: {error}"[:400]
    answer["seconds"] = round(time.perf_counter() - started, 3)
    print(json.dumps(answer), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
