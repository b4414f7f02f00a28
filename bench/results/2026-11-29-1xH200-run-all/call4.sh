#!/bin/bash
# Session 31, call 4 (a fresh nvidia-h200: one H200, 16 cores): ResNet-18 --decode gpu end to end on one GPU at
# 4, 6, 8 and 12 loader threads, twice each in alternating order, against one synthetic run; the step graphed as
# in run_all's e2e step. In run_all (call 1-3) 4 threads read 94.1% and 12 threads 92.9%: which count is fastest on
# a 16-core host, and is it steady?
t0=$(date +%s); R=$OUT/call4.txt
el() { echo "[$(( $(date +%s) - t0 )) s] $*" | tee -a $R; }
xz -dc .pack/pack.tar.xz | tar xf - --no-overwrite-dir -C / || { echo "unpack failed"; exit 1; }
dpkg -x .gpu/libutfcpp-dev_*.deb /opt/deps
source .pack/activate.sh
export LD_LIBRARY_PATH=/tmp/site/nvidia/cu13/lib:$LD_LIBRARY_PATH PYTHONPATH=/tmp/site
export MGPU_BENCH_PYTHON=$(command -v python3) MGPU_PYTHON=$(command -v python3) PYTHONUNBUFFERED=1
el "unpacked"
nvidia-smi -L >> $R; lscpu | grep -E "Model name|^CPU\(s\)|NUMA node\(s\)|Thread\(s\) per core|Core\(s\) per socket|Socket" >> $R
find . -path ./build -prune -o -path ./build-gpu -prune -o \( -name '*.cpp' -o -name '*.h' -o -name '*.cu' \) -print | sort | xargs cat | md5sum >> $R
E2E=$HOME/.cache/mgpu/bench-e2e/jpeg-40000
setsid nohup bash -c "python3 bench/make_jpeg_folder.py $E2E --images 40000 > /tmp/mk.txt 2>&1; echo MK_RC=\$? >> /tmp/mk.txt" > /dev/null 2>&1 < /dev/null &
cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DMGPU_PYTHON=$(command -v python3) \
  -DMGPU_TEST_PYTHON=$(command -v python3) -DMGPU_NVJPEG_INCLUDE_DIR=/tmp/site/nvidia/cu13/include -DMPI_CXX_COMPILER=$MPI_CXX_COMPILER > /tmp/cmake.log 2>&1 || { tail -30 /tmp/cmake.log >> $R; cat $R; exit 1; }
ninja -C build-gpu mgpu-worker > /tmp/ninja.log 2>&1 || { grep -A12 FAILED /tmp/ninja.log | head -60 >> $R; cat $R; exit 1; }
el "built"
while ! grep -q MK_RC /tmp/mk.txt 2>/dev/null; do sleep 2; done
el "jpegs: $(tail -2 /tmp/mk.txt | tr '\n' ' ')"
export NCCL_NVLS_ENABLE=0
run() {  # run W TAG [--synthetic-from JSON]
  local w=$1 tag=$2; shift 2
  [ $(( $(date +%s) - t0 )) -lt 540 ] || { el "skipped W=$w ($tag): out of time"; return; }
  python3 bench/e2e_bench.py --build build-gpu --out /tmp/sw/$tag --models resnet18 --workers $w \
    --e2e-flags "--decode gpu" --mgpu-flags "--cuda-graphs true" --no-pytorch --run-timeout 120 "$@" > /tmp/sw/$tag.log 2>&1
  el "W=$w ($tag) rc=$?: $(grep -E 'target: e2e >= 95' /tmp/sw/$tag.log | tail -2 | tr '\n' ' ')"
}
mkdir -p /tmp/sw
run 4 w4a
S=/tmp/sw/w4a/e2e-bench.json
for tag in w12a w6a w8a w8b w6b w12b w4b; do run ${tag:1:-1} $tag --synthetic-from $S; done
(cd /tmp && find sw -type f \( -name '*.json' -o -name '*.csv' -o -name '*.log' \) -size -3M -print0 | tar czf $OUT/sw.tgz --null -T - 2>/dev/null)
cat $R
