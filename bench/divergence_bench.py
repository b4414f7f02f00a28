"""The precision experiment's divergence finding on a GPU (issue 6): float16 training without
loss scaling at a high learning rate produces a non-finite loss, and mgpu stops it with exit 3
naming the step, while float16 autocast with dynamic loss scaling trains through the same
learning rate. Builds nothing: give it a built tree.

    python3 bench/divergence_bench.py --build build-gpu [--out DIR] [--model resnet18]
        [--dataset synthetic|fashion-mnist] [--lrs 1,2,3.2,4] [--seeds 42,43,44]

For every learning rate of --lrs (ascending) and every seed of --seeds, two mgpu-worker runs on
one GPU with the same model, seed, batch and data (CIFAR-shaped synthetic images, or
Fashion-MNIST with --model resnet18), SGD with momentum 0.9 and weight decay 5e-4 (the VGG-19
precision experiment's optimizer, configs/vgg19-cifar10-precision.yaml):
  fp16 --loss-scale none          the model in float16 (BatchNorm in float32), no master weights,
                                  --on-nonfinite stop: the first non-finite loss is exit 3
  amp-fp16 --loss-scale dynamic   float32 weights, autocast to float16, GradScaler from 2^16,
                                  --on-nonfinite skip: GradScaler's own semantics, a step with a
                                  non-finite loss or gradient is skipped and the scale backs off;
                                  the worker still exits 3 if the model breaks anyway (a
                                  non-finite test loss, or a scale that fell to 0)
The finding is reproduced at a learning rate where, for every seed, the fp16 run exits 3 and the
amp-fp16 run finishes (exit 0, finite loss). The sweep stops after the first such learning rate.
Training at these rates is chaotic (cuDNN's algorithm choice alone changes the trajectory), hence
several seeds. PyTorch runs the same recipe at the learning rates tried
(bench/divergence_reference.py; it does not stop on a non-finite loss, so its first such step is
given). Writes DIR/divergence-bench.json and prints a Markdown table.
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
sys.path.insert(0, HERE)
from results_folder import default_results_folder, recorded_command  # noqa: E402

RUNS = {"fp16 --loss-scale none": ["--precision", "fp16", "--loss-scale", "none", "--on-nonfinite", "stop"],
        "amp-fp16 --loss-scale dynamic": ["--precision", "amp-fp16", "--loss-scale", "dynamic",
                                          "--on-nonfinite", "skip"]}
EXIT_DIVERGED = 3  # common/status.h: ExitCode::kDiverged


def train(args, lr, seed, name, flags):
    """One run; returns its outcome: exit code, the divergence message (exit 3) or the last
    loss, skipped steps and final loss scale (exit 0)."""
    out = os.path.join(args.out, f"{args.model}-{args.dataset}-lr{lr}-seed{seed}-" +
                       re.sub(r"[^A-Za-z0-9]+", "-", name).strip("-"))
    cmd = [os.path.join(args.build, "bin", "mgpu-worker"), "--model", args.model, "--dataset", args.dataset,
           "--batch-size", str(args.batch), "--max-steps", str(args.steps), "--epochs", "1000",
           "--log-every", "10", "--optimizer", "sgd", "--momentum", "0.9", "--lr", str(lr), "--seed", str(seed),
           "--weight-decay", str(args.weight_decay),
           "--device", args.device, "--progress", "lines", "--out", out, "--overwrite"] + flags
    if args.dataset == "synthetic":
        cmd += ["--image-size", "32", "--synthetic-train", str(args.batch * args.steps), "--synthetic-test", "256"]
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
    row.update(skipped_steps=summary.get("skipped_steps"), final_loss_scale=summary.get("final_loss_scale"),
               test_accuracy=summary.get("test_accuracy"))
    if code == EXIT_DIVERGED:
        row["error"] = summary.get("error", "")
    else:
        with open(os.path.join(out, "metrics.csv")) as f:
            row["last_loss"] = float(list(csv.DictReader(f))[-1]["loss"])
    return row


def pytorch_reference(args, lrs):
    """PyTorch's runs of the same recipe at `lrs` (bench/divergence_reference.py, one process):
    {lr: {mode: [row per seed]}}, or {"error": why}."""
    if not args.device.startswith("cuda"):
        return {"error": "PyTorch's side runs on a GPU only"}
    cmd = [sys.executable, os.path.join(HERE, "divergence_reference.py"), "--model", args.model, "--lrs",
           ",".join(f"{lr:g}" for lr in lrs), "--seeds", ",".join(map(str, args.seed_list)), "--steps",
           str(args.steps), "--batch", str(args.batch), "--weight-decay", str(args.weight_decay),
           "--dataset", args.dataset]
    timeout = args.run_timeout * len(lrs) * len(args.seed_list)
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return {"error": f"stopped after {timeout} s"}
    rows = {}
    for line in done.stdout.splitlines():
        if line.startswith("{"):
            row = json.loads(line)
            rows.setdefault(row["lr"], {}).setdefault(row["mode"], []).append(row)
    return rows if rows else {"error": done.stderr[-500:]}


def reproduced(pair):
    """One seed's two runs show the finding: fp16 stopped with exit 3, amp-fp16 finished finite."""
    fp16, amp = pair["fp16 --loss-scale none"], pair["amp-fp16 --loss-scale dynamic"]
    return (fp16["exit_code"] == EXIT_DIVERGED and amp["exit_code"] == 0
            and math.isfinite(amp.get("last_loss", math.nan)))


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--build", default="build-gpu")
    parser.add_argument("--out", help="default: bench/results/<date>-<host>-divergence/ (bench/results_folder.py)")
    parser.add_argument("--model", default="resnet18", help="resnet18 or vgg19 (on VGG-19 the rates that break "
                        "float16 break the forward pass of both runs, see docs/BENCHMARKS.md)")
    parser.add_argument("--dataset", default="synthetic", choices=["synthetic", "fashion-mnist"],
                        help="CIFAR-shaped random images (the issue's recipe) or real data (resnet18 only)")
    parser.add_argument("--lrs", default="1,2,3.2,4", help="learning rates to try, ascending")
    parser.add_argument("--seeds", default="42,43,44", help="seeds run at every learning rate")
    parser.add_argument("--weight-decay", type=float, default=5e-4, help="the precision experiment's; without it "
                        "the BatchNorm-scaled weights grow until float16 activations overflow in both runs")
    parser.add_argument("--batch", type=int, default=256)
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--run-timeout", type=int, default=120)
    parser.add_argument("--device", default="cuda", help="cuda; cpu (with a small --model) tries the driver out")
    args = parser.parse_args()
    args.out = args.out or default_results_folder("divergence")
    try:
        lrs = [float(v) for v in args.lrs.split(",")]
        args.seed_list = [int(v) for v in args.seeds.split(",")]
    except ValueError:
        raise SystemExit(f"--lrs {args.lrs} / --seeds {args.seeds}: expected numbers separated by commas, "
                         "e.g. --lrs 0.1,1,10 --seeds 42,43")
    if args.dataset == "fashion-mnist" and args.model != "resnet18":
        raise SystemExit(f"--dataset fashion-mnist needs --model resnet18 (VGG-19 needs 32x32 images, "
                         f"Fashion-MNIST's are 28x28), not --model {args.model}")
    if args.device.startswith("cuda") and not torch.cuda.is_available():
        raise SystemExit("no CUDA device visible; the finding is about float16 training on a GPU")
    os.makedirs(args.out, exist_ok=True)
    sweep = []
    for lr in lrs:
        seeds = [{"seed": seed, "runs": {name: train(args, lr, seed, name, flags) for name, flags in RUNS.items()}}
                 for seed in args.seed_list]
        for point in seeds:
            point["reproduced"] = reproduced(point["runs"])
        sweep.append({"lr": lr, "seeds": seeds, "reproduced": all(point["reproduced"] for point in seeds)})
        print(json.dumps(sweep[-1]), flush=True)
        if sweep[-1]["reproduced"]:
            break
    reference = pytorch_reference(args, [p["lr"] for p in sweep])
    for point in sweep:
        point["pytorch"] = reference.get(point["lr"], {"error": reference.get("error", "no result line")})
    meta = {"date": datetime.date.today().isoformat(), "host": platform.node(),
            "device": torch.cuda.get_device_name(0) if args.device.startswith("cuda") else args.device,
            "torch": torch.__version__, "cuda": torch.version.cuda, "model": args.model, "dataset": args.dataset,
            "batch": args.batch, "steps": args.steps, "seeds": args.seed_list, "weight_decay": args.weight_decay,
            "command": recorded_command()}
    with open(os.path.join(args.out, "divergence-bench.json"), "w") as f:
        json.dump({"meta": meta, "divergence": sweep}, f, indent=2)
    print(f"\n{meta['device']}, {args.model} on {args.dataset}, batch {args.batch}, up to {args.steps} steps, "
          f"seeds {args.seeds}, {meta['date']}\n")
    print("| lr | seed | run | exit | outcome |\n| --- | --- | --- | --- | --- |")
    for point in sweep:
        for seeded in point["seeds"]:
            for name, row in seeded["runs"].items():
                outcome = (row.get("failed") or (row.get("error", "")[:160] if row["exit_code"] == EXIT_DIVERGED else
                           f"last loss {row.get('last_loss', float('nan')):.4g}, {row.get('skipped_steps')} skipped "
                           f"steps, loss scale {row.get('final_loss_scale')}"))
                print(f"| {point['lr']:g} | {seeded['seed']} | mgpu {name} | {row['exit_code']} | {outcome} |")
        for mode, rows in point["pytorch"].items() if "error" not in point["pytorch"] else []:
            for row in rows:
                first = row["first_nonfinite_step"]
                print(f"| {point['lr']:g} | {row['seed']} | PyTorch {mode} | - | " + (
                    f"first non-finite loss at step {first}, {row['nonfinite_steps']} of {row['steps']} steps "
                    f"non-finite" if first else f"no non-finite loss in {row['steps']} steps") +
                    f", last loss {row['last_loss']:.4g}, loss scale {row['final_loss_scale']:g} |")
    found = next((p["lr"] for p in sweep if p["reproduced"]), None)
    print(f"\nfinding reproduced: {f'yes, at lr {found:g}, every seed' if found is not None else 'no'}")


if __name__ == "__main__":
    main()
