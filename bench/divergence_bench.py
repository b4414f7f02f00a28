"""The precision experiment's divergence finding on a GPU (issue 6): float16 training without
loss scaling at a high learning rate produces a non-finite loss, and mgpu stops it with exit 3
naming the step, while float16 autocast with dynamic loss scaling trains through the same
learning rate. Builds nothing: give it a built tree.

    python3 bench/divergence_bench.py --build build-gpu [--out DIR] [--model vgg19] [--lrs 1,2,4,8]

For every learning rate of --lrs (ascending), two mgpu-worker runs on one GPU with the same
model, seed, batch and CIFAR-shaped synthetic data, SGD with momentum 0.9 and weight decay 5e-4
(the VGG-19 precision experiment's optimizer, configs/vgg19-cifar10-precision.yaml):
  fp16 --loss-scale none          the model in float16 (BatchNorm in float32), no master weights
  amp-fp16 --loss-scale dynamic   float32 weights, autocast to float16, GradScaler from 2^16
each with --on-nonfinite stop (the default), so a non-finite loss ends the run with exit 3.
The finding is reproduced at a learning rate where the fp16 run exits 3 and the amp-fp16 run
finishes (exit 0, finite loss). The sweep stops after the first such learning rate. PyTorch runs
the same recipe at the learning rates tried (bench/divergence_reference.py; it does not stop on a
non-finite loss, so its first such step is given). Writes DIR/divergence-bench.json and prints a
Markdown table.
"""
import argparse
import csv
import datetime
import json
import math
import os
import platform
import re
import subprocess
import sys

import torch

HERE = os.path.dirname(os.path.abspath(__file__))

RUNS = {"fp16 --loss-scale none": ["--precision", "fp16", "--loss-scale", "none"],
        "amp-fp16 --loss-scale dynamic": ["--precision", "amp-fp16", "--loss-scale", "dynamic"]}
EXIT_DIVERGED = 3  # common/status.h: ExitCode::kDiverged


def train(args, lr, name, flags):
    """One run; returns its outcome: exit code, the divergence message (exit 3) or the last
    loss, skipped steps and final loss scale (exit 0)."""
    out = os.path.join(args.out, f"{args.model}-lr{lr}-" + re.sub(r"[^A-Za-z0-9]+", "-", name).strip("-"))
    cmd = [os.path.join(args.build, "bin", "mgpu-worker"), "--model", args.model, "--dataset", "synthetic",
           "--image-size", "32", "--synthetic-train", str(args.batch * args.steps), "--synthetic-test", "256",
           "--batch-size", str(args.batch), "--max-steps", str(args.steps), "--epochs", "1000",
           "--log-every", "10", "--optimizer", "sgd", "--momentum", "0.9", "--lr", str(lr), "--seed", "42",
           "--weight-decay", str(args.weight_decay),
           "--device", args.device, "--progress", "lines", "--out", out] + flags
    with open(out + ".log", "w") as log:
        try:
            code = subprocess.run(cmd, env=dict(os.environ, NCCL_NVLS_ENABLE="0"), stdout=log,
                                  stderr=subprocess.STDOUT, timeout=args.run_timeout).returncode
        except subprocess.TimeoutExpired:
            return {"exit_code": None, "failed": f"stopped after --run-timeout {args.run_timeout} s; see {out}.log"}
    row = {"exit_code": code, "log": out + ".log"}
    if code not in (0, EXIT_DIVERGED):
        row["failed"] = f"exit code {code}; see {out}.log"
    try:
        with open(os.path.join(out, "summary.json")) as f:
            summary = json.load(f)
    except (OSError, json.JSONDecodeError):
        row.setdefault("failed", f"no summary.json in {out}")
        return row
    row.update(skipped_steps=summary.get("skipped_steps"), final_loss_scale=summary.get("final_loss_scale"))
    if code == EXIT_DIVERGED:
        row["error"] = summary.get("error", "")
    else:
        with open(os.path.join(out, "metrics.csv")) as f:
            row["last_loss"] = float(list(csv.DictReader(f))[-1]["loss"])
    return row


def pytorch_reference(args, lrs):
    """PyTorch's runs of the same recipe at `lrs` (bench/divergence_reference.py, one process):
    {lr: {mode: row}}, or {"error": why}."""
    if not args.device.startswith("cuda"):
        return {"error": "PyTorch's side runs on a GPU only"}
    cmd = [sys.executable, os.path.join(HERE, "divergence_reference.py"), "--model", args.model, "--lrs",
           ",".join(f"{lr:g}" for lr in lrs), "--steps", str(args.steps), "--batch", str(args.batch),
           "--weight-decay", str(args.weight_decay)]
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=args.run_timeout * len(lrs))
    except subprocess.TimeoutExpired:
        return {"error": f"stopped after {args.run_timeout * len(lrs)} s"}
    rows = {}
    for line in done.stdout.splitlines():
        if line.startswith("{"):
            row = json.loads(line)
            rows.setdefault(row["lr"], {})[row["mode"]] = row
    return rows if rows else {"error": done.stderr[-500:]}


def reproduced(pair):
    fp16, amp = pair["fp16 --loss-scale none"], pair["amp-fp16 --loss-scale dynamic"]
    return (fp16["exit_code"] == EXIT_DIVERGED and amp["exit_code"] == 0
            and math.isfinite(amp.get("last_loss", math.nan)))


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--build", default="build-gpu")
    parser.add_argument("--out", default="divergence-bench-out")
    parser.add_argument("--model", default="vgg19", help="the precision experiment's model; resnet18 works too")
    parser.add_argument("--lrs", default="1,2,4,8", help="learning rates to try, ascending")
    parser.add_argument("--weight-decay", type=float, default=5e-4, help="the precision experiment's; without it "
                        "the BatchNorm-scaled weights grow until float16 activations overflow in both runs")
    parser.add_argument("--batch", type=int, default=256)
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--run-timeout", type=int, default=120)
    parser.add_argument("--device", default="cuda", help="cuda; cpu (with a small --model) tries the driver out")
    args = parser.parse_args()
    try:
        lrs = [float(v) for v in args.lrs.split(",")]
    except ValueError:
        raise SystemExit(f"--lrs {args.lrs}: expected numbers separated by commas, e.g. 0.1,1,10")
    if args.device.startswith("cuda") and not torch.cuda.is_available():
        raise SystemExit("no CUDA device visible; the finding is about float16 training on a GPU")
    os.makedirs(args.out, exist_ok=True)
    sweep = []
    for lr in lrs:
        pair = {name: train(args, lr, name, flags) for name, flags in RUNS.items()}
        sweep.append({"lr": lr, "runs": pair, "reproduced": reproduced(pair)})
        print(json.dumps(sweep[-1]), flush=True)
        if sweep[-1]["reproduced"]:
            break
    reference = pytorch_reference(args, [p["lr"] for p in sweep])
    for point in sweep:
        point["pytorch"] = reference.get(point["lr"], {"error": reference.get("error", "no result line")})
    meta = {"date": datetime.date.today().isoformat(), "host": platform.node(), "device": torch.cuda.get_device_name(0) if args.device.startswith("cuda") else args.device,
            "torch": torch.__version__, "cuda": torch.version.cuda, "model": args.model, "batch": args.batch,
            "steps": args.steps, "weight_decay": args.weight_decay, "command": " ".join(sys.argv)}
    with open(os.path.join(args.out, "divergence-bench.json"), "w") as f:
        json.dump({"meta": meta, "divergence": sweep}, f, indent=2)
    print(f"\n{meta['device']}, {args.model}, batch {args.batch}, up to {args.steps} steps, {meta['date']}\n")
    print("| lr | run | exit | outcome |\n| --- | --- | --- | --- |")
    for point in sweep:
        for name, row in point["runs"].items():
            outcome = (row.get("failed") or (row.get("error", "")[:160] if row["exit_code"] == EXIT_DIVERGED else
                       f"last loss {row.get('last_loss', float('nan')):.4g}, {row.get('skipped_steps')} skipped "
                       f"steps, loss scale {row.get('final_loss_scale')}"))
            print(f"| {point['lr']:g} | mgpu {name} | {row['exit_code']} | {outcome} |")
        for mode, row in point["pytorch"].items() if "error" not in point["pytorch"] else []:
            first = row["first_nonfinite_step"]
            print(f"| {point['lr']:g} | PyTorch {mode} | - | " + (
                f"first non-finite loss at step {first}, {row['nonfinite_steps']} of {row['steps']} steps non-finite"
                if first else f"no non-finite loss in {row['steps']} steps, last loss {row['last_loss']:.4g}") +
                f", loss scale {row['final_loss_scale']:g} |")
    found = next((p["lr"] for p in sweep if p["reproduced"]), None)
    print(f"\nfinding reproduced: {f'yes, at lr {found:g}' if found is not None else 'no'}")


if __name__ == "__main__":
    main()
