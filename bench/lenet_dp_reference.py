"""PyTorch reference for bench/dp_bench.py: the classic MNIST experiment's recipe — LeNet-5,
batch 32, Adam 1e-3, a DataLoader with --num-workers worker processes doing ToTensor + Normalize
per sample — one epoch on one GPU, under nn.DataParallel over --gpus GPUs (the batch of 32 split
among them), or with --ddp under DistributedDataParallel: --gpus processes over NCCL, each with a
DistributedSampler and its own batch of 32. Reads MNIST-format IDX files (gzip) from --data-dir.
Prints one JSON line: epoch seconds (rank 0, between barriers under DDP) and test accuracy.

--max-steps N times only steps 21..N of the epoch instead (nn.DataParallel on LeNet can take
minutes per epoch): the line then has seconds_per_step, steps_measured and
epoch_seconds_projected (seconds per step x steps per epoch), and no accuracy.
"""
import argparse
import gzip
import json
import os
import struct
import time

import numpy as np
import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn as nn
import torch.nn.functional as F

from reference_train import LeNet

WARMUP_STEPS = 20  # with --max-steps: cuDNN's search and the loader's start are not timed


def read_idx(path):
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rb") as f:
        data = f.read()
    rank = data[3]
    dims = struct.unpack(">" + "I" * rank, data[4:4 + 4 * rank])
    return np.frombuffer(data, dtype=np.uint8, offset=4 + 4 * rank).reshape(dims)


def find(folder, stem):
    for name in (stem, stem + ".gz"):
        if os.path.exists(os.path.join(folder, name)):
            return os.path.join(folder, name)
    raise SystemExit(f"{stem}[.gz] not found in {folder}")


class Images(torch.utils.data.Dataset):
    """uint8 images; per sample ToTensor + Normalize((0.1307,), (0.3081,)) as the seed did."""

    def __init__(self, images, labels):
        self.images, self.labels = images, labels

    def __len__(self):
        return len(self.labels)

    def __getitem__(self, i):
        x = torch.from_numpy(self.images[i].astype(np.float32) / 255.0).unsqueeze(0)
        return (x - 0.1307) / 0.3081, int(self.labels[i])


def train(rank, args, queue):
    ddp = args.ddp and args.gpus > 1
    if ddp:
        os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(args.port))
        dist.init_process_group("nccl", rank=rank, world_size=args.gpus)
    # Not for nn.DataParallel: its replicas run in new threads every step and cuDNN's autotuning
    # cache is per thread, so it would re-tune every step (see reference_train.py).
    torch.backends.cudnn.benchmark = ddp or args.gpus == 1
    torch.cuda.set_device(rank)
    device = torch.device("cuda", rank)
    train_set = Images(read_idx(find(args.data_dir, "train-images-idx3-ubyte")),
                       read_idx(find(args.data_dir, "train-labels-idx1-ubyte")))
    sampler = torch.utils.data.distributed.DistributedSampler(train_set, shuffle=True) if ddp else None
    # fork, as under torchrun: a rank made by mp.spawn would spawn its workers, each a new
    # interpreter importing torch, inside the timed epoch (e2e_reference.py, WORKER_START).
    loader = torch.utils.data.DataLoader(train_set, batch_size=args.batch_size, shuffle=sampler is None,
                                         sampler=sampler, num_workers=args.num_workers, pin_memory=True,
                                         persistent_workers=args.num_workers > 0,
                                         multiprocessing_context="fork" if args.num_workers > 0 else None)
    model = LeNet().to(device)
    if ddp:
        model = nn.parallel.DistributedDataParallel(model, device_ids=[rank])
    elif args.gpus > 1:
        model = nn.DataParallel(model, device_ids=list(range(args.gpus)))
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    if ddp:
        dist.barrier()
    start = time.perf_counter()
    for step, (x, y) in enumerate(loader, 1):
        if step == WARMUP_STEPS + 1 and args.max_steps:
            torch.cuda.synchronize()
            start = time.perf_counter()
        x, y = x.to(device, non_blocking=True), y.to(device, non_blocking=True)
        optimizer.zero_grad(set_to_none=True)
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        optimizer.step()
        if step == args.max_steps:
            break
    torch.cuda.synchronize()
    if ddp:
        dist.barrier()
    seconds = time.perf_counter() - start
    if rank == 0 and args.max_steps:
        per_step = seconds / (args.max_steps - WARMUP_STEPS)
        queue.put({"impl": "pytorch-ddp" if ddp else ("pytorch-dp" if args.gpus > 1 else "pytorch"), "gpus": args.gpus,
                   "seconds_per_step": per_step, "steps_measured": args.max_steps - WARMUP_STEPS,
                   "epoch_seconds_projected": per_step * len(loader), "batch_size": args.batch_size,
                   "num_workers": args.num_workers})
    elif rank == 0:
        test_x = torch.from_numpy(read_idx(find(args.data_dir, "t10k-images-idx3-ubyte")).astype(np.float32) / 255.0)
        test_y = torch.from_numpy(read_idx(find(args.data_dir, "t10k-labels-idx1-ubyte")).astype(np.int64))
        model.eval()
        with torch.no_grad():
            x = ((test_x - 0.1307) / 0.3081).unsqueeze(1).to(device)
            accuracy = (model(x).argmax(1).cpu() == test_y).float().mean().item() * 100
        impl = "pytorch-ddp" if ddp else ("pytorch-dp" if args.gpus > 1 else "pytorch")
        queue.put({"impl": impl, "gpus": args.gpus, "epoch_seconds": seconds, "test_accuracy": accuracy,
                   "batch_size": args.batch_size, "num_workers": args.num_workers})
    if ddp:
        dist.destroy_process_group()


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--data-dir", required=True)
    parser.add_argument("--gpus", type=int, default=1, help="1: one GPU; more: nn.DataParallel, or DDP with --ddp")
    parser.add_argument("--ddp", action="store_true", help="one process per GPU, DistributedDataParallel over NCCL")
    parser.add_argument("--batch-size", type=int, default=32, help="per process")
    parser.add_argument("--num-workers", type=int, default=4)
    parser.add_argument("--port", type=int, default=29541)
    parser.add_argument("--max-steps", type=int, default=0,
                        help=f"time steps {WARMUP_STEPS + 1}..N only and project the epoch (0: the whole epoch)")
    args = parser.parse_args()
    if args.max_steps and args.max_steps <= WARMUP_STEPS:
        parser.error(f"--max-steps must exceed the {WARMUP_STEPS} warm-up steps")
    queue = mp.get_context("spawn").Queue()
    if args.ddp and args.gpus > 1:
        mp.spawn(train, args=(args, queue), nprocs=args.gpus, join=True)
    else:
        train(0, args, queue)
    print(json.dumps(queue.get()))


if __name__ == "__main__":
    main()
