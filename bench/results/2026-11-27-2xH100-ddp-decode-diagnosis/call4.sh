#!/bin/bash
# Session 21, call 4 (nvidia-h100-x2, main ef3fd0d): (a) the CPU affinity of DDP's ranks and of a single run
# (NCCL may narrow it), DDP --decode gpu with NCCL_IGNORE_CPU_AFFINITY=1 (I) against main (A), with data_wait_seconds;
# (b) issue 39's stale ResNet-50 e2e rows: e2e_bench.py --models resnet50 --worlds 1,2 --workers 16 with PyTorch.
source .devdeps/activate.sh; for f in .devdeps/libutfcpp-dev*.deb; do dpkg -x $f /opt/deps; done
export NCCL_NVLS_ENABLE=0
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export LD_LIBRARY_PATH=/tmp/site/nvidia/cu13/lib:$LD_LIBRARY_PATH PYTHONPATH=/tmp/site
R=$OUT/call4.txt; t0=$(date +%s)
el() { echo "[$(( $(date +%s) - t0 )) s] $*" | tee -a $R; }
nvidia-smi -L >> $R; nproc >> $R; git log --oneline -1 >> $R
E2E=$HOME/.cache/mgpu/bench-e2e/jpeg-40000
[ -d $E2E/train ] || { python3 bench/make_jpeg_folder.py $E2E --images 40000 > /tmp/mk.txt 2>&1 & }
[ -d build-gpu ] || cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DMGPU_PYTHON=$(command -v python3) \
  -DMGPU_TEST_PYTHON=$(command -v python3) -DMGPU_NVJPEG_INCLUDE_DIR=/tmp/site/nvidia/cu13/include -DMPI_CXX_COMPILER=$MPI_CXX_COMPILER > /tmp/cmake.log 2>&1 || { tail -30 /tmp/cmake.log >> $R; cat $R; exit 1; }
ninja -C build-gpu mgpu-worker mgpu_gpu_tests mgpu-loader-bench > /tmp/ninja.log 2>&1 || { grep -A12 FAILED /tmp/ninja.log | head -60 >> $R; cat $R; exit 1; }
B=build-gpu/bin
el "built"; wait; el "jpegs there: $(ls $E2E/train | wc -l) classes"
mkdir -p /tmp/d4
COMMON="--model resnet18 --precision amp-bf16 --optimizer sgd --momentum 0.9 --lr 0.01 --epochs 1000 --progress lines --device cuda --channels-last true --log-every 10"
STREAM="--dataset imagefolder --data-dir $E2E --data-loading stream --augment rrc-flip --resize 224 --image-size 224 --decode gpu --num-workers 4"
rate() { python3 - "$1" "$2" "$3" <<'PY'
import sys, json, os, csv
sys.path.insert(0, "bench")
from gpu_bench import elapsed_throughput
out, warm, batch = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
try:
    r = elapsed_throughput(out, warm, batch)
    rows = [x for x in csv.DictReader(open(os.path.join(out, "metrics.csv"))) if int(x["step"]) > warm]
    st = max(sum(float(x["step_seconds"]) for x in rows), 1e-9)
    inp = sum(float(x.get("input_seconds") or 0) for x in rows) / st
    wait = sum(float(x.get("data_wait_seconds") or 0) for x in rows) / st
    s = json.load(open(os.path.join(out, "summary.json")))
    g = s.get("gpu_decode", {}); a = g.get("cpu_assisted", 0); n = g.get("images", 0)
    print(f"{os.path.basename(out)}: {r:.0f} img/s; data wait {100*wait:.0f}%, input phase {100*inp:.0f}%; assisted {a} of {a+n} ({100*a/max(a+n,1):.0f}%)")
except Exception as e:
    print(f"{out}: no rate ({e})")
PY
}
affinity() { sleep 14; for p in $(pgrep -f "mgpu-worker.*$1"); do
  echo "pid $p: $(grep Cpus_allowed_list /proc/$p/status) threads $(ls /proc/$p/task | wc -l); per thread: $(for t in /proc/$p/task/*; do grep Cpus_allowed_list $t/status | cut -f2; done | sort | uniq -c | tr '\n' ' ')"; done >> $R; }
ddp() { # name env
  port=$(( 29500 + RANDOM % 1000 ))
  for r in 0 1; do env $2 RANK=$r WORLD_SIZE=2 LOCAL_RANK=$r LOCAL_WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=$port \
    timeout 70 $B/mgpu-worker $COMMON $STREAM --mode ddp --backend nccl --batch-size 512 --max-steps 76 --out /tmp/d4/$1 > /tmp/d4-$1-$r.log 2>&1 & done
  [ $1 = A-1 ] && affinity /tmp/d4/$1; wait
  echo "x2 $1 $(rate /tmp/d4/$1 20 512)" >> $R; }
lscpu | grep -i "numa\|socket" >> $R; nvidia-smi topo -m >> $R 2>&1
env CUDA_VISIBLE_DEVICES=0 timeout 60 $B/mgpu-worker $COMMON $STREAM --batch-size 256 --max-steps 150 --out /tmp/d4/x1 > /tmp/d4-x1.log 2>&1 &
affinity /tmp/d4/x1; wait; echo "x1 $(rate /tmp/d4/x1 20 256)" >> $R
ddp A-1 ""; ddp I-1 NCCL_IGNORE_CPU_AFFINITY=1; ddp I-2 NCCL_IGNORE_CPU_AFFINITY=1; ddp A-2 ""
el "affinity done"
grep -h "rror" /tmp/d4-*.log | head -5 >> $R
timeout 330 python3 bench/e2e_bench.py --build build-gpu --out $OUT/e2e-r50-w16 --data-dir $E2E --models resnet50 --worlds 1,2 --workers 16 \
  --bench-python $(command -v python3) --run-timeout 150 > $OUT/e2e-r50-w16.log 2>&1
el "e2e rc $?"
grep -E "^\|" $OUT/e2e-r50-w16.log >> $R
cat $R
