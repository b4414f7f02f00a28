#!/bin/bash
# Call 6: the working tree of call 5 built whole, then bench/run_all.sh --only e2e,gpu-decode (the JPEG folder made
# during the build): the end-to-end rows with the faster batch norms. Meanwhile, on the GPU while the build runs:
# call 5's wrong gx at kBnVectorsInFlight 16 again, and with one block an SM (__launch_bounds__(256, 1): no register
# spills), to tell spilled code from the source: ResNet-18's batch norm 1 gx against kBnVectorsInFlight 8's.
t0=$(date +%s); R=$OUT/call6.txt
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
  ninja -C build-gpu mgpu-worker mgpu > /tmp/ninja.log 2>&1; echo "BUILD_RC=$?" >> /tmp/ninja.log ) &
build=$!
variant() {  # variant NAME VECTORS BLOCKS_PER_SM
  mkdir -p /tmp/v/$1/models && cp -r models/kernels /tmp/v/$1/models/
  sed -i "s/^constexpr int kBnVectorsInFlight = .*/constexpr int kBnVectorsInFlight = $2;/" /tmp/v/$1/models/kernels/batch_norm_math.h
  sed -i "s/^constexpr int kBnBlocksPerSm = .*/constexpr int kBnBlocksPerSm = $3;/" /tmp/v/$1/models/kernels/batch_norm_kernels.cu
  nvcc -std=c++17 -O3 -arch=sm_90 -I/tmp/v/$1 -I. -Xptxas -v $H/bn_bandwidth.cu /tmp/v/$1/models/kernels/batch_norm_kernels.cu \
    -o /tmp/v/$1/bnb > /tmp/v/$1/nvcc.log 2>&1
  echo "$1 spills: $(grep spill /tmp/v/$1/nvcc.log | sort | uniq -c | sed 's/ bytes stack frame//; s/ bytes spill stores/ st/; s/ bytes spill loads/ ld/' | tr -s ' ' | tr '\n' ';')" >> $R
  echo "$1 $(/tmp/v/$1/bnb resnet18)" >> $R
  BN_DUMP_GX=1 BN_DUMP_FILE=/tmp/gx-$1.bin /tmp/v/$1/bnb resnet18 > /dev/null
}
variant v8 8 2; variant v16 16 2; variant v16-one-block 16 1
python3 - >> $R <<'PY'
import numpy as np
a = np.fromfile('/tmp/gx-v8.bin', dtype=np.uint16)
for name in ('v16', 'v16-one-block'):
    b = np.fromfile(f'/tmp/gx-{name}.bin', dtype=np.uint16)
    d = np.nonzero(a != b)[0]; rows = np.unique(d // 64)
    print(f"{name}: {d.size} of {a.size} gx elements differ from v8's, in {rows.size} rows; first rows {rows[:10].tolist()}")
PY
el "bandwidth harness done"
wait $build; tail -1 /tmp/ninja.log >> $R
grep -q "BUILD_RC=0" /tmp/ninja.log || { tail -30 /tmp/cmake.log >> $R; grep -A12 FAILED /tmp/ninja.log | head -60 >> $R; cat $R; exit 1; }
wait $mk; tail -2 /tmp/mk.txt >> $R
el "built"
timeout $(( 575 - ($(date +%s) - t0) )) bash bench/run_all.sh --only e2e,gpu-decode build-gpu /tmp/ra > /tmp/run_all.log 2>&1
echo "run_all rc=$?" >> $R
cp /tmp/run_all.log /tmp/ra/ 2>/dev/null; tar czf $OUT/ra.tar.gz -C /tmp ra 2>/dev/null
grep -E "^\| (39|4|10) " /tmp/ra/targets.md >> $R 2>/dev/null
el "done"
cat $R
