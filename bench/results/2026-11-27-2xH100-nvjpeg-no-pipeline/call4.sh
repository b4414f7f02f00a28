#!/bin/bash
# Session 20, call 4 (nvidia-h100-x2): the tree to commit, nvJPEG's HW_DECODE_NO_PIPELINE flag on by default (N),
# with an uncommitted switch back to main's pipelined decode (A, MGPU_AB_PIPELINED=1). The GPU decode tests; then
# ResNet-18 --decode gpu, 4 threads per GPU, A and N alternating, on 1 GPU and on 2 (DDP).
source .devdeps/activate.sh; for f in .devdeps/libutfcpp-dev*.deb; do dpkg -x $f /opt/deps; done
export NCCL_NVLS_ENABLE=0
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export LD_LIBRARY_PATH=/tmp/site/nvidia/cu13/lib:$LD_LIBRARY_PATH
R=$OUT/call4.txt; t0=$(date +%s)
el() { echo "[$(( $(date +%s) - t0 )) s] $*" | tee -a $R; }
nvidia-smi -L >> $R; nproc >> $R
E2E=$HOME/.cache/mgpu/bench-e2e/jpeg-40000
[ -d $E2E/train ] || { python3 bench/make_jpeg_folder.py $E2E --images 40000 > /tmp/mk.txt 2>&1 & }
[ -d build-gpu ] || cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DMGPU_PYTHON=$(command -v python3) \
  -DMGPU_TEST_PYTHON=$(command -v python3) -DMGPU_NVJPEG_INCLUDE_DIR=/tmp/site/nvidia/cu13/include -DMPI_CXX_COMPILER=$MPI_CXX_COMPILER > /tmp/cmake.log 2>&1
ninja -C build-gpu mgpu-worker mgpu_gpu_tests mgpu-loader-bench > /tmp/ninja.log 2>&1 || { grep -A12 FAILED /tmp/ninja.log | head -60 >> $R; cat $R; exit 1; }
B=build-gpu/bin
F='CropResize*:GpuDecode*:*GpuDecodeEachDecoder*:CudaGraphs.GraphedStepsTrainFromJpegs*'
CUDA_VISIBLE_DEVICES=0 timeout 100 $B/mgpu_gpu_tests --gtest_filter="$F" > $OUT/gpu-tests.log 2>&1
el "tests rc $?: $(grep -cE '^\[       OK' $OUT/gpu-tests.log) ok, $(grep -cE '^\[  FAILED  \] [A-Z]' $OUT/gpu-tests.log) failed"
grep -B2 -A20 -m3 "Failure" $OUT/gpu-tests.log | cut -c1-300 | head -50 >> $R
wait; el "jpegs there"
mkdir -p /tmp/ab4
COMMON="--model resnet18 --precision amp-bf16 --optimizer sgd --momentum 0.9 --lr 0.01 --epochs 1000 --progress lines --device cuda --channels-last true --log-every 10"
STREAM="--dataset imagefolder --data-dir $E2E --data-loading stream --augment rrc-flip --resize 224 --image-size 224 --decode gpu --num-workers 4"
rate() { python3 - "$1" "$2" "$3" <<'PY'
import sys, json, os
sys.path.insert(0, "bench")
from gpu_bench import elapsed_throughput
out, warm, batch = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
r = elapsed_throughput(out, warm, batch)
s = json.load(open(os.path.join(out, "summary.json")))
g = s.get("gpu_decode", {})
a = g.get("cpu_assisted", 0); n = g.get("images", 0)
print(f"{os.path.basename(out)}: {r:.0f} img/s; assisted {a} of {a+n} ({100*a/max(a+n,1):.0f}%)" if r else f"{out}: no rate")
PY
}
envof() { [ $1 = A ] && echo MGPU_AB_PIPELINED=1; }
one() { env CUDA_VISIBLE_DEVICES=0 $(envof $1) timeout 60 $B/mgpu-worker $COMMON $STREAM --batch-size 256 --max-steps 150 --out /tmp/ab4/x1-$1-$2 > /tmp/ab4-x1-$1-$2.log 2>&1; echo "x1 $1 $(rate /tmp/ab4/x1-$1-$2 20 256)" >> $R; }
two() { port=$(( 29500 + RANDOM % 1000 ))
  for r in 0 1; do env $(envof $1) RANK=$r WORLD_SIZE=2 LOCAL_RANK=$r LOCAL_WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=$port \
    timeout 70 $B/mgpu-worker $COMMON $STREAM --mode ddp --backend nccl --batch-size 512 --max-steps 100 --out /tmp/ab4/x2-$1-$2 > /tmp/ab4-x2-$1-$2-$r.log 2>&1 & done; wait
  echo "x2 $1 $(rate /tmp/ab4/x2-$1-$2 20 512)" >> $R; }
one N 1; one A 1; one A 2; one N 2
el "one GPU done"
two N 1; two A 1; two A 2; two N 2
el "two GPUs done"
grep -h "rror" /tmp/ab4-*.log | head -5 >> $R
cat $R
