"""VGG-19 amp-bf16 on 2 GPUs: does CPU placement explain the slow runs? Alternating variants,
one-GPU run first in each repetition; per run: img/s, phases, children's CPU seconds, host steal."""
import json, os, resource, subprocess, sys, time, argparse
sys.path.insert(0, "bench")
import gpu_bench

OUT = os.environ["OUT"]
ncpu = os.cpu_count()
half = ncpu // 2
VARIANT = {"name": "default"}
real_popen = subprocess.Popen

def popen(flags, env=None, **kw):
    v = VARIANT["name"]
    env = dict(env or os.environ)
    rank = int(env.get("RANK", "0"))
    if v in ("omp1", "pinned"):
        env["OMP_NUM_THREADS"] = "1"
    if v == "pinned":
        lo = rank * half
        flags = ["taskset", "-c", f"{lo}-{lo + half - 1}"] + list(flags)
    return real_popen(flags, env=env, **kw)

gpu_bench.subprocess.Popen = popen

def stat():
    with open("/proc/stat") as f:
        v = [int(x) for x in f.readline().split()[1:]]
    return v  # user nice system idle iowait irq softirq steal ...

args = argparse.Namespace(build="build-gpu", warmup=20, steps=60, batch=256, loader_workers=8, run_timeout=60)
log = open(os.path.join(OUT, "vgg-cpu.jsonl"), "a")
reps = int(os.environ.get("REPS", "8"))
variants = ["default", "omp1", "pinned"]
for rep in range(reps):
    order = variants[rep % 3:] + variants[:rep % 3]
    for world, v in [(1, "default")] + [(2, x) for x in order]:
        VARIANT["name"] = v
        out = f"/tmp/vgg/{rep}-{world}-{v}"
        os.makedirs(out, exist_ok=True)
        top = None
        if rep < 2 and world == 2:
            top = subprocess.Popen(f"sleep 5; top -H -b -n 1 -w 220 | head -45 > {OUT}/top-{rep}-{v}.txt", shell=True)
        s0, r0, t0 = stat(), resource.getrusage(resource.RUSAGE_CHILDREN), time.monotonic()
        r = gpu_bench.mgpu_run(args, "vgg19", "amp-bf16", world, out)
        s1, r1, t1 = stat(), resource.getrusage(resource.RUSAGE_CHILDREN), time.monotonic()
        if top: top.wait()
        d = [b - a for a, b in zip(s0, s1)]
        total = sum(d[:8]) or 1
        rec = {"rep": rep, "world": world, "variant": v, "ips": r.get("images_per_second"), "error": r.get("error"),
               "phases": r.get("device_seconds_per_step"), "wall": t1 - t0,
               "child_cpu_s": (r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime),
               "steal_pct": 100.0 * d[7] / total, "busy_pct": 100.0 * (total - d[3] - d[4]) / total}
        log.write(json.dumps(rec) + "\n"); log.flush()
        print(rec, flush=True)
