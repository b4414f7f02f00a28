#!/bin/bash
# Call 5: is nvJPEG's hardware decode serialized per process? Decode only (mgpu-loader-bench --decode gpu, the
# JPEG engines, 4 threads, the CPU assist off), one process alone, then two and three at once on the same GPU.
t0=$(date +%s); R=$OUT/call5.txt
el() { echo "[$(( $(date +%s) - t0 )) s] $*" | tee -a $R; }
xz -dc .pack/pack.tar.xz | tar xf - --no-overwrite-dir -C / || { echo "unpack failed"; exit 1; }
dpkg -x .gpu/libutfcpp-dev_*.deb /opt/deps
source .pack/activate.sh
export LD_LIBRARY_PATH=/tmp/site/nvidia/cu13/lib:$LD_LIBRARY_PATH PYTHONPATH=/tmp/site PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0
nvidia-smi -L >> $R; nproc >> $R; git log --oneline -1 >> $R 2>&1
E2E=$HOME/.cache/mgpu/bench-e2e/jpeg-40000
( python3 bench/make_jpeg_folder.py $E2E --images 40000 > /tmp/mk.txt 2>&1; echo "MK_RC=$?" >> /tmp/mk.txt ) &
mk=$!
( cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DMGPU_PYTHON=$(command -v python3) \
    -DMGPU_TEST_PYTHON=$(command -v python3) -DMGPU_NVJPEG_INCLUDE_DIR=/tmp/site/nvidia/cu13/include \
    -DMPI_CXX_COMPILER=$MPI_CXX_COMPILER > /tmp/cmake.log 2>&1 && \
  ninja -C build-gpu mgpu-loader-bench > /tmp/ninja.log 2>&1; echo "BUILD_RC=$?" >> /tmp/ninja.log ) &
build=$!
wait $build; tail -1 /tmp/ninja.log >> $R
grep -q "BUILD_RC=0" /tmp/ninja.log || { tail -30 /tmp/cmake.log >> $R; grep -A12 FAILED /tmp/ninja.log | head -60 >> $R; cat $R; exit 1; }
el "built"; wait $mk; tail -2 /tmp/mk.txt >> $R; el "jpegs"
B=build-gpu/bin
# One decode-only process: its img/s (its own clock, over its batches) and its wall seconds.
bench() { # out seed
  local s=$(date +%s.%N)
  timeout 90 $B/mgpu-loader-bench --data-dir $E2E --decode gpu --num-workers 4 --cpu-assist false --seed $2 > $1 2>&1
  echo "wall $(python3 -c "print(round($(date +%s.%N) - $s, 2))")" >> $1; }
rates() { for f in "$@"; do python3 -c "
import json, sys
lines = open('$f').read().strip().splitlines()
d = json.loads([l for l in lines if l.startswith('{')][-1])
print(f\"{d['images_per_second']:.0f} img/s over {d['seconds']:.2f} s ({d['images']} images), {lines[-1]}\")" 2>&1 | tail -1; done; }
many() { # name count
  local pids=()
  for i in $(seq 1 $2); do bench /tmp/$1-$i.json $i & pids+=($!); done; wait "${pids[@]}"
  el "$1: $2 process(es) at once:"; rates $(for i in $(seq 1 $2); do echo /tmp/$1-$i.json; done) | tee -a $R; }
many warm 1
many one-a 1; many two-a 2; many three-a 3
many two-b 2; many one-b 1; many three-b 3
el "done"
cat $R
