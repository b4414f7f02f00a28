"""PyTorch (Python) reference for bench/cpu_ddp.sh: LeNet-5 on Fashion-MNIST trained by
torch.nn.parallel.DistributedDataParallel over Gloo, one process per rank, in-memory data.

Same model, optimizer, global batch, thread count and normalization as mgpu-worker --mode ddp
--backend gloo; each rank takes every world-th image of a seeded permutation (as mgpu's
distributed sampler). Prints one JSON line: rank 0's epoch time and the test accuracy.
"""
import argparse
import json
import os
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn.functional as F

from lenet_reference import LeNet, load_split


def run(rank, args, port, queue):
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    torch.set_num_threads(args.threads)
    dist.init_process_group("gloo", rank=rank, world_size=args.world)
    torch.manual_seed(args.seed)
    train_x, train_y = load_split(args.data_dir, "train")
    test_x, test_y = load_split(args.data_dir, "t10k")
    model = torch.nn.parallel.DistributedDataParallel(LeNet())
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    per_rank = args.batch_size // args.world
    dist.barrier()
    start = time.perf_counter()
    generator = torch.Generator().manual_seed(args.seed)
    order = torch.randperm(len(train_x), generator=generator)[rank::args.world]
    model.train()
    for i in range(0, len(order), per_rank):
        idx = order[i:i + per_rank]
        optimizer.zero_grad()
        F.cross_entropy(model(train_x[idx]), train_y[idx]).backward()
        optimizer.step()
    dist.barrier()
    seconds = time.perf_counter() - start
    if rank == 0:
        model.eval()
        with torch.no_grad():
            correct = sum((model(test_x[i:i + 1000]).argmax(1) == test_y[i:i + 1000]).sum().item()
                          for i in range(0, len(test_x), 1000))
        queue.put({"epoch_seconds": seconds, "test_accuracy": 100.0 * correct / len(test_x),
                   "torch": torch.__version__})
    dist.destroy_process_group()


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--data-dir", default="/usr/share/datasets/fashion-mnist")
    parser.add_argument("--batch-size", type=int, default=64, help="global")
    parser.add_argument("--world", type=int, default=2)
    parser.add_argument("--threads", type=int, default=1, help="per rank")
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument("--port", type=int, default=29533)
    args = parser.parse_args()
    ctx = mp.get_context("spawn")
    queue = ctx.Queue()
    mp.spawn(run, args=(args, args.port, queue), nprocs=args.world, join=True)
    print(json.dumps(queue.get()))


if __name__ == "__main__":
    main()
