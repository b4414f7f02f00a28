"""PyTorch reference for bench/cpu_lenet.sh: LeNet-5 on Fashion-MNIST, in-memory data.

Same model, optimizer, batch size, thread count and normalization as mgpu-worker; the data is
decoded from the same IDX files into one tensor up front (no DataLoader), so the comparison is
the training loop itself. Prints one JSON line with the epoch time and test accuracy.
"""
import argparse
import gzip
import json
import struct
import time

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F


def read_idx(path):
    with gzip.open(path, "rb") as f:
        data = f.read()
    _, _, dtype, rank = struct.unpack(">BBBB", data[:4])
    dims = struct.unpack(">" + "I" * rank, data[4:4 + 4 * rank])
    return np.frombuffer(data, dtype=np.uint8, offset=4 + 4 * rank).reshape(dims)


def load_split(data_dir, prefix):
    """Images (N, 1, 28, 28) normalized as mgpu-worker does for Fashion-MNIST, labels (N)."""
    mean, std = 0.2860, 0.3530
    x = torch.from_numpy(read_idx(f"{data_dir}/{prefix}-images-idx3-ubyte.gz").copy())
    y = torch.from_numpy(read_idx(f"{data_dir}/{prefix}-labels-idx1-ubyte.gz").astype(np.int64))
    return ((x.float() / 255.0 - mean) / std).unsqueeze(1), y


class LeNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 6, 5, padding=2)
        self.conv2 = nn.Conv2d(6, 16, 5)
        self.fc1 = nn.Linear(16 * 5 * 5, 120)
        self.fc2 = nn.Linear(120, 84)
        self.fc3 = nn.Linear(84, 10)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.conv1(x)), 2)
        x = F.max_pool2d(F.relu(self.conv2(x)), 2)
        x = x.flatten(1)
        x = F.relu(self.fc1(x))
        x = F.relu(self.fc2(x))
        return self.fc3(x)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--data-dir", default="/usr/share/datasets/fashion-mnist")
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--epochs", type=int, default=1)
    parser.add_argument("--seed", type=int, default=42)
    args = parser.parse_args()

    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    train_x, train_y = load_split(args.data_dir, "train")
    test_x, test_y = load_split(args.data_dir, "t10k")
    model = LeNet()
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)

    epoch_seconds = []
    for epoch in range(args.epochs):
        start = time.perf_counter()
        order = torch.randperm(len(train_x))
        model.train()
        for i in range(0, len(order), args.batch_size):
            idx = order[i:i + args.batch_size]
            images, labels = train_x[idx], train_y[idx]
            optimizer.zero_grad()
            loss = F.cross_entropy(model(images), labels)
            loss.backward()
            optimizer.step()
        epoch_seconds.append(time.perf_counter() - start)

    model.eval()
    with torch.no_grad():
        correct = sum((model(test_x[i:i + 1000]).argmax(1) == test_y[i:i + 1000]).sum().item()
                      for i in range(0, len(test_x), 1000))
    print(json.dumps({"epoch_seconds": epoch_seconds, "test_accuracy": 100.0 * correct / len(test_x),
                      "torch": torch.__version__, "threads": torch.get_num_threads()}))


if __name__ == "__main__":
    main()
