#!/bin/bash
# Session 23, call 6 (nvidia-h100-x2, main 622f851 + an uncommitted switch): the CPU assist of batch b+1 running until
# the producer takes it (T: MGPU_AB_ASSIST_TO_TAKE=1) against stopping once batch b's decodes are enqueued (S), ResNet-18.
source .devdeps/activate.sh; for f in .devdeps/libutfcpp-dev*.deb; do dpkg -x $f /opt/deps; done
export NCCL_NVLS_ENABLE=0
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export LD_LIBRARY_PATH=/tmp/site/nvidia/cu13/lib:$LD_LIBRARY_PATH PYTHONPATH=/tmp/site
R=$OUT/call6.txt; t0=$(date +%s)
el() { echo "[$(( $(date +%s) - t0 )) s] $*" | tee -a $R; }
nvidia-smi -L >> $R; nproc >> $R; git log --oneline -1 >> $R; git status --short | head >> $R
find . -path ./build -prune -o -path ./build-gpu -prune -o \( -name '*.cpp' -o -name '*.h' -o -name '*.cu' \) -print | sort | xargs cat | md5sum >> $R
E2E=$HOME/.cache/mgpu/bench-e2e/jpeg-40000
[ -d $E2E/train ] || { python3 bench/make_jpeg_folder.py $E2E --images 40000 > /tmp/mk.txt 2>&1 & }
cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DMGPU_PYTHON=$(command -v python3) \
  -DMGPU_TEST_PYTHON=$(command -v python3) -DMGPU_NVJPEG_INCLUDE_DIR=/tmp/site/nvidia/cu13/include -DMPI_CXX_COMPILER=$MPI_CXX_COMPILER > /tmp/cmake.log 2>&1 || { tail -30 /tmp/cmake.log >> $R; cat $R; exit 1; }
ninja -C build-gpu mgpu-worker > /tmp/ninja.log 2>&1 || { grep -A12 FAILED /tmp/ninja.log | head -60 >> $R; cat $R; exit 1; }
B=build-gpu/bin
el "built"; wait; el "jpegs there: $(ls $E2E/train | wc -l) classes"
mkdir -p /tmp/d
COMMON="--model resnet18 --precision amp-bf16 --optimizer sgd --momentum 0.9 --lr 0.01 --epochs 1000 --progress lines --device cuda --channels-last true --log-every 10"
STREAM="--dataset imagefolder --data-dir $E2E --data-loading stream --augment rrc-flip --resize 224 --image-size 224 --decode gpu --num-workers 4"
SYN="--dataset synthetic --image-size 224 --synthetic-train 60000 --synthetic-test 256"
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
envof() { [ $1 = T ] && echo MGPU_AB_ASSIST_TO_TAKE=1; }
one() { # variant name data steps
  env $(envof $1) CUDA_VISIBLE_DEVICES=0 timeout 60 $B/mgpu-worker $COMMON $3 --batch-size 256 --max-steps $4 --out /tmp/d/$2 > /tmp/d/$2.log 2>&1
  el "one $1 $2: $(rate /tmp/d/$2 20 256)"; }
ddp() { # variant name data steps
  port=$(( 29500 + RANDOM % 1000 ))
  for r in 0 1; do env $(envof $1) RANK=$r WORLD_SIZE=2 LOCAL_RANK=$r LOCAL_WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=$port \
    timeout 80 $B/mgpu-worker $COMMON $3 --mode ddp --backend nccl --batch-size 512 --max-steps $4 --out /tmp/d/$2 > /tmp/d/$2-$r.log 2>&1 & done; wait
  el "ddp $1 $2: $(rate /tmp/d/$2 20 512)"; }
for rep in 1 2 3; do for V in S T; do one $V r18-one-$V$rep "$STREAM" 150; done; [ $(( $(date +%s) - t0 )) -gt 230 ] && break; done
[ $(( $(date +%s) - t0 )) -lt 220 ] && for V in S T; do ddp $V r18-ddp-$V "$STREAM" 76; done
grep -h "rror" /tmp/d/*.log | head -5 >> $R
cat $R
