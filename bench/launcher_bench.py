"""Launcher benchmark (issue 7): the same DDP job started three ways on one GPU host, alternating,
so that any gap is the launcher's and not the machine's drift:

  mgpu run   `mgpu run --nproc-per-node N` (gRPC coordinator, heartbeats, metrics stream)
  mpirun     `mpirun -np N --bind-to none mgpu-worker` (Open MPI's environment, NCCL id by MPI_Bcast)
  torchrun   N mgpu-worker processes with torchrun's environment, started by this script

    python3 bench/launcher_bench.py --build build-gpu [--out DIR] [--gpus 2] [--repeats 2]

The job: ResNet-18 on CIFAR-shaped synthetic data, batch 256 per GPU, --precision (amp-bf16),
SGD, NCCL. images/s is images over time across rank 0's metrics.csv rows after warm-up (as
bench/gpu_bench.py). Target: `mgpu run` within 3% of mpirun. Writes DIR/launcher-bench.json
and prints a Markdown table.
"""
import argparse
import datetime
import json
import os
import platform
import shutil
import subprocess
import sys

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from ports import free_port  # noqa: E402
from run_rate import log_every_for, measured_throughput  # noqa: E402
from results_folder import default_results_folder, recorded_command  # noqa: E402

ENV = dict(os.environ, NCCL_NVLS_ENABLE="0")


def worker_flags(args, out):
    steps = args.warmup + args.steps
    return ["--model", "resnet18", "--dataset", "synthetic", "--image-size", "32",
            "--synthetic-train", str(args.batch * args.gpus * (steps + 1)), "--synthetic-test", "256",
            "--batch-size", str(args.batch * args.gpus), "--max-steps", str(steps), "--epochs", "1000",
            "--log-every", str(log_every_for(args.warmup, args.steps)), "--optimizer", "sgd", "--momentum", "0.9", "--lr", "0.01",
            "--precision", args.precision, "--num-workers", "4", "--mode", "ddp", "--backend", "nccl",
            "--progress", "lines", "--out", out, "--overwrite"]


def launch(args, how, out):
    worker = os.path.join(args.build, "bin", "mgpu-worker")
    flags = worker_flags(args, out)
    log = open(out + ".log", "w")
    if how == "mgpu run":
        cmd = [os.path.join(args.build, "bin", "mgpu"), "run", "--nproc-per-node", str(args.gpus)] + flags
        procs = [subprocess.Popen(cmd, env=ENV, stdout=log, stderr=subprocess.STDOUT)]
    elif how == "mpirun":
        cmd = [args.mpirun, "-np", str(args.gpus), "--bind-to", "none", "-x", "NCCL_NVLS_ENABLE=0", worker] + flags
        procs = [subprocess.Popen(cmd, env=ENV, stdout=log, stderr=subprocess.STDOUT)]
    else:
        port = free_port()
        procs = [subprocess.Popen([worker] + flags, stdout=log, stderr=subprocess.STDOUT,
                                  env=dict(ENV, RANK=str(r), WORLD_SIZE=str(args.gpus), LOCAL_RANK=str(r),
                                           LOCAL_WORLD_SIZE=str(args.gpus), MASTER_ADDR="127.0.0.1",
                                           MASTER_PORT=str(port)))
                 for r in range(args.gpus)]
    codes = [p.wait() for p in procs]
    log.close()
    if any(codes):
        return {"error": f"exit codes {codes}; see {out}.log"}
    ips, step_seconds, _ = measured_throughput(out, args.warmup, args.batch * args.gpus)
    return {"images_per_second": ips, "step_seconds": step_seconds}


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--build", default="build-gpu")
    parser.add_argument("--out", help="default: bench/results/<date>-<host>-launcher/ (bench/results_folder.py)")
    parser.add_argument("--gpus", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--precision", default="amp-bf16")
    parser.add_argument("--batch", type=int, default=256, help="per GPU")
    parser.add_argument("--steps", type=int, default=40)
    parser.add_argument("--warmup", type=int, default=10)
    parser.add_argument("--mpirun", default=shutil.which("mpirun") or "mpirun")
    args = parser.parse_args()
    args.out = args.out or default_results_folder("launcher")
    os.makedirs(args.out, exist_ok=True)
    ways = ["mgpu run", "mpirun", "torchrun"]
    results = {how: [] for how in ways}
    for repeat in range(args.repeats):
        for how in ways:
            out = os.path.join(args.out, f"{how.replace(' ', '-')}-{repeat}")
            results[how].append(launch(args, how, out))
            print(json.dumps({"launcher": how, "repeat": repeat, **results[how][-1]}), flush=True)
    meta = {"date": datetime.date.today().isoformat(), "host": platform.node(), "gpus": args.gpus,
            "gpu": torch.cuda.get_device_name(0), "command": recorded_command()}
    with open(os.path.join(args.out, "launcher-bench.json"), "w") as f:
        json.dump({"meta": meta, "results": results}, f, indent=2)
    mean = {how: sum(r.get("images_per_second", 0) for r in runs) / len(runs)
            for how, runs in results.items() if all("error" not in r for r in runs)}
    print(f"\n{args.gpus}x {meta['gpu']}, ResNet-18 {args.precision}, batch {args.batch} per GPU, {meta['date']}\n")
    print("| launcher | img/s per repeat | mean img/s | vs mpirun |")
    print("| --- | --- | --- | --- |")
    for how, runs in results.items():
        per = ", ".join(f"{r['images_per_second']:.0f}" if "error" not in r else "error" for r in runs)
        m = mean.get(how)
        vs = f"{m / mean['mpirun']:.3f}" if m and mean.get("mpirun") else "-"
        print(f"| {how} | {per} | {f'{m:.0f}' if m else '-'} | {vs} |")
        for r in runs:
            if "error" in r:
                print(f"  {how} error: {r['error']}")


if __name__ == "__main__":
    main()
