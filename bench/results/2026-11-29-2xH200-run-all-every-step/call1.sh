#!/bin/bash
# Session 33, call 1 (two H200, 32 cores): make bench-gpu's run_all, every step, in one invocation (issue 39's "done when"),
# started detached right after the build and polled here and by the next calls (.gpu/poll28.sh). The GPU tests
# are left for the last call, device time permitting: the whole run needs about 1,450 s of the 1,800.
t0=$(date +%s); R=$OUT/call1.txt
el() { echo "[$(( $(date +%s) - t0 )) s] $*" | tee -a $R; }
xz -dc .pack/pack.tar.xz | tar xf - --no-overwrite-dir -C / || { echo "unpack failed"; exit 1; }
dpkg -x .gpu/libutfcpp-dev_*.deb /opt/deps && gzip -1 /opt/deps/usr/share/datasets/fashion-mnist/*-ubyte
source .pack/activate.sh
export LD_LIBRARY_PATH=/tmp/site/nvidia/cu13/lib:$LD_LIBRARY_PATH PYTHONPATH=/tmp/site
export MGPU_BENCH_PYTHON=$(command -v python3) MGPU_PYTHON=$(command -v python3) PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0
el "unpacked: torchvision $(python3 -c 'import torchvision, PIL; print(torchvision.__version__, PIL.__version__)' 2>&1)"
nvidia-smi -L >> $R; nproc >> $R; lscpu | grep -E "Model name|^CPU\(s\)|NUMA node\(s\)|Thread\(s\) per core" >> $R; git log --oneline -1 >> $R; git status --short | head >> $R
find . -path ./build -prune -o -path ./build-gpu -prune -o \( -name '*.cpp' -o -name '*.h' -o -name '*.cu' \) -print | sort | xargs cat | md5sum >> $R
E2E=$HOME/.cache/mgpu/bench-e2e/jpeg-80000
setsid nohup bash -c "python3 bench/make_jpeg_folder.py $E2E --images 80000 > /tmp/mk.txt 2>&1; echo MK_RC=\$? >> /tmp/mk.txt" > /dev/null 2>&1 < /dev/null &
cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DMGPU_PYTHON=$(command -v python3) \
  -DMGPU_TEST_PYTHON=$(command -v python3) -DMGPU_NVJPEG_INCLUDE_DIR=/tmp/site/nvidia/cu13/include -DMPI_CXX_COMPILER=$MPI_CXX_COMPILER > /tmp/cmake.log 2>&1 || { tail -30 /tmp/cmake.log >> $R; cat $R; exit 1; }
ninja -C build-gpu mgpu-worker mgpu mgpu-allreduce-bench mgpu-loader-bench > /tmp/ninja.log 2>&1 || { grep -A12 FAILED /tmp/ninja.log | head -60 >> $R; cat $R; exit 1; }
el "built"
el "jpegs so far: $(find $E2E/train -name '*.jpg' 2>/dev/null | wc -l); $(cat /tmp/mk.txt 2>/dev/null | tail -2)"
cat > /tmp/ra.sh <<'SH'
while [ -f /tmp/mk.txt ] && ! grep -q MK_RC /tmp/mk.txt; do sleep 2; done
echo "jpegs: $(tail -2 /tmp/mk.txt | tr '\n' ' ') at $(date -u +%T)"
start=$(date +%s)
bash bench/run_all.sh build-gpu /tmp/ra
rc=$?
echo "RUN_ALL_RC=$rc after $(( $(date +%s) - start )) s at $(date -u +%T)"
echo "EXTRA_RC=0"
SH
export -p | grep -v -E '^declare -x (OUT|PWD|OLDPWD|SHLVL|_)=' > /tmp/env.sh
setsid nohup bash -c "source /tmp/env.sh; cd $PWD; bash /tmp/ra.sh" > /tmp/ra.log 2>&1 < /dev/null &
sleep 2
bash .gpu/poll28.sh $(( 585 - ($(date +%s) - t0) ))
cat $R
