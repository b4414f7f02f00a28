"""Speed beyond the reference (issue 10): mgpu's --cuda-graphs, --channels-last and
--data-on-device, each measured on and off, against PyTorch 2.11 eager in the same invocation.

    python3 bench/speed_bench.py --build build-gpu [--out DIR] [--mnist-dir DIR] [--only lenet,mnist,resnet]
        [--targets-only]

Rows, one GPU:
  lenet-synthetic  LeNet-5, batch 32, SGD momentum, 28 px images held on the GPU on both sides
                   (PyTorch: bench/reference_train.py; mgpu: --data-on-device, and once with its
                   host loader); steps/s.
  mnist-epoch      The MNIST experiment's recipe end to end: LeNet-5, batch 32, Adam 1e-3, one
                   epoch of Fashion-MNIST (--mnist-dir; random IDX data otherwise), PyTorch with
                   its DataLoader (bench/lenet_dp_reference.py, 0 workers) against mgpu with its
                   loader, then with --data-on-device --cuda-graphs; epoch seconds and steps/s.
  resnet18-bf16    ResNet-18 (CIFAR stem), amp-bf16, batch 256, 32 px synthetic data on the GPU,
                   SGD momentum: PyTorch eager (NCHW, as the seeds run it) against mgpu eager,
                   --channels-last, and --channels-last --cuda-graphs (all with --data-on-device,
                   as PyTorch's data is on the GPU too); img/s.
Targets (issue 10): LeNet with --cuda-graphs >= 3x PyTorch's steps/s; ResNet-18 amp-bf16 with
channels-last and graphs >= 1.15x PyTorch eager. Writes DIR/speed-bench.json, prints Markdown.
"""
import argparse
import datetime
import json
import os
import platform
import re
import sys
from types import SimpleNamespace

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from dp_bench import mgpu, mnist_dir, python_reference  # noqa: E402
from gpu_bench import mgpu_run, pytorch_run  # noqa: E402
from results_folder import default_results_folder, recorded_command  # noqa: E402

FAST = ["--cuda-graphs", "true", "--data-on-device", "true"]


def synthetic_rows(args, model, precision, batch, steps, warmup, variants):
    """mgpu variants and PyTorch eager on synthetic data; images/s per row."""
    run_args = SimpleNamespace(build=args.build, batch=batch, steps=steps, warmup=warmup, loader_workers=4,
                               run_timeout=args.run_timeout)
    rows = {"PyTorch eager": pytorch_run(run_args, model, precision, 1)}
    print(json.dumps({model: rows["PyTorch eager"]}), flush=True)
    for name, flags in variants.items():
        out = os.path.join(args.out, f"{model}-{precision}-" + re.sub(r"[^A-Za-z0-9]+", "-", name).strip("-"))
        rows[name] = mgpu_run(run_args, model, precision, 1, out, extra_flags=flags)
        print(json.dumps({model: {name: rows[name]}}), flush=True)
    return rows


def mnist_epoch(args):
    data = mnist_dir(args)
    common = ["--dataset", "mnist", "--data-dir", data, "--model", "lenet", "--epochs", "1", "--optimizer", "adam",
              "--lr", "0.001", "--batch-size", "32", "--num-workers", "0", "--log-every", "500", "--device", "cuda:0"]
    rows = {"PyTorch eager (DataLoader)": python_reference(
        args, "lenet_dp_reference.py", ["--data-dir", data, "--gpus", "1", "--num-workers", "0"],
        os.path.join(args.out, "mnist-pytorch.log"))}
    for name, flags in (("mgpu eager (loader)", []), ("mgpu --data-on-device --cuda-graphs", FAST)):
        out = os.path.join(args.out, "mnist-" + ("fast" if flags else "eager"))
        summary = mgpu(args, out, common + flags)
        rows[name] = summary if "failed" in summary else {
            "epoch_seconds": summary["epochs_detail"][0]["seconds"], "test_accuracy": summary["test_accuracy"],
            "steps": summary["steps"], "cuda_graphs": summary.get("cuda_graphs")}
    for row in rows.values():
        if "epoch_seconds" in row:
            row["steps_per_second"] = 60000 / 32 / row["epoch_seconds"]
    print(json.dumps({"mnist-epoch": rows}), flush=True)
    return rows


def value(row, key):
    return row.get(key) if isinstance(row, dict) and "error" not in row and "failed" not in row else None


def table(title, rows, key, unit, scale=1.0):
    print(f"\n{title}\n\n| run | {unit} | vs PyTorch eager |\n| --- | --- | --- |")
    base = next((value(r, key) for n, r in rows.items() if n.startswith("PyTorch")), None)
    for name, row in rows.items():
        v = value(row, key)
        why = "" if v else (row.get("error") or row.get("failed") or "")[:200]
        print(f"| {name} | {f'{v * scale:.0f}' if v else 'failed: ' + why} | {f'{v / base:.2f}' if v and base else '-'} |")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--build", default="build-gpu")
    parser.add_argument("--out", help="default: bench/results/<date>-<host>-speed/ (bench/results_folder.py)")
    parser.add_argument("--mnist-dir", default="")
    parser.add_argument("--run-timeout", type=int, default=300)
    parser.add_argument("--only", default="lenet,mnist,resnet", help="which of lenet, mnist, resnet to run")
    parser.add_argument("--targets-only", action="store_true",
                        help="of each row's variants, only those issue 10's targets compare (PyTorch eager and "
                        "mgpu's fastest); what bench/run_all.sh runs, to stay within its time")
    args = parser.parse_args()
    args.out = args.out or default_results_folder("speed")
    only = args.only.split(",")
    if not set(only) <= {"lenet", "mnist", "resnet"}:
        raise SystemExit(f"--only {args.only}: expected a comma-separated list of lenet, mnist, resnet")
    os.makedirs(args.out, exist_ok=True)
    results = {}

    def variants(every, target):  # the variants to run: `target` always, the others unless --targets-only
        return {name: flags for name, flags in every.items() if name == target or not args.targets_only}

    if "lenet" in only:
        results["lenet-synthetic"] = synthetic_rows(
            args, "lenet", "fp32", 32, 1500, 300, variants(
                {"mgpu eager (host loader, 4 workers)": [], "mgpu eager --data-on-device": ["--data-on-device", "true"],
                 "mgpu --data-on-device --cuda-graphs": FAST}, "mgpu --data-on-device --cuda-graphs"))
    if "mnist" in only:
        results["mnist-epoch"] = mnist_epoch(args)
    if "resnet" in only:
        results["resnet18-bf16"] = synthetic_rows(
            args, "resnet18", "amp-bf16", 256, 60, 15, variants(
                {"mgpu eager --data-on-device": ["--data-on-device", "true", "--channels-last", "false"],
                 "mgpu --data-on-device --channels-last": ["--data-on-device", "true", "--channels-last", "true"],
                 "mgpu --data-on-device --channels-last --cuda-graphs": ["--channels-last", "true"] + FAST},
                "mgpu --data-on-device --channels-last --cuda-graphs"))
    meta = {"date": datetime.date.today().isoformat(), "host": platform.node(), "gpu": torch.cuda.get_device_name(0),
            "torch": torch.__version__, "cuda": torch.version.cuda, "command": recorded_command()}
    with open(os.path.join(args.out, "speed-bench.json"), "w") as f:
        json.dump({"meta": meta, "results": results}, f, indent=2)
    print(f"\n{meta['gpu']}, torch {meta['torch']}, CUDA {meta['cuda']}, {meta['date']}")
    if "lenet-synthetic" in results:
        table("LeNet-5, batch 32, fp32, data on the GPU (target: --cuda-graphs >= 3x)", results["lenet-synthetic"],
              "images_per_second", "steps/s", 1 / 32)
    if "mnist-epoch" in results:
        table("MNIST experiment, one epoch, LeNet-5 batch 32 Adam (target: >= 3x)", results["mnist-epoch"],
              "steps_per_second", "steps/s")
    if "resnet18-bf16" in results:
        table("ResNet-18, amp-bf16, batch 256 (target: channels-last + graphs >= 1.15x)", results["resnet18-bf16"],
              "images_per_second", "img/s")


if __name__ == "__main__":
    main()
