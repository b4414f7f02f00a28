"""PyTorch's end-to-end training from a JPEG folder for bench/e2e_bench.py (issue 39), in its faster
form: DataLoader + torchvision decoding and RandomResizedCrop(224) + flip in --workers worker
processes per GPU (uint8 tensors, pin_memory, persistent workers), normalization, the float
conversion and channels_last on the GPU, autocast bf16, SGD with momentum; one GPU, or
DistributedDataParallel over --world GPUs (one process each, DistributedSampler). The models are
torchvision's resnet18/resnet50 with the folder's class count (mgpu's ImageNet-stem layout at
224 px). Prints one JSON line.

    python3 bench/e2e_reference.py --data-dir DIR --model resnet50 [--world 1] [--workers 8]
        [--batch 256] [--warmup 30] [--steps 100]

Throughput: the steps after --warmup, timed between two synchronizations (the loader's start-up
and the first batches are in the warm-up). CPU cores used: CPU seconds of the training process
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
        prefetch_factor=4 if args.workers > 0 else None)


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
    step, started, cpu_start = 0, None, 0.0
    pids = [os.getpid()]
    for images, labels in batches:
        if step == 0 and args.workers > 0:
            pids += [w.pid for w in batches._iterator._workers]  # the persistent workers of this epoch
        if step == args.warmup:
            torch.cuda.synchronize()
            started, cpu_start = time.perf_counter(), cpu_seconds(pids)
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
    torch.cuda.synchronize()
    seconds = time.perf_counter() - started
    cores = torch.tensor([(cpu_seconds(pids) - cpu_start) / seconds], device=device)
    if world > 1:
        dist.all_reduce(cores)  # every rank's process and workers
        dist.destroy_process_group()
    if rank == 0:
        queue.put({"impl": "pytorch", "model": args.model, "world": world, "workers_per_gpu": args.workers,
                   "batch_per_gpu": args.batch, "parameters": params, "steps": args.steps,
                   "images_per_second": args.batch * world * args.steps / seconds, "cpu_cores_used": cores.item(),
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
