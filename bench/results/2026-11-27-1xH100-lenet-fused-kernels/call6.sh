#!/bin/bash
# Session 10, call 6 (nvidia-h100-x2): the 2-GPU tests with LeNet's fused kernels (DDP over NCCL eager and
# graphed, DataParallel replicas), main at the fused-kernel commit.
source .devdeps/activate.sh; for f in .devdeps/libutfcpp-dev*.deb; do dpkg -x $f /opt/deps; done
export NCCL_NVLS_ENABLE=0
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export LD_LIBRARY_PATH=/tmp/site/nvidia/cu13/lib:$LD_LIBRARY_PATH
R=$OUT/call6.txt; t0=$(date +%s)
el() { echo "[$(( $(date +%s) - t0 )) s] $*" | tee -a $R; }
nvidia-smi -L >> $R
cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DMGPU_PYTHON=$(command -v python3) \
  -DMGPU_TEST_PYTHON=$(command -v python3) -DMGPU_NVJPEG_INCLUDE_DIR=/tmp/site/nvidia/cu13/include -DMPI_CXX_COMPILER=$MPI_CXX_COMPILER > /tmp/cmake.log 2>&1 || { tail -30 /tmp/cmake.log >> $R; cat $R; exit 1; }
ninja -C build-gpu mgpu-worker mgpu_gpu_tests > /tmp/ninja.log 2>&1 || { grep -A12 FAILED /tmp/ninja.log | head -60 >> $R; cat $R; exit 1; }
el "built"
ctest --test-dir build-gpu -R "CudaDdp.NcclOnTwo|GraphedDdpSteps|CudaDp.NcclReplicas|CudaDp.CudaGraphsPerReplica" --timeout 120 -j1 > /tmp/ctest.log 2>&1
el "ctest rc $?"; grep -E "Test +#|tests passed|Failed" /tmp/ctest.log | sed "s|$PWD/||" >> $R
cat $R
