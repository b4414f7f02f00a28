"""GPU benchmark driver: mgpu against PyTorch (Python) in one invocation, same models, batch,
precision and synthetic CIFAR-shaped data. Builds nothing: give it a built tree.

    python3 bench/gpu_bench.py --build build-gpu [--out DIR] [--models resnet18,vgg19]

Rows: one GPU per precision (those mgpu-worker --help lists), then DDP over all visible GPUs.
mgpu's images/s is the mean of its metrics.csv windows after warm-up; PyTorch's is timed with
CUDA synchronization around the measured steps. Writes DIR/bench-results.json and prints a
Markdown table (the one that goes into docs/BENCHMARKS.md).
"""
import argparse
import csv
import datetime
import json
import os
import platform
import socket
import subprocess
import sys

import torch

HERE = os.path.dirname(os.path.abspath(__file__))


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def mgpu_run(args, model, precision, world, out, extra_flags=()):
    """Runs mgpu-worker on `world` GPUs (torchrun-style environment) and returns its measurements."""
    steps, log_every = args.warmup + args.steps, args.steps // 4
    # One epoch holds every step: an epoch boundary would put a loader restart into the timing.
    train_images = args.batch * world * (steps + 1)
    flags = [os.path.join(args.build, "bin", "mgpu-worker"), "--model", model, "--dataset", "synthetic",
             "--image-size", "32", "--synthetic-train", str(train_images), "--synthetic-test", "1000",
             "--batch-size", str(args.batch * world), "--max-steps", str(steps), "--epochs", "1000",
             "--log-every", str(log_every), "--optimizer", "sgd", "--momentum", "0.9", "--lr", "0.01",
             "--precision", precision, "--num-workers", str(args.loader_workers), "--progress", "lines",
             "--out", out, "--device", "cuda"]
    if world > 1:
        flags += ["--mode", "ddp", "--backend", "nccl"]
    flags += list(extra_flags)
    port = free_port()
    procs = []
    for rank in range(world):
        env = dict(os.environ, NCCL_NVLS_ENABLE="0")
        if world > 1:
            env.update(RANK=str(rank), WORLD_SIZE=str(world), LOCAL_RANK=str(rank), LOCAL_WORLD_SIZE=str(world),
                       MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
        log = open(f"{out}.rank{rank}.log", "w")
        procs.append((subprocess.Popen(flags, env=env, stdout=log, stderr=subprocess.STDOUT), log))
    codes = [p.wait() for p, _ in procs]
    for _, log in procs:
        log.close()
    if any(codes):
        return {"impl": "mgpu", "error": f"exit codes {codes}; see {out}.rank*.log"}
    with open(os.path.join(out, "metrics.csv")) as f:
        rows = [r for r in csv.DictReader(f) if int(r["step"]) > args.warmup]
    with open(os.path.join(out, "summary.json")) as f:
        summary = json.load(f)
    # Images over time across the measured rows (each row is the mean of the steps since the last).
    steps_in = [int(r["step"]) - int(p["step"]) for p, r in zip([{"step": args.warmup}] + rows, rows)]
    seconds = sum(n * float(r["step_seconds"]) for n, r in zip(steps_in, rows))
    ips = args.batch * world * sum(steps_in) / seconds if seconds else 0.0
    phases = {k[:-len("_seconds")]: sum(n * float(r[k]) for n, r in zip(steps_in, rows)) / max(sum(steps_in), 1)
              for k in (rows[0].keys() if rows else []) if k in
              ("input_seconds", "forward_seconds", "backward_seconds", "exposed_comm_seconds", "optimizer_seconds")}
    return {"impl": "mgpu", "model": model, "precision": precision, "world": world, "batch_per_gpu": args.batch,
            "parameters": summary.get("parameters"), "images_per_second": ips,
            "peak_memory_bytes": max(summary.get("peak_memory_bytes") or [0]),
            "step_seconds": seconds / max(sum(steps_in), 1), "device_seconds_per_step": phases,
            "buckets": len(summary.get("ddp_bucket_bytes") or [])}


def pytorch_run(args, model, precision, world):
    cmd = [sys.executable, os.path.join(HERE, "reference_train.py"), "--model", model, "--precision", precision,
           "--batch", str(args.batch), "--world", str(world), "--steps", str(args.steps), "--warmup",
           str(args.warmup), "--port", str(free_port())]
    done = subprocess.run(cmd, capture_output=True, text=True, env=dict(os.environ, NCCL_NVLS_ENABLE="0"))
    if done.returncode != 0:
        return {"impl": "pytorch", "error": done.stderr[-2000:]}
    return json.loads(done.stdout.strip().splitlines()[-1])


def supported_precisions(build):
    text = subprocess.run([os.path.join(build, "bin", "mgpu-worker"), "--help"], capture_output=True,
                          text=True).stdout
    line = next((l for l in text.splitlines() if "--precision" in l), "")
    return [p for p in ["fp32", "tf32", "amp-fp16", "amp-bf16"] if p in line]


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--build", default="build-gpu")
    parser.add_argument("--out", default="bench-out")
    parser.add_argument("--models", default="resnet18,vgg19")
    parser.add_argument("--precisions", default="", help="default: every one mgpu supports")
    parser.add_argument("--batch", type=int, default=256, help="per GPU")
    parser.add_argument("--steps", type=int, default=40)
    parser.add_argument("--warmup", type=int, default=10)
    parser.add_argument("--loader-workers", type=int, default=4)
    parser.add_argument("--ddp-only", action="store_true")
    parser.add_argument("--bucket-caps", default="", help="e.g. 1,5,25,100: also sweep mgpu's --bucket-cap-mb "
                        "(MiB) on the multi-GPU rows")
    args = parser.parse_args()
    os.makedirs(args.out, exist_ok=True)
    gpus = torch.cuda.device_count()
    precisions = args.precisions.split(",") if args.precisions else supported_precisions(args.build)
    rows, sweep = [], []
    for model in args.models.split(","):
        worlds = ([] if args.ddp_only else [1]) + ([gpus] if gpus > 1 else [])
        for world in worlds:
            for precision in precisions if world == 1 else [p for p in precisions if p in ("fp32", "amp-bf16")]:
                out = os.path.join(args.out, f"{model}-{precision}-w{world}")
                m = mgpu_run(args, model, precision, world, out)
                p = pytorch_run(args, model, precision, world)
                rows.append({"model": model, "precision": precision, "world": world, "mgpu": m, "pytorch": p})
                print(json.dumps(rows[-1]), flush=True)
                for cap in (args.bucket_caps.split(",") if args.bucket_caps and world > 1 else []):
                    m = mgpu_run(args, model, precision, world, f"{out}-bucket{cap}", ["--bucket-cap-mb", cap])
                    sweep.append({"model": model, "precision": precision, "world": world, "bucket_cap_mb": float(cap),
                                  "mgpu": m})
                    print(json.dumps(sweep[-1]), flush=True)
    meta = {"date": datetime.date.today().isoformat(), "host": platform.node(),
            "gpu": torch.cuda.get_device_name(0) if gpus else "none", "gpus": gpus,
            "torch": torch.__version__, "cuda": torch.version.cuda, "nccl": ".".join(map(str, torch.cuda.nccl.version())),
            "command": " ".join(sys.argv)}
    with open(os.path.join(args.out, "bench-results.json"), "w") as f:
        json.dump({"meta": meta, "rows": rows, "bucket_sweep": sweep}, f, indent=2)
    print(f"\n{meta['gpus']}x {meta['gpu']}, torch {meta['torch']}, CUDA {meta['cuda']}, NCCL {meta['nccl']}, {meta['date']}")
    print("| model | precision | GPUs | mgpu img/s | PyTorch img/s | mgpu / PyTorch | mgpu peak MiB | PyTorch peak MiB |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    for r in rows:
        m, p = r["mgpu"], r["pytorch"]
        mi, pi = m.get("images_per_second"), p.get("images_per_second")
        ratio = f"{mi / pi:.2f}" if mi and pi else "-"
        fmt = lambda v: f"{v:.0f}" if v else ("error" if v is None else "-")
        mm = m.get("peak_memory_bytes"), p.get("peak_memory_bytes")
        print(f"| {r['model']} | {r['precision']} | {r['world']} | {fmt(mi)} | {fmt(pi)} | {ratio} | "
              f"{fmt(mm[0] / 2**20 if mm[0] else None)} | {fmt(mm[1] / 2**20 if mm[1] else None)} |")
        for impl in ("mgpu", "pytorch"):
            if "error" in r[impl]:
                print(f"  {impl} error: {r[impl]['error'][:500]}")
    # Multi-GPU rows: scaling against each side's own one-GPU row, and where mgpu's step time goes.
    single = {(r["model"], r["precision"], impl): r[impl].get("images_per_second")
              for r in rows if r["world"] == 1 for impl in ("mgpu", "pytorch")}
    multi = [r for r in rows if r["world"] > 1]
    if multi:
        print("\n| model | precision | GPUs | mgpu scaling | PyTorch scaling | mgpu step ms | forward | backward "
              "| exposed comm | optimizer | input | exposed comm share |")
        print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for r in multi:
        m, key = r["mgpu"], (r["model"], r["precision"])
        eff = lambda impl: (f"{r[impl]['images_per_second'] / (r['world'] * single[key + (impl,)]):.0%}"
                            if r[impl].get("images_per_second") and single.get(key + (impl,)) else "-")
        ph, step = m.get("device_seconds_per_step", {}), m.get("step_seconds")
        ms = lambda v: f"{v * 1e3:.2f}" if v is not None else "-"
        share = f"{ph['exposed_comm'] / step:.1%}" if step and "exposed_comm" in ph else "-"
        print(f"| {r['model']} | {r['precision']} | {r['world']} | {eff('mgpu')} | {eff('pytorch')} | {ms(step)} | "
              f"{ms(ph.get('forward'))} | {ms(ph.get('backward'))} | {ms(ph.get('exposed_comm'))} | "
              f"{ms(ph.get('optimizer'))} | {ms(ph.get('input'))} | {share} |")

    if sweep:
        print("\n| model | precision | GPUs | bucket cap MiB | buckets | mgpu img/s | step ms | exposed comm ms |")
        print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    for r in sweep:
        m = r["mgpu"]
        ms = lambda v: f"{v * 1e3:.2f}" if v is not None else "-"
        print(f"| {r['model']} | {r['precision']} | {r['world']} | {r['bucket_cap_mb']:g} | {m.get('buckets', '-')} | "
              f"{m.get('images_per_second', 0):.0f} | {ms(m.get('step_seconds'))} | "
              f"{ms(m.get('device_seconds_per_step', {}).get('exposed_comm'))} |")

if __name__ == "__main__":
    main()
