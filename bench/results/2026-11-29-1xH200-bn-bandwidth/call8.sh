#!/bin/bash
# Call 8: a second H200 machine for call 5's strongest rows: cde24ec's mgpu-worker built, then
# bench/strongest_bench.py --models resnet18,resnet50 --compile-mode default, cut to the session's last device time.
t0=$(date +%s); R=$OUT/call8.txt
el() { echo "[$(( $(date +%s) - t0 )) s] $*" | tee -a $R; }
xz -dc .pack/pack.tar.xz | tar xf - --no-overwrite-dir -C / || { echo "unpack failed"; exit 1; }
dpkg -x .gpu/libutfcpp-dev_*.deb /opt/deps
source .pack/activate.sh
export LD_LIBRARY_PATH=/tmp/site/nvidia/cu13/lib:$LD_LIBRARY_PATH PYTHONPATH=/tmp/site PYTHONUNBUFFERED=1
nvidia-smi -L >> $R; nproc >> $R; git log --oneline -1 >> $R 2>/dev/null
cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DMGPU_PYTHON=$(command -v python3) \
  -DMGPU_TEST_PYTHON=$(command -v python3) -DMGPU_NVJPEG_INCLUDE_DIR=/tmp/site/nvidia/cu13/include \
  -DMPI_CXX_COMPILER=$MPI_CXX_COMPILER > /tmp/cmake.log 2>&1 || { tail -30 /tmp/cmake.log >> $R; cat $R; exit 1; }
ninja -C build-gpu mgpu-worker > /tmp/ninja.log 2>&1 || { grep -A12 FAILED /tmp/ninja.log | head -60 >> $R; cat $R; exit 1; }
el "built"
timeout $(( 315 - ($(date +%s) - t0) )) python3 bench/strongest_bench.py --build build-gpu --out /tmp/strongest \
  --models resnet18,resnet50 --compile-mode default --run-timeout 200 > /tmp/strongest.txt 2>&1
echo "strongest rc=$?" >> $R
grep -E "^\| (resnet|model)" /tmp/strongest.txt >> $R; grep '^{' /tmp/strongest.txt > $OUT/strongest-lines.json
el "done"
cat $R
