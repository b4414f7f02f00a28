"""PyTorch's side of bench/divergence_bench.py: the same recipe (VGG-19 or ResNet-18 as mgpu
builds them, with mgpu's initialization: Kaiming-normal fan-out convolutions, N(0, 0.01) linear
layers; SGD momentum 0.9, weight decay; batch 256 of CIFAR-shaped random images) in
  fp16-none     model.half() with BatchNorm kept in float32, no loss scaling
  amp-dynamic   float32 model, torch.autocast(float16), torch.amp.GradScaler
Prints one JSON line per run: the first step whose loss was not finite (null if none), how many
of the steps had one, and the final loss scale. PyTorch does not stop on a non-finite loss;
GradScaler skips the step instead, so "first_nonfinite_step" is the comparable figure.
"""
import argparse
import json
import os
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
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


def run(args, lr, mode, batches):
    torch.manual_seed(args.seed)
    model = build(args.model).cuda()
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
    return {"impl": "pytorch", "model": args.model, "lr": lr, "mode": mode, "steps": len(batches),
            "first_nonfinite_step": first, "nonfinite_steps": nonfinite,
            "final_loss_scale": scaler.get_scale() if mode == "amp-dynamic" else 1.0, "last_loss": loss.item()}


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--model", default="vgg19")
    parser.add_argument("--lrs", default="1,2")
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--batch", type=int, default=256)
    parser.add_argument("--weight-decay", type=float, default=5e-4)
    parser.add_argument("--seed", type=int, default=42)
    args = parser.parse_args()
    generator = torch.Generator(device="cuda").manual_seed(args.seed)
    batches = [(torch.randn(args.batch, 3, 32, 32, device="cuda", generator=generator),
                torch.randint(0, 10, (args.batch,), device="cuda", generator=generator)) for _ in range(args.steps)]
    for lr in (float(v) for v in args.lrs.split(",")):
        for mode in ("fp16-none", "amp-dynamic"):
            print(json.dumps(run(args, lr, mode, batches)), flush=True)


if __name__ == "__main__":
    main()
