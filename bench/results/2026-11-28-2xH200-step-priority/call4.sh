#!/bin/bash
# Session 25, call 4 (nvidia-h200-x2, call 3's machine still warm): more rounds of the committed change, ResNet-18 --decode gpu at 12 threads (one GPU on 16 cores, DDP) and at 4 (one GPU), against synthetic
source .devdeps/activate.sh; for f in .devdeps/libutfcpp-dev*.deb; do dpkg -x $f /opt/deps; done
export NCCL_NVLS_ENABLE=0
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export LD_LIBRARY_PATH=/tmp/site/nvidia/cu13/lib:$LD_LIBRARY_PATH PYTHONPATH=/tmp/site
R=$OUT/call4.txt; t0=$(date +%s)
el() { echo "[$(( $(date +%s) - t0 )) s] $*" | tee -a $R; }
nvidia-smi -L >> $R; nproc >> $R; git log --oneline -1 >> $R; git status --short | head >> $R
find . -path ./build -prune -o -path ./build-gpu -prune -o \( -name '*.cpp' -o -name '*.h' -o -name '*.cu' \) -print | sort | xargs cat | md5sum >> $R
E2E=$HOME/.cache/mgpu/bench-e2e/jpeg-80000
cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DMGPU_PYTHON=$(command -v python3) \
  -DMGPU_TEST_PYTHON=$(command -v python3) -DMGPU_NVJPEG_INCLUDE_DIR=/tmp/site/nvidia/cu13/include -DMPI_CXX_COMPILER=$MPI_CXX_COMPILER > /tmp/cmake.log 2>&1 || { tail -30 /tmp/cmake.log >> $R; cat $R; exit 1; }
ninja -C build-gpu mgpu-worker mgpu_gpu_tests mgpu-allreduce-bench mgpu-loader-bench > /tmp/ninja.log 2>&1 || { grep -A12 FAILED /tmp/ninja.log | head -60 >> $R; cat $R; exit 1; }
B=build-gpu/bin
el "built"; wait; el "jpegs there: $(find $E2E/train -name '*.jpg' | wc -l)"
mkdir -p /tmp/d
COMMON="--model resnet18 --precision amp-bf16 --optimizer sgd --momentum 0.9 --lr 0.01 --epochs 1000 --progress lines --device cuda --channels-last true"
STREAM="--dataset imagefolder --data-dir $E2E --data-loading stream --augment rrc-flip --resize 224 --image-size 224 --decode gpu"
SYN="--dataset synthetic --image-size 224 --synthetic-train 200000 --synthetic-test 256 --num-workers 4"
rate() { python3 - "$1" "$2" "$3" <<'PY'
import sys, json, os, csv
sys.path.insert(0, "bench")
from gpu_bench import elapsed_throughput
out, warm, batch = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
try:
    r = elapsed_throughput(out, warm, batch)
    rows = [x for x in csv.DictReader(open(os.path.join(out, "metrics.csv"))) if int(x["step"]) > warm]
    steps = max(sum(float(x["step_seconds"]) for x in rows), 1e-9)
    idle = sum(float(x.get("input_seconds") or 0) for x in rows) / steps
    s = json.load(open(os.path.join(out, "summary.json")))
    g = s.get("gpu_decode", {}); a = g.get("cpu_assisted", 0); n = g.get("images", 0)
    print(f"{r:.0f} img/s; GPU idle at input {100*idle:.0f}%; assisted {100*a/max(a+n,1):.0f}%")
except Exception as e:
    print(f"no rate ({e})")
PY
}
one() { # name data steps
  CUDA_VISIBLE_DEVICES=0 timeout 60 taskset -c 0-15 $B/mgpu-worker $COMMON $2 --batch-size 256 --max-steps $3 --log-every 10 --out /tmp/d/$1 > /tmp/d/$1.log 2>&1
  el "one $1: $(rate /tmp/d/$1 30 256)"; }
ddp() { # name data steps
  port=$(( 29500 + RANDOM % 1000 ))
  for r in 0 1; do RANK=$r WORLD_SIZE=2 LOCAL_RANK=$r LOCAL_WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=$port \
    timeout 80 $B/mgpu-worker $COMMON $2 --mode ddp --backend nccl --batch-size 512 --max-steps $3 --log-every 10 --out /tmp/d/ddp-$1 > /tmp/d/ddp-$1-$r.log 2>&1 & done; wait
  el "ddp $1: $(rate /tmp/d/ddp-$1 30 512)"; }
rm -rf /tmp/d; mkdir -p /tmp/d
for rep in a b; do
  [ $(( $(date +%s) - t0 )) -gt 160 ] && break
  one syn-$rep "$SYN" 200; one gpu12-$rep "$STREAM --num-workers 12" 200; one gpu4-$rep "$STREAM --num-workers 4" 200
  ddp syn-$rep "$SYN" 150; ddp gpu12-$rep "$STREAM --num-workers 12" 150
done
grep -h "rror" /tmp/d/*.log | head -5 >> $R
cat $R
