#!/bin/bash
# Session 11, call 4 (nvidia-h100-x2): the whole GPU suite on two GPUs with the fused head (the 2-GPU tests
# train LeNet in float32 over DDP and DataParallel, eager and graphed, and channels-last DDP).
source .devdeps/activate.sh; for f in .devdeps/libutfcpp-dev*.deb; do dpkg -x $f /opt/deps; done
export NCCL_NVLS_ENABLE=0
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export LD_LIBRARY_PATH=/tmp/site/nvidia/cu13/lib:$LD_LIBRARY_PATH
R=$OUT/call4.txt; t0=$(date +%s)
el() { echo "[$(( $(date +%s) - t0 )) s] $*" | tee -a $R; }
nvidia-smi -L >> $R
cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DMGPU_PYTHON=$(command -v python3) \
  -DMGPU_TEST_PYTHON=$(command -v python3) -DMGPU_NVJPEG_INCLUDE_DIR=/tmp/site/nvidia/cu13/include -DMPI_CXX_COMPILER=$MPI_CXX_COMPILER > /tmp/cmake.log 2>&1 || { tail -30 /tmp/cmake.log >> $R; cat $R; exit 1; }
ninja -C build-gpu mgpu mgpu-worker mgpu_gpu_tests mgpu-loader-bench mgpu-allreduce-bench mgpu_example_plugin > /tmp/ninja.log 2>&1 || { grep -A12 FAILED /tmp/ninja.log | head -60 >> $R; cat $R; exit 1; }
el "built"
ctest --test-dir build-gpu -L gpu --timeout 300 -j1 > /tmp/ctest.log 2>&1
el "ctest -L gpu rc $?"; grep -E "Test +#|tests passed|Failed|Not Run|Timeout" /tmp/ctest.log | sed "s|$PWD/||" >> $R
cp /tmp/ctest.log $OUT/ctest-gpu.log
cat $R
