"""The readers of a run's metrics.csv that the drivers share (no torch needed), and one run
folder's in-run rate for quick measurements beside the drivers (A/B pairs, device scripts):
images/s by the device's clock after the warm-up (in_run_throughput: no start-up in it, what
PyTorch's references measure between synchronizations), the shares of the steps' time the device
waited for its batch (the input phase) and the host waited for the loader (data wait), and for
`--decode gpu` the share of images the CPU assist decoded.

    python3 bench/run_rate.py RUN_DIR [--warmup STEPS] [--synthetic IMAGES_PER_SECOND]

The global batch comes from summary.json, so the run must have ended (any status). With
--synthetic the line also gives the rate as a share of that compute limit. Prints one line; exit
code 2 where the folder cannot say (no metrics.csv or summary.json, no row after the warm-up).
"""
import argparse
import csv
import json
import math
import os
import sys


def log_every_for(warmup, steps):
    """A --log-every whose rows end exactly at the warm-up's last step, so that no measured row
    holds a warm-up step (mgpu's rows cost no device synchronization, so small values are free)."""
    return max(math.gcd(warmup, steps), 1)


def in_run_throughput(out, warmup, global_batch):
    """Images/s within one run by the device's clock: from the end of the warm-up's last step to the
    end of the last step, as metrics.csv's step times add up. Those follow one another without a gap
    (each row's window of CUDA events starts at the previous row's last event, and the device's idle
    time before a step is that step's input phase), so start-up is left out by construction and
    everything between steps kept; only an epoch's evaluation and set-up are not in them. That is
    what PyTorch's references time between their synchronizations. Not metrics.csv's
    elapsed_seconds: they are the host's clock when a step was launched, and a graphed step's host
    runs steps ahead of the device, by more at the end than right after the warm-up's row (ResNet-18
    at 224 px read 5-6% fast by it: 19,692 img/s against 18,500 by the device and 18,499 as the
    driver saw the rows complete, bench/results/2026-11-28-1xH200-loader-decode-e2e-16-cores/).
    None where metrics.csv has no row at step `warmup` or none after it."""
    with open(os.path.join(out, "metrics.csv")) as f:
        steps = [int(r["step"]) for r in csv.DictReader(f)]
    if warmup not in steps or steps[-1] <= warmup:
        return None
    return measured_throughput(out, warmup, global_batch)[0]


def measured_throughput(out, warmup, global_batch):
    """(images/s, seconds per step, device seconds per phase per step) from a run's metrics.csv
    rows after `warmup` steps; each row holds the mean of the steps since the previous row."""
    with open(os.path.join(out, "metrics.csv")) as f:
        every = list(csv.DictReader(f))
    previous = {int(r["step"]): int(p["step"]) for p, r in zip([{"step": 0}] + every, every)}
    rows = [r for r in every if previous[int(r["step"])] >= warmup]
    steps_in = [int(r["step"]) - previous[int(r["step"])] for r in rows]
    steps = max(sum(steps_in), 1)
    seconds = sum(n * float(r["step_seconds"]) for n, r in zip(steps_in, rows))
    phases = {k[:-len("_seconds")]: sum(n * float(r[k]) for n, r in zip(steps_in, rows)) / steps
              for k in (rows[0].keys() if rows else []) if k in
              ("input_seconds", "forward_seconds", "backward_seconds", "exposed_comm_seconds", "optimizer_seconds")}
    return (global_batch * sum(steps_in) / seconds if seconds else 0.0), seconds / steps, phases


def waited_shares(out, warmup):
    """(input, data wait) as shares of the steps' time after `warmup`, rows weighted by their steps."""
    with open(os.path.join(out, "metrics.csv")) as f:
        rows = list(csv.DictReader(f))
    step = input_ = wait = 0.0
    for before, row in zip([{"step": 0}] + rows, rows):
        if int(before["step"]) < warmup:
            continue
        n = int(row["step"]) - int(before["step"])
        step += n * float(row["step_seconds"])
        input_ += n * float(row.get("input_seconds") or 0)
        wait += n * float(row.get("data_wait_seconds") or 0)
    return (input_ / step, wait / step) if step else (None, None)


def describe(out, warmup, synthetic=None):
    """The line run_rate.py prints for the run folder `out`; raises ValueError where it cannot."""
    try:
        with open(os.path.join(out, "summary.json")) as f:
            summary = json.load(f)
        batch = int(summary["batch_size"])
        rate = in_run_throughput(out, warmup, batch)
    except (OSError, ValueError, KeyError) as e:
        raise ValueError(f"{out}: no summary.json with batch_size or no metrics.csv ({e.__class__.__name__}: {e})")
    if rate is None:
        raise ValueError(f"{out}: metrics.csv has no row at step {warmup} or none after it (--warmup must end a row: --log-every)")
    parts = [f"{rate:,.0f} img/s in-run after step {warmup} (the device's clock)"]
    if synthetic:
        parts[0] += f" ({100 * rate / synthetic:.1f}% of {synthetic:,.0f})"
    input_share, wait_share = waited_shares(out, warmup)
    if input_share is not None:
        parts.append(f"device waited for input {100 * input_share:.1f}%, host for the loader {100 * wait_share:.1f}%")
    decode = summary.get("gpu_decode")
    if decode:
        assisted, decoded = decode.get("cpu_assisted", 0), decode.get("images", 0)
        parts.append(f"CPU assist decoded {100 * assisted / max(assisted + decoded, 1):.0f}%")
    return "; ".join(parts)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("run_dir")
    parser.add_argument("--warmup", type=int, default=20, help="steps left out of the rate (a row must end there)")
    parser.add_argument("--synthetic", type=float, default=0, help="a compute-limit rate to set it against")
    args = parser.parse_args()
    try:
        print(describe(args.run_dir, args.warmup, args.synthetic))
    except ValueError as e:
        print(f"run_rate.py: {e}", file=sys.stderr)
        sys.exit(2)


if __name__ == "__main__":
    main()
