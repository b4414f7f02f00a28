"""End to end from JPEGs (issue 39): mgpu's streaming loader against PyTorch's DataLoader +
torchvision at the same worker count, with mgpu on synthetic data of the same shape as the
compute limit; ResNet-50 and ResNet-18 at 224 px, amp-bf16, batch 256 per GPU, on one GPU and on
every GPU of the host.

    python3 bench/e2e_bench.py --build BUILD [--out DIR] [--models resnet50,resnet18] [--worlds 1,N]
        [--workers W] [--data-dir DIR] [--images N] [--bench-python PY] [--run-timeout S]
        [--mgpu-flags "..."] [--e2e-flags "..."] [--no-pytorch] [--no-gpu-decode]
        [--synthetic-from E2E_BENCH_JSON]

Data: a folder of --images JPEGs from bench/make_jpeg_folder.py, made once and kept in
--data-dir (default $MGPU_CACHE/bench-e2e/jpeg-<images>, MGPU_CACHE defaulting to ~/.cache/mgpu),
large enough that no epoch ends inside a measurement: by default one epoch of the largest world
holds the warm-up and MAX_LONG measured steps (default_images: 40,000 on one GPU, 80,000 on two,
310,000 on eight). The measured steps follow the images the folder holds, whoever made it.
mgpu: --data-loading stream --augment rrc-flip --resize 224 --channels-last true (dropped, and
said so, where the mode refuses it) and --num-workers W per rank; DDP over NCCL beyond one GPU.
Two mgpu rows from JPEGs: the loader threads decoding (mgpu e2e, --decode's default) and nvJPEG
decoding on the device with min(W, --gpu-decode-workers) threads beside it (mgpu e2e, --decode
gpu; left out where --e2e-flags names a decoder, or with --no-gpu-decode). Each gets its own
targets. (--gpu-decode-workers defaults to 12: by the device's clock, one H200 with 16 cores read
ResNet-18 at 96.1% and 96.3% of synthetic at 12 threads, 96.0% and 96.7% at 8, 92.4% and 95.3% at 6,
92.5% and 95.5% at 4, no count steadily better than 12; bench/results/2026-11-29-1xH200-run-all/.
Machines differ more than counts: that day's run_all machine read 92.9% at 12. On 2x H100, by the
host's launch clock (metrics.csv's elapsed_seconds), 12 was best of 4-16 on one GPU and beat 16 under DDP;
2026-11-28-2xH100-decode-threads/.)
After one 3-step warm-up run (the first process on a fresh machine reads the libraries from disk),
each mgpu configuration runs once, WARMUP steps and then as many as one epoch of the folder holds
(at most MAX_LONG), measured within the run as PyTorch's reference measures its own between
synchronizations: images/s by the device's clock from the end of the warm-up's last step to the end
of the last (run_rate.in_run_throughput: metrics.csv's step times, which hold the device's idle
time between steps; not its elapsed_seconds, the host's clock at each step's launch, which read
ResNet-18's graphed synthetic rows 5-6% fast), so that no start-up is in it. CPU cores used: the
processes' CPU seconds (/proc, every rank) over the time between the driver seeing those two rows
of metrics.csv (each written once the device has run its step); that span also gives the
cross-check kept beside the rate (rows as seen: the host's clock at completion, polled every 10
ms). (The rate from two run lengths, which needed a second process per row, swung by start-up's
seconds at these lengths: 61% and 251% of synthetic where metrics.csv read 86% and 97%.)
The data-wait share is metrics.csv's data_wait_seconds over step_seconds after the warm-up. (With
--mgpu-flags "--cuda-graphs true" it also holds part of the device's step: the host enqueues the step
at once, runs ahead, and blocks where the input path next waits for the device, which metrics.csv
counts as data wait; the synthetic rows then read 1-13%.)
--synthetic-from takes the synthetic rows of an earlier e2e-bench.json from this machine and build
(run_all.sh's e2e step, for gpu_decode_bench.sh) where model, world, batch and --mgpu-flags match,
instead of measuring them again, and then skips the warm-up run (the machine is warm).
PyTorch: bench/e2e_reference.py, timed from the first step after the warm-up that waited for its
batch (before it, the DataLoader hands out the batches its workers built ahead during start-up;
see there) (needs torchvision:
--bench-python, default $MGPU_BENCH_PYTHON, else bench/setup_bench_env.sh's venv).
W defaults to the host's cores divided by the GPUs of the row.

Targets: e2e >= 95% of mgpu's synthetic rate where the host has >= 12 cores per GPU; mgpu e2e
>= 1.0x PyTorch on one GPU, >= 1.5x on 2+. Writes DIR/e2e-bench.json, prints a Markdown table.
"""
import argparse
import datetime
import json
import math
import os
import platform
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from ports import free_port  # noqa: E402
from results_folder import default_results_folder, earlier_results, recorded_command, recorded_path  # noqa: E402
from run_rate import in_run_throughput, log_every_for, waited_shares  # noqa: E402

BATCH = 256  # per GPU
WARMUP = 15  # steps before the measured ones
MAX_LONG = 135  # the measured steps, where one epoch of the folder holds them (long_steps)
MIN_LONG = 30


def default_images(max_world):
    """The folder's size where --images is not given: one epoch of `max_world` GPUs holds the
    warm-up and MAX_LONG measured steps, at least 40,000 images (issue 39), in whole 10,000s. (At
    40,000 images two GPUs measured 62 steps, about 1.2 s of ResNet-18, and eight GPUs could not
    measure without an epoch's end and its evaluation inside.)"""
    need = BATCH * max_world * (WARMUP + MAX_LONG + 1)
    return max(40000, -(-need // 10000) * 10000)


def folder_images(data_dir):
    """The JPEGs in the folder's train/ split."""
    return sum(len(files) for _, _, files in os.walk(os.path.join(data_dir, "train")))


def long_steps(images, world):
    """The measured steps after the warm-up: as many as one epoch holds (an epoch's end inside a
    measurement would add its evaluation), at most MAX_LONG, at least MIN_LONG."""
    return max(MIN_LONG, min(MAX_LONG, images // (BATCH * world) - WARMUP - 1))
CORES_PER_GPU_FOR_COMPUTE_TARGET = 12
CPU_DECODE_ROW = "mgpu e2e"  # --decode as --e2e-flags say (the CPU loader threads by default)
GPU_DECODE_ROW = "mgpu e2e, --decode gpu"
# How the mgpu rows are timed, in the results' meta: --synthetic-from takes rows timed the same way only
# (files before it timed them by the host's launch clock, elapsed_seconds).
MGPU_CLOCK = "device, after the warm-up"


class RowWatch:
    """When the driver first sees metrics.csv rows at steps `first` and `last` (written once the
    device has run those steps), with the ranks' CPU seconds then: the measured span of a run."""

    def __init__(self, path, first, last):
        self.path, self.first, self.last = path, first, last
        self.seen = {}  # step -> (monotonic seconds, CPU seconds of every rank)

    def poll(self, pids):
        if len(self.seen) == 2 or not os.path.exists(self.path):
            return
        from e2e_reference import cpu_seconds  # /proc, every thread of each process
        with open(self.path) as f:
            steps = {int(line.split(",", 1)[0]) for line in f.read().splitlines()[1:] if line[:1].isdigit()}
        now = time.monotonic()
        for step in (self.first, self.last):
            if step in steps and step not in self.seen:
                self.seen[step] = (now, cpu_seconds(pids))

    def reset(self):
        """Forgets what it saw: the run starts again."""
        self.seen.clear()

    def span(self):
        """(seconds, CPU seconds) between the two rows, or None where the driver missed one."""
        if len(self.seen) < 2:
            return None
        (t0, c0), (t1, c1) = self.seen[self.first], self.seen[self.last]
        return (t1 - t0, c1 - c0) if t1 > t0 else None


PORT_TAKEN = "the port is taken"  # mgpu-worker's rendezvous error when MASTER_PORT is in use
PORT_ATTEMPTS = 3


def launch(cmd, world, log_path, timeout, watch=None):
    """Runs `cmd` as `world` ranks (torchrun's environment beyond one), polling `watch` (a
    RowWatch) every 10 ms: (wall s, error). A port free when chosen can be taken before rank 0
    listens on it (another process's outgoing connection may get it as its own port): such a run
    starts again on another port, up to PORT_ATTEMPTS times."""
    for attempt in range(1, PORT_ATTEMPTS + 1):
        wall, error = launch_once(cmd, world, log_path, timeout, watch, free_port())
        if world == 1 or not error or attempt == PORT_ATTEMPTS or not port_was_taken(log_path):
            return wall, error
        print(f"{log_path}: rank 0's port was taken; starting again on another", file=sys.stderr)
        if watch:
            watch.reset()


def port_was_taken(log_path):
    with open(log_path, errors="replace") as f:
        return PORT_TAKEN in f.read()


def launch_once(cmd, world, log_path, timeout, watch, port):
    procs = []
    started = time.monotonic()
    with open(log_path, "w") as log:
        for rank in range(world):
            env = dict(os.environ, NCCL_NVLS_ENABLE="0")
            if world > 1:
                env.update(RANK=str(rank), WORLD_SIZE=str(world), LOCAL_RANK=str(rank), LOCAL_WORLD_SIZE=str(world),
                           MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
            procs.append(subprocess.Popen(cmd, env=env, stdout=log, stderr=subprocess.STDOUT))
        codes, deadline = {}, started + timeout
        while len(codes) < world:
            if watch:
                watch.poll([p.pid for p in procs if p.pid not in codes])
            for p in procs:
                if p.pid not in codes and p.poll() is not None:
                    codes[p.pid] = p.returncode
            failed = any(codes.values())
            if len(codes) < world and (failed or time.monotonic() > deadline):
                for p in procs:  # a rank that failed leaves the others waiting for it: stop them too
                    if p.pid not in codes:
                        p.kill()
                        codes[p.pid] = p.wait()
                if not failed:
                    return None, f"stopped after --run-timeout {timeout} s (log: {log_path})"
            if len(codes) < world:
                time.sleep(0.01)
    wall = time.monotonic() - started
    if any(codes.values()):
        with open(log_path) as f:
            ranks = ", ".join(f"rank {r}: {codes[p.pid]}" for r, p in enumerate(procs))
            return None, f"exit codes {ranks}: {f.read().strip()[-300:]} (log: {log_path})"
    return wall, None


def mgpu_run(args, name, base_flags, world):
    """One mgpu configuration's run: the row's measurements, or an error."""
    steps = long_steps(args.images, world)
    out = os.path.join(args.out, name)
    cmd = [os.path.join(args.build, "bin", "mgpu-worker"), *base_flags, "--batch-size", str(BATCH * world),
           "--max-steps", str(WARMUP + steps), "--log-every", str(log_every_for(WARMUP, steps)), "--out", out, "--overwrite"]
    watch = RowWatch(os.path.join(out, "metrics.csv"), WARMUP, WARMUP + steps)
    wall, error = launch(cmd, world, out + ".log", args.run_timeout, watch)
    if error:
        return {"error": error}
    rate = in_run_throughput(out, WARMUP, BATCH * world)
    if not rate:
        return {"error": f"{out}/metrics.csv has no row at step {WARMUP} or none after it"}
    span = watch.span()
    with open(os.path.join(out, "summary.json")) as f:
        parameters = json.load(f).get("parameters")
    return {"images_per_second": rate, "parameters": parameters,
            "cpu_cores_used": span[1] / span[0] if span else None,
            "data_wait_share": waited_shares(out, WARMUP)[1],
            "rows_seen_images_per_second": BATCH * world * steps / span[0] if span else None,
            "wall_seconds": wall}


def warm_up(args):
    """One short run before the measured ones: the first process on a fresh machine also reads
    LibTorch's and cuDNN's libraries from disk, which lengthened whichever run came first (a
    30-step run once took longer than its 150-step pair)."""
    out = os.path.join(args.out, "warm-up")
    cmd = [os.path.join(args.build, "bin", "mgpu-worker"), "--model", "resnet18", "--dataset", "synthetic",
           "--image-size", "224", "--synthetic-train", "768", "--synthetic-test", "256", "--batch-size", str(BATCH),
           "--max-steps", "3", "--precision", "amp-bf16", "--device", "cuda", "--progress", "lines", "--out", out, "--overwrite"]
    launch(cmd, 1, out + ".log", args.run_timeout)  # a failure shows in the measured rows


def mgpu_rows(args, model, world, workers):
    common = ["--model", model, "--precision", "amp-bf16", "--optimizer", "sgd", "--momentum", "0.9", "--lr", "0.01",
              "--epochs", "1000", "--progress", "lines", "--device", "cuda", *args.mgpu_flags.split()]
    if world > 1:
        common += ["--mode", "ddp", "--backend", "nccl"]
    stream = ["--dataset", "imagefolder", "--data-dir", args.data_dir, "--data-loading", "stream", "--augment",
              "rrc-flip", "--resize", "224", "--image-size", "224", *args.e2e_flags.split()]
    synthetic = ["--dataset", "synthetic", "--image-size", "224", "--synthetic-test", "256",
                 "--synthetic-train", str(BATCH * world * (WARMUP + long_steps(args.images, world) + 1))]
    runs = [(CPU_DECODE_ROW, "e2e", stream, workers)]
    if gpu_decode_row_wanted(args):
        threads = min(workers, args.gpu_decode_workers)
        runs.append((GPU_DECODE_ROW, "e2e-decode-gpu", stream + ["--decode", "gpu"], threads))
    rows = {}
    reused = args.synthetic_rows.get((model, world))
    if reused:
        rows["mgpu synthetic"] = reused
    else:
        runs.append(("mgpu synthetic", "synthetic", synthetic, workers))
    for kind, suffix, flags, threads in runs:
        name = f"{model}-x{world}-{suffix}"
        flags = common + flags + ["--num-workers", str(threads)]
        row = mgpu_run(args, name, flags + ["--channels-last", "true"], world)
        if "error" in row and "channels-last" in row["error"]:  # a mode without channels-last yet
            row = mgpu_run(args, name, flags, world)
            row["note"] = "without --channels-last (this mode refused it)"
        row["workers"] = threads
        rows[kind] = row
    return rows


def earlier_synthetic_rows(path, mgpu_flags):
    """{(model, world): row} of the "mgpu synthetic" rows in an earlier e2e-bench.json, where its
    batch per GPU and --mgpu-flags are this run's; {} (and a warning) where the file does not fit."""
    earlier = earlier_results(path, "--synthetic-from", "measuring synthetic here")
    if earlier is None:
        return {}
    meta = earlier["meta"]
    if meta.get("steps", {}).get("batch_per_gpu") != BATCH or meta.get("mgpu_flags") != mgpu_flags:
        print(f"warning: --synthetic-from {path}: its batch or --mgpu-flags differ; measuring synthetic here", flush=True)
        return {}
    if meta.get("mgpu_clock") != MGPU_CLOCK:
        print(f"warning: --synthetic-from {path}: its mgpu rows were timed by another clock; measuring synthetic here",
              flush=True)
        return {}
    found = {}
    for row in earlier.get("e2e", []):
        synthetic = row.get("mgpu synthetic", {})
        if "images_per_second" in synthetic:
            note = f"from {recorded_path(path)} (its run at {row['workers']} workers/GPU)"
            found[(row["model"], row["world"])] = dict(synthetic, note="; ".join(filter(None, [synthetic.get("note"),
                                                                                              note])))
    return found


def floor_percent(share):
    """A share as a percentage to one decimal, rounded down: a share below a target never reads as
    the target (0.94955 is "94.9%", not "95.0%")."""
    return f"{math.floor(round(share * 1000, 6)) / 10:.1f}%"


def gpu_decode_row_wanted(args):
    """Whether the rows from JPEGs include nvJPEG's beside the CPU loader's: unless --no-gpu-decode, or
    --e2e-flags already name the decoder (gpu_decode_bench.sh's runs)."""
    return not args.no_gpu_decode and "--decode" not in args.e2e_flags.split()


def e2e_rows(row):
    """The mgpu rows from JPEGs that a (model, world) row holds, CPU_DECODE_ROW first."""
    return [kind for kind in (CPU_DECODE_ROW, GPU_DECODE_ROW) if kind in row]


def pytorch_row(args, model, world, workers):
    cmd = [args.bench_python, os.path.join(HERE, "e2e_reference.py"), "--data-dir", args.data_dir, "--model", model,
           "--world", str(world), "--workers", str(workers), "--batch", str(BATCH), "--warmup", str(WARMUP),
           "--steps", str(long_steps(args.images, world)), "--port", str(free_port())]
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=args.run_timeout,
                              env=dict(os.environ, NCCL_NVLS_ENABLE="0"))
    except subprocess.TimeoutExpired:
        return {"error": f"stopped after --run-timeout {args.run_timeout} s"}
    line = next((l for l in done.stdout.splitlines() if l.startswith("{")), None)
    if not line:
        return {"error": f"exit code {done.returncode}: {done.stderr.strip()[-300:]}"}
    row = json.loads(line)
    row["note"] = (f"timed over its last {row['steps']} steps, from step {row['timed_from_step']}: " +
                   ("the first that waited for its batch" if row["stock_drained"] else
                    "none waited for its batch (the GPU's pace)"))
    return row


def targets(row, cores_per_gpu):
    """[(target, measured, verdict)] of one (model, world) row: for each mgpu row from JPEGs, its
    share of synthetic and its rate against PyTorch's."""
    found = []
    for kind in e2e_rows(row):
        threads = row[kind].get("workers", row["workers"])
        decoder = ((f" (--decode gpu, {threads} threads/GPU)" if threads != row["workers"] else " (--decode gpu)")
                   if kind == GPU_DECODE_ROW else "")
        found += decoder_targets(row[kind], row["mgpu synthetic"], row["PyTorch"], row["world"], cores_per_gpu,
                                 decoder)
    return found


def decoder_targets(e2e, synthetic, torch_row, world, cores_per_gpu, decoder):
    rate = lambda r: r.get("images_per_second") if "error" not in r else None  # noqa: E731
    found = []
    if rate(e2e) and rate(synthetic):
        share = rate(e2e) / rate(synthetic)
        applies = cores_per_gpu >= CORES_PER_GPU_FOR_COMPUTE_TARGET
        found.append((f"e2e{decoder} >= 95% of synthetic (applies at >= {CORES_PER_GPU_FOR_COMPUTE_TARGET} "
                      "cores/GPU)", f"{floor_percent(share)} at {cores_per_gpu:.0f} cores/GPU",
                      ("met" if share >= 0.95 else "missed") if applies else "not applicable"))
    else:
        found.append((f"e2e{decoder} >= 95% of synthetic", "-", "not measured"))
    need = 1.0 if world == 1 else 1.5
    if rate(e2e) and rate(torch_row):
        x = rate(e2e) / rate(torch_row)
        found.append((f"e2e{decoder} >= {need}x PyTorch", f"{x:.2f}x", "met" if x >= need else "missed"))
    else:
        found.append((f"e2e{decoder} >= {need}x PyTorch", "-", "not measured"))
    return found


def ensure_data(args):
    if os.path.isdir(os.path.join(args.data_dir, "train")):
        return None
    done = subprocess.run([args.bench_python, os.path.join(HERE, "make_jpeg_folder.py"), args.data_dir, "--images",
                           str(args.images)], capture_output=True, text=True)
    return None if done.returncode == 0 else f"make_jpeg_folder.py failed: {done.stderr.strip()[-300:]}"


def print_table(rows, meta):
    print(f"\n{meta['gpus']}x {meta['gpu']}, {meta['cores']} cores, torch {meta['torch']}, {meta['date']}; "
          f"{meta['images']} JPEGs, batch {BATCH}/GPU, amp-bf16\n")
    print("| model | GPUs | workers/GPU | run | img/s | CPU cores used | img/s per core | data wait | note |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for row in rows:
        for name in (*e2e_rows(row), "PyTorch", "mgpu synthetic"):
            r = row[name]
            workers = r.get("workers", row["workers"])
            if "error" in r or "skipped" in r:
                why = r["error"][:200] if "error" in r else f"not run ({r['skipped']})"
                print(f"| {row['model']} | {row['world']} | {workers} | {name} | - | - | - | - | {why} |")
                continue
            rate, cores, wait = r["images_per_second"], r.get("cpu_cores_used"), r.get("data_wait_share")
            seen = r.get("rows_seen_images_per_second")
            note = "; ".join(filter(None, [r.get("note"), f"rows as seen {seen:.0f} img/s" if seen else ""]))
            per_core = f"{rate / cores:.0f}" if cores and name != "mgpu synthetic" else "-"
            print(f"| {row['model']} | {row['world']} | {workers} | {name} | {rate:.0f} | "
                  f"{f'{cores:.1f}' if cores else '-'} | {per_core} | {f'{wait:.1%}' if wait is not None else '-'} | "
                  f"{note} |")
        for target, measured, verdict in row["targets"]:
            print(f"| {row['model']} | {row['world']} | {row['workers']} | target: {target} | {measured} | | | | "
                  f"**{verdict}** |")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--build", default="build")
    parser.add_argument("--out", help="default: bench/results/<date>-<host>-e2e/ (bench/results_folder.py)")
    parser.add_argument("--models", default="resnet50,resnet18")
    parser.add_argument("--worlds", default="", help="GPU counts, e.g. 1,2; default: 1 and all visible GPUs")
    parser.add_argument("--workers", type=int, default=0, help="loader workers per GPU (0: cores / GPUs of the row)")
    parser.add_argument("--images", type=int, default=0,
                        help="JPEGs to make where --data-dir has none (default: default_images of the largest world)")
    parser.add_argument("--data-dir", default="")
    parser.add_argument("--bench-python", default="", help="a Python with torch, torchvision and Pillow")
    parser.add_argument("--run-timeout", type=int, default=240, help="seconds one process may take")
    parser.add_argument("--mgpu-flags", default="", help="extra mgpu-worker flags for every mgpu row, e.g. "
                        "'--cuda-graphs true'")
    parser.add_argument("--e2e-flags", default="", help="extra mgpu-worker flags for the rows from JPEGs only "
                        "(not the synthetic one), e.g. '--decode gpu'")
    parser.add_argument("--no-pytorch", action="store_true", help="leave out PyTorch's rows (their targets then "
                        "read 'not measured'), where only the share of synthetic is wanted, as in "
                        "gpu_decode_bench.sh")
    parser.add_argument("--gpu-decode-workers", type=int, default=12, help="the --decode gpu row's threads per GPU, "
                        "at most --workers (default 12: see above)")
    parser.add_argument("--no-gpu-decode", action="store_true", help="leave out the row that decodes the JPEGs "
                        "with nvJPEG (--decode gpu) beside the CPU loader's")
    parser.add_argument("--synthetic-from", default="", help="an e2e-bench.json of an earlier run on this machine "
                        "and build: its synthetic rows instead of measuring them again (gpu_decode_bench.sh)")
    args = parser.parse_args()
    models = args.models.split(",")
    if args.gpu_decode_workers < 1:
        raise SystemExit(f"--gpu-decode-workers {args.gpu_decode_workers}: expected at least 1")
    if not set(models) <= {"resnet50", "resnet18"}:
        raise SystemExit(f"--models {args.models}: expected resnet50, resnet18 or both")
    cache = os.environ.get("MGPU_CACHE") or os.path.join(os.path.expanduser("~"), ".cache", "mgpu")
    args.bench_python = (args.bench_python or os.environ.get("MGPU_BENCH_PYTHON")
                         or os.path.join(cache, "venv-bench", "bin", "python"))
    try:
        usable = subprocess.run([args.bench_python, "-c", "import torch, torchvision, PIL, numpy"],
                                capture_output=True).returncode == 0
    except OSError:
        usable = False
    if not usable:
        raise SystemExit(f"e2e_bench.py: {args.bench_python} cannot import torch, torchvision, Pillow and numpy; "
                         "run bash bench/setup_bench_env.sh BUILD (make bench-gpu does) or pass --bench-python")
    import torch

    gpus = torch.cuda.device_count()
    if gpus < 1:
        raise SystemExit("e2e_bench.py: no CUDA device visible")
    worlds = [int(w) for w in args.worlds.split(",")] if args.worlds else sorted({1, gpus})
    if any(w < 1 or w > gpus for w in worlds):
        raise SystemExit(f"--worlds {args.worlds}: this host has {gpus} GPUs")
    args.out = args.out or default_results_folder("e2e")
    os.makedirs(args.out, exist_ok=True)
    args.images = args.images or default_images(max(worlds))
    args.data_dir = args.data_dir or os.path.join(cache, "bench-e2e", f"jpeg-{args.images}")
    error = ensure_data(args)
    if error:
        raise SystemExit(f"e2e_bench.py: {error}")
    args.images = folder_images(args.data_dir)
    cores = os.cpu_count() or 1
    args.synthetic_rows = earlier_synthetic_rows(args.synthetic_from, args.mgpu_flags) if args.synthetic_from else {}
    if not args.synthetic_rows:
        warm_up(args)
    rows = []
    for model in models:
        for world in worlds:
            workers = args.workers or max(1, cores // world)
            if world * BATCH * (WARMUP + long_steps(args.images, world)) > args.images:
                print(f"warning: {model} x{world}: {world * BATCH * (WARMUP + long_steps(args.images, world))} images "
                      "per measurement, more than "
                      f"the folder's {args.images}: an epoch ends inside it (--images)", flush=True)
            row = {"model": model, "world": world, "workers": workers, **mgpu_rows(args, model, world, workers),
                   "PyTorch": {"skipped": "--no-pytorch"} if args.no_pytorch else pytorch_row(args, model, world,
                                                                                              workers)}
            row["targets"] = targets(row, cores / world)
            theirs, ours = row["PyTorch"].get("parameters"), row["mgpu e2e"].get("parameters")
            if theirs and ours and theirs != ours:
                print(f"warning: {model} has {ours} parameters in mgpu, {theirs} in torchvision's: the rows do not "
                      "compare the same model", flush=True)
            rows.append(row)
            print(json.dumps(row), flush=True)
    meta = {"date": datetime.date.today().isoformat(), "host": platform.node(), "gpu": torch.cuda.get_device_name(0),
            "gpus": gpus, "cores": cores, "torch": torch.__version__, "images": args.images,
            "data_dir": recorded_path(args.data_dir), "mgpu_flags": args.mgpu_flags, "e2e_flags": args.e2e_flags,
            "mgpu_clock": MGPU_CLOCK, "command": recorded_command(),
            "steps": {"warmup": WARMUP, "batch_per_gpu": BATCH,
                      "long_by_world": {str(w): long_steps(args.images, w) for w in worlds}}}
    with open(os.path.join(args.out, "e2e-bench.json"), "w") as f:
        json.dump({"meta": meta, "e2e": rows}, f, indent=2)
    print_table(rows, meta)


if __name__ == "__main__":
    main()
