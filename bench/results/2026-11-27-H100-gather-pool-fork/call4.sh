#!/bin/bash
# Session 15, call 4 (nvidia-h100-x2): CudaGraphs.ARankThatStopsReplayingFailsTheOtherAtTheCollectiveTimeout, which
# hung past 200 s in call 3 (17 s when it passed on 2026-11-27's max-pool call 2): once more, and rank 0's log if it hangs.
source .devdeps/activate.sh; for f in .devdeps/libutfcpp-dev*.deb; do dpkg -x $f /opt/deps; done
export NCCL_NVLS_ENABLE=0
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export LD_LIBRARY_PATH=/tmp/site/nvidia/cu13/lib:$LD_LIBRARY_PATH
R=$OUT/call4.txt; t0=$(date +%s)
el() { echo "[$(( $(date +%s) - t0 )) s] $*" | tee -a $R; }
cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DMGPU_PYTHON=$(command -v python3) \
  -DMGPU_TEST_PYTHON=$(command -v python3) -DMGPU_NVJPEG_INCLUDE_DIR=/tmp/site/nvidia/cu13/include -DMPI_CXX_COMPILER=$MPI_CXX_COMPILER > /tmp/cmake.log 2>&1 || { tail -30 /tmp/cmake.log >> $R; cat $R; exit 1; }
ninja -C build-gpu mgpu-worker mgpu_gpu_tests > /tmp/ninja.log 2>&1 || { grep -A12 FAILED /tmp/ninja.log | head -60 >> $R; cat $R; exit 1; }
el "built"
timeout -s KILL 45 build-gpu/bin/mgpu_gpu_tests --gtest_filter='CudaGraphs.ARank*' > $OUT/arank.log 2>&1
el "ARank rc $?"
tail -5 $OUT/arank.log >> $R
for d in $(find /tmp -maxdepth 3 -type d -name hang 2>/dev/null); do
  find $d -type f \( -name "*.log" -o -name "*.txt" \) | while read f; do echo "== $f" >> $R; tail -40 "$f" >> $R; done
done
ps aux | grep mgpu-worker | grep -v grep | cut -c1-200 >> $R
cat $R
