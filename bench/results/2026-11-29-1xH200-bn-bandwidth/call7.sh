#!/bin/bash
# Call 7: call 6's run_all again, with mgpu-loader-bench built (the gpu-decode step needs it: call 6's run_all
# refused to start without it, exit 2): bench/run_all.sh --only e2e,gpu-decode, the JPEG folder made during the build.
t0=$(date +%s); R=$OUT/call7.txt
el() { echo "[$(( $(date +%s) - t0 )) s] $*" | tee -a $R; }
H=bench/results/2026-11-29-1xH200-bn-bandwidth
xz -dc .pack/pack.tar.xz | tar xf - --no-overwrite-dir -C / || { echo "unpack failed"; exit 1; }
dpkg -x .gpu/libutfcpp-dev_*.deb /opt/deps && gzip -1 /opt/deps/usr/share/datasets/fashion-mnist/*-ubyte
source .pack/activate.sh
export LD_LIBRARY_PATH=/tmp/site/nvidia/cu13/lib:$LD_LIBRARY_PATH PYTHONPATH=/tmp/site PYTHONUNBUFFERED=1
export MGPU_BENCH_PYTHON=$(command -v python3) MGPU_PYTHON=$(command -v python3)
nvidia-smi -L >> $R; nproc >> $R
find . -path ./build-gpu -prune -o \( -name '*.cpp' -o -name '*.h' -o -name '*.cu' \) -print | sort | xargs cat | md5sum >> $R
E2E=$HOME/.cache/mgpu/bench-e2e/jpeg-40000
( python3 bench/make_jpeg_folder.py $E2E --images 40000 > /tmp/mk.txt 2>&1; echo "MK_RC=$?" >> /tmp/mk.txt ) &
mk=$!
( cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DMGPU_PYTHON=$(command -v python3) \
    -DMGPU_TEST_PYTHON=$(command -v python3) -DMGPU_NVJPEG_INCLUDE_DIR=/tmp/site/nvidia/cu13/include \
    -DMPI_CXX_COMPILER=$MPI_CXX_COMPILER > /tmp/cmake.log 2>&1 && \
  ninja -C build-gpu mgpu-worker mgpu-loader-bench > /tmp/ninja.log 2>&1; echo "BUILD_RC=$?" >> /tmp/ninja.log ) &
build=$!
wait $build; tail -1 /tmp/ninja.log >> $R
grep -q "BUILD_RC=0" /tmp/ninja.log || { tail -30 /tmp/cmake.log >> $R; grep -A12 FAILED /tmp/ninja.log | head -60 >> $R; cat $R; exit 1; }
wait $mk; tail -2 /tmp/mk.txt >> $R
el "built"
timeout $(( 575 - ($(date +%s) - t0) )) bash bench/run_all.sh --only e2e,gpu-decode build-gpu /tmp/ra > /tmp/run_all.log 2>&1
echo "run_all rc=$?" >> $R
mkdir -p /tmp/ra && cp /tmp/run_all.log /tmp/ra/; tar czf $OUT/ra.tar.gz -C /tmp ra 2>/dev/null
grep -E "^\| (39|4|10) " /tmp/ra/targets.md >> $R 2>/dev/null
el "done"
cat $R
