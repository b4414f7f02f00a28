#!/bin/bash
# Session 19, call 1 (nvidia-h100-x2): branch ddp-overlapped-optimizer with .gpu/s18_ab_whole_step.sh applied
# (uncommitted): the optimizer stepped per bucket against once after every bucket (MGPU_AB_WHOLE_STEP=1), plus
# NCCL_CTA_POLICY=1 and --broadcast-buffers false on the per-bucket path; VGG-19 and ResNet-18 amp-bf16 graphed DDP with
# the data on the device, alternating, two rounds; the two-GPU tests; a VGG-19 DDP trace if time is left.
source .devdeps/activate.sh; for f in .devdeps/libutfcpp-dev*.deb; do dpkg -x $f /opt/deps; done
export NCCL_NVLS_ENABLE=0
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export LD_LIBRARY_PATH=/tmp/site/nvidia/cu13/lib:$LD_LIBRARY_PATH
R=$OUT/call1.txt; t0=$(date +%s)
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
for m in vgg19 resnet18; do
  steps=580; [ $m = resnet18 ] && steps=1500
  one $m a $steps
  for round in 1 2; do
    MGPU_AB_WHOLE_STEP=1 two $m whole$round $steps; two $m parts$round $steps
    NCCL_CTA_POLICY=1 two $m cta$round $steps; two $m nobuf$round $steps --broadcast-buffers false
    el "$m round $round: whole step $(rate $m-two-whole$round 512), per bucket $(rate $m-two-parts$round 512)," \
      "per bucket + NCCL_CTA_POLICY=1 $(rate $m-two-cta$round 512), per bucket + --broadcast-buffers false $(rate $m-two-nobuf$round 512)"
  done
  one $m b $steps
  el "$m one GPU: $(rate $m-one-a 256), $(rate $m-one-b 256)"
done
timeout 150 build-gpu/bin/mgpu_gpu_tests --gtest_filter='CudaGraphs.*Ddp*:CudaDdp.*' > $OUT/gpu-tests-2gpu.log 2>&1
el "two-GPU tests rc $?: $(grep -E '^\[  (PASSED|FAILED) ' $OUT/gpu-tests-2gpu.log | tr '\n' ' ')"
grep -E "^\[  FAILED.*ms\)|^\[       OK" $OUT/gpu-tests-2gpu.log >> $R
[ $(( $(date +%s) - t0 )) -gt 480 ] && { el 'no time for the trace'; cat $R; exit 0; }
one vgg19 prof 60 --profile-steps 40-44; two vgg19 prof 60 --profile-steps 40-44
python3 .gpu/ddp_compare.py /tmp/v/vgg19-one-prof/trace-rank0.json /tmp/v/vgg19-two-prof/trace-rank0.json 5 >> $R 2>&1
mkdir -p $OUT/traces; for t in one two; do gzip -c /tmp/v/vgg19-$t-prof/trace-rank0.json > $OUT/traces/$t-rank0.json.gz; done
cat $R
