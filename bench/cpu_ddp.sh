#!/usr/bin/env bash
# DDP on the CPU: mgpu-worker --mode ddp --backend gloo (2 processes, torchrun's environment)
# against PyTorch's DistributedDataParallel over Gloo (Python), in one invocation: LeNet-5,
# Fashion-MNIST in memory, Adam, same global batch and threads per rank. Builds nothing: give it
# a built tree. Prints a Markdown row per repeat and the ratio of mean epoch times.
#   bash bench/cpu_ddp.sh [BUILD_DIR] [REPEATS]
set -euo pipefail
BUILD_DIR=${1:-build}
REPEATS=${2:-3}
WORLD=${WORLD:-2}
THREADS=${THREADS:-1}   # per rank: 2 ranks x 1 thread on a 2-core machine
BATCH=${BATCH:-64}      # global
DATA=${FASHION_MNIST_DIR:-/usr/share/datasets/fashion-mnist}
here=$(cd "$(dirname "$0")" && pwd)
. "$BUILD_DIR/.setup.env"
PY=${MGPU_PYTHON:-python3}
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
free_port() { "$PY" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

echo "machine: $(uname -n), $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)"
echo "date: $(date -u +%Y-%m-%d), $WORLD ranks x $THREADS thread(s), global batch $BATCH, one epoch"
echo
echo "| repeat | mgpu epoch s | mgpu accuracy % | PyTorch DDP epoch s | PyTorch accuracy % | PyTorch / mgpu |"
echo "| --- | --- | --- | --- | --- | --- |"
mgpu_total=0; torch_total=0
for r in $(seq 1 "$REPEATS"); do
  port=$(free_port)
  pids=()
  for rank in $(seq 0 $((WORLD - 1))); do
    RANK=$rank WORLD_SIZE=$WORLD LOCAL_RANK=$rank LOCAL_WORLD_SIZE=$WORLD MASTER_ADDR=127.0.0.1 MASTER_PORT=$port \
      "$BUILD_DIR/bin/mgpu-worker" --mode ddp --backend gloo --model lenet --dataset fashion-mnist \
      --data-dir "$DATA" --device cpu --threads "$THREADS" --batch-size "$BATCH" --epochs 1 \
      --optimizer adam --lr 0.001 --num-workers 0 --progress lines --out "$out/mgpu-$r" \
      > "$out/mgpu-$r.rank$rank.log" 2>&1 &
    pids+=($!)
  done
  for pid in "${pids[@]}"; do wait "$pid"; done
  read -r m_sec m_acc < <("$PY" -c "import json,sys; s=json.load(open(sys.argv[1])); print(s['epochs_detail'][0]['seconds'], s['test_accuracy'])" "$out/mgpu-$r/summary.json")
  read -r t_sec t_acc < <(cd "$here" && "$PY" ddp_cpu_reference.py --data-dir "$DATA" --world "$WORLD" \
    --threads "$THREADS" --batch-size "$BATCH" --port "$(free_port)" 2>/dev/null | tail -1 | \
    "$PY" -c "import json,sys; r=json.loads(sys.stdin.read()); print(r['epoch_seconds'], r['test_accuracy'])")
  printf '| %d | %.2f | %.2f | %.2f | %.2f | %.2f |\n' "$r" "$m_sec" "$m_acc" "$t_sec" "$t_acc" "$(echo "$t_sec / $m_sec" | bc -l)"
  mgpu_total=$(echo "$mgpu_total + $m_sec" | bc -l); torch_total=$(echo "$torch_total + $t_sec" | bc -l)
done
echo
printf 'mean epoch: mgpu %.2f s, PyTorch DDP %.2f s; PyTorch / mgpu = %.2f (above 1: mgpu is faster)\n' \
  "$(echo "$mgpu_total / $REPEATS" | bc -l)" "$(echo "$torch_total / $REPEATS" | bc -l)" \
  "$(echo "$torch_total / $mgpu_total" | bc -l)"
