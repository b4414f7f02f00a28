#!/bin/bash
# Session 28, call 1 (nvidia-h200-x2): the build for run_all.sh (and the GPU tests), the e2e JPEG folder made
# detached beside it, the host's CPU topology, then the new --numa-binding GPU test.
source .devdeps/activate.sh; for f in .devdeps/libutfcpp-dev*.deb; do dpkg -x $f /opt/deps; done
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export LD_LIBRARY_PATH=/tmp/site/nvidia/cu13/lib:$LD_LIBRARY_PATH PYTHONPATH=/tmp/site
export MGPU_BENCH_PYTHON=$(command -v python3) MGPU_PYTHON=$(command -v python3) PYTHONUNBUFFERED=1
export -p | grep -v -E '^declare -x (OUT|PWD|OLDPWD|SHLVL|_)=' > /tmp/env.sh
R=$OUT/call1.txt; t0=$(date +%s)
el() { echo "[$(( $(date +%s) - t0 )) s] $*" | tee -a $R; }
nvidia-smi -L >> $R; nproc >> $R; git log --oneline -1 >> $R; git status --short | head >> $R
nvidia-smi --query-gpu=driver_version,clocks.max.sm,pci.bus_id --format=csv >> $R
find . -path ./build -prune -o -path ./build-gpu -prune -o \( -name '*.cpp' -o -name '*.h' -o -name '*.cu' \) -print | sort | xargs cat | md5sum >> $R
E2E=$HOME/.cache/mgpu/bench-e2e/jpeg-80000
[ -d $E2E/train ] || setsid nohup bash -c "python3 bench/make_jpeg_folder.py $E2E --images 80000 > /tmp/mk.txt 2>&1; echo MK_RC=\$? >> /tmp/mk.txt" > /dev/null 2>&1 < /dev/null &
{ echo "--- topology"; lscpu | grep -iE "numa|socket|core|thread|model name|L3"; ls /sys/devices/system/node/ 2>&1 | tr '\n' ' '; echo
  for g in $(nvidia-smi --query-gpu=pci.bus_id --format=csv,noheader); do b=$(echo ${g#0000} | tr A-Z a-z); b=0000${b#0000}; b=${b/00000000:/0000:}
    echo "$g numa_node: $(cat /sys/bus/pci/devices/$b/numa_node 2>&1) (sysfs $b)"; done
  ls /sys/bus/pci/devices 2>&1 | head -3; grep Cpus_allowed_list /proc/self/status; nvidia-smi topo -m 2>&1 | head -8; } >> $R
cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DMGPU_PYTHON=$(command -v python3) \
  -DMGPU_TEST_PYTHON=$(command -v python3) -DMGPU_NVJPEG_INCLUDE_DIR=/tmp/site/nvidia/cu13/include -DMPI_CXX_COMPILER=$MPI_CXX_COMPILER > /tmp/cmake.log 2>&1 || { tail -30 /tmp/cmake.log >> $R; cat $R; exit 1; }
ninja -C build-gpu mgpu-worker mgpu mgpu-allreduce-bench mgpu-loader-bench > /tmp/ninja.log 2>&1 || { grep -A12 FAILED /tmp/ninja.log | head -60 >> $R; cat $R; exit 1; }
el "built: $(ls build-gpu/bin | tr '\n' ' ')"
ninja -C build-gpu mgpu_gpu_tests > /tmp/ninja2.log 2>&1 || { grep -A12 FAILED /tmp/ninja2.log | head -40 >> $R; }
el "gpu tests built"
NCCL_NVLS_ENABLE=0 timeout 60 build-gpu/bin/mgpu_gpu_tests --gtest_filter='CudaTraining.NumaBinding*' > $OUT/call1-numa-test.log 2>&1
el "numa GPU test rc=$?: $(grep -E '^\[  (PASSED|FAILED) ' $OUT/call1-numa-test.log | tr '\n' ' ')"
el "jpegs so far: $(find $E2E/train -name '*.jpg' 2>/dev/null | wc -l); $(cat /tmp/mk.txt 2>/dev/null | tail -2)"
cat $R
