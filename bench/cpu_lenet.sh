#!/usr/bin/env bash
# LeNet-5 on Fashion-MNIST on the CPU: mgpu-worker against PyTorch (Python) in one invocation,
# same model, batch, optimizer, thread count and in-memory data. Builds nothing: give it a built
# tree. Prints a Markdown table row per repeat and the ratio of mean epoch times.
#   bash bench/cpu_lenet.sh [BUILD_DIR] [REPEATS]
set -euo pipefail
BUILD_DIR=${1:-build}
REPEATS=${2:-3}
THREADS=${THREADS:-2}
BATCH=${BATCH:-32}
EPOCHS=${EPOCHS:-1}
DATA=${FASHION_MNIST_DIR:-/usr/share/datasets/fashion-mnist}
here=$(cd "$(dirname "$0")" && pwd)
. "$BUILD_DIR/.setup.env"
PY=${MGPU_PYTHON:-python3}
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

echo "machine: $(uname -n), $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)"
echo "date: $(date -u +%Y-%m-%d), threads $THREADS, batch $BATCH, epochs $EPOCHS, repeats $REPEATS"
echo
echo "| repeat | mgpu epoch s | mgpu accuracy % | PyTorch epoch s | PyTorch accuracy % | PyTorch / mgpu |"
echo "| --- | --- | --- | --- | --- | --- |"
mgpu_total=0; torch_total=0
for r in $(seq 1 "$REPEATS"); do
  "$BUILD_DIR/bin/mgpu-worker" --model lenet --dataset fashion-mnist --data-dir "$DATA" --device cpu \
    --threads "$THREADS" --batch-size "$BATCH" --epochs "$EPOCHS" --optimizer adam --lr 0.001 \
    --num-workers 0 --progress lines --out "$out/mgpu-$r" > "$out/mgpu-$r.log" 2>&1
  read -r m_sec m_acc < <("$PY" -c "import json,sys; s=json.load(open(sys.argv[1])); e=s['epochs_detail']; print(sum(x['seconds'] for x in e)/len(e), s['test_accuracy'])" "$out/mgpu-$r/summary.json")
  read -r t_sec t_acc < <("$PY" "$here/lenet_reference.py" --data-dir "$DATA" --threads "$THREADS" \
    --batch-size "$BATCH" --epochs "$EPOCHS" | "$PY" -c "import json,sys; r=json.loads(sys.stdin.read()); print(sum(r['epoch_seconds'])/len(r['epoch_seconds']), r['test_accuracy'])")
  printf '| %d | %.2f | %.2f | %.2f | %.2f | %.2f |\n' "$r" "$m_sec" "$m_acc" "$t_sec" "$t_acc" "$(echo "$t_sec / $m_sec" | bc -l)"
  mgpu_total=$(echo "$mgpu_total + $m_sec" | bc -l); torch_total=$(echo "$torch_total + $t_sec" | bc -l)
done
echo
printf 'mean epoch: mgpu %.2f s, PyTorch %.2f s; PyTorch / mgpu = %.2f (above 1: mgpu is faster)\n' \
  "$(echo "$mgpu_total / $REPEATS" | bc -l)" "$(echo "$torch_total / $REPEATS" | bc -l)" \
  "$(echo "$torch_total / $mgpu_total" | bc -l)"
