#!/bin/bash
# Session 30, call 2 (a fresh nvidia-h200: one H200, 16 cores; the two-GPU kind was withdrawn): run_all's
# gpu-decode and loader steps at HEAD, in the foreground (one call, no poll). The loader's target names the
# 16-core host; its row and issue 40's one-GPU rows were last measured before many loader changes.
t0=$(date +%s); R=$OUT/call2.txt
el() { echo "[$(( $(date +%s) - t0 )) s] $*" | tee -a $R; }
xz -dc .pack/pack.tar.xz | tar xf - --no-overwrite-dir -C / || { echo "unpack failed"; exit 1; }
gzip -1 /opt/deps/usr/share/datasets/fashion-mnist/*-ubyte
source .pack/activate.sh
export LD_LIBRARY_PATH=/tmp/site/nvidia/cu13/lib:$LD_LIBRARY_PATH PYTHONPATH=/tmp/site
export MGPU_BENCH_PYTHON=$(command -v python3) MGPU_PYTHON=$(command -v python3) PYTHONUNBUFFERED=1
el "unpacked; torchvision $(python3 -c 'import torchvision, PIL; print(torchvision.__version__, PIL.__version__)' 2>&1)"
nvidia-smi -L >> $R; nproc >> $R; lscpu | grep -E "Model name|^CPU\(s\)|NUMA node\(s\)" >> $R; git log --oneline -1 >> $R
find . -path ./build -prune -o -path ./build-gpu -prune -o \( -name '*.cpp' -o -name '*.h' -o -name '*.cu' \) -print | sort | xargs cat | md5sum >> $R
E2E=$HOME/.cache/mgpu/bench-e2e/jpeg-40000
setsid nohup bash -c "python3 bench/make_jpeg_folder.py $E2E --images 40000 > /tmp/mk.txt 2>&1; echo MK_RC=\$? >> /tmp/mk.txt" > /dev/null 2>&1 < /dev/null &
cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DMGPU_PYTHON=$(command -v python3) \
  -DMGPU_TEST_PYTHON=$(command -v python3) -DMGPU_NVJPEG_INCLUDE_DIR=/tmp/site/nvidia/cu13/include -DMPI_CXX_COMPILER=$MPI_CXX_COMPILER > /tmp/cmake.log 2>&1 || { tail -30 /tmp/cmake.log >> $R; cat $R; exit 1; }
ninja -C build-gpu mgpu-worker mgpu-loader-bench > /tmp/ninja.log 2>&1 || { grep -A12 FAILED /tmp/ninja.log | head -60 >> $R; cat $R; exit 1; }
el "built: $(ls build-gpu/bin | tr '\n' ' ')"
while ! grep -q MK_RC /tmp/mk.txt 2>/dev/null; do sleep 2; done
el "jpegs: $(tail -2 /tmp/mk.txt | tr '\n' ' ')"
timeout $(( 575 - ($(date +%s) - t0) )) bash bench/run_all.sh --only gpu-decode,loader build-gpu /tmp/ra > $OUT/run_all.log 2>&1
el "run_all rc=$?"
(cd /tmp && find ra -type f \( -name '*.json' -o -name '*.jsonl' -o -name '*.csv' -o -name '*.log' -o -name '*.md' -o -name '*.txt' \) -size -3M -print0 \
  | tar czf $OUT/ra.tgz --null -T - 2>/dev/null)
grep -E "^== " $OUT/run_all.log; tail -25 $OUT/run_all.log
cat $R
