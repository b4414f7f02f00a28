#!/usr/bin/env bash
# Every performance claim of docs/BENCHMARKS.md on one GPU host, mgpu against PyTorch 2.11 in the
# same invocation (issue 10). Builds nothing: give it a built tree (`make build`, or the GPU
# host recipe in docs).
#
#   bash bench/run_all.sh BUILD_DIR [OUT_DIR]        (make bench-gpu BUILD_DIR=...)
#
# Runs, in order (each driver writes its JSON into OUT_DIR/<name>/ and prints its tables):
#   gpu       bench/gpu_bench.py: one GPU per precision (LeNet, ResNet-18, VGG-19, ResNet-50), and
#             DDP on all GPUs (ResNet-18, VGG-19; fp32, amp-bf16)
#   dp        bench/dp_bench.py: ResNet-18 DataParallel (mgpu's, LibTorch's data_parallel,
#             nn.DataParallel) and the MNIST experiment's recipe (1 GPU / DP / DDP x 0 and 4 loader
#             workers) on Fashion-MNIST
#   speed     bench/speed_bench.py: --cuda-graphs, --channels-last, --data-on-device on and off
#   launcher  bench/launcher_bench.py: mgpu run vs mpirun vs torchrun's environment
#   allreduce bench/allreduce_sweep.py: bus bandwidth through mgpu's communicator and PyTorch's
# then bench/targets.py: one table of every target, met or missed, into OUT_DIR/targets.md.
# A driver that fails is reported and the others still run; the exit code is 1 if any failed.
set -uo pipefail
BUILD=${1:?usage: bash bench/run_all.sh BUILD_DIR [OUT_DIR]}
OUT=${2:-bench-results-$(date +%Y-%m-%d)}
HERE=$(cd "$(dirname "$0")" && pwd)
export NCCL_NVLS_ENABLE=0
if [ ! -x "$BUILD/bin/mgpu-worker" ] || [ ! -x "$BUILD/bin/mgpu-allreduce-bench" ]; then
  echo "run_all.sh: $BUILD/bin has no mgpu-worker or mgpu-allreduce-bench; build first (make build BUILD_DIR=$BUILD)" >&2
  exit 2
fi
PYTHON=${MGPU_PYTHON:-python3}  # runs the drivers and PyTorch's side: needs torch 2.11 (and numpy)
if ! GPUS=$("$PYTHON" -c 'import numpy, torch; print(torch.cuda.device_count())' 2>/dev/null); then
  echo "run_all.sh: $PYTHON cannot import torch and numpy; set MGPU_PYTHON to the Python of a torch 2.11 install" >&2
  exit 2
fi
if [ "$GPUS" -lt 1 ]; then
  echo "run_all.sh: no CUDA device visible (check CUDA_VISIBLE_DEVICES and the driver)" >&2
  exit 2
fi
MNIST=${FASHION_MNIST_DIR:-/usr/share/datasets/fashion-mnist}
mkdir -p "$OUT"
failed=()
step() {  # step NAME RESULT_FILE COMMAND...: runs a driver, its log beside its results
  local name=$1 result=$2
  shift 2
  mkdir -p "$OUT/$name"
  echo "== $name: $*"
  local start=$SECONDS
  "$@" 2>&1 | tee "$OUT/$name/driver.log" || true  # judged by its results file below
  if [ ! -s "$OUT/$name/$result" ]; then failed+=("$name"); fi
  echo "== $name: $((SECONDS - start)) s"
}
step gpu bench-results.json "$PYTHON" "$HERE/gpu_bench.py" --build "$BUILD" --out "$OUT/gpu" \
  --models lenet,resnet18,vgg19,resnet50 --multi-models resnet18,vgg19 --modes ddp --steps 20 --warmup 20 \
  --run-timeout 90
step dp dp-bench-results.json "$PYTHON" "$HERE/dp_bench.py" --build "$BUILD" --out "$OUT/dp" --gpus "$GPUS" \
  --mnist-dir "$MNIST" --lenet-workers 0,4 --steps 20 --warmup 10 --run-timeout 90
step speed speed-bench.json "$PYTHON" "$HERE/speed_bench.py" --build "$BUILD" --out "$OUT/speed" \
  --mnist-dir "$MNIST" --run-timeout 120
if [ "$GPUS" -ge 2 ]; then
  step launcher launcher-bench.json "$PYTHON" "$HERE/launcher_bench.py" --build "$BUILD" --out "$OUT/launcher" \
    --gpus 2 --repeats 1
  step allreduce allreduce-sweep.json "$PYTHON" "$HERE/allreduce_sweep.py" --build "$BUILD" --out "$OUT/allreduce"
fi
results=()
for f in gpu/bench-results.json dp/dp-bench-results.json speed/speed-bench.json launcher/launcher-bench.json \
         allreduce/allreduce-sweep.json; do
  [ -s "$OUT/$f" ] && results+=("$OUT/$f")
done
if [ ${#results[@]} -gt 0 ]; then
  "$PYTHON" "$HERE/targets.py" "${results[@]}" | tee "$OUT/targets.md"
fi
if [ ${#failed[@]} -gt 0 ]; then
  echo "run_all.sh: these drivers wrote no results: ${failed[*]} (their logs: $OUT/<name>/driver.log)" >&2
  exit 1
fi
