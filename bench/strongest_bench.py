"""mgpu's best single-GPU configuration against PyTorch's strongest (issue 39), per model: LeNet
batch 32, ResNet-18 and VGG-19 (32 px, batch 256), ResNet-50 (224 px, batch 256), synthetic
data on the GPU on both sides.

    python3 bench/strongest_bench.py --build BUILD [--out DIR] [--models lenet,resnet18,vgg19,resnet50]
        [--compile-mode max-autotune-no-cudagraphs|default|reduce-overhead|none] [--run-timeout S]

PyTorch (bench/strongest_reference.py, one process per model): the whole step captured with
torch.cuda.graph, once eager ("graphed") and once with torch.compile (--compile-mode) before the
capture ("compiled"), in each precision and layout of the model's plan (channels_last and
autocast bf16; for LeNet also float32/TF32 and NCHW, its fastest; SGD fused); a row that fails says why
("did not compile: ..."). The best row is the anchor. mgpu: its best flags for the model (PLAN's
"mgpu") and --cuda-graphs true --data-on-device true, run twice with different --max-steps; its throughput is
the longer run's by the device's clock from the end of its warm-up to the end of its last step
(run_rate.in_run_throughput: metrics.csv's step times, which hold the device's idle time between
steps), as PyTorch's rows time their replays between synchronizations: start-up left out by
construction. (Until 2026-11-28 it was the host's clock at the steps' launches, elapsed_seconds,
which the graphed host's growing lead over the device read up to 1.2% fast: VGG-19 104,690 against
103,484 img/s.) Beside it, as a cross-check: the two runs' difference (extra images over extra
wall-clock seconds, which cancels start-up only where it takes as long in both: the conv nets'
multi-GB synthetic sets made it vary by up to 1.6 s, ResNet-50's difference 0.92x and 1.28x the
compiled row in two calls on one H100, 2026-11-27). Targets: mgpu >=
1.0x the anchor on every row, LeNet >= 1.2x.
Writes DIR/strongest-bench.json and prints a Markdown table.
"""
import argparse
import datetime
import functools
import itertools
import json
import os
import platform
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from results_folder import default_results_folder, recorded_command  # noqa: E402
from run_rate import in_run_throughput, log_every_for  # noqa: E402

# Per model: batch, warm-up steps, mgpu's two run lengths (measured steps after the warm-up) and
# PyTorch's replayed steps, each sized for a few seconds of GPU time on an H100 (the conv nets'
# longer mgpu runs for 7-12 s more than the shorter: with 2-4 s between them, their start-ups'
# spread, which grows with the training set the runs create and upload, put the wall-clock rates
# 8-23% off metrics.csv's, either way; ResNet-50's within the 184 batches that a third of an 80 GB
# GPU holds, as an epoch's end in the longer run cost its in-run rate 3%; 1x H100, 2026-11-27); PyTorch's
# precisions and layouts to try, and mgpu's precision and layout. LeNet at batch 32 is fastest in
# float32/TF32 and NCHW on both sides (1x H100, 2026-11-26, steps/s with CUDA graphs: PyTorch
# compiled 6,612 against 5,543-5,826 in the other three; mgpu 4,358-4,793 against 3,778-4,285, and
# 4,548-4,910 in pure fp16, a recipe with no counterpart on PyTorch's side here;
# bench/results/2026-11-26-1xH100-strongest-lenet-sweep/), the more so with mgpu's fused convolution
# kernels, which run in float32 only (7,493-7,665 steps/s, 1x H100, 2026-11-27,
# bench/results/2026-11-27-1xH100-lenet-fused-kernels/); the conv nets under bf16 channels-last.
# PyTorch's SGD is fused (one kernel per step, like mgpu's), faster than torch.optim's foreach
# default in each of LeNet's 16 combinations (4-6%) and for ResNet-18 (50,050 against 49,572
# img/s graphed; 2x H100, 2026-11-26, bench/results/2026-11-26-2xH100-decode-fix-fused-sgd/).
AMP_CHANNELS_LAST = ["--precision", "amp-bf16", "--channels-last", "true"]
PLAN = {
    "lenet": {"batch": 32, "warmup": 300, "short": 1000, "long": 21000, "pytorch_steps": 10000,
              "precisions": "bf16,tf32", "layouts": "channels-last,nchw", "optimizers": "fused",
              "mgpu": ["--precision", "tf32", "--channels-last", "false"]},
    "resnet18": {"batch": 256, "warmup": 20, "short": 50, "long": 3050, "pytorch_steps": 500,
                 "precisions": "bf16", "layouts": "channels-last", "optimizers": "fused",
                 "mgpu": AMP_CHANNELS_LAST},
    "vgg19": {"batch": 256, "warmup": 20, "short": 50, "long": 3050, "pytorch_steps": 300,
              "precisions": "bf16", "layouts": "channels-last", "optimizers": "fused",
              "mgpu": AMP_CHANNELS_LAST},
    "resnet50": {"batch": 256, "warmup": 10, "short": 10, "long": 160, "pytorch_steps": 40,
                 "precisions": "bf16", "layouts": "channels-last", "optimizers": "fused",
                 "mgpu": AMP_CHANNELS_LAST},
}
TARGET = {"lenet": 1.2}  # mgpu / PyTorch's strongest; 1.0 for the others
MGPU_GRAPHED = ["--cuda-graphs", "true", "--data-on-device", "true"]


def pytorch_rows(args, model, modes):
    """PyTorch's rows of `modes` (torch.compile modes, "none" for eager) in each precision and
    layout of the model's plan, from one process, one start-up: {row name: result}; a row
    without a line says why."""
    plan = PLAN[model]
    cmd = [sys.executable, os.path.join(HERE, "strongest_reference.py"), "--model", model, "--batch",
           str(plan["batch"]), "--steps", str(plan["pytorch_steps"]), "--warmup", str(plan["warmup"]),
           "--compile", ",".join(modes), "--precision", plan["precisions"], "--layout", plan["layouts"],
           "--optimizer-impl", plan["optimizers"]]
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=args.run_timeout)
        stdout, why = done.stdout, f"exit code {done.returncode}: {done.stderr.strip()[-300:]}"
    except subprocess.TimeoutExpired as e:  # the modes done before it still count
        stdout = e.stdout.decode() if isinstance(e.stdout, bytes) else (e.stdout or "")
        why = f"stopped after --run-timeout {args.run_timeout} s"
    rows = {}
    for line in stdout.splitlines():
        if line.startswith("{"):
            row = json.loads(line)
            if row.get("stage") == "compile":
                row["error"] = "did not compile: " + row["error"]
            rows[(row["compile"], row["precision"], row["layout"], row["optimizer_impl"])] = row
    return {pytorch_row_name(*key): rows.get(key, {"error": why})
            for key in itertools.product(modes, plan["precisions"].split(","), plan["layouts"].split(","),
                                         plan["optimizers"].split(","))}


def pytorch_row_name(mode, precision, layout, optimizer_impl):
    how = "graphed" if mode == "none" else f"compiled ({mode}) + graphed"
    return f"PyTorch {how}, {precision}, {layout}, {optimizer_impl} SGD"


@functools.lru_cache(maxsize=None)
def gpu_memory_bytes():
    """The first visible GPU's memory, from nvidia-smi (no CUDA context in this process); 8 GiB where
    nvidia-smi cannot tell."""
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=memory.total", "--format=csv,noheader,nounits", "-i", "0"],
                             capture_output=True, text=True, timeout=30).stdout
        return int(out.split()[0]) << 20
    except (OSError, ValueError, IndexError, subprocess.TimeoutExpired):
        return 8 << 30


def mgpu_process(args, model, steps, out):
    """One mgpu-worker run of `steps` steps in mgpu's best configuration: (wall seconds, error)."""
    from reference_train import INPUT_SHAPE

    plan = PLAN[model]
    channels, side = INPUT_SHAPE.get(model, (3, 32))
    # The same training set for both run lengths (its creation is start-up cost, which must cancel),
    # an epoch longer than the longer run where a third of the GPU's memory holds it in float32:
    # an epoch's end evaluates the test set, which PyTorch's step does not (with 13-batch epochs,
    # ResNet-50's step took 49.6 ms on an H100 against 46.4 ms of GPU work in a step's profile). The
    # runs go round it in epochs only where it does not fit.
    per_image = channels * side * side * 4
    room = gpu_memory_bytes() // 3  # ResNet-50 at 224 px: 184 batches of 256 on an H100 (81,559 MiB)
    images = plan["batch"] * min(plan["warmup"] + plan["long"] + 1, max(2, room // per_image // plan["batch"]))
    cmd = [os.path.join(args.build, "bin", "mgpu-worker"), "--model", model, "--dataset", "synthetic",
           "--image-size", str(side), "--synthetic-channels", str(channels), "--synthetic-train", str(images),
           "--synthetic-test", "256",
           "--batch-size", str(plan["batch"]), "--max-steps", str(plan["warmup"] + steps), "--epochs", "100000",
           "--log-every", str(log_every_for(plan["warmup"], steps)), "--optimizer", "sgd", "--momentum", "0.9",
           "--lr", "0.01", "--progress", "lines", "--out", out, "--overwrite", "--device", "cuda", *plan["mgpu"]]
    started = time.monotonic()
    with open(out + ".log", "w") as log:
        try:
            code = subprocess.run(cmd + MGPU_GRAPHED, stdout=log, stderr=subprocess.STDOUT,
                                  timeout=args.run_timeout).returncode
        except subprocess.TimeoutExpired:
            return None, f"stopped after --run-timeout {args.run_timeout} s"
    if code != 0:
        with open(out + ".log") as log:
            return None, f"exit code {code}: {log.read().strip()[-300:]} (log: {out}.log)"
    return time.monotonic() - started, None


def mgpu_row(args, model):
    """Two runs of mgpu's best configuration; images/s by the device's clock within the longer run
    after its warm-up, the two runs' difference beside it."""

    plan = PLAN[model]
    wall = {}
    for length in ("short", "long"):
        wall[length], error = mgpu_process(args, model, plan[length], os.path.join(args.out, f"{model}-mgpu-{length}"))
        if error:
            return {"error": error}
    long_out = os.path.join(args.out, f"{model}-mgpu-long")
    rate = in_run_throughput(long_out, plan["warmup"], plan["batch"])
    if not rate:
        return {"error": f"{long_out}/metrics.csv has no row at step {plan['warmup']} or none after it"}
    extra_seconds = wall["long"] - wall["short"]
    extra_images = plan["batch"] * (plan["long"] - plan["short"])
    with open(os.path.join(long_out, "summary.json")) as f:
        parameters = json.load(f).get("parameters")
    return {"impl": "mgpu", "model": model, "flags": " ".join(plan["mgpu"] + MGPU_GRAPHED),
            "images_per_second": rate, "steps_per_second": rate / plan["batch"],
            "two_run_images_per_second": extra_images / extra_seconds if extra_seconds > 0 else None,
            "parameters": parameters, "wall_seconds": wall}


def verdict(model, rows):
    """(ratio, target, anchor name) of mgpu against the better PyTorch row, or None."""
    anchors = {name: r["images_per_second"] for name, r in rows.items()
               if name.startswith("PyTorch") and "images_per_second" in r}
    mgpu = rows.get("mgpu best", {}).get("images_per_second")
    if not anchors or not mgpu:
        return None
    anchor = max(anchors, key=anchors.get)
    return mgpu / anchors[anchor], TARGET.get(model, 1.0), anchor


def print_table(results, meta):
    print(f"\n{meta['gpu']}, torch {meta['torch']}, {meta['date']}; mgpu by the device's clock within its longer "
          "run after the warm-up, PyTorch between synchronizations after warm-up\n")
    print("| model | run | img/s | steps/s | note |\n| --- | --- | --- | --- | --- |")
    for model, rows in results.items():
        for name, r in rows.items():
            if "images_per_second" in r:
                note = "; ".join(filter(None, [
                    f"two runs' difference {r['two_run_images_per_second']:.0f} img/s"
                    if r.get("two_run_images_per_second") else "",
                    f"compiled in {r['compile_seconds']:.0f} s" if r.get("compile_seconds") else ""]))
                print(f"| {model} | {name} | {r['images_per_second']:.0f} | {r['steps_per_second']:.0f} | {note} |")
            else:
                print(f"| {model} | {name} | - | - | {r.get('error', 'no result')[:200]} |")
        v = verdict(model, rows)
        if v:
            ratio, target, anchor = v
            print(f"| {model} | **mgpu / {anchor}** | {ratio:.2f}x | | target >= {target}x: "
                  f"{'met' if ratio >= target else 'missed'} |")
        else:
            print(f"| {model} | **mgpu / PyTorch strongest** | - | | target >= {TARGET.get(model, 1.0)}x: not measured |")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--build", default="build")
    parser.add_argument("--out", help="default: bench/results/<date>-<host>-strongest/ (bench/results_folder.py)")
    parser.add_argument("--models", default="lenet,resnet18,vgg19,resnet50")
    parser.add_argument("--compile-mode", default="max-autotune-no-cudagraphs",
                        choices=["max-autotune-no-cudagraphs", "default", "reduce-overhead", "none"],
                        help="torch.compile's mode for the compiled PyTorch row (none: leave that row out)")
    parser.add_argument("--run-timeout", type=int, default=300, help="seconds one process may take (PyTorch's "
                        "runs both of its rows in one)")
    args = parser.parse_args()
    models = args.models.split(",")
    if not set(models) <= set(PLAN):
        raise SystemExit(f"--models {args.models}: expected a comma-separated list of {', '.join(PLAN)}")
    import torch  # after argument checks, so that --help and bad arguments answer at once

    if not torch.cuda.is_available():
        raise SystemExit("strongest_bench.py: no CUDA device visible; this benchmark compares CUDA-graph steps")
    args.out = args.out or default_results_folder("strongest")
    os.makedirs(args.out, exist_ok=True)
    results = {}
    for model in models:
        started = time.monotonic()
        modes = ["none"] + ([args.compile_mode] if args.compile_mode != "none" else [])
        rows = pytorch_rows(args, model, modes)
        rows["mgpu best"] = mgpu_row(args, model)
        results[model] = rows
        counts = {r["parameters"] for r in rows.values() if r.get("parameters")}
        if len(counts) > 1:
            print(f"warning: {model}: parameter counts {sorted(counts)} differ between the rows: they do not "
                  "compare the same model", flush=True)
        print(json.dumps({model: rows, "seconds": time.monotonic() - started}), flush=True)
    meta = {"date": datetime.date.today().isoformat(), "host": platform.node(), "gpu": torch.cuda.get_device_name(0),
            "torch": torch.__version__, "cuda": torch.version.cuda, "command": recorded_command(),
            "plan": {m: PLAN[m] for m in models}}
    with open(os.path.join(args.out, "strongest-bench.json"), "w") as f:
        json.dump({"meta": meta, "strongest": results}, f, indent=2)
    print_table(results, meta)


if __name__ == "__main__":
    main()
