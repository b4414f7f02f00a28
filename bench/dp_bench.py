"""DataParallel benchmark (issue 5): mgpu --mode dp against mgpu on one GPU and PyTorch's
nn.DataParallel, in one invocation on one host. Builds nothing: give it a built tree.

    python3 bench/dp_bench.py --build build-gpu [--out DIR] [--gpus 2] [--mnist-dir DIR]

1. ResNet-18, synthetic CIFAR-shaped data, global batch 512, fp32, SGD: images/s of mgpu on one
   GPU, mgpu dp (--dp-impl mgpu and libtorch), PyTorch on one GPU and nn.DataParallel.
   Targets: mgpu dp >= 1.7x mgpu one GPU and >= 1.5x nn.DataParallel.
2. The MNIST experiment's recipe: LeNet-5, batch 32, Adam, --lenet-workers loader workers (4;
   e.g. 0,4 for both), one epoch of MNIST-format data (--mnist-dir, e.g. Fashion-MNIST's folder,
   else 60000 + 10000 random images written once into DIR): epoch seconds and accuracy of the
   baseline (one GPU), DataParallel over --gpus GPUs (the batch of 32 split among them) and DDP
   (--gpus processes, 32 images each per step; mgpu's started by `mgpu run`), for mgpu and
   PyTorch (nn.DataParallel, DistributedDataParallel with a DistributedSampler).
   Targets: mgpu dp's epoch <= 0.3x nn.DataParallel's and <= 1.2x mgpu's one-GPU epoch. mgpu's
   one-GPU and dp epochs run --repeats times (3), interleaved in pairs, since the one-GPU epoch
   alone varies by up to 30% within minutes: the median pair ratio is the result. With
   --lenet-graphs (the default), those pairs run again with --cuda-graphs.
mgpu's images/s is images over time across its metrics.csv rows after warm-up; its epoch time is
summary.json's. Writes DIR/dp-bench-results.json and prints Markdown tables.
"""
import argparse
import datetime
import gzip
import json
import os
import platform
import statistics
import struct
import subprocess
import sys

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from ports import free_port  # noqa: E402
from run_rate import log_every_for, measured_throughput  # noqa: E402
from results_folder import default_results_folder, recorded_command  # noqa: E402
ENV = dict(os.environ, NCCL_NVLS_ENABLE="0")


def run_logged(args, cmd, log_path, cwd=None):
    """Runs `cmd` with its output in `log_path`; returns None, or why it failed. A run past
    --run-timeout is stopped: one pathological configuration must not take the whole budget."""
    with open(log_path, "w") as log:
        try:
            code = subprocess.run(cmd, env=ENV, stdout=log, stderr=subprocess.STDOUT, cwd=cwd,
                                  timeout=args.run_timeout).returncode
        except subprocess.TimeoutExpired:
            return f"stopped after --run-timeout {args.run_timeout} s; see {log_path}"
    return f"exit code {code}; see {log_path}" if code else None


def mgpu(args, out, flags, launcher=()):
    """Runs mgpu-worker (or `launcher` + worker flags, e.g. mgpu run); returns its summary.json,
    or {"failed": why}. (summary.json's own "error" field is empty on success.)"""
    cmd = list(launcher or [os.path.join(args.build, "bin", "mgpu-worker")]) + ["--progress", "lines", "--out", out, "--overwrite"]
    failed = run_logged(args, cmd + flags, out + ".log")
    if failed:
        return {"failed": failed}
    with open(os.path.join(out, "summary.json")) as f:
        return json.load(f)


def python_reference(args, script, flags, log_path):
    """Runs a PyTorch reference script; returns the last JSON object it printed, or {"failed": why}.
    (Its log mixes stdout and stderr, and PyTorch may warn at exit after the result line.)"""
    failed = run_logged(args, [sys.executable, os.path.join(HERE, script)] + flags, log_path, cwd=HERE)
    if failed:
        return {"failed": failed}
    with open(log_path) as f:
        for line in reversed(f.read().splitlines()):
            if line.startswith("{"):
                return json.loads(line)
    return {"failed": f"no result line; see {log_path}"}


def report(results, name, value):
    results[name] = value
    print(json.dumps({name: value}), flush=True)


def dp_flags(args, impl):
    return ["--mode", "dp", "--dp-impl", impl, "--dp-devices", ",".join(f"cuda:{i}" for i in range(args.gpus))]


def resnet(args):
    steps, log_every = args.warmup + args.steps, log_every_for(args.warmup, args.steps)
    common = ["--model", "resnet18", "--dataset", "synthetic", "--image-size", "32", "--synthetic-train", "60000",
              "--synthetic-test", "1000", "--batch-size", str(args.batch), "--max-steps", str(steps),
              "--epochs", "1000", "--log-every", str(log_every), "--optimizer", "sgd", "--momentum", "0.9",
              "--lr", "0.01", "--precision", "fp32", "--num-workers", str(args.loader_workers)]
    runs = {"mgpu 1 GPU": ["--device", "cuda:0"], "mgpu dp": dp_flags(args, "mgpu"),
            "mgpu dp (libtorch data_parallel)": dp_flags(args, "libtorch")}
    results = {}
    for name, flags in runs.items():
        out = os.path.join(args.out, "resnet18-" + name.replace(" ", "-").replace("(", "").replace(")", ""))
        summary = mgpu(args, out, common + flags)
        report(results, name, summary if "failed" in summary else {
            "images_per_second": measured_throughput(out, args.warmup, args.batch)[0],
            "peak_memory_bytes": summary.get("peak_memory_bytes"), "dp_timing": summary.get("dp_timing")})
    for name, gpus in (("PyTorch 1 GPU", 1), ("PyTorch nn.DataParallel", args.gpus)):
        flags = ["--model", "resnet18", "--precision", "fp32", "--batch", str(args.batch // gpus), "--world", str(gpus),
                 "--steps", str(args.steps), "--warmup", str(args.warmup)] + (["--data-parallel"] if gpus > 1 else [])
        log_path = os.path.join(args.out, "resnet18-" + name.replace(" ", "-") + ".log")
        report(results, name, python_reference(args, "reference_train.py", flags, log_path))
    return results


def write_idx(path, array):
    header = struct.pack(">BBBB", 0, 0, 8, array.ndim) + struct.pack(">" + "I" * array.ndim, *array.shape)
    with gzip.open(path, "wb", compresslevel=1) as f:
        f.write(header + array.astype(np.uint8).tobytes())


def mnist_dir(args):
    if args.mnist_dir:
        return args.mnist_dir
    folder = os.path.join(args.out, "mnist-random")
    if not os.path.exists(os.path.join(folder, "t10k-labels-idx1-ubyte.gz")):
        os.makedirs(folder, exist_ok=True)
        rng = np.random.default_rng(0)
        for prefix, n in (("train", 60000), ("t10k", 10000)):
            write_idx(os.path.join(folder, f"{prefix}-images-idx3-ubyte.gz"), rng.integers(0, 256, (n, 28, 28)))
            write_idx(os.path.join(folder, f"{prefix}-labels-idx1-ubyte.gz"), rng.integers(0, 10, (n,)))
    return folder


def lenet(args, loader_workers):
    data = mnist_dir(args)
    common = ["--dataset", "mnist", "--data-dir", data, "--model", "lenet", "--epochs", "1", "--optimizer", "adam",
              "--lr", "0.001", "--num-workers", str(loader_workers), "--log-every", "500"]
    one_gpu = ["--batch-size", "32", "--device", "cuda:0"]
    dp = ["--batch-size", "32"] + dp_flags(args, "mgpu")
    pairs = [("mgpu 1 GPU", one_gpu, "mgpu dp", dp)]
    if args.lenet_graphs:  # LeNet's eager step is launch-bound: the same recipe with its kernels replayed
        graphs = ["--cuda-graphs", "true"]
        pairs.append(("mgpu 1 GPU --cuda-graphs", one_gpu + graphs, "mgpu dp --cuda-graphs", dp + graphs))

    def run(name, flags, launcher=(), repeat=None):
        suffix = "" if repeat is None else f"-r{repeat}"
        out = os.path.join(args.out, f"lenet-w{loader_workers}-" + name.replace(" ", "-") + suffix)
        summary = mgpu(args, out, common + flags, launcher)
        return summary if "failed" in summary else {
            "epoch_seconds": summary["epochs_detail"][0]["seconds"], "test_accuracy": summary["test_accuracy"],
            "dp_timing": summary.get("dp_timing")}

    results = {}
    for one_name, one_flags, dp_name, dp_run_flags in pairs:
        # The one-GPU epoch itself varies by up to 30% within minutes on one host, so each dp epoch
        # is compared with the one-GPU epoch run just before it, and the pairs' median ratio counts.
        runs = {one_name: [], dp_name: []}
        for repeat in range(args.repeats):
            for name, flags in ((one_name, one_flags), (dp_name, dp_run_flags)):
                runs[name].append(run(name, flags, repeat=repeat if args.repeats > 1 else None))
                print(json.dumps({f"{name} (run {repeat + 1} of {args.repeats})": runs[name][-1]}), flush=True)
        for name, done in runs.items():
            report(results, name, median_run(done))
        ratios = [d["epoch_seconds"] / o["epoch_seconds"] for o, d in zip(runs[one_name], runs[dp_name])
                  if "failed" not in o and "failed" not in d]
        if ratios:
            report(results, f"{dp_name} / {one_name}", {"pair_ratios": ratios, "median": statistics.median(ratios)})
    ddp_launcher = [os.path.join(args.build, "bin", "mgpu"), "run", "--nproc-per-node", str(args.gpus),
                    "--master-port", str(free_port())]
    report(results, "mgpu ddp", run("mgpu ddp", ["--batch-size", str(32 * args.gpus), "--mode", "ddp", "--backend", "nccl"],
                                    ddp_launcher))
    nn_dp_steps = ["--max-steps", str(args.nn_dp_steps)] if args.nn_dp_steps else []
    for name, gpus, extra in (("PyTorch 1 GPU", 1, []), ("PyTorch nn.DataParallel", args.gpus, nn_dp_steps),
                              ("PyTorch DDP", args.gpus, ["--ddp"])):
        if "--ddp" in extra:  # picked just before use: one picked before the other references ran was taken once
            extra = extra + ["--port", str(free_port())]
        flags = ["--data-dir", data, "--gpus", str(gpus), "--num-workers", str(loader_workers)] + extra
        log_path = os.path.join(args.out, f"lenet-w{loader_workers}-" + name.replace(" ", "-").replace(".", "") + ".log")
        report(results, name, python_reference(args, "lenet_dp_reference.py", flags, log_path))
    return results


def median_run(runs):
    """The run with the median epoch (the lower middle one of an even count), with every run's epoch
    seconds beside it; the first failure if any run failed."""
    failed = [r for r in runs if "failed" in r]
    if failed:
        return failed[0]
    ordered = sorted(runs, key=lambda r: r["epoch_seconds"])
    return dict(ordered[(len(ordered) - 1) // 2], epoch_seconds_runs=[r["epoch_seconds"] for r in runs])


def ratio(a, b):
    return f"{a / b:.2f}" if a and b else "-"


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--build", default="build-gpu")
    parser.add_argument("--out", help="default: bench/results/<date>-<host>-dp/ (bench/results_folder.py)")
    parser.add_argument("--gpus", type=int, default=torch.cuda.device_count())
    parser.add_argument("--batch", type=int, default=512, help="ResNet-18 global batch")
    parser.add_argument("--steps", type=int, default=40)
    parser.add_argument("--warmup", type=int, default=10)
    parser.add_argument("--loader-workers", type=int, default=4)
    parser.add_argument("--mnist-dir", default="")
    parser.add_argument("--lenet-workers", default="4", help="loader workers of the LeNet runs, e.g. 0,4")
    parser.add_argument("--run-timeout", type=int, default=600, help="seconds one run may take before it is stopped")
    parser.add_argument("--nn-dp-steps", type=int, default=0,
                        help="time nn.DataParallel's LeNet over steps 21..N and project its epoch from them (0: "
                        "the whole epoch, which can take minutes)")
    parser.add_argument("--repeats", type=int, default=3,
                        help="LeNet: run mgpu's one-GPU and dp epochs this many times, interleaved in pairs; the "
                        "median pair ratio is the dp / one-GPU result")
    parser.add_argument("--only", choices=["resnet", "lenet"], default=None)
    parser.add_argument("--lenet-graphs", action=argparse.BooleanOptionalAction, default=True,
                        help="also run mgpu's one-GPU and dp LeNet rows with --cuda-graphs")
    args = parser.parse_args()
    args.out = args.out or default_results_folder("dp")
    if args.gpus < 2:
        raise SystemExit(f"dp_bench needs at least 2 GPUs, found {args.gpus}")
    if args.repeats < 1:
        raise SystemExit(f"--repeats {args.repeats}: give at least 1 (the number of one-GPU/dp LeNet pairs)")
    os.makedirs(args.out, exist_ok=True)
    results = {}
    if args.only in (None, "resnet"):
        results["resnet18"] = resnet(args)
    if args.only in (None, "lenet"):
        for workers in args.lenet_workers.split(","):
            results[f"lenet-w{workers}"] = lenet(args, int(workers))
    meta = {"date": datetime.date.today().isoformat(), "host": platform.node(), "gpus": args.gpus,
            "gpu": torch.cuda.get_device_name(0) if torch.cuda.is_available() else "none",
            "torch": torch.__version__, "cuda": torch.version.cuda,
            "command": recorded_command()}
    with open(os.path.join(args.out, "dp-bench-results.json"), "w") as f:
        json.dump({"meta": meta, "results": results}, f, indent=2)

    print(f"\n{meta['gpus']}x {meta['gpu']}, torch {meta['torch']}, CUDA {meta['cuda']}, {meta['date']}")
    if "resnet18" in results:
        r = results["resnet18"]
        ips = {k: v.get("images_per_second") for k, v in r.items()}
        print(f"\nResNet-18, CIFAR-shaped synthetic data, global batch {args.batch}, fp32\n")
        print("| run | img/s | vs mgpu 1 GPU | vs nn.DataParallel |")
        print("| --- | --- | --- | --- |")
        for name, v in ips.items():
            print(f"| {name} | {v:.0f} | {ratio(v, ips.get('mgpu 1 GPU'))} | {ratio(v, ips.get('PyTorch nn.DataParallel'))} |"
                  if v else f"| {name} | failed: {r[name].get('failed', '')[:200]} | | |")
        print(f"\ntargets: mgpu dp / mgpu 1 GPU >= 1.7 ({ratio(ips.get('mgpu dp'), ips.get('mgpu 1 GPU'))}), "
              f"mgpu dp / nn.DataParallel >= 1.5 ({ratio(ips.get('mgpu dp'), ips.get('PyTorch nn.DataParallel'))})")
    for key in (k for k in results if k.startswith("lenet-w")):
        r = results[key]
        pair_ratios = {k: v for k, v in r.items() if "pair_ratios" in v}
        sec = {k: v.get("epoch_seconds") or v.get("epoch_seconds_projected") for k, v in r.items() if k not in pair_ratios}
        print(f"\nLeNet-5, batch 32 per process, Adam, {key[len('lenet-w'):]} loader workers, one epoch, "
              f"{args.gpus} GPUs for DataParallel and DDP\n")
        print("| run | epoch s | accuracy % | vs same side's 1 GPU |")
        print("| --- | --- | --- | --- |")
        for name, v in sec.items():
            base = sec.get(("mgpu 1 GPU --cuda-graphs" if name.endswith("--cuda-graphs") else "mgpu 1 GPU")
                           if name.startswith("mgpu") else "PyTorch 1 GPU")
            projected = (f" (projected from {r[name]['steps_measured']} steps)"
                         if "epoch_seconds_projected" in r[name] else "")
            runs = r[name].get("epoch_seconds_runs", [])
            median = f" (median of {', '.join(f'{s:.2f}' for s in runs)})" if len(runs) > 1 else ""
            accuracy = f"{r[name]['test_accuracy']:.2f}" if "test_accuracy" in r[name] else "-"
            print(f"| {name} | {v:.2f}{projected}{median} | {accuracy} | {ratio(v, base)} |" if v
                  else f"| {name} | failed: {r[name].get('failed', '')[:200]} | | |")
        for name, v in pair_ratios.items():
            print(f"\n{name}, pair by pair: {', '.join(f'{x:.2f}' for x in v['pair_ratios'])} (median {v['median']:.2f})")

        def paired(dp_name, one_name):
            pair = pair_ratios.get(f"{dp_name} / {one_name}")
            return f"{pair['median']:.2f}" if pair else ratio(sec.get(dp_name), sec.get(one_name))

        print(f"\ntargets: mgpu dp / nn.DataParallel <= 0.3 ({ratio(sec.get('mgpu dp'), sec.get('PyTorch nn.DataParallel'))}), "
              f"mgpu dp / mgpu 1 GPU <= 1.2 (median pair {paired('mgpu dp', 'mgpu 1 GPU')}; with --cuda-graphs on "
              f"both {paired('mgpu dp --cuda-graphs', 'mgpu 1 GPU --cuda-graphs')}, on dp only "
              f"{ratio(sec.get('mgpu dp --cuda-graphs'), sec.get('mgpu 1 GPU'))}); "
              f"mgpu ddp / PyTorch DDP: {ratio(sec.get('mgpu ddp'), sec.get('PyTorch DDP'))}")


if __name__ == "__main__":
    main()
