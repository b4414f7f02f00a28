"""PyTorch reference for bench/dp_bench.py: the classic MNIST experiment's recipe — LeNet-5,
batch 32, Adam 1e-3, a DataLoader with 4 worker processes doing ToTensor + Normalize per
sample — one epoch on one GPU or under nn.DataParallel over --gpus GPUs. Reads MNIST-format IDX
files (gzip) from --data-dir. Prints one JSON line: epoch seconds and test accuracy.
"""
import argparse
import gzip
import json
import os
import struct
import time

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

from reference_train import LeNet


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


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--data-dir", required=True)
    parser.add_argument("--gpus", type=int, default=1, help="1: one GPU; more: nn.DataParallel")
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--num-workers", type=int, default=4)
    args = parser.parse_args()
    torch.backends.cudnn.benchmark = True
    train = Images(read_idx(find(args.data_dir, "train-images-idx3-ubyte")),
                   read_idx(find(args.data_dir, "train-labels-idx1-ubyte")))
    test_x = torch.from_numpy(read_idx(find(args.data_dir, "t10k-images-idx3-ubyte")).astype(np.float32) / 255.0)
    test_y = torch.from_numpy(read_idx(find(args.data_dir, "t10k-labels-idx1-ubyte")).astype(np.int64))
    loader = torch.utils.data.DataLoader(train, batch_size=args.batch_size, shuffle=True,
                                         num_workers=args.num_workers, pin_memory=True,
                                         persistent_workers=args.num_workers > 0)
    device = torch.device("cuda", 0)
    model = LeNet().to(device)
    if args.gpus > 1:
        model = nn.DataParallel(model, device_ids=list(range(args.gpus)))
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    start = time.perf_counter()
    for x, y in loader:
        x, y = x.to(device, non_blocking=True), y.to(device, non_blocking=True)
        optimizer.zero_grad(set_to_none=True)
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        optimizer.step()
    torch.cuda.synchronize()
    seconds = time.perf_counter() - start
    model.eval()
    with torch.no_grad():
        x = ((test_x - 0.1307) / 0.3081).unsqueeze(1).to(device)
        accuracy = (model(x).argmax(1).cpu() == test_y).float().mean().item() * 100
    print(json.dumps({"impl": "pytorch-dp" if args.gpus > 1 else "pytorch", "gpus": args.gpus,
                      "epoch_seconds": seconds, "test_accuracy": accuracy,
                      "batch_size": args.batch_size, "num_workers": args.num_workers}))


if __name__ == "__main__":
    main()
