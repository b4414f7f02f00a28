"""PyTorch's side of bench/divergence_bench.py: the same recipe (VGG-19 or ResNet-18 as mgpu
builds them, with mgpu's initialization: Kaiming-normal fan-out convolutions, N(0, 0.01) linear
layers; SGD momentum 0.9, weight decay; batch 256 of CIFAR-shaped random images, or of
Fashion-MNIST normalized as mgpu does) in
  fp16-none     model.half() with BatchNorm kept in float32, no loss scaling
  amp-dynamic   float32 model, torch.autocast(float16), torch.amp.GradScaler
for every seed of --seeds. Prints one JSON line per run: the first step whose loss was not finite
(null if none), how many of the steps had one, the last loss and the final loss scale. PyTorch
does not stop on a non-finite loss; GradScaler skips the step instead, so "first_nonfinite_step"
is the comparable figure, and a run "stays finite" when its last loss is finite and its scale is
above 0 (a scale of 0 never grows again).
"""
import argparse
import json
import math
import os
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from lenet_reference import load_split  # noqa: E402  (Fashion-MNIST normalized as mgpu-worker does)
from reference_train import build  # noqa: E402


def init_as_mgpu(model):
    for m in model.modules():
        if isinstance(m, nn.Conv2d):
            nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu")
            if m.bias is not None:
                nn.init.zeros_(m.bias)
        elif isinstance(m, nn.BatchNorm2d):
            nn.init.ones_(m.weight)
            nn.init.zeros_(m.bias)
        elif isinstance(m, nn.Linear):
            nn.init.normal_(m.weight, 0, 0.01)
            nn.init.zeros_(m.bias)


def batches_for(args, seed, train):
    """The --steps batches of one run: (B, C, H, W) float32 images and (B) labels on the GPU."""
    generator = torch.Generator(device="cuda").manual_seed(seed)
    if train is None:
        return [(torch.randn(args.batch, 3, 32, 32, device="cuda", generator=generator),
                 torch.randint(0, 10, (args.batch,), device="cuda", generator=generator)) for _ in range(args.steps)]
    images, labels = train  # (N, 1, 28, 28) normalized, (N)
    order, batches = torch.empty(0, dtype=torch.long, device="cuda"), []
    for _ in range(args.steps):
        if order.numel() < args.batch:  # a new epoch: a fresh permutation, the partial batch dropped
            order = torch.randperm(images.size(0), device="cuda", generator=generator)
        take, order = order[:args.batch], order[args.batch:]
        batches.append((images[take], labels[take]))
    return batches


def make_model(args):
    model = build(args.model)
    if args.dataset == "fashion-mnist":  # mgpu's ResNet-18 takes the data's one channel at its first convolution
        model.conv1 = nn.Conv2d(1, 64, 3, 1, 1, bias=False)
    return model


def run(args, lr, mode, seed, batches):
    torch.manual_seed(seed)
    model = make_model(args).cuda()
    init_as_mgpu(model)
    if mode == "fp16-none":
        model.half()
        for m in model.modules():
            if isinstance(m, nn.BatchNorm2d):
                m.float()
    optimizer = torch.optim.SGD(model.parameters(), lr=lr, momentum=0.9, weight_decay=args.weight_decay)
    scaler = torch.amp.GradScaler("cuda", enabled=mode == "amp-dynamic")
    first, nonfinite = None, 0
    for step, (images, labels) in enumerate(batches, start=1):
        optimizer.zero_grad(set_to_none=True)
        with torch.autocast("cuda", dtype=torch.float16, enabled=mode == "amp-dynamic"):
            loss = F.cross_entropy(model(images.half() if mode == "fp16-none" else images).float(), labels)
        scaler.scale(loss).backward()
        scaler.step(optimizer)
        scaler.update()
        if not torch.isfinite(loss).item():
            nonfinite += 1
            first = first or step
    scale = scaler.get_scale() if mode == "amp-dynamic" else 1.0
    return {"impl": "pytorch", "model": args.model, "dataset": args.dataset, "lr": lr, "mode": mode, "seed": seed,
            "steps": len(batches), "first_nonfinite_step": first, "nonfinite_steps": nonfinite,
            "final_loss_scale": scale, "last_loss": loss.item(),
            "stays_finite": math.isfinite(loss.item()) and scale > 0}


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--model", default="resnet18")
    parser.add_argument("--dataset", default="synthetic", choices=["synthetic", "fashion-mnist"])
    parser.add_argument("--data-dir", default=os.environ.get("FASHION_MNIST_DIR", "/usr/share/datasets/fashion-mnist"))
    parser.add_argument("--lrs", default="1,2")
    parser.add_argument("--seeds", default="42")
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--batch", type=int, default=256)
    parser.add_argument("--weight-decay", type=float, default=5e-4)
    args = parser.parse_args()
    if args.dataset == "fashion-mnist" and args.model != "resnet18":
        raise SystemExit(f"--dataset fashion-mnist: only resnet18 takes 28x28 one-channel images here, not {args.model}")
    train = None
    if args.dataset == "fashion-mnist":
        images, labels = load_split(args.data_dir, "train")  # (N, 1, 28, 28), (N)
        train = (images.cuda(), labels.cuda())
    for lr in (float(v) for v in args.lrs.split(",")):
        for seed in (int(v) for v in args.seeds.split(",")):
            batches = batches_for(args, seed, train)
            for mode in ("fp16-none", "amp-dynamic"):
                print(json.dumps(run(args, lr, mode, seed, batches)), flush=True)


if __name__ == "__main__":
    main()
