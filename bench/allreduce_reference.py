"""PyTorch reference for bench/allreduce_sweep.py: the same all-reduce sweep as
mgpu-allreduce-bench (in-place float32 sums, sizes doubling from --min-bytes to --max-bytes,
--warmup untimed and --iters timed back to back, CUDA-synchronized around them) through
torch.distributed's ProcessGroupNCCL. Start with torchrun; rank 0 prints one JSON line per size.
"""
import argparse
import json
import os
import time

import torch
import torch.distributed as dist


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--min-bytes", type=int, default=8)
    parser.add_argument("--max-bytes", type=int, default=256 << 20)
    parser.add_argument("--iters", type=int, default=20)
    parser.add_argument("--warmup", type=int, default=5)
    args = parser.parse_args()
    local_rank = int(os.environ["LOCAL_RANK"])
    torch.cuda.set_device(local_rank)
    dist.init_process_group("nccl", device_id=torch.device("cuda", local_rank))
    n = dist.get_world_size()
    size = args.min_bytes
    while size <= args.max_bytes:
        buffer = torch.empty(max(size // 4, 1), dtype=torch.float32, device="cuda")
        for _ in range(args.warmup):
            dist.all_reduce(buffer)
        dist.barrier()
        torch.cuda.synchronize()
        start = time.perf_counter()
        for _ in range(args.iters):
            dist.all_reduce(buffer)
        torch.cuda.synchronize()
        seconds = (time.perf_counter() - start) / args.iters
        algbw = buffer.numel() * 4 / seconds / 1e9
        if dist.get_rank() == 0:
            print(json.dumps({"bytes": buffer.numel() * 4, "time_us": seconds * 1e6, "algbw_gbps": algbw,
                              "busbw_gbps": algbw * 2 * (n - 1) / n}), flush=True)
        size *= 2
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
