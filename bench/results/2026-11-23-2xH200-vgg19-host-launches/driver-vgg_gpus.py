"""VGG-19 amp-bf16: is one GPU of the pair the slow one? Per repetition: one-GPU runs on GPU 0 and
on GPU 1, both at once as two independent one-GPU jobs (no NCCL), then 2-GPU DDP."""
import json, os, subprocess, sys, threading, argparse
sys.path.insert(0, "bench")
import gpu_bench

OUT = os.environ["OUT"]
local = threading.local()
real_popen = subprocess.Popen

def popen(flags, env=None, **kw):
    env = dict(env or os.environ)
    gpu = getattr(local, "gpu", None)
    if gpu is not None:
        env["CUDA_VISIBLE_DEVICES"] = str(gpu)
    return real_popen(flags, env=env, **kw)

gpu_bench.subprocess.Popen = popen
args = argparse.Namespace(build="build-gpu", warmup=20, steps=60, batch=256, loader_workers=8, run_timeout=60)
log = open(os.path.join(OUT, "vgg-gpus.jsonl"), "a")

def one(gpu, out, results, key):
    local.gpu = gpu
    results[key] = gpu_bench.mgpu_run(args, "vgg19", "amp-bf16", 1, out)

def record(rep, what, r):
    rec = {"rep": rep, "run": what, "ips": r.get("images_per_second"), "error": r.get("error"),
           "phases": r.get("device_seconds_per_step")}
    log.write(json.dumps(rec) + "\n"); log.flush(); print(rec, flush=True)

os.makedirs("/tmp/vg", exist_ok=True)
for rep in range(int(os.environ.get("REPS", "8"))):
    base = f"/tmp/vg/{rep}"
    for gpu in (0, 1):
        res = {}
        one(gpu, f"{base}-gpu{gpu}", res, "r")
        record(rep, f"gpu{gpu} alone", res["r"])
    res = {}
    threads = [threading.Thread(target=one, args=(g, f"{base}-both{g}", res, g)) for g in (0, 1)]
    for t in threads: t.start()
    for t in threads: t.join()
    for g in (0, 1):
        record(rep, f"gpu{g} while gpu{1 - g} trains too", res[g])
    local.gpu = None
    record(rep, "ddp 2 gpus", gpu_bench.mgpu_run(args, "vgg19", "amp-bf16", 2, f"{base}-ddp"))
