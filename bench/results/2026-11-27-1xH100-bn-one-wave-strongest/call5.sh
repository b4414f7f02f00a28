#!/bin/bash
# Session 14, call 5 (nvidia-h100-x1): bench/strongest_bench.py for the conv nets (run_all's strongest step without
# LeNet, whose row stands), with the batch norms' one-wave splits and the batch count in the finalize.
source .devdeps/activate.sh; for f in .devdeps/libutfcpp-dev*.deb; do dpkg -x $f /opt/deps; done
export NCCL_NVLS_ENABLE=0
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export LD_LIBRARY_PATH=/tmp/site/nvidia/cu13/lib:$LD_LIBRARY_PATH
R=$OUT/call5.txt; t0=$(date +%s)
el() { echo "[$(( $(date +%s) - t0 )) s] $*" | tee -a $R; }
nvidia-smi -L >> $R; git log --oneline -1 >> $R 2>/dev/null
cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DMGPU_PYTHON=$(command -v python3) \
  -DMGPU_TEST_PYTHON=$(command -v python3) -DMGPU_NVJPEG_INCLUDE_DIR=/tmp/site/nvidia/cu13/include -DMPI_CXX_COMPILER=$MPI_CXX_COMPILER > /tmp/cmake.log 2>&1 || { tail -30 /tmp/cmake.log >> $R; cat $R; exit 1; }
ninja -C build-gpu mgpu-worker > /tmp/ninja.log 2>&1 || { grep -A12 FAILED /tmp/ninja.log | head -60 >> $R; cat $R; exit 1; }
el "built"
timeout 440 python3 bench/strongest_bench.py --build build-gpu --out /tmp/run/strongest --models resnet18,vgg19,resnet50 \
  --compile-mode default --run-timeout 200 > /tmp/run_all.log 2>&1
el "strongest_bench rc $?"
mkdir -p $OUT/strongest; cp /tmp/run/strongest/strongest-bench.json $OUT/strongest/ 2>/dev/null; cp /tmp/run_all.log $OUT/strongest/driver.log
grep -vE "^\s*$" /tmp/run_all.log | tail -40 >> $R
cat $R
