"""All-reduce bus bandwidth sweep (issue 10): mgpu's own communicator (mgpu-allreduce-bench,
which also reports the device time of NCCL's kernels: the raw NCCL figure) next to PyTorch's
ProcessGroupNCCL (bench/allreduce_reference.py), both started by torchrun on --gpus GPUs in the
same invocation.

    python3 bench/allreduce_sweep.py --build build-gpu [--gpus 2] [--max-bytes 268435456] [--out DIR]

Writes DIR/allreduce-sweep.json and prints a Markdown table (busbw in GB/s, nccl-tests' definition).
"""
import argparse
import datetime
import json
import os
import subprocess
import sys

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from results_folder import default_results_folder, recorded_command  # noqa: E402
ENV = dict(os.environ, NCCL_NVLS_ENABLE="0")


def torchrun(args, program):
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc-per-node={args.gpus}"] + program
    done = subprocess.run(cmd, env=ENV, capture_output=True, text=True, timeout=args.run_timeout)
    if done.returncode != 0:
        return {"error": (done.stdout + done.stderr)[-2000:]}
    rows = [json.loads(l) for l in done.stdout.splitlines() if l.startswith("{") and '"bytes"' in l]
    return {"rows": rows}


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--build", default="build-gpu")
    parser.add_argument("--gpus", type=int, default=torch.cuda.device_count())
    parser.add_argument("--max-bytes", type=int, default=256 << 20)
    parser.add_argument("--iters", type=int, default=20)
    parser.add_argument("--out", help="default: bench/results/<date>-<host>-allreduce/ (bench/results_folder.py)")
    parser.add_argument("--run-timeout", type=int, default=300)
    args = parser.parse_args()
    args.out = args.out or default_results_folder("allreduce")
    os.makedirs(args.out, exist_ok=True)
    sweep = ["--min-bytes", "8", "--max-bytes", str(args.max_bytes), "--iters", str(args.iters)]
    mgpu = torchrun(args, ["--no-python", os.path.join(args.build, "bin", "mgpu-allreduce-bench"), "--backend", "nccl"]
                    + sweep)
    pytorch = torchrun(args, [os.path.join(HERE, "allreduce_reference.py")] + sweep)
    meta = {"date": datetime.date.today().isoformat(), "gpus": args.gpus, "gpu": torch.cuda.get_device_name(0),
            "nccl": ".".join(map(str, torch.cuda.nccl.version())), "command": recorded_command()}
    with open(os.path.join(args.out, "allreduce-sweep.json"), "w") as f:
        json.dump({"meta": meta, "mgpu": mgpu, "pytorch": pytorch}, f, indent=2)
    print(f"\n{args.gpus}x {meta['gpu']}, NCCL {meta['nccl']}, {meta['date']}: all-reduce busbw, GB/s\n")
    for name, result in (("mgpu", mgpu), ("pytorch", pytorch)):
        if "error" in result:
            print(f"{name} failed: {result['error']}")
    by_size = {r["bytes"]: r for r in pytorch.get("rows", [])}
    print("| bytes | mgpu communicator | NCCL kernels (mgpu's events) | PyTorch c10d | mgpu / PyTorch |")
    print("| --- | --- | --- | --- | --- |")
    for r in mgpu.get("rows", []):
        p = by_size.get(r["bytes"], {}).get("busbw_gbps")
        k = r.get("nccl_kernel_busbw_gbps")
        ratio = f"{r['busbw_gbps'] / p:.2f}" if p else "-"
        print(f"| {r['bytes']} | {r['busbw_gbps']:.2f} | {f'{k:.2f}' if k else '-'} | {f'{p:.2f}' if p else '-'} | {ratio} |")


if __name__ == "__main__":
    main()
