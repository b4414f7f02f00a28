#!/usr/bin/env python3
"""Where a benchmark driver writes by default: bench/results/<date>-<host>-<topic>/.

    python3 bench/results_folder.py TOPIC                 # prints the folder (the shell drivers)
    from results_folder import default_results_folder     # the Python drivers, run as bench/X.py
    from results_folder import recorded_command, recorded_path  # what their JSON records
    from results_folder import earlier_results             # a driver's JSON from an earlier run

<date> is today's date in UTC (YYYY-MM-DD). <host> tags the machine by the GPUs a run may use:
<N>x<model> (e.g. 2xH200, 1xH100) from `nvidia-smi --query-gpu=name`, narrowed to the entries of
CUDA_VISIBLE_DEVICES when that is set; cpu<N>core (e.g. cpu2core) where no GPU is listed.
<model> is the first word of the GPU's name that holds a digit, cut at its first '-', after the
vendor words ("NVIDIA H100 80GB HBM3" -> H100, "NVIDIA A100-SXM4-80GB" -> A100). <topic> names
the driver (gpu, dp, divergence, speed, allreduce, launcher, loader, run-all). Every folder under
bench/results/ follows this scheme, so results from several hosts and days sit side by side.
Standard library only.
"""
import json
import os
import subprocess
import sys
import time

RESULTS_ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "results")
REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
VENDOR_WORDS = {"NVIDIA", "Tesla", "GeForce", "Quadro"}


def gpu_names():
    """The names nvidia-smi lists, one per GPU; empty without nvidia-smi or a working driver."""
    try:
        done = subprocess.run(["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"],
                              capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return []
    if done.returncode != 0:
        return []
    return [line.strip() for line in done.stdout.splitlines() if line.strip()]


def short_model(name):
    words = [w for w in name.split() if w not in VENDOR_WORDS]
    word = next((w for w in words if any(c.isdigit() for c in w)), words[0] if words else "gpu")
    return word.split("-")[0]


def host_tag():
    names = gpu_names()
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible is not None and names:
        entries = []
        for entry in (e.strip() for e in visible.split(",")):
            if not entry or entry.startswith("-"):
                break  # CUDA ignores an invalid entry and every one after it ("-1": no GPU)
            entries.append(entry)
        indices = [int(e) for e in entries if e.isdigit() and int(e) < len(names)]
        # Indices pick the listed GPUs; UUIDs or MIG names count without naming a model.
        names = [names[i] for i in indices] if len(indices) == len(entries) else names[:len(entries)]
    if not names:
        return f"cpu{os.cpu_count()}core"
    return f"{len(names)}x{short_model(names[0])}"


def recorded_path(path):
    """`path` as a results file records it: relative to the repository's root when under it, with
    ~ for the home folder when under that, so that no machine's layout is written down."""
    full = os.path.abspath(path)
    if full == REPO_ROOT or full.startswith(REPO_ROOT + os.sep):
        return os.path.relpath(full, REPO_ROOT)
    home = os.path.expanduser("~")
    if full.startswith(home + os.sep):
        return "~" + full[len(home):]
    return path


def earlier_results(path, flag, instead):
    """The JSON object a driver wrote at `path`, where it holds a "meta" object; else None, after a
    warning naming the driver's `flag` and what it does `instead` (e.g. "measuring PyTorch here")."""
    try:
        with open(path) as f:
            earlier = json.load(f)
        if isinstance(earlier, dict) and isinstance(earlier.get("meta"), dict):
            return earlier
        problem = "no meta object"
    except (OSError, ValueError) as e:
        problem = f"{e.__class__.__name__} ({e})"
    print(f"warning: {flag} {path}: {problem}; {instead}", flush=True)
    return None


def recorded_command():
    """This process's command line, its absolute paths as recorded_path() writes them."""
    return " ".join(recorded_path(a) if os.path.isabs(a) else a for a in sys.argv)


def default_results_folder(topic):
    date = time.strftime("%Y-%m-%d", time.gmtime())
    return os.path.join(RESULTS_ROOT, f"{date}-{host_tag()}-{topic}")


if __name__ == "__main__":
    if len(sys.argv) != 2 or not sys.argv[1] or "/" in sys.argv[1]:
        print("usage: python3 bench/results_folder.py TOPIC (one word, such as gpu or run-all)", file=sys.stderr)
        sys.exit(2)
    print(default_results_folder(sys.argv[1]))
