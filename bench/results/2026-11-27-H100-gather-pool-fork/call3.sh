#!/bin/bash
# Session 15, call 3 (nvidia-h100-x2): the two-GPU tests with this session's tree (and bb0e197's batch count in the
# finalize kernel, not yet run on two GPUs), then the one-GPU suites again on GPU 1.
source .devdeps/activate.sh; for f in .devdeps/libutfcpp-dev*.deb; do dpkg -x $f /opt/deps; done
export NCCL_NVLS_ENABLE=0
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export LD_LIBRARY_PATH=/tmp/site/nvidia/cu13/lib:$LD_LIBRARY_PATH
R=$OUT/call3.txt; t0=$(date +%s)
el() { echo "[$(( $(date +%s) - t0 )) s] $*" | tee -a $R; }
nvidia-smi -L >> $R; git log --oneline -1 >> $R 2>/dev/null
cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DMGPU_PYTHON=$(command -v python3) \
  -DMGPU_TEST_PYTHON=$(command -v python3) -DMGPU_NVJPEG_INCLUDE_DIR=/tmp/site/nvidia/cu13/include -DMPI_CXX_COMPILER=$MPI_CXX_COMPILER > /tmp/cmake.log 2>&1 || { tail -30 /tmp/cmake.log >> $R; cat $R; exit 1; }
ninja -C build-gpu mgpu-worker mgpu_gpu_tests > /tmp/ninja.log 2>&1 || { grep -A12 FAILED /tmp/ninja.log | head -60 >> $R; cat $R; exit 1; }
el "built"
timeout 330 build-gpu/bin/mgpu_gpu_tests --gtest_filter='CudaGraphs.*Ddp*:CudaGraphs.ARank*:CudaDdp.*:CudaDp.*' > $OUT/gpu-tests-2gpu.log 2>&1
el "two-GPU tests rc $?: $(grep -E '^\[  (PASSED|FAILED|SKIPPED) ' $OUT/gpu-tests-2gpu.log | tr '\n' ' ')"
grep -E "^\[  FAILED|^\[       OK" $OUT/gpu-tests-2gpu.log >> $R
CUDA_VISIBLE_DEVICES=1 timeout 150 build-gpu/bin/mgpu_gpu_tests --gtest_filter='BatchGatherCuda.*:GlobalAveragePoolCuda.*:MaxPoolCuda.*:BatchNormActCuda.*' > $OUT/gpu-tests-gpu1.log 2>&1
el "one-GPU kernel tests on GPU 1 rc $?: $(grep -E '^\[  (PASSED|FAILED|SKIPPED) ' $OUT/gpu-tests-gpu1.log | tr '\n' ' ')"
cat $R
