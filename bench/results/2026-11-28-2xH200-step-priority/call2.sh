#!/bin/bash
# Session 25, call 2 (nvidia-h200-x2): the step stream change (cuda/step_stream.h, NCCL's stream priority) with an uncommitted override (X_STEP_PRIO, X_NCCL_PRIO): GPU tests; synthetic ResNet-18 one GPU and DDP with the step and NCCL at high or default priority; VGG-19 graphed DDP data-on-device with NCCL at high or default priority
source .devdeps/activate.sh; for f in .devdeps/libutfcpp-dev*.deb; do dpkg -x $f /opt/deps; done
export NCCL_NVLS_ENABLE=0
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export LD_LIBRARY_PATH=/tmp/site/nvidia/cu13/lib:$LD_LIBRARY_PATH PYTHONPATH=/tmp/site
R=$OUT/call2.txt; t0=$(date +%s)
el() { echo "[$(( $(date +%s) - t0 )) s] $*" | tee -a $R; }
nvidia-smi -L >> $R; nproc >> $R; git log --oneline -1 >> $R; git status --short | head >> $R
find . -path ./build -prune -o -path ./build-gpu -prune -o \( -name '*.cpp' -o -name '*.h' -o -name '*.cu' \) -print | sort | xargs cat | md5sum >> $R
E2E=$HOME/.cache/mgpu/bench-e2e/jpeg-80000
[ -d $E2E/train ] || { python3 bench/make_jpeg_folder.py $E2E --images 80000 > /tmp/mk.txt 2>&1 & }
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
timeout 240 build-gpu/bin/mgpu_gpu_tests --gtest_filter='StepStream*:CudaDdp.Nccl*:CudaGraphs.*:GpuDecode*' > $OUT/call2-gpu-tests.log 2>&1
el "gpu tests rc $?: $(grep -c '^\[       OK' $OUT/call2-gpu-tests.log) ok; $(grep '^\[  FAILED\|^\[  PASSED\|SKIPPED \]' $OUT/call2-gpu-tests.log | head -8 | tr '\n' ' ')"
VG="--dataset synthetic --synthetic-channels 3 --synthetic-test 256 --epochs 100000 --log-every 20 --optimizer sgd --momentum 0.9 --lr 0.01 --progress lines --overwrite --precision amp-bf16 --channels-last true --cuda-graphs true --data-on-device true --model vgg19 --image-size 32"
vtwo() { # tag
  port=$((29700 + RANDOM % 200))
  for r in 0 1; do RANK=$r LOCAL_RANK=$r WORLD_SIZE=2 LOCAL_WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=$port \
    timeout 90 $B/mgpu-worker $VG --mode ddp --backend nccl --synthetic-train $((512 * 600)) --batch-size 512 --max-steps 580 \
    --out /tmp/d/v-$1 > /tmp/d/v-$1-$r.log 2>&1 & done; wait
  el "vgg19 ddp $1: $(rate /tmp/d/v-$1 100 512)"; }
for rep in a b; do
  X_STEP_PRIO=0 one syn0-$rep "$SYN" 200
  X_STEP_PRIO=1 one syn1-$rep "$SYN" 200
  X_STEP_PRIO=0 ddp syn0-$rep "$SYN" 150
  X_STEP_PRIO=1 ddp syn1-$rep "$SYN" 150
  X_NCCL_PRIO=1 ddp synn-$rep "$SYN" 150
done
for rep in a b; do
  [ $(( $(date +%s) - t0 )) -gt 500 ] && break
  X_NCCL_PRIO=0 vtwo n0-$rep
  X_NCCL_PRIO=1 vtwo n1-$rep
done
for rep in a; do
  [ $(( $(date +%s) - t0 )) -gt 520 ] && break
  ddp gpu12-$rep "$STREAM --num-workers 12" 150
  X_STEP_PRIO=0 ddp gpu12x0-$rep "$STREAM --num-workers 12" 150
done
grep -h "rror" /tmp/d/*.log | head -5 >> $R
grep -h "decode  " /tmp/d/ddp-gpu12-a-0.log | head -2 >> $R
cat $R
