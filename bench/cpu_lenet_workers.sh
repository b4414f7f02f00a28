#!/usr/bin/env bash
# The seed MNIST experiment's num_workers table: LeNet-5 on Fashion-MNIST with per-sample random
# affine augmentation, batch 32, Adam, one epoch, 0/2/4 loader workers; mgpu-worker against
# PyTorch + torchvision (DataLoader worker processes, PIL transforms) in one invocation. Builds
# and downloads nothing: give it a built tree and run bench/setup_bench_env.sh once before.
#   bash bench/cpu_lenet_workers.sh [BUILD_DIR] [REPEATS]
# WORKERS (default "0 2 4") and SEEDS (default 42) pick the rows; with several seeds the script
# ends with each side's mean accuracy, which one seed cannot show (one epoch of LeNet moves by
# about a point between seeds). DEVICE=cuda runs both sides' model on the GPU (issue 3's GPU row:
# the loaders stay on the CPU), and mgpu both eagerly and with --cuda-graphs (VARIANTS). On a
# host without a package registry, BENCH_WHEELS=DIR (from bench/fetch_bench_wheels.sh) is
# unpacked into a temporary folder on PYTHONPATH, with MGPU_BENCH_PYTHON naming a Python that has
# torch, e.g. on the GPU host:
#   DEVICE=cuda BENCH_WHEELS=.whl MGPU_BENCH_PYTHON=python3 bash bench/cpu_lenet_workers.sh build-gpu
set -euo pipefail
BUILD_DIR=${1:-build}
REPEATS=${2:-1}
THREADS=${THREADS:-2}
WORKERS=${WORKERS:-"0 2 4"}
SEEDS=${SEEDS:-42}
DEVICE=${DEVICE:-cpu}
DATA=${FASHION_MNIST_DIR:-/usr/share/datasets/fashion-mnist}
here=$(cd "$(dirname "$0")" && pwd)
if [ -f "$BUILD_DIR/.setup.env" ]; then . "$BUILD_DIR/.setup.env"; fi  # written by make build; absent in a bare cmake build
PY=${MGPU_BENCH_PYTHON:-${MGPU_CACHE:-$HOME/.cache/mgpu}/venv-bench/bin/python}
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
if [ -n "${BENCH_WHEELS:-}" ]; then
  for wheel in "$BENCH_WHEELS"/*.whl; do
    [ -f "$wheel" ] || { echo "cpu_lenet_workers.sh: BENCH_WHEELS=$BENCH_WHEELS holds no .whl files; fill it with bash bench/fetch_bench_wheels.sh $BENCH_WHEELS" >&2; exit 2; }
    "$PY" -m zipfile -e "$wheel" "$out/site"
  done
  export PYTHONPATH="$out/site${PYTHONPATH:+:$PYTHONPATH}"
fi
if ! "$PY" -c 'import torchvision, PIL' 2>/dev/null; then
  echo "cpu_lenet_workers.sh: $PY cannot import torchvision and PIL; run bash bench/setup_bench_env.sh $BUILD_DIR first" \
    "(or, on a host without a package registry, pass BENCH_WHEELS=DIR filled by bench/fetch_bench_wheels.sh)" >&2
  exit 2
fi

echo "machine: $(uname -n), $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)"
if [ "$DEVICE" != cpu ]; then echo "device: $DEVICE ($("$PY" -c 'import torch; print(torch.cuda.get_device_name(0))'))"; fi
echo "date: $(date -u +%Y-%m-%d), intra-op threads $THREADS, batch 32, Adam lr 0.001, 1 epoch, repeats $REPEATS"
echo "$("$PY" -c 'import torch, torchvision; print("torch", torch.__version__, "torchvision", torchvision.__version__)')"
echo
# mgpu runs each row eagerly and, on a GPU (where LeNet's eager step is launch-bound), again with
# its kernels replayed as a CUDA graph: VARIANTS="eager graphs" (the default with DEVICE=cuda).
if [ "$DEVICE" = cpu ]; then VARIANTS=${VARIANTS:-eager}; else VARIANTS=${VARIANTS:-"eager graphs"}; fi
calc() { awk "BEGIN { printf \"%.4f\", $1 }"; }  # bc is not on every host
echo "| workers | seed | repeat | mgpu run | mgpu epoch s | mgpu data wait s | mgpu accuracy % | PyTorch epoch s | PyTorch accuracy % | mgpu / PyTorch |"
echo "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"
declare -A m_total
t_total=0; runs=0
for w in $WORKERS; do
  for seed in $SEEDS; do
  for r in $(seq 1 "$REPEATS"); do
    read -r t_sec t_acc < <("$PY" "$here/lenet_workers_reference.py" --seed "$seed" --data-dir "$DATA" --threads "$THREADS" \
      --device "$DEVICE" --num-workers "$w" 2> "$out/torch-$w-$r.err" | "$PY" -c "import json,sys; r=json.loads(sys.stdin.read()); print(r['epoch_seconds'], r['test_accuracy'])")
    for variant in $VARIANTS; do
      case $variant in
        eager) flags=() ;;
        graphs) flags=(--cuda-graphs true) ;;
        *) echo "cpu_lenet_workers.sh: VARIANTS entry '$variant' is neither eager nor graphs" >&2; exit 2 ;;
      esac
      run="$out/mgpu-$variant-$w-$seed-$r"
      "$BUILD_DIR/bin/mgpu-worker" --seed "$seed" --model lenet --dataset fashion-mnist --data-dir "$DATA" --device "$DEVICE" \
        --threads "$THREADS" --batch-size 32 --epochs 1 --optimizer adam --lr 0.001 --augment affine \
        --num-workers "$w" --progress lines "${flags[@]}" --out "$run" > "$run.log" 2>&1 \
        || { echo "cpu_lenet_workers.sh: mgpu-worker failed ($variant, $w workers); its log:" >&2; tail -20 "$run.log" >&2; exit 1; }
      read -r m_sec m_wait m_acc < <("$PY" -c "import json,sys; s=json.load(open(sys.argv[1])); e=s['epochs_detail'][0]; print(e['seconds'], e['data_wait_seconds'], s['test_accuracy'])" "$run/summary.json")
      printf '| %d | %d | %d | %s | %.2f | %.2f | %.2f | %.2f | %.2f | %.2f |\n' "$w" "$seed" "$r" "$variant" "$m_sec" "$m_wait" \
        "$m_acc" "$t_sec" "$t_acc" "$(calc "$m_sec / $t_sec")"
      m_total[$variant]=$(calc "${m_total[$variant]:-0} + $m_acc")
    done
    t_total=$(calc "$t_total + $t_acc"); runs=$((runs + 1))
  done
  done
done
for variant in $VARIANTS; do
  printf '\nmean test accuracy over %d runs: mgpu (%s) %.2f %%, PyTorch %.2f %% (difference %.2f points)\n' "$runs" "$variant" \
    "$(calc "${m_total[$variant]} / $runs")" "$(calc "$t_total / $runs")" "$(calc "(${m_total[$variant]} - $t_total) / $runs")"
done
