#!/usr/bin/env python3
"""The PyTorch side of bench/loader_throughput.sh: torchvision's ImageFolder through a
DataLoader with RandomResizedCrop(224) + RandomHorizontalFlip + ToTensor + Normalize (ImageNet's
training transform), on the same folder, batch size and worker count as mgpu-loader-bench.

    loader_reference.py --data-dir DIR [--num-workers N] [--batch-size 256] [--size 224]
                        [--max-images M] [--seed S]

The main process runs torch with --threads intra-op threads (default 1, as the DataLoader sets
in its workers and as mgpu's loader does per thread): with 0 workers the transforms run there,
and PyTorch's default of one OpenMP thread per core collapsed to 17 img/s on a busy 2-core
machine (spinning threads), against 167 img/s with 1.

Times from the DataLoader's first iter() (worker start-up included) to the last batch, as
mgpu-loader-bench times its loader. Memory: a thread samples every 0.1 s the resident memory of
this process and all its descendants (the DataLoader's worker processes): peak_rss_bytes is the
largest sum of VmRSS (shared pages counted in each process: an upper bound), peak_pss_bytes the
largest sum of Pss (shared pages split among their processes). Prints one JSON line.
"""
import argparse
import json
import os
import threading
import time

import torch
import torchvision
from torchvision import transforms


def descendants(pid):
    children = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as stat:
                    ppid = int(stat.read().rsplit(")", 1)[1].split()[1])
            except OSError:
                continue
            children.setdefault(ppid, []).append(int(entry))
    found, stack = [], [pid]
    while stack:
        p = stack.pop()
        found.append(p)
        stack.extend(children.get(p, []))
    return found


def memory_of(pid):
    rss = pss = 0
    try:
        with open(f"/proc/{pid}/status") as status:
            for line in status:
                if line.startswith("VmRSS:"):
                    rss = int(line.split()[1]) * 1024
        with open(f"/proc/{pid}/smaps_rollup") as rollup:
            for line in rollup:
                if line.startswith("Pss:"):
                    pss = int(line.split()[1]) * 1024
    except OSError:
        pass
    return rss, pss


class MemorySampler(threading.Thread):
    def __init__(self):
        super().__init__(daemon=True)
        self.peak_rss = self.peak_pss = 0
        self.done = threading.Event()

    def sample(self):
        totals = [memory_of(p) for p in descendants(os.getpid())]
        self.peak_rss = max(self.peak_rss, sum(r for r, _ in totals))
        self.peak_pss = max(self.peak_pss, sum(p for _, p in totals))

    def run(self):
        while not self.done.wait(0.1):
            self.sample()


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data-dir", required=True)
    parser.add_argument("--num-workers", type=int, default=0)
    parser.add_argument("--batch-size", type=int, default=256)
    parser.add_argument("--size", type=int, default=224)
    parser.add_argument("--max-images", type=int, default=0)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--threads", type=int, default=1, help="torch intra-op threads of the main process")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    sampler = MemorySampler()
    sampler.start()
    index_start = time.perf_counter()
    dataset = torchvision.datasets.ImageFolder(
        os.path.join(args.data_dir, "train"),
        transform=transforms.Compose([
            transforms.RandomResizedCrop(args.size),
            transforms.RandomHorizontalFlip(),
            transforms.ToTensor(),
            transforms.Normalize(mean=[0.485, 0.456, 0.406], std=[0.229, 0.224, 0.225]),
        ]))
    index_seconds = time.perf_counter() - index_start
    generator = torch.Generator().manual_seed(args.seed)
    loader = torch.utils.data.DataLoader(dataset, batch_size=args.batch_size, shuffle=True,
                                         num_workers=args.num_workers, generator=generator)
    batches = len(loader)
    if args.max_images > 0:
        batches = min(batches, -(-args.max_images // args.batch_size))
    start = time.perf_counter()
    images, checksum = 0, 0.0
    for i, (x, y) in enumerate(loader):
        images += y.shape[0]
        checksum += float(x[0, 0, 0, 0])
        if i + 1 == batches:
            break
    seconds = time.perf_counter() - start
    sampler.sample()
    sampler.done.set()
    print(json.dumps({"loader": "pytorch", "num_workers": args.num_workers, "batch_size": args.batch_size,
                      "size": args.size, "images": images, "dataset_images": len(dataset), "seconds": seconds,
                      "images_per_second": images / seconds, "index_seconds": index_seconds,
                      "peak_rss_bytes": sampler.peak_rss, "peak_pss_bytes": sampler.peak_pss,
                      "checksum": checksum, "torch": torch.__version__, "torchvision": torchvision.__version__}))


if __name__ == "__main__":
    main()
