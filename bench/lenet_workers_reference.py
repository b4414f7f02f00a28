"""PyTorch + torchvision reference for bench/cpu_lenet_workers.sh: the seed MNIST experiment's
loader recipe. LeNet-5 on Fashion-MNIST, per-sample RandomAffine(10°, translate 0.1, scale
0.9-1.1) on PIL images as torchvision.datasets.FashionMNIST hands them out, ToTensor, Normalize,
a shuffling DataLoader with --num-workers worker processes, Adam, on --device (cpu, or cuda with
pinned batches copied without blocking, as the PyTorch tutorials do). Prints one JSON line with
the epoch time (the training pass, data loading included) and the test accuracy after it.
"""
import argparse
import json
import time

import numpy as np
import torch
import torch.nn.functional as F
from PIL import Image
from torchvision import transforms

from lenet_reference import LeNet, read_idx  # the same model and IDX reader as bench/cpu_lenet.sh

MEAN, STD = 0.2860, 0.3530


class FashionMnist(torch.utils.data.Dataset):
    """torchvision.datasets.FashionMNIST's __getitem__, over the IDX files read once."""

    def __init__(self, images, labels, transform):
        self.images, self.labels, self.transform = images, labels, transform

    def __len__(self):
        return len(self.labels)

    def __getitem__(self, index):
        image = Image.fromarray(self.images[index], mode="L")
        return self.transform(image), int(self.labels[index])


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--data-dir", default="/usr/share/datasets/fashion-mnist")
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--num-workers", type=int, default=0)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument("--device", default="cpu", help="cpu or cuda[:K]")
    args = parser.parse_args()
    device = torch.device(args.device)

    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    train_transform = transforms.Compose([
        transforms.RandomAffine(degrees=10, translate=(0.1, 0.1), scale=(0.9, 1.1)),
        transforms.ToTensor(),
        transforms.Normalize((MEAN,), (STD,)),
    ])
    d = args.data_dir
    train = FashionMnist(read_idx(f"{d}/train-images-idx3-ubyte.gz"), read_idx(f"{d}/train-labels-idx1-ubyte.gz"),
                         train_transform)
    test_x = torch.from_numpy(read_idx(f"{d}/t10k-images-idx3-ubyte.gz").copy())
    test_x = ((test_x.float() / 255.0 - MEAN) / STD).unsqueeze(1)
    test_y = torch.from_numpy(read_idx(f"{d}/t10k-labels-idx1-ubyte.gz").astype(np.int64))
    test_x, test_y = test_x.to(device), test_y.to(device)
    loader = torch.utils.data.DataLoader(train, batch_size=args.batch_size, shuffle=True,
                                         num_workers=args.num_workers,
                                         persistent_workers=args.num_workers > 0,
                                         pin_memory=device.type == "cuda")
    model = LeNet().to(device)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)

    start = time.perf_counter()
    model.train()
    for images, labels in loader:
        images, labels = images.to(device, non_blocking=True), labels.to(device, non_blocking=True)
        optimizer.zero_grad()
        F.cross_entropy(model(images), labels).backward()
        optimizer.step()
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    epoch_seconds = time.perf_counter() - start

    model.eval()
    with torch.no_grad():
        correct = sum((model(test_x[i:i + 1000]).argmax(1) == test_y[i:i + 1000]).sum().item()
                      for i in range(0, len(test_x), 1000))
    print(json.dumps({"epoch_seconds": epoch_seconds, "test_accuracy": 100.0 * correct / len(test_x),
                      "num_workers": args.num_workers, "device": str(device), "torch": torch.__version__}))


if __name__ == "__main__":
    main()
