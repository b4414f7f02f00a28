#!/bin/bash
# Session 26, call 4 (a fresh nvidia-h200-x2: call 3 found call 2's machine gone): issue 40's rows alone,
# bash bench/gpu_decode_bench.sh (decode only; ResNet-18 at 4 threads per GPU, ResNet-50 at 2, worlds 1 and 2).
source .devdeps/activate.sh; for f in .devdeps/libutfcpp-dev*.deb; do dpkg -x $f /opt/deps; done
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export LD_LIBRARY_PATH=/tmp/site/nvidia/cu13/lib:$LD_LIBRARY_PATH PYTHONPATH=/tmp/site
export MGPU_BENCH_PYTHON=$(command -v python3) PYTHONUNBUFFERED=1
R=$OUT/call4.txt; t0=$(date +%s)
el() { echo "[$(( $(date +%s) - t0 )) s] $*" | tee -a $R; }
nvidia-smi -L >> $R; nproc >> $R; git log --oneline -1 >> $R; git status --short | head >> $R
E2E=$HOME/.cache/mgpu/bench-e2e/jpeg-80000
python3 bench/make_jpeg_folder.py $E2E --images 80000 > /tmp/mk.txt 2>&1 &
cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DMGPU_PYTHON=$(command -v python3) \
  -DMGPU_TEST_PYTHON=$(command -v python3) -DMGPU_NVJPEG_INCLUDE_DIR=/tmp/site/nvidia/cu13/include -DMPI_CXX_COMPILER=$MPI_CXX_COMPILER > /tmp/cmake.log 2>&1 || { tail -30 /tmp/cmake.log >> $R; cat $R; exit 1; }
ninja -C build-gpu mgpu-worker mgpu-loader-bench mgpu-allreduce-bench > /tmp/ninja.log 2>&1 || { grep -A12 FAILED /tmp/ninja.log | head -60 >> $R; cat $R; exit 1; }
el "built"; wait; el "jpegs: $(tail -1 /tmp/mk.txt)"
copy() { for f in /tmp/gd/gpu-decode.jsonl /tmp/gd/gpu-decode.json /tmp/gd/e2e-resnet18-w4/e2e-bench.json /tmp/gd/e2e-resnet50-w2/e2e-bench.json; do
  [ -f $f ] && cp $f $OUT/$(basename $(dirname $f))-$(basename $f); done; }
( while sleep 20; do copy; done ) &
bash bench/gpu_decode_bench.sh build-gpu /tmp/gd python3 2>&1 | tee $OUT/gpu-decode.log | grep -E '^\{|\| (resnet|target)' 
el "gpu-decode done"; copy; kill %1 2>/dev/null
cat $R
