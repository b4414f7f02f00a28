#!/bin/bash
# Session 17, call 4 (nvidia-h100-x2): DDP ranks let cuDNN time its algorithms in a pass without collectives
# (worker/convolution_timing.h) against timing them in the first step (uncommitted MGPU_AB_NOQUIET switch), alternating;
# the two-GPU tests.
source .devdeps/activate.sh; for f in .devdeps/libutfcpp-dev*.deb; do dpkg -x $f /opt/deps; done
export NCCL_NVLS_ENABLE=0
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export LD_LIBRARY_PATH=/tmp/site/nvidia/cu13/lib:$LD_LIBRARY_PATH
R=$OUT/call4.txt; t0=$(date +%s)
el() { echo "[$(( $(date +%s) - t0 )) s] $*" | tee -a $R; }
nvidia-smi -L >> $R
cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DMGPU_PYTHON=$(command -v python3) \
  -DMGPU_TEST_PYTHON=$(command -v python3) -DMGPU_NVJPEG_INCLUDE_DIR=/tmp/site/nvidia/cu13/include -DMPI_CXX_COMPILER=$MPI_CXX_COMPILER > /tmp/cmake.log 2>&1 || { tail -30 /tmp/cmake.log >> $R; cat $R; exit 1; }
ninja -C build-gpu mgpu-worker mgpu_gpu_tests mgpu-loader-bench > /tmp/ninja.log 2>&1 || { grep -A12 FAILED /tmp/ninja.log | head -60 >> $R; cat $R; exit 1; }
el "built"
COMMON="--dataset synthetic --synthetic-channels 3 --synthetic-test 256 --epochs 100000 --log-every 20
  --optimizer sgd --momentum 0.9 --lr 0.01 --progress lines --overwrite --precision amp-bf16 --channels-last true --cuda-graphs true
  --data-on-device true"
one() {  # MODEL TAG STEPS [extra]
  local m=$1 tag=$2 steps=$3; shift 3
  CUDA_VISIBLE_DEVICES=0 timeout 120 build-gpu/bin/mgpu-worker $COMMON --model $m --image-size 32 --device cuda \
    --synthetic-train $((256 * 600)) --batch-size 256 --max-steps $steps "$@" --out /tmp/v/$m-one-$tag > /tmp/v/$m-one-$tag.log 2>&1 \
    || tail -5 /tmp/v/$m-one-$tag.log >> $R
}
two() {  # MODEL TAG STEPS [extra]; env passes through
  local m=$1 tag=$2 steps=$3; shift 3; local port=$((29700 + RANDOM % 200))
  for r in 0 1; do
    RANK=$r LOCAL_RANK=$r WORLD_SIZE=2 LOCAL_WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=$port timeout 120 build-gpu/bin/mgpu-worker \
      $COMMON --model $m --image-size 32 --mode ddp --backend nccl --synthetic-train $((512 * 600)) --batch-size 512 \
      --max-steps $steps "$@" --out /tmp/v/$m-two-$tag > /tmp/v/$m-two-$tag-r$r.log 2>&1 &
  done
  wait; tail -3 /tmp/v/$m-two-$tag-r0.log | grep -iE "error|fail" >> $R
}
rate() { python3 -c "import sys; sys.path.insert(0, 'bench'); from gpu_bench import elapsed_throughput as e; print(round(e('/tmp/v/$1', 100, $2)))"; }
mkdir -p /tmp/v
one vgg19 a 580
for round in 1 2; do
  MGPU_AB_NOQUIET=1 two vgg19 first$round 580; two vgg19 quiet$round 580
  el "VGG-19 round $round: timed in the first step $(rate vgg19-two-first$round 512), without collectives $(rate vgg19-two-quiet$round 512)"
done
one resnet18 a 1500
for round in 1 2; do
  MGPU_AB_NOQUIET=1 two resnet18 first$round 1500; two resnet18 quiet$round 1500
  el "ResNet-18 round $round: timed in the first step $(rate resnet18-two-first$round 512), without collectives $(rate resnet18-two-quiet$round 512)"
done
el "one GPU: VGG-19 $(rate vgg19-one-a 256), ResNet-18 $(rate resnet18-one-a 256)"
timeout 150 build-gpu/bin/mgpu_gpu_tests --gtest_filter='CudaGraphs.*Ddp*:CudaDdp.*' > $OUT/gpu-tests-2gpu.log 2>&1
el "two-GPU tests rc $?: $(grep -E '^\[  (PASSED|FAILED) ' $OUT/gpu-tests-2gpu.log | tr '\n' ' ')"
grep -E "^\[  FAILED.*ms\)|^\[       OK" $OUT/gpu-tests-2gpu.log >> $R
cat $R
