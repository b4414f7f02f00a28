"""A/B: DDP with batched bucket copies (new) against per-parameter accumulation (old), alternating."""
import json, os, sys, argparse
sys.path.insert(0, "bench")
import gpu_bench
OUT = os.environ["OUT"]
log = open(os.path.join(OUT, "ddp-ab.jsonl"), "a")
os.makedirs("/tmp/ab", exist_ok=True)
def A(build): return argparse.Namespace(build=build, warmup=20, steps=60, batch=256, loader_workers=8, run_timeout=60)
def record(**rec):
    r = rec.pop("r")
    rec.update(ips=r.get("images_per_second"), error=r.get("error"), phases=r.get("device_seconds_per_step"),
               step_seconds=r.get("step_seconds"), peak=r.get("peak_memory_bytes"))
    log.write(json.dumps(rec) + "\n"); log.flush(); print(rec, flush=True)
plan = [("vgg19", "amp-bf16", int(os.environ.get("VGG_REPS", "6"))), ("resnet18", "amp-bf16", 3), ("vgg19", "fp32", 2), ("resnet18", "fp32", 2)]
for model, prec, reps in plan:
    for rep in range(reps):
        record(model=model, precision=prec, rep=rep, variant="one gpu",
               r=gpu_bench.mgpu_run(A("/tmp/wnew"), model, prec, 1, f"/tmp/ab/{model}-{prec}-{rep}-1"))
        order = ["new", "old"] if rep % 2 == 0 else ["old", "new"]
        for v in order:
            record(model=model, precision=prec, rep=rep, variant=v,
                   r=gpu_bench.mgpu_run(A(f"/tmp/w{v}"), model, prec, 2, f"/tmp/ab/{model}-{prec}-{rep}-{v}"))
