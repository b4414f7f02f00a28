"""GPU benchmark driver: mgpu against PyTorch (Python) in one invocation, same models, batch,
precision and synthetic data (CIFAR-shaped 32 px; ResNet-50 at 224 px). Builds nothing: give it
a built tree.

    python3 bench/gpu_bench.py --build build-gpu [--out DIR] [--models resnet18,vgg19,resnet50]
        [--worlds 1,2,4,8] [--modes ddp,dp]

Rows: one GPU per precision (those mgpu-worker --help lists), then for every world size above 1
and every mode of --modes: ddp (mgpu-worker processes with torchrun's environment; PyTorch
DistributedDataParallel) and dp (single-process DataParallel: mgpu --mode dp; PyTorch
nn.DataParallel), batch --batch per GPU. mgpu's images/s is images over time across its metrics.csv rows after warm-up (rows
weighted by their steps); PyTorch's is timed with CUDA synchronization around the measured
steps. Writes DIR/bench-results.json and prints the Markdown tables that go into
docs/BENCHMARKS.md, with each multi-GPU row's scaling efficiency against the same side's
one-GPU row. --pytorch-from takes the PyTorch rows of an earlier bench-results.json measured with
the same batch and steps (they do not depend on --mgpu-flags) instead of measuring them again.
"""
import argparse
import datetime
import json
import os
import platform
import subprocess
import sys
import time

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from ports import free_port  # noqa: E402
from reference_train import INPUT_SHAPE  # noqa: E402  (the one table of input shapes, shared)
from results_folder import default_results_folder, earlier_results, recorded_command, recorded_path  # noqa: E402
from run_rate import log_every_for, measured_throughput  # noqa: E402


def mgpu_run(args, model, precision, world, out, extra_flags=(), mode="ddp"):
    """Runs mgpu on `world` GPUs and returns its measurements: mode "ddp" starts one mgpu-worker
    per GPU with torchrun's environment, "dp" one process with --mode dp over cuda:0..world-1."""
    steps, log_every = args.warmup + args.steps, log_every_for(args.warmup, args.steps)
    # One epoch holds every step: an epoch boundary would put a loader restart into the timing.
    train_images = args.batch * world * (steps + 1)
    side = INPUT_SHAPE.get(model, (3, 32))[1]
    flags = [os.path.join(args.build, "bin", "mgpu-worker"), "--model", model, "--dataset", "synthetic",
             "--image-size", str(side), "--synthetic-train", str(train_images), "--synthetic-test", "256",
             "--batch-size", str(args.batch * world), "--max-steps", str(steps), "--epochs", "1000",
             "--log-every", str(log_every), "--optimizer", "sgd", "--momentum", "0.9", "--lr", "0.01",
             "--precision", precision, "--num-workers", str(args.loader_workers), "--progress", "lines",
             "--out", out, "--overwrite", "--device", "cuda"]
    processes = world if mode == "ddp" else 1
    if world > 1 and mode == "ddp":
        flags += ["--mode", "ddp", "--backend", "nccl"]
    elif world > 1:
        flags += ["--mode", "dp", "--dp-devices", ",".join(f"cuda:{i}" for i in range(world))]
    flags += list(extra_flags)
    port = free_port()
    started = time.monotonic()
    procs = []
    for rank in range(processes):
        env = dict(os.environ, NCCL_NVLS_ENABLE="0")
        if processes > 1:
            env.update(RANK=str(rank), WORLD_SIZE=str(world), LOCAL_RANK=str(rank), LOCAL_WORLD_SIZE=str(world),
                       MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
        log = open(f"{out}.rank{rank}.log", "w")
        procs.append((subprocess.Popen(flags, env=env, stdout=log, stderr=subprocess.STDOUT), log))
    codes = []
    for p, _ in procs:
        try:
            codes.append(p.wait(timeout=args.run_timeout))
        except subprocess.TimeoutExpired:  # one stuck configuration must not take the whole budget
            for q, _ in procs:
                q.kill()
            codes.append(f"stopped after --run-timeout {args.run_timeout} s")
    for p, log in procs:
        p.wait()
        log.close()
    wall = time.monotonic() - started  # start-up and tear-down included: what the row costs the driver
    if any(codes):
        return {"impl": "mgpu", "error": f"exit codes {codes}; see {out}.rank*.log", "wall_seconds": wall}
    with open(os.path.join(out, "summary.json")) as f:
        summary = json.load(f)
    ips, step_seconds, phases = measured_throughput(out, args.warmup, args.batch * world)
    return {"impl": "mgpu", "mode": mode if world > 1 else "single", "model": model, "precision": precision,
            "world": world, "batch_per_gpu": args.batch, "parameters": summary.get("parameters"),
            "images_per_second": ips, "peak_memory_bytes": max(summary.get("peak_memory_bytes") or [0]),
            "step_seconds": step_seconds, "device_seconds_per_step": phases,
            "buckets": len(summary.get("ddp_bucket_bytes") or []), "dp_timing": summary.get("dp_timing"),
            "wall_seconds": wall}


def pytorch_runs(args, model, precisions, world, mode="ddp"):
    """PyTorch's rows for several precisions from one process (one import and CUDA start-up
    instead of one per row): {precision: result}."""
    cmd = [sys.executable, os.path.join(HERE, "reference_train.py"), "--model", model, "--precision",
           ",".join(precisions), "--batch", str(args.batch), "--world", str(world), "--steps", str(args.steps),
           "--warmup", str(args.warmup), "--port", str(free_port())] + (["--data-parallel"] if mode == "dp" and world > 1 else [])
    started = time.monotonic()
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, env=dict(os.environ, NCCL_NVLS_ENABLE="0"),
                              timeout=args.run_timeout * len(precisions))
    except subprocess.TimeoutExpired:
        return {p: {"impl": "pytorch", "error": f"stopped after --run-timeout {args.run_timeout} s per precision"}
                for p in precisions}
    results = {}
    for line in done.stdout.splitlines():
        if line.startswith("{"):
            row = json.loads(line)
            row["process_wall_seconds"] = time.monotonic() - started  # one process for all of `precisions`
            results[row["precision"]] = row
    error = done.stderr[-2000:] if done.returncode else "no result line"
    return {p: results.get(p, {"impl": "pytorch", "error": error}) for p in precisions}


def pytorch_run(args, model, precision, world, mode="ddp"):
    return pytorch_runs(args, model, [precision], world, mode)[precision]


def run_settings(args):
    """What a PyTorch row's measurement depends on beyond its model, precision, world and mode."""
    return {"batch_per_gpu": args.batch, "steps": args.steps, "warmup": args.warmup}


def earlier_pytorch_rows(path, settings):
    """{(model, precision, world, mode): row} of the PyTorch rows in an earlier bench-results.json
    that were measured with `settings` (run_settings) and hold a rate; {} (and a warning) where the
    file does not fit. PyTorch's rows do not depend on --mgpu-flags, so run_all's gpu-graphs step
    takes the gpu step's instead of measuring the same eager runs again."""
    earlier = earlier_results(path, "--pytorch-from", "measuring PyTorch here")
    if earlier is None:
        return {}
    meta = earlier["meta"]
    if meta.get("settings") != settings:
        print(f"warning: --pytorch-from {path}: measured with {meta.get('settings')}, not {settings}; measuring "
              "PyTorch here", flush=True)
        return {}
    return {(r["model"], r["precision"], r["world"], r["mode"]): dict(r["pytorch"], reused_from=recorded_path(path))
            for r in earlier.get("rows", []) if "images_per_second" in r.get("pytorch", {})}


def reference_rows(args, model, precisions, world, mode):
    """PyTorch's rows for `precisions`: those --pytorch-from holds, the others measured here."""
    reused = {p: args.earlier_pytorch[(model, p, world, mode)] for p in precisions
              if (model, p, world, mode) in args.earlier_pytorch}
    missing = [p for p in precisions if p not in reused]
    return {**(pytorch_runs(args, model, missing, world, mode=mode) if missing else {}), **reused}


def supported_precisions(build):
    text = subprocess.run([os.path.join(build, "bin", "mgpu-worker"), "--help"], capture_output=True,
                          text=True).stdout
    line = next((l for l in text.splitlines() if "--precision" in l), "")
    return [p for p in ["fp32", "tf32", "amp-fp16", "amp-bf16"] if p in line]


def fmt_count(v):
    return f"{v:.0f}" if v else ("error" if v is None else "-")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--build", default="build-gpu")
    parser.add_argument("--out", help="default: bench/results/<date>-<host>-gpu/ (bench/results_folder.py)")
    parser.add_argument("--models", default="resnet18,vgg19", help="any of resnet18, vgg19, resnet50")
    parser.add_argument("--precisions", default="", help="one-GPU rows; default: every one mgpu supports")
    parser.add_argument("--multi-precisions", default="fp32,amp-bf16",
                        help="multi-GPU rows: those of --precisions also listed here")
    parser.add_argument("--multi-models", default="", help="models of the multi-GPU rows (default: every one of "
                        "--models)")
    parser.add_argument("--worlds", default="", help="GPU counts, e.g. 1,2,4,8; default: 1 and all visible GPUs")
    parser.add_argument("--modes", default="ddp", help="multi-GPU rows: ddp, dp (single-process DataParallel) or both")
    parser.add_argument("--batch", type=int, default=256, help="per GPU")
    parser.add_argument("--steps", type=int, default=40)
    parser.add_argument("--warmup", type=int, default=10)
    parser.add_argument("--loader-workers", type=int, default=4)
    parser.add_argument("--run-timeout", type=int, default=300, help="seconds one run may take before it is stopped")
    parser.add_argument("--ddp-only", action="store_true", help="no one-GPU rows (same as leaving 1 out of --worlds)")
    parser.add_argument("--bucket-caps", default="", help="e.g. 1,5,25,100: also sweep mgpu's --bucket-cap-mb "
                        "(MiB) on the DDP rows")
    parser.add_argument("--mgpu-flags", default="", help="extra mgpu-worker flags for every mgpu row, e.g. "
                        "'--data-on-device true' (PyTorch's reference holds its batch on the GPU)")
    parser.add_argument("--pytorch-from", default="", help="a bench-results.json of an earlier run on this machine "
                        "with the same --batch, --steps and --warmup: its PyTorch rows instead of measuring them "
                        "again (run_all's gpu-graphs step)")
    args = parser.parse_args()
    args.earlier_pytorch = earlier_pytorch_rows(args.pytorch_from, run_settings(args)) if args.pytorch_from else {}
    args.out = args.out or default_results_folder("gpu")
    os.makedirs(args.out, exist_ok=True)
    gpus = torch.cuda.device_count()
    worlds = [int(w) for w in args.worlds.split(",")] if args.worlds else sorted({1, gpus})
    if args.ddp_only:
        worlds = [w for w in worlds if w > 1]
    if any(w < 1 or w > gpus for w in worlds):
        raise SystemExit(f"--worlds {args.worlds}: this host has {gpus} GPUs")
    if any(m not in ("ddp", "dp") for m in args.modes.split(",")):
        raise SystemExit(f"--modes {args.modes}: expected ddp, dp or ddp,dp")
    precisions = args.precisions.split(",") if args.precisions else supported_precisions(args.build)
    multi_precisions = [p for p in precisions if p in args.multi_precisions.split(",")]
    rows, sweep = [], []
    for model in args.models.split(","):
        for world in worlds:
            if world > 1 and args.multi_models and model not in args.multi_models.split(","):
                continue
            modes = ["single"] if world == 1 else args.modes.split(",")
            for mode in modes:
                row_precisions = precisions if world == 1 else multi_precisions
                reference = reference_rows(args, model, row_precisions, world, mode)
                for precision in row_precisions:
                    out = os.path.join(args.out, f"{model}-{precision}-{mode}{world}")
                    m = mgpu_run(args, model, precision, world, out, extra_flags=args.mgpu_flags.split(), mode=mode)
                    p = reference[precision]
                    rows.append({"model": model, "precision": precision, "world": world, "mode": mode,
                                 "mgpu": m, "pytorch": p})
                    print(json.dumps(rows[-1]), flush=True)
                    if m.get("parameters") and p.get("parameters") and m["parameters"] != p["parameters"]:
                        print(f"warning: {model} has {m['parameters']} parameters in mgpu, {p['parameters']} in "
                              "the PyTorch reference: the rows do not compare the same model", flush=True)
                    for cap in (args.bucket_caps.split(",") if args.bucket_caps and mode == "ddp" else []):
                        m = mgpu_run(args, model, precision, world, f"{out}-bucket{cap}",
                                     args.mgpu_flags.split() + ["--bucket-cap-mb", cap])
                        sweep.append({"model": model, "precision": precision, "world": world,
                                      "bucket_cap_mb": float(cap), "mgpu": m})
                        print(json.dumps(sweep[-1]), flush=True)
    meta = {"date": datetime.date.today().isoformat(), "host": platform.node(),
            "gpu": torch.cuda.get_device_name(0) if gpus else "none", "gpus": gpus,
            "torch": torch.__version__, "cuda": torch.version.cuda, "nccl": ".".join(map(str, torch.cuda.nccl.version())),
            "mgpu_flags": args.mgpu_flags, "settings": run_settings(args), "command": recorded_command()}
    with open(os.path.join(args.out, "bench-results.json"), "w") as f:
        json.dump({"meta": meta, "rows": rows, "bucket_sweep": sweep}, f, indent=2)
    print(f"\n{meta['gpus']}x {meta['gpu']}, torch {meta['torch']}, CUDA {meta['cuda']}, NCCL {meta['nccl']}, {meta['date']}")
    reused = sum("reused_from" in r["pytorch"] for r in rows)
    if reused:
        print(f"PyTorch's img/s in {reused} of the {len(rows)} rows: from {recorded_path(args.pytorch_from)} "
              "(--pytorch-from), measured there")
    print("| model | precision | GPUs | mode | mgpu img/s | PyTorch img/s | mgpu / PyTorch | mgpu peak MiB | PyTorch peak MiB |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for r in rows:
        m, p = r["mgpu"], r["pytorch"]
        mi, pi = m.get("images_per_second"), p.get("images_per_second")
        ratio = f"{mi / pi:.2f}" if mi and pi else "-"
        mm = m.get("peak_memory_bytes"), p.get("peak_memory_bytes")
        print(f"| {r['model']} | {r['precision']} | {r['world']} | {r['mode']} | {fmt_count(mi)} | {fmt_count(pi)} | "
              f"{ratio} | {fmt_count(mm[0] / 2**20 if mm[0] else None)} | {fmt_count(mm[1] / 2**20 if mm[1] else None)} |")
        for impl in ("mgpu", "pytorch"):
            if "error" in r[impl]:
                print(f"  {impl} error: {r[impl]['error'][:500]}")
    # Multi-GPU rows: scaling against each side's own one-GPU row, and where mgpu's DDP step goes.
    single = {(r["model"], r["precision"], impl): r[impl].get("images_per_second")
              for r in rows if r["world"] == 1 for impl in ("mgpu", "pytorch")}
    multi = [r for r in rows if r["world"] > 1]
    if multi:
        print("\n| model | precision | GPUs | mode | mgpu scaling | PyTorch scaling | mgpu step ms | forward | backward "
              "| exposed comm | optimizer | input | exposed comm share |")
        print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for r in multi:
        m, key = r["mgpu"], (r["model"], r["precision"])
        eff = lambda impl: (f"{r[impl]['images_per_second'] / (r['world'] * single[key + (impl,)]):.0%}"
                            if r[impl].get("images_per_second") and single.get(key + (impl,)) else "-")
        ph, step = m.get("device_seconds_per_step", {}) if r["mode"] == "ddp" else {}, m.get("step_seconds")
        ms = lambda v: f"{v * 1e3:.2f}" if v is not None else "-"
        share = f"{ph['exposed_comm'] / step:.1%}" if step and "exposed_comm" in ph else "-"
        print(f"| {r['model']} | {r['precision']} | {r['world']} | {r['mode']} | {eff('mgpu')} | {eff('pytorch')} | "
              f"{ms(step)} | {ms(ph.get('forward'))} | {ms(ph.get('backward'))} | {ms(ph.get('exposed_comm'))} | "
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
