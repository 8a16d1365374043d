"""One rank of the bandwidth preflight (`python -m entrypoint.launch.preflight_worker` under torchrun).

All-reduces float32 tensors of several sizes over every process of every node (NCCL on GPUs, Gloo on CPU),
after warm-up, several timed repetitions each, and has each node's local rank 0 write the results as JSON. The
only module of the package that imports torch.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sizes", required=True, help="comma-separated message sizes in bytes")
    parser.add_argument("--iters", type=int, default=10)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--out", required=True)
    args = parser.parse_args()

    import torch  # type: ignore[import-not-found, unused-ignore]  # only in the training image
    import torch.distributed as dist  # type: ignore[import-not-found, unused-ignore]

    use_cuda = torch.cuda.is_available() and os.environ.get("VLA_DEVICE", "gpu") != "cpu"
    if use_cuda:
        torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", "0")))
    dist.init_process_group("nccl" if use_cuda else "gloo")
    world = dist.get_world_size()
    device = torch.device("cuda") if use_cuda else torch.device("cpu")

    def sync() -> None:
        if use_cuda:
            torch.cuda.synchronize()

    results = []
    for size in (int(s) for s in args.sizes.split(",")):
        tensor = torch.ones(max(1, size // 4), dtype=torch.float32, device=device)
        for _ in range(2):
            dist.all_reduce(tensor)
        sync()
        busbws = []
        for _ in range(args.repeats):
            dist.barrier()
            start = time.perf_counter()
            for _ in range(args.iters):
                dist.all_reduce(tensor)
            sync()
            seconds = (time.perf_counter() - start) / args.iters
            algbw = tensor.numel() * 4 / seconds
            busbws.append(algbw * 2 * (world - 1) / world if world > 1 else algbw)
        results.append(
            {
                "bytes": tensor.numel() * 4,
                "busbw_gbps": [round(b / 1e9, 3) for b in busbws],
                "median_gbps": round(statistics.median(busbws) / 1e9, 3),
            }
        )
    if int(os.environ.get("LOCAL_RANK", "0")) == 0:  # every node's launcher reads its own copy
        with open(args.out, "w", encoding="utf-8") as handle:
            json.dump(
                {"world_size": world, "backend": dist.get_backend(), "device": str(device), "results": results}, handle
            )
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
