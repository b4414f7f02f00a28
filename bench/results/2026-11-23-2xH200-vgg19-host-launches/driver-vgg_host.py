"""VGG-19 amp-bf16: is the step host-bound? Profiled runs (1 GPU, DDP) for trace_gaps, then
repetitions of one GPU eager, one GPU --cuda-graphs (no per-op launches), 2-GPU DDP."""
import json, os, subprocess, sys, argparse, shutil
sys.path.insert(0, "bench")
import gpu_bench

OUT = os.environ["OUT"]
args = argparse.Namespace(build="build-gpu", warmup=20, steps=60, batch=256, loader_workers=8, run_timeout=60)
log = open(os.path.join(OUT, "vgg-host.jsonl"), "a")
os.makedirs("/tmp/vh", exist_ok=True)

def record(rep, what, r):
    rec = {"rep": rep, "run": what, "ips": r.get("images_per_second"), "error": r.get("error"),
           "phases": r.get("device_seconds_per_step"), "step_seconds": r.get("step_seconds")}
    log.write(json.dumps(rec) + "\n"); log.flush(); print(rec, flush=True)

for world in (1, 2):
    out = f"/tmp/vh/profiled-{world}"
    r = gpu_bench.mgpu_run(args, "vgg19", "amp-bf16", world, out, extra_flags=["--profile-steps", "50-54"])
    record(-1, f"profiled {world} gpu", r)
    trace = os.path.join(out, "trace-rank0.json")
    with open(os.path.join(OUT, f"gaps-{world}gpu.txt"), "w") as f:
        subprocess.run([sys.executable, "bench/trace_gaps.py", trace, "--top", "12"], stdout=f, stderr=subprocess.STDOUT)
    subprocess.run(["gzip", "-k", trace]); shutil.copy(trace + ".gz", os.path.join(OUT, f"trace-{world}gpu.json.gz"))

for rep in range(int(os.environ.get("REPS", "8"))):
    record(rep, "1 gpu eager", gpu_bench.mgpu_run(args, "vgg19", "amp-bf16", 1, f"/tmp/vh/{rep}-1"))
    record(rep, "1 gpu graphs", gpu_bench.mgpu_run(args, "vgg19", "amp-bf16", 1, f"/tmp/vh/{rep}-1g", extra_flags=["--cuda-graphs"]))
    record(rep, "ddp 2 gpus", gpu_bench.mgpu_run(args, "vgg19", "amp-bf16", 2, f"/tmp/vh/{rep}-2"))
