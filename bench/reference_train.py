"""PyTorch (Python) reference for bench/gpu_bench.sh: images/s of a training step on synthetic
CIFAR-shaped data held on the GPU, for one GPU, DDP over all visible GPUs (torch.distributed,
one process per GPU, NCCL), or with --data-parallel nn.DataParallel over --world GPUs in one
process (the global batch, --batch x --world, scattered from cuda:0 every step). Prints one
JSON line per run.

The models are the variants mgpu builds (ResNet-18 with the CIFAR stem: a 3x3 conv and no
max-pool, 11,173,962 parameters; VGG-19 with batch norm and a 512->10 head, 20,040,522; LeNet-5;
ResNet-50 with the ImageNet stem at 224 px and a 10-class head, 23,528,522, torchvision's layout
with the stride in the 3x3 conv), so the driver checks the parameter counts against mgpu's summary.
"""
import argparse
import json
import os
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn as nn
import torch.nn.functional as F


class BasicBlock(nn.Module):
    def __init__(self, cin, cout, stride):
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(cout)
        self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)
        self.shortcut = nn.Sequential()
        if stride != 1 or cin != cout:
            self.shortcut = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))

    def forward(self, x):
        out = F.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        return F.relu(out + self.shortcut(x))


class ResNet18(nn.Module):
    def __init__(self, classes=10):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 64, 3, 1, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(64)
        layers, cin = [], 64
        for cout, stride in [(64, 1), (128, 2), (256, 2), (512, 2)]:
            layers += [BasicBlock(cin, cout, stride), BasicBlock(cout, cout, 1)]
            cin = cout
        self.layers = nn.Sequential(*layers)
        self.fc = nn.Linear(512, classes)

    def forward(self, x):
        x = self.layers(F.relu(self.bn1(self.conv1(x))))
        return self.fc(torch.flatten(F.adaptive_avg_pool2d(x, 1), 1))


class Bottleneck(nn.Module):
    def __init__(self, cin, planes, stride):
        super().__init__()
        cout = planes * 4
        self.conv1, self.bn1 = nn.Conv2d(cin, planes, 1, bias=False), nn.BatchNorm2d(planes)
        self.conv2, self.bn2 = nn.Conv2d(planes, planes, 3, stride, 1, bias=False), nn.BatchNorm2d(planes)
        self.conv3, self.bn3 = nn.Conv2d(planes, cout, 1, bias=False), nn.BatchNorm2d(cout)
        self.shortcut = nn.Sequential()
        if stride != 1 or cin != cout:
            self.shortcut = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))

    def forward(self, x):
        out = F.relu(self.bn1(self.conv1(x)))
        out = F.relu(self.bn2(self.conv2(out)))
        out = self.bn3(self.conv3(out))
        return F.relu(out + self.shortcut(x))


class ResNet50(nn.Module):
    def __init__(self, classes=10):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 64, 7, 2, 3, bias=False)
        self.bn1 = nn.BatchNorm2d(64)
        layers, cin = [], 64
        for planes, blocks, stride in [(64, 3, 1), (128, 4, 2), (256, 6, 2), (512, 3, 2)]:
            for b in range(blocks):
                layers.append(Bottleneck(cin, planes, stride if b == 0 else 1))
                cin = planes * 4
        self.layers = nn.Sequential(*layers)
        self.fc = nn.Linear(2048, classes)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.bn1(self.conv1(x))), 3, 2, 1)
        x = self.layers(x)
        return self.fc(torch.flatten(F.adaptive_avg_pool2d(x, 1), 1))


def vgg19_bn(classes=10):
    layers, cin = [], 3
    for v in [64, 64, "M", 128, 128, "M", 256, 256, 256, 256, "M", 512, 512, 512, 512, "M", 512, 512, 512, 512, "M"]:
        if v == "M":
            layers.append(nn.MaxPool2d(2))
        else:
            layers += [nn.Conv2d(cin, v, 3, padding=1), nn.BatchNorm2d(v), nn.ReLU(inplace=True)]
            cin = v
    return nn.Sequential(*layers, nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(512, classes))


class LeNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1, self.conv2 = nn.Conv2d(1, 6, 5, padding=2), nn.Conv2d(6, 16, 5)
        self.fc1, self.fc2, self.fc3 = nn.Linear(400, 120), nn.Linear(120, 84), nn.Linear(84, 10)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.conv1(x)), 2)
        x = F.max_pool2d(F.relu(self.conv2(x)), 2).flatten(1)
        return self.fc3(F.relu(self.fc2(F.relu(self.fc1(x)))))


def build(name):
    return {"resnet18": ResNet18, "resnet50": ResNet50, "vgg19": vgg19_bn, "lenet": LeNet}[name]()


# (channels, side) of the synthetic images each model is measured on.
INPUT_SHAPE = {"lenet": (1, 28), "resnet50": (3, 224)}


def run(rank, world, args, queue):
    if world > 1:
        os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
        os.environ.setdefault("MASTER_PORT", str(args.port))
        dist.init_process_group("nccl", rank=rank, world_size=world)
    torch.cuda.set_device(rank)
    device = torch.device("cuda", rank)
    # cuDNN's autotuning caches its choices per thread (thread_local in ATen's Conv_v8.cpp), and
    # nn.DataParallel runs each replica's forward in a new thread every step, so with
    # benchmark=True it re-tunes every convolution every step (measured 2026-11-22: ResNet-18
    # 640 ms per step instead of ~30). Its fastest correct setting is benchmark=False.
    torch.backends.cudnn.benchmark = not args.data_parallel
    for precision in args.precision.split(","):
        result = measure(rank, world, args, device, precision)
        if rank == 0:
            queue.put(result)
    if world > 1:
        dist.destroy_process_group()


def measure(rank, world, args, device, precision):
    """Warm-up then timed steps of one precision; returns the result row (rank 0's)."""
    torch.backends.cuda.matmul.allow_tf32 = precision == "tf32"
    torch.backends.cudnn.allow_tf32 = precision == "tf32"
    torch.cuda.reset_peak_memory_stats(device)
    model = build(args.model).to(device)
    params = sum(p.numel() for p in model.parameters())
    batch = args.batch
    if args.data_parallel:
        model = nn.DataParallel(model, device_ids=list(range(args.world)))
        batch = args.batch * args.world
    elif world > 1:
        model = nn.parallel.DistributedDataParallel(model, device_ids=[rank])
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    channels, size = INPUT_SHAPE.get(args.model, (3, 32))
    images = torch.randn(batch, channels, size, size, device=device)
    labels = torch.randint(0, 10, (batch,), device=device)
    amp_dtype = {"amp-fp16": torch.float16, "amp-bf16": torch.bfloat16}.get(precision)
    scaler = torch.amp.GradScaler("cuda", enabled=precision == "amp-fp16")

    def step():
        optimizer.zero_grad(set_to_none=True)
        with torch.autocast("cuda", dtype=amp_dtype or torch.float32, enabled=amp_dtype is not None):
            loss = F.cross_entropy(model(images), labels)
        scaler.scale(loss).backward()
        scaler.step(optimizer)
        scaler.update()

    for _ in range(args.warmup):
        step()
    torch.cuda.synchronize()  # peak memory covers the whole run, cuDNN's algorithm search included, as mgpu's
    start = time.perf_counter()
    for _ in range(args.steps):
        step()
    torch.cuda.synchronize()
    seconds = time.perf_counter() - start
    result = {"impl": "pytorch-dp" if args.data_parallel else "pytorch", "model": args.model,
              "precision": precision, "world": args.world if args.data_parallel else world,
              "batch_per_gpu": args.batch, "parameters": params,
              "images_per_second": batch * world * args.steps / seconds,
              "peak_memory_bytes": torch.cuda.max_memory_allocated(device)}
    model = optimizer = None  # the step closure holds them too: clear the cells, not just the names
    torch.cuda.empty_cache()  # the next precision's peak is its own
    return result


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--model", default="resnet18")
    parser.add_argument("--precision", default="fp32", help="one, or several separated by commas (one result "
                        "line each, in this order)")
    parser.add_argument("--batch", type=int, default=256, help="per GPU")
    parser.add_argument("--world", type=int, default=1)
    parser.add_argument("--steps", type=int, default=50)
    parser.add_argument("--warmup", type=int, default=10)
    parser.add_argument("--port", type=int, default=29531)
    parser.add_argument("--data-parallel", action="store_true",
                        help="nn.DataParallel over --world GPUs in this one process")
    args = parser.parse_args()
    ctx = mp.get_context("spawn")
    queue = ctx.Queue()
    if args.world == 1 or args.data_parallel:
        run(0, 1, args, queue)
    else:
        mp.spawn(run, args=(args.world, args, queue), nprocs=args.world, join=True)
    for _ in args.precision.split(","):
        print(json.dumps(queue.get()), flush=True)


if __name__ == "__main__":
    main()
