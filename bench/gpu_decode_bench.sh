#!/usr/bin/env bash
# --decode gpu's benchmark rows (issue 40), on one GPU host:
#   1. decode only: mgpu-loader-bench --decode gpu and --decode cpu at 2 and 4 threads, 20,000
#      images of the loader benchmark's JPEG folder: nvJPEG's img/s per GPU beside the CPU
#      loader's (divide by the threads for its img/s per core) -> OUT_DIR/gpu-decode.jsonl;
#   2. end to end, where bench/e2e_bench.py is there: ResNet-18 with 4 loader threads per GPU and
#      ResNet-50 with 2, --decode gpu, one GPU and all GPUs -> OUT_DIR/e2e-resnet18-w4/ and
#      OUT_DIR/e2e-resnet50-w2/ (their e2e-bench.json holds the synthetic rate beside).
#   bash bench/gpu_decode_bench.sh BUILD_DIR OUT_DIR PYTHON
# PYTHON needs numpy and Pillow once, to generate the JPEG folder (bench/make_jpeg_folder.py);
# e2e_bench.py's own Python is MGPU_BENCH_PYTHON, as in bench/run_all.sh.
set -euo pipefail
BUILD=${1:?"usage: bash bench/gpu_decode_bench.sh BUILD_DIR OUT_DIR PYTHON"}
OUT=${2:?"usage: bash bench/gpu_decode_bench.sh BUILD_DIR OUT_DIR PYTHON"}
PYTHON=${3:?"usage: bash bench/gpu_decode_bench.sh BUILD_DIR OUT_DIR PYTHON"}
HERE=$(cd "$(dirname "$0")" && pwd)
# The end-to-end step's folder (bench/e2e_bench.py's default) when it exists: one folder, made once.
CACHE=${MGPU_CACHE:-$HOME/.cache/mgpu}
DATA=$CACHE/bench-e2e/jpeg-40000
[ -d "$DATA/train" ] || DATA=$CACHE/bench-loader/jpeg-20k
mkdir -p "$OUT"
[ -d "$DATA/train" ] || "$PYTHON" "$HERE/make_jpeg_folder.py" "$DATA"
rows="$OUT/gpu-decode.jsonl.partial"
: > "$rows"
for threads in 2 4; do
  for decode in gpu cpu; do
    "$BUILD/bin/mgpu-loader-bench" --data-dir "$DATA" --decode "$decode" --num-workers "$threads" \
      --max-images 20000 | tee -a "$rows"
  done
done
mv "$rows" "$OUT/gpu-decode.jsonl"
if [ -f "$HERE/e2e_bench.py" ]; then
  "$PYTHON" "$HERE/e2e_bench.py" --build "$BUILD" --out "$OUT/e2e-resnet18-w4" --models resnet18 --workers 4 \
    --e2e-flags "--decode gpu" --run-timeout 240
  "$PYTHON" "$HERE/e2e_bench.py" --build "$BUILD" --out "$OUT/e2e-resnet50-w2" --models resnet50 --workers 2 \
    --e2e-flags "--decode gpu" --run-timeout 240
fi
