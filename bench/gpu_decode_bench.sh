#!/usr/bin/env bash
# --decode gpu's benchmark rows (issue 40), on one GPU host:
#   1. decode only: mgpu-loader-bench --decode gpu and --decode cpu at 2 and 4 threads, 20,000
#      images of the loader benchmark's JPEG folder: nvJPEG's img/s per GPU beside the CPU
#      loader's (divide by the threads for its img/s per core), and nvJPEG's CUDA decoder alone
#      (--gpu-decoder cuda, as on a GPU without JPEG engines) -> OUT_DIR/gpu-decode.jsonl;
#   2. end to end, where bench/e2e_bench.py is there: ResNet-18 with 4 loader threads per GPU and
#      ResNet-50 with 2, --decode gpu, one GPU and all GPUs -> OUT_DIR/e2e-resnet18-w4/ and
#      OUT_DIR/e2e-resnet50-w2/ (their e2e-bench.json holds the synthetic rate beside);
#   3. OUT_DIR/gpu-decode.json: both, for bench/targets.py (issue 40's targets).
#   bash bench/gpu_decode_bench.sh BUILD_DIR OUT_DIR PYTHON [E2E_BENCH_JSON]
# E2E_BENCH_JSON: the e2e step's results on this machine and build (run_all.sh passes them): their
# synthetic rows stand for this script's instead of being measured again (e2e_bench.py --synthetic-from),
# and this script's mgpu runs take the --mgpu-flags they were measured with. Without them the mgpu
# runs take MGPU_FLAGS (run_all.sh passes the e2e step's, so that a --only gpu-decode run measures
# the same step as a whole run; empty: mgpu's eager step).
# PYTHON needs numpy and Pillow once, to generate the JPEG folder (bench/make_jpeg_folder.py);
# e2e_bench.py's own Python is MGPU_BENCH_PYTHON, as in bench/run_all.sh.
set -euo pipefail
usage="usage: bash bench/gpu_decode_bench.sh BUILD_DIR OUT_DIR PYTHON [E2E_BENCH_JSON]"
BUILD=${1:?$usage}
OUT=${2:?$usage}
PYTHON=${3:?$usage}
synthetic_from=()
mgpu_flags=${MGPU_FLAGS:-}
if [ -s "${4:-}" ]; then
  synthetic_from=(--synthetic-from "$4")
  # Its --mgpu-flags too, which its synthetic rows were measured with (run_all.sh's: --cuda-graphs true).
  mgpu_flags=$("$PYTHON" -c 'import json, sys; print(json.load(open(sys.argv[1]))["meta"].get("mgpu_flags", ""))' \
    "$4" 2>/dev/null) || mgpu_flags=${MGPU_FLAGS:-}  # unreadable: e2e_bench.py says so, measures synthetic here
fi
HERE=$(cd "$(dirname "$0")" && pwd)
# The end-to-end step's folder (bench/e2e_bench.py's default, sized by the host's GPUs) when one
# exists: one folder, made once.
CACHE=${MGPU_CACHE:-$HOME/.cache/mgpu}
DATA=$CACHE/bench-loader/jpeg-20k
for folder in "$CACHE"/bench-e2e/jpeg-*/; do
  if [ -d "$folder/train" ]; then DATA=${folder%/}; break; fi
done
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
# nvJPEG's CUDA decoder alone: what a GPU without JPEG engines decodes.
"$BUILD/bin/mgpu-loader-bench" --data-dir "$DATA" --decode gpu --gpu-decoder cuda --num-workers 4 \
  --max-images 20000 | tee -a "$rows"
mv "$rows" "$OUT/gpu-decode.jsonl"
if [ -f "$HERE/e2e_bench.py" ]; then
  # Issue 40's targets compare with synthetic only: PyTorch's rows at these worker counts (minutes of its
  # DataLoader at 2-4 workers) are left out; the e2e step measures PyTorch beside mgpu.
  "$PYTHON" "$HERE/e2e_bench.py" --build "$BUILD" --out "$OUT/e2e-resnet18-w4" --models resnet18 --workers 4 \
    --e2e-flags "--decode gpu" --mgpu-flags "$mgpu_flags" --no-pytorch --run-timeout 240 "${synthetic_from[@]}" || true
  "$PYTHON" "$HERE/e2e_bench.py" --build "$BUILD" --out "$OUT/e2e-resnet50-w2" --models resnet50 --workers 2 \
    --e2e-flags "--decode gpu" --mgpu-flags "$mgpu_flags" --no-pytorch --run-timeout 240 "${synthetic_from[@]}" || true
fi
"$PYTHON" - "$OUT" <<'PY'
import json, os, sys
out = sys.argv[1]
decode_only = [json.loads(line) for line in open(os.path.join(out, "gpu-decode.jsonl")) if line.startswith("{")]
e2e = []
for model, folder in (("resnet18", "e2e-resnet18-w4"), ("resnet50", "e2e-resnet50-w2")):
    path = os.path.join(out, folder, "e2e-bench.json")
    try:
        with open(path) as f:
            e2e.append({"model": model, "result": json.load(f)})
    except (OSError, ValueError) as e:
        e2e.append({"model": model, "error": f"no {folder}/e2e-bench.json ({e.__class__.__name__})"})
with open(os.path.join(out, "gpu-decode.json"), "w") as f:
    json.dump({"gpu_decode": {"decode_only": decode_only, "e2e": e2e}}, f, indent=2)
PY
