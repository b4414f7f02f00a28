"""Graphed DDP (--cuda-graphs with --mode ddp) against one GPU --cuda-graphs and eager DDP, in
interleaved repetitions: mgpu only (PyTorch comes in gpu_bench.py's run)."""
import argparse, json, os, sys
sys.path.insert(0, "bench")
import gpu_bench

OUT = os.environ["OUT"]
args = argparse.Namespace(build="build-gpu", warmup=20, steps=60, batch=256, loader_workers=8, run_timeout=90)
log = open(os.path.join(OUT, "graphed-ddp.jsonl"), "a")
os.makedirs("/tmp/gd", exist_ok=True)

def record(rep, model, precision, what, r):
    rec = {"rep": rep, "model": model, "precision": precision, "run": what, "ips": r.get("images_per_second"),
           "error": r.get("error"), "phases": r.get("device_seconds_per_step"), "step_seconds": r.get("step_seconds"),
           "peak_memory_bytes": r.get("peak_memory_bytes")}
    log.write(json.dumps(rec) + "\n"); log.flush(); print(json.dumps(rec), flush=True)

plan = [("vgg19", "amp-bf16", int(os.environ.get("VGG_REPS", "4")))] + [
    (m, p, int(os.environ.get("REPS", "2"))) for m, p in (("vgg19", "fp32"), ("resnet18", "amp-bf16"), ("resnet18", "fp32"))]
for model, precision, reps in plan:
    for rep in range(reps):
        tag = f"/tmp/gd/{model}-{precision}-{rep}"
        g = ["--cuda-graphs", "true"]
        record(rep, model, precision, "1 gpu graphs", gpu_bench.mgpu_run(args, model, precision, 1, tag + "-1g", extra_flags=g))
        record(rep, model, precision, "ddp 2 graphs", gpu_bench.mgpu_run(args, model, precision, 2, tag + "-2g", extra_flags=g))
        record(rep, model, precision, "ddp 2 eager", gpu_bench.mgpu_run(args, model, precision, 2, tag + "-2e"))
        if rep == 0:
            for r in range(2):
                os.system(f"cp {tag}-2g.rank{r}.log {OUT}/first-graphed-ddp-{model}-{precision}.rank{r}.log")
