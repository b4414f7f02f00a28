#!/bin/bash
# Session 16, call 3 (nvidia-h100-x2): LaunchWatched bounds the graph replays in flight (3), collectives read on the host
# are polled (WaitForHost); the weight shadows merged. The two-GPU tests (ARank three times), an A/B of the bound on
# graphed DDP throughput (uncommitted MGPU_AB_REPLAYS override: 3 against 100000), and the one-GPU graph and amp tests.
source .devdeps/activate.sh; for f in .devdeps/libutfcpp-dev*.deb; do dpkg -x $f /opt/deps; done
export NCCL_NVLS_ENABLE=0
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export LD_LIBRARY_PATH=/tmp/site/nvidia/cu13/lib:$LD_LIBRARY_PATH
R=$OUT/call3.txt; t0=$(date +%s)
el() { echo "[$(( $(date +%s) - t0 )) s] $*" | tee -a $R; }
nvidia-smi -L >> $R
cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DMGPU_PYTHON=$(command -v python3) \
  -DMGPU_TEST_PYTHON=$(command -v python3) -DMGPU_NVJPEG_INCLUDE_DIR=/tmp/site/nvidia/cu13/include -DMPI_CXX_COMPILER=$MPI_CXX_COMPILER > /tmp/cmake.log 2>&1 || { tail -30 /tmp/cmake.log >> $R; cat $R; exit 1; }
ninja -C build-gpu mgpu-worker mgpu_gpu_tests > /tmp/ninja.log 2>&1 || { grep -A12 FAILED /tmp/ninja.log | head -60 >> $R; cat $R; exit 1; }
el "built"
timeout 200 build-gpu/bin/mgpu_gpu_tests --gtest_filter='CudaGraphs.ARank*' --gtest_repeat=3 > $OUT/gpu-tests-arank.log 2>&1
el "ARank x3 rc $?: $(grep -cE '^\[       OK' $OUT/gpu-tests-arank.log) ok, $(grep -cE '^\[  FAILED  \] CudaGraphs.*ms\)' $OUT/gpu-tests-arank.log) failed"
grep -E "^\[       OK|^\[  FAILED.*ms\)" $OUT/gpu-tests-arank.log >> $R
timeout 300 build-gpu/bin/mgpu_gpu_tests --gtest_filter='CudaGraphs.*Ddp*:CudaDdp.*:CudaDp.*' > $OUT/gpu-tests-2gpu.log 2>&1
el "two-GPU tests rc $?: $(grep -E '^\[  (PASSED|FAILED) ' $OUT/gpu-tests-2gpu.log | tr '\n' ' ')"
grep -E "^\[  FAILED.*ms\)|^\[       OK" $OUT/gpu-tests-2gpu.log >> $R
ddp() {  # TAG BOUND MODEL SIDE CHANNELS BATCH STEPS [extra]
  local tag=$1 bound=$2 m=$3 side=$4 ch=$5 b=$6 steps=$7; shift 7; local port=$((29600 + RANDOM % 300))
  for r in 0 1; do
    MGPU_AB_REPLAYS=$bound RANK=$r LOCAL_RANK=$r WORLD_SIZE=2 LOCAL_WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=$port timeout 150 \
      build-gpu/bin/mgpu-worker --mode ddp --backend nccl --model $m --dataset synthetic --image-size $side --synthetic-channels $ch \
      --synthetic-train $((b * 400)) --synthetic-test 256 --batch-size $b --max-steps $steps --epochs 100000 --log-every 20 \
      --optimizer sgd --momentum 0.9 --lr 0.01 --progress lines --cuda-graphs true --data-on-device true "$@" --out /tmp/ab/$m-$tag \
      --overwrite > /tmp/ab/$m-$tag-r$r.log 2>&1 &
  done
  wait
}
rate() { python3 -c "import sys; sys.path.insert(0, 'bench'); from gpu_bench import elapsed_throughput as e; print(round(e('/tmp/ab/$1', $2, $3)))"; }
mkdir -p /tmp/ab
for round in 1 2; do
  for bound in 3 100000; do
    ddp b$bound-$round $bound lenet 28 1 64 6000 --precision fp32
    ddp b$bound-$round $bound resnet18 32 3 512 1500 --precision amp-bf16 --channels-last true
    el "round $round bound $bound: lenet bs64 $(rate lenet-b$bound-$round 1000 64) img/s, resnet18 bs512 $(rate resnet18-b$bound-$round 100 512) img/s"
  done
done
CUDA_VISIBLE_DEVICES=0 timeout 200 build-gpu/bin/mgpu_gpu_tests --gtest_filter='CudaGraphs.*:AmpCuda.*' > $OUT/gpu-tests-graphs-amp.log 2>&1
el "one-GPU CudaGraphs, AmpCuda rc $?: $(grep -E '^\[  (PASSED|FAILED) ' $OUT/gpu-tests-graphs-amp.log | tr '\n' ' ')"
grep -E "^\[  FAILED.*ms\)" $OUT/gpu-tests-graphs-amp.log >> $R
cat $R
