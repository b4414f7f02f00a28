#!/bin/bash
# Session 11, call 5 (nvidia-h100-x1): bench/run_all.sh --only strongest at 27c82cd (LeNet with every fused kernel;
# ResNet-18, VGG-19, ResNet-50 as before), for docs/BENCHMARKS.md's table of the strongest step.
source .devdeps/activate.sh; for f in .devdeps/libutfcpp-dev*.deb; do dpkg -x $f /opt/deps; done
export NCCL_NVLS_ENABLE=0
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export LD_LIBRARY_PATH=/tmp/site/nvidia/cu13/lib:$LD_LIBRARY_PATH
R=$OUT/call5.txt; t0=$(date +%s)
el() { echo "[$(( $(date +%s) - t0 )) s] $*" | tee -a $R; }
nvidia-smi -L >> $R
cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DMGPU_PYTHON=$(command -v python3) \
  -DMGPU_TEST_PYTHON=$(command -v python3) -DMGPU_NVJPEG_INCLUDE_DIR=/tmp/site/nvidia/cu13/include -DMPI_CXX_COMPILER=$MPI_CXX_COMPILER > /tmp/cmake.log 2>&1 || { tail -30 /tmp/cmake.log >> $R; cat $R; exit 1; }
ninja -C build-gpu mgpu-worker mgpu-allreduce-bench > /tmp/ninja.log 2>&1 || { grep -A12 FAILED /tmp/ninja.log | head -60 >> $R; cat $R; exit 1; }
el "built"
MGPU_PYTHON=$(command -v python3) timeout 450 bash bench/run_all.sh --only strongest build-gpu /tmp/run > /tmp/run_all.log 2>&1
el "run_all --only strongest rc $?"
mkdir -p $OUT/strongest; cp /tmp/run/strongest/strongest-bench.json /tmp/run/strongest/driver.log /tmp/run/targets.md $OUT/strongest/ 2>/dev/null
grep -vE "^\s*$" /tmp/run_all.log | tail -40 >> $R
cat $R
