#!/usr/bin/env bash
# Streaming loader throughput: mgpu-loader-bench against PyTorch's DataLoader + torchvision
# (bench/loader_reference.py) on the same JPEG folder, batch 256, RandomResizedCrop(224) + flip
# + normalize, at each of $WORKERS workers (0 2 4 8), then the peak-RSS run on a folder 10x
# larger than memory could hold decoded. Writes OUT_DIR/loader.json (every run) and
# OUT_DIR/loader.md (the table, with the mgpu / PyTorch ratio).
#   bash bench/loader_throughput.sh BENCH_BINARY PYTHON [OUT_DIR]
# OUT_DIR defaults to bench/results/<date>-<host>-loader/ (bench/results_folder.py's rule).
# PYTHON: one with torch, torchvision, numpy and Pillow (bench/setup_bench_env.sh's venv).
# Environment: DATA_DIR (default $MGPU_CACHE/bench-loader/jpeg-20k, MGPU_CACHE defaulting to
# ~/.cache/mgpu, generated once with make_jpeg_folder.py and kept out of the results folder),
# BIG_DIR (default beside it, jpeg-10x-ram, hard links, generated once), WORKERS, MAX_IMAGES (0: the
# whole epoch), RSS_WORKERS (default: the largest of WORKERS), RSS_IMAGES (default 25600: the
# index of the whole big folder is built; then 100 batches), SKIP_RSS=1 to leave that run out.
set -euo pipefail
BENCH=${1:?"usage: bash bench/loader_throughput.sh BENCH_BINARY PYTHON [OUT_DIR]"}
PYTHON=${2:?"usage: bash bench/loader_throughput.sh BENCH_BINARY PYTHON [OUT_DIR]"}
here=$(cd "$(dirname "$0")" && pwd)
OUT_DIR=${3:-$("$PYTHON" "$here/results_folder.py" loader)}
DATA_CACHE=${MGPU_CACHE:-$HOME/.cache/mgpu}/bench-loader
DATA_DIR=${DATA_DIR:-$DATA_CACHE/jpeg-20k}
BIG_DIR=${BIG_DIR:-$DATA_CACHE/jpeg-10x-ram}
WORKERS=${WORKERS:-"0 2 4 8"}
MAX_IMAGES=${MAX_IMAGES:-0}
RSS_WORKERS=${RSS_WORKERS:-$(echo $WORKERS | tr ' ' '\n' | sort -n | tail -1)}
RSS_IMAGES=${RSS_IMAGES:-25600}
mkdir -p "$OUT_DIR"
runs="$OUT_DIR/loader.jsonl"
: > "$runs"

[ -d "$DATA_DIR/train" ] || "$PYTHON" "$here/make_jpeg_folder.py" "$DATA_DIR"
for workers in $WORKERS; do
  echo "== $workers workers: mgpu, then PyTorch" >&2
  "$BENCH" --data-dir "$DATA_DIR" --num-workers "$workers" --max-images "$MAX_IMAGES" | tee -a "$runs"
  "$PYTHON" "$here/loader_reference.py" --data-dir "$DATA_DIR" --num-workers "$workers" --max-images "$MAX_IMAGES" \
    | tee -a "$runs"
done
if [ "${SKIP_RSS:-0}" != 1 ]; then
  [ -d "$BIG_DIR/train" ] || "$PYTHON" "$here/make_jpeg_folder.py" "$BIG_DIR" --links-from "$DATA_DIR"
  echo "== peak RSS on $BIG_DIR, $RSS_WORKERS workers" >&2
  "$BENCH" --data-dir "$BIG_DIR" --num-workers "$RSS_WORKERS" --max-images "$RSS_IMAGES" \
    | sed 's/^{/{"rss_run": true, /' | tee -a "$runs"
  "$PYTHON" "$here/loader_reference.py" --data-dir "$BIG_DIR" --num-workers "$RSS_WORKERS" --max-images "$RSS_IMAGES" \
    | sed 's/^{/{"rss_run": true, /' | tee -a "$runs"
fi

"$PYTHON" - "$runs" "$OUT_DIR" <<'PY'
import json, os, platform, subprocess, sys, time
runs = [json.loads(line) for line in open(sys.argv[1]) if line.strip()]
model = next((l.split(":", 1)[1].strip() for l in subprocess.run(["lscpu"], capture_output=True, text=True).stdout.splitlines()
              if l.startswith("Model name")), platform.processor())
machine = {"cpu": model, "cores": os.cpu_count(), "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())}
json.dump({"machine": machine, "runs": runs}, open(os.path.join(sys.argv[2], "loader.json"), "w"), indent=1)
gib = 2 ** 30
lines = [f"{machine['cpu']}, {machine['cores']} cores, {machine['date']}", "",
         "| workers | mgpu img/s | PyTorch img/s | mgpu / PyTorch | mgpu peak RSS | PyTorch peak RSS (sum) |",
         "|---:|---:|---:|---:|---:|---:|"]
timed = [r for r in runs if not r.get("rss_run")]
for workers in sorted({r["num_workers"] for r in timed}):
    m = next(r for r in timed if r["loader"] == "mgpu" and r["num_workers"] == workers)
    p = next(r for r in timed if r["loader"] == "pytorch" and r["num_workers"] == workers)
    lines.append(f"| {workers} | {m['images_per_second']:.0f} | {p['images_per_second']:.0f} | "
                 f"{m['images_per_second'] / p['images_per_second']:.2f}x | {m['peak_rss_bytes'] / gib:.2f} GiB | "
                 f"{p['peak_rss_bytes'] / gib:.2f} GiB |")
for r in runs:
    if r.get("rss_run"):
        lines.append("")
        lines.append(f"Peak RSS, {r['loader']}, {r['dataset_images']} files (10x memory decoded), {r['num_workers']} workers, "
                     f"{r['images']} images: {r['peak_rss_bytes'] / gib:.2f} GiB"
                     + (f" (PSS {r['peak_pss_bytes'] / gib:.2f} GiB)" if "peak_pss_bytes" in r else "")
                     + f"; index {r['index_seconds']:.1f} s, {r['images_per_second']:.0f} img/s")
open(os.path.join(sys.argv[2], "loader.md"), "w").write("\n".join(lines) + "\n")
print("\n".join(lines))
PY
