"""PyTorch's end-to-end training from a JPEG folder for bench/e2e_bench.py (issue 39), in its faster
form: DataLoader + torchvision decoding and RandomResizedCrop(224) + flip in --workers worker
processes per GPU (uint8 tensors, pin_memory, persistent workers), normalization, the float
conversion and channels_last on the GPU, autocast bf16, SGD with momentum; one GPU, or
DistributedDataParallel over --world GPUs (one process each, DistributedSampler). The models are
torchvision's resnet18/resnet50 with the folder's class count (mgpu's ImageNet-stem layout at
224 px). Prints one JSON line.

    python3 bench/e2e_reference.py --data-dir DIR --model resnet50 [--world 1] [--workers 8]
        [--batch 256] [--warmup 30] [--steps 100]

Throughput: the steps after the loader's head start is used up, timed between two
synchronizations. Each of the W workers builds whole batches, and the DataLoader keeps
W * prefetch_factor of them requested: at start-up the workers fill that stock while the first
steps run (cuDNN's algorithm search among them), and the steps that take batches from the stock
run at the GPU's pace, not the loader's. So timing starts, after --warmup steps, at the first step
that waited DRAINED_WAIT or more for its batch (on any rank): every batch built by then has been
used, and the ones the workers are building are part-built, as at the end of the timing, so that
from there the steps run at the loader's pace. A loader that never falls behind the GPU has no
such step, and is timed over the last MIN_TIMED_STEPS steps ("stock_drained": false). The workers
finish their batches in bursts (each builds a whole batch, all started together), so a steady
loader's steps wait once a burst, not every step: a rule of several waits in a row never fired
for ResNet-18 at 16 workers (2x H100, 2026-11-26). (Timed from the warm-up's end instead, with
prefetch_factor 4, ResNet-18 on 2 GPUs read 22,055 img/s over 62 steps: the GPUs' pace, not its
16 workers' per GPU; 2x H100, 2026-11-26.) CPU cores used: CPU seconds of the training process
and its loader workers (from /proc, all ranks) over the same wall time. Needs torchvision and
Pillow (bench/setup_bench_env.sh's venv).
"""
import argparse
import json
import os
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn.functional as F

PREFETCH_FACTOR = 2  # batches requested ahead per worker (DataLoader's default)
DRAINED_WAIT = 0.002  # seconds a step waits for its batch once the workers' stock is used up
MIN_TIMED_STEPS = 20  # timed at least, where the stock never drains
# The loader workers' start: fork, Linux's default and what they get under torchrun. A rank made
# by mp.spawn has "spawn" as its default, and its workers would each start a new interpreter and
# import torch: rank 0's first batch came at 21 s instead of 4 s with 4 workers per rank on a
# 2-core VM, and the 2-GPU run took about 130 s on a 32-core host (2026-11-26).
WORKER_START = "fork"

MEAN = (0.485 * 255, 0.456 * 255, 0.406 * 255)
STD = (0.229 * 255, 0.224 * 255, 0.225 * 255)


def cpu_seconds(pids):
    """User + system CPU seconds of these processes so far (Linux /proc)."""
    ticks = os.sysconf("SC_CLK_TCK")
    total = 0.0
    for pid in pids:
        try:
            with open(f"/proc/{pid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            total += (int(fields[11]) + int(fields[12])) / ticks  # utime, stime
        except (OSError, IndexError, ValueError):
            pass  # a worker that is gone counts nothing
    return total


def loader(args, rank, world):
    from torchvision import datasets, transforms

    transform = transforms.Compose([transforms.RandomResizedCrop(224), transforms.RandomHorizontalFlip(),
                                    transforms.PILToTensor()])
    data = datasets.ImageFolder(os.path.join(args.data_dir, "train"), transform=transform)
    sampler = torch.utils.data.DistributedSampler(data, world, rank, shuffle=True) if world > 1 else None
    return data, torch.utils.data.DataLoader(
        data, batch_size=args.batch, shuffle=sampler is None, sampler=sampler, num_workers=args.workers,
        pin_memory=True, persistent_workers=args.workers > 0, drop_last=True,
        prefetch_factor=PREFETCH_FACTOR if args.workers > 0 else None,
        multiprocessing_context=WORKER_START if args.workers > 0 else None)


def waited_for_batch(waited, world, device):
    """Whether this step waited DRAINED_WAIT or more for its batch, on any rank (a collective, so
    that every rank starts its clock at the same step)."""
    drained = waited >= DRAINED_WAIT
    if world == 1:
        return drained
    flag = torch.tensor([1.0 if drained else 0.0], device=device)
    dist.all_reduce(flag, op=dist.ReduceOp.MAX)
    return flag.item() > 0


def run(rank, world, args, queue):
    import torchvision

    if world > 1:
        os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
        os.environ.setdefault("MASTER_PORT", str(args.port))
        dist.init_process_group("nccl", rank=rank, world_size=world)
    torch.cuda.set_device(rank)
    device = torch.device("cuda", rank)
    torch.backends.cudnn.benchmark = True
    data, batches = loader(args, rank, world)
    model = getattr(torchvision.models, args.model)(num_classes=len(data.classes))
    model = model.to(device).to(memory_format=torch.channels_last)
    params = sum(p.numel() for p in model.parameters())
    if world > 1:
        model = torch.nn.parallel.DistributedDataParallel(model, device_ids=[rank])
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    mean = torch.tensor(MEAN, device=device).view(1, 3, 1, 1)
    std = torch.tensor(STD, device=device).view(1, 3, 1, 1)
    steps_needed = args.warmup + args.steps
    if len(batches) < steps_needed:
        raise SystemExit(f"{args.data_dir}: {len(batches)} batches per epoch per GPU, fewer than the {steps_needed} "
                         "steps measured; generate more images (bench/make_jpeg_folder.py --images)")
    step, started, cpu_start, timed_from, drained = 0, None, 0.0, None, False
    pids = [os.getpid()]
    arrived = time.perf_counter()
    for images, labels in batches:
        waited = time.perf_counter() - arrived
        if step == 0 and args.workers > 0:
            pids += [w.pid for w in batches._iterator._workers]  # the persistent workers of this epoch
        if timed_from is None and step >= args.warmup:
            drained = waited_for_batch(waited, world, device)
            if drained or step >= steps_needed - MIN_TIMED_STEPS:
                torch.cuda.synchronize()
                started, cpu_start, timed_from = time.perf_counter(), cpu_seconds(pids), step
        x = images.to(device, non_blocking=True).to(memory_format=torch.channels_last).float().sub_(mean).div_(std)
        y = labels.to(device, non_blocking=True)
        optimizer.zero_grad(set_to_none=True)
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = F.cross_entropy(model(x), y)
        loss.backward()
        optimizer.step()
        step += 1
        if step == steps_needed:
            break
        arrived = time.perf_counter()
    torch.cuda.synchronize()
    seconds = time.perf_counter() - started
    timed_steps = steps_needed - timed_from
    cores = torch.tensor([(cpu_seconds(pids) - cpu_start) / seconds], device=device)
    if world > 1:
        dist.all_reduce(cores)  # every rank's process and workers
        dist.destroy_process_group()
    if rank == 0:
        queue.put({"impl": "pytorch", "model": args.model, "world": world, "workers_per_gpu": args.workers,
                   "batch_per_gpu": args.batch, "parameters": params, "steps": timed_steps, "timed_from_step": timed_from,
                   "stock_drained": drained, "prefetch_factor": PREFETCH_FACTOR,
                   "images_per_second": args.batch * world * timed_steps / seconds, "cpu_cores_used": cores.item(),
                   "peak_memory_bytes": torch.cuda.max_memory_allocated(device)})


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data-dir", required=True, help="ImageFolder root: DIR/train/<class>/*.jpg")
    parser.add_argument("--model", default="resnet50", choices=["resnet18", "resnet50"])
    parser.add_argument("--world", type=int, default=1)
    parser.add_argument("--workers", type=int, default=8, help="DataLoader workers per GPU")
    parser.add_argument("--batch", type=int, default=256, help="per GPU")
    parser.add_argument("--warmup", type=int, default=30)
    parser.add_argument("--steps", type=int, default=100)
    parser.add_argument("--port", type=int, default=29541)
    args = parser.parse_args()
    if not os.path.isdir(os.path.join(args.data_dir, "train")):
        raise SystemExit(f"--data-dir {args.data_dir}: no train/ folder (bench/make_jpeg_folder.py writes one)")
    if not torch.cuda.is_available() or torch.cuda.device_count() < args.world:
        raise SystemExit(f"e2e_reference.py: --world {args.world} needs that many CUDA devices; "
                         f"{torch.cuda.device_count()} visible")
    ctx = mp.get_context("spawn")
    queue = ctx.Queue()
    if args.world == 1:
        run(0, 1, args, queue)
    else:
        mp.spawn(run, args=(args.world, args, queue), nprocs=args.world, join=True)
    print(json.dumps(queue.get()), flush=True)


if __name__ == "__main__":
    main()
