#!/bin/bash
# Session 15, call 1 (nvidia-h100-x1): --data-on-device's gather in one kernel. GPU tests, ResNet-50's element-wise
# kernels per step, and bench/strongest_bench.py for ResNet-50 and ResNet-18.
source .devdeps/activate.sh; for f in .devdeps/libutfcpp-dev*.deb; do dpkg -x $f /opt/deps; done
export NCCL_NVLS_ENABLE=0
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export LD_LIBRARY_PATH=/tmp/site/nvidia/cu13/lib:$LD_LIBRARY_PATH
R=$OUT/call1.txt; t0=$(date +%s)
el() { echo "[$(( $(date +%s) - t0 )) s] $*" | tee -a $R; }
nvidia-smi -L >> $R; git log --oneline -1 >> $R 2>/dev/null; git status --short >> $R
cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DMGPU_PYTHON=$(command -v python3) \
  -DMGPU_TEST_PYTHON=$(command -v python3) -DMGPU_NVJPEG_INCLUDE_DIR=/tmp/site/nvidia/cu13/include -DMPI_CXX_COMPILER=$MPI_CXX_COMPILER > /tmp/cmake.log 2>&1 || { tail -30 /tmp/cmake.log >> $R; cat $R; exit 1; }
ninja -C build-gpu mgpu-worker mgpu_gpu_tests > /tmp/ninja.log 2>&1 || { grep -A12 FAILED /tmp/ninja.log | head -60 >> $R; cat $R; exit 1; }
el "built"
CUDA_VISIBLE_DEVICES=0 timeout 300 build-gpu/bin/mgpu_gpu_tests --gtest_filter='BatchGatherCuda.*:CudaGraphs.*:BatchNormActCuda.*:MaxPoolCuda.*' > $OUT/gpu-tests.log 2>&1
el "gpu tests rc $?: $(grep -E '^\[  (PASSED|FAILED|SKIPPED) ' $OUT/gpu-tests.log | tr '\n' ' ')"
grep -E "^\[  FAILED" $OUT/gpu-tests.log >> $R
mg() {  # TAG MODEL SIDE STEPS FROM TRAIN_BATCHES [extra]
  local tag=$1 m=$2 side=$3 steps=$4 from=$5 nb=$6; shift 6
  CUDA_VISIBLE_DEVICES=0 timeout 120 build-gpu/bin/mgpu-worker --model $m --dataset synthetic --image-size $side --synthetic-channels 3 --synthetic-train $((256*nb)) \
    --synthetic-test 256 --batch-size 256 --max-steps $steps --epochs 100000 --log-every 10 --optimizer sgd --momentum 0.9 --lr 0.01 \
    --progress lines --overwrite --device cuda --precision amp-bf16 --channels-last true --cuda-graphs true --data-on-device true \
    "$@" --out /tmp/m-$m-$tag > /tmp/m-$m-$tag.log 2>&1 || tail -5 /tmp/m-$m-$tag.log >> $R
}
mg prof resnet50 224 30 20 70 --profile-steps 20-24
python3 .gpu/kernels_per_step.py /tmp/m-resnet50-prof/trace-rank0.json 5 400 | grep -E "kernels/step|elementwise|index|gather|Gather|\[" >> $R 2>&1
mg prof resnet18 32 60 40 700 --profile-steps 40-44
python3 .gpu/kernels_per_step.py /tmp/m-resnet18-prof/trace-rank0.json 5 400 | grep -E "kernels/step|elementwise|index|gather|Gather|\[" >> $R 2>&1
el "profiles"
timeout 450 python3 bench/strongest_bench.py --build build-gpu --out /tmp/run/strongest --models resnet50,resnet18 \
  --compile-mode default --run-timeout 200 > /tmp/run_all.log 2>&1
el "strongest_bench rc $?"
mkdir -p $OUT/strongest; cp /tmp/run/strongest/strongest-bench.json $OUT/strongest/ 2>/dev/null; cp /tmp/run_all.log $OUT/strongest/driver.log
grep -vE "^\s*$" /tmp/run_all.log | tail -40 >> $R
cat $R
