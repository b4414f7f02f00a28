#!/bin/bash
# Session 26, call 1 (nvidia-h200-x2): the build for run_all.sh, the e2e JPEG folder made detached beside it.
source .devdeps/activate.sh; for f in .devdeps/libutfcpp-dev*.deb; do dpkg -x $f /opt/deps; done
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export LD_LIBRARY_PATH=/tmp/site/nvidia/cu13/lib:$LD_LIBRARY_PATH PYTHONPATH=/tmp/site
export MGPU_BENCH_PYTHON=$(command -v python3) MGPU_PYTHON=$(command -v python3) PYTHONUNBUFFERED=1
export -p | grep -v -E '^declare -x (OUT|PWD|OLDPWD|SHLVL|_)=' > /tmp/env.sh
R=$OUT/call1.txt; t0=$(date +%s)
el() { echo "[$(( $(date +%s) - t0 )) s] $*" | tee -a $R; }
nvidia-smi -L >> $R; nproc >> $R; git log --oneline -1 >> $R; git status --short | head >> $R
nvidia-smi --query-gpu=driver_version,clocks.max.sm --format=csv >> $R
find . -path ./build -prune -o -path ./build-gpu -prune -o \( -name '*.cpp' -o -name '*.h' -o -name '*.cu' \) -print | sort | xargs cat | md5sum >> $R
E2E=$HOME/.cache/mgpu/bench-e2e/jpeg-80000
[ -d $E2E/train ] || setsid nohup bash -c "python3 bench/make_jpeg_folder.py $E2E --images 80000 > /tmp/mk.txt 2>&1; echo MK_RC=\$? >> /tmp/mk.txt" > /dev/null 2>&1 < /dev/null &
cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DMGPU_PYTHON=$(command -v python3) \
  -DMGPU_TEST_PYTHON=$(command -v python3) -DMGPU_NVJPEG_INCLUDE_DIR=/tmp/site/nvidia/cu13/include -DMPI_CXX_COMPILER=$MPI_CXX_COMPILER > /tmp/cmake.log 2>&1 || { tail -30 /tmp/cmake.log >> $R; cat $R; exit 1; }
ninja -C build-gpu mgpu-worker mgpu mgpu-allreduce-bench mgpu-loader-bench > /tmp/ninja.log 2>&1 || { grep -A12 FAILED /tmp/ninja.log | head -60 >> $R; cat $R; exit 1; }
el "built: $(ls build-gpu/bin | tr '\n' ' ')"
el "jpegs so far: $(find $E2E/train -name '*.jpg' 2>/dev/null | wc -l); $(cat /tmp/mk.txt 2>/dev/null | tail -2)"
cat $R
