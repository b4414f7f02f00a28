#!/bin/bash
# Call 5: the working tree (kBnVectorsInFlight = 8: call 4's s8-a8-g8) built whole: the GPU tests of the fused
# batch norm (bit for bit against the CPU's arithmetic, every instance, bf16 and float32) and of the graphed ResNet,
# then bench/strongest_bench.py for ResNet-18 and ResNet-50 (mgpu's best against PyTorch's compiled + graphed step).
# Meanwhile, on the GPU while the build runs: bn_bandwidth.cu with kBnVectorsInFlight 8 and 16 (16 is call 3's
# s8-a16-g16 for the gradient apply, whose gx hash differed), batch norm 1 of ResNet-18's gx dumped by both and compared.
t0=$(date +%s); R=$OUT/call5.txt
el() { echo "[$(( $(date +%s) - t0 )) s] $*" | tee -a $R; }
H=bench/results/2026-11-29-1xH200-bn-bandwidth
xz -dc .pack/pack.tar.xz | tar xf - --no-overwrite-dir -C / || { echo "unpack failed"; exit 1; }
dpkg -x .gpu/libutfcpp-dev_*.deb /opt/deps && gzip -1 /opt/deps/usr/share/datasets/fashion-mnist/*-ubyte
source .pack/activate.sh
export LD_LIBRARY_PATH=/tmp/site/nvidia/cu13/lib:$LD_LIBRARY_PATH PYTHONPATH=/tmp/site PYTHONUNBUFFERED=1
nvidia-smi -L >> $R; nproc >> $R
find . -path ./build-gpu -prune -o \( -name '*.cpp' -o -name '*.h' -o -name '*.cu' \) -print | sort | xargs cat | md5sum >> $R
( cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DMGPU_PYTHON=$(command -v python3) \
    -DMGPU_TEST_PYTHON=$(command -v python3) -DMGPU_NVJPEG_INCLUDE_DIR=/tmp/site/nvidia/cu13/include \
    -DMPI_CXX_COMPILER=$MPI_CXX_COMPILER > /tmp/cmake.log 2>&1 && \
  ninja -C build-gpu mgpu-worker mgpu_gpu_tests > /tmp/ninja.log 2>&1; echo "BUILD_RC=$?" >> /tmp/ninja.log ) &
build=$!
for v in 8 16; do
  mkdir -p /tmp/v/v$v/models && cp -r models/kernels /tmp/v/v$v/models/
  sed -i "s/^constexpr int kBnVectorsInFlight = .*/constexpr int kBnVectorsInFlight = $v;/" /tmp/v/v$v/models/kernels/batch_norm_math.h
  nvcc -std=c++17 -O3 -arch=sm_90 -I/tmp/v/v$v -I. -Xptxas -v $H/bn_bandwidth.cu /tmp/v/v$v/models/kernels/batch_norm_kernels.cu \
    -o /tmp/v/v$v/bnb > /tmp/v/v$v/nvcc.log 2>&1
  echo "v$v spills: $(grep spill /tmp/v/v$v/nvcc.log | sort | uniq -c | tr '\n' ';')" >> $R
  for m in resnet50 resnet18; do echo "v$v $(/tmp/v/v$v/bnb $m)" | tee -a $R; done
  BN_DUMP_GX=1 BN_DUMP_FILE=/tmp/gx-v$v.bin /tmp/v/v$v/bnb resnet18 > /dev/null
done
python3 - >> $R <<'PY'
import numpy as np
a = np.fromfile('/tmp/gx-v8.bin', dtype=np.uint16); b = np.fromfile('/tmp/gx-v16.bin', dtype=np.uint16)
f = lambda u: (u.astype(np.uint32) << 16).view(np.float32)
d = np.nonzero(a != b)[0]
print(f"gx of ResNet-18's batch norm 1 ({a.size} elements): {d.size} differ between v8 and v16")
if d.size:
    fa, fb = f(a[d]), f(b[d]); C = 64
    print("  first:", d[:8].tolist(), "rows", (d[:8] // C).tolist(), "channels", (d[:8] % C).tolist())
    print("  v8:", fa[:6].tolist(), " v16:", fb[:6].tolist())
    print("  max |diff|", float(np.max(np.abs(fa - fb))), " max |v8|", float(np.max(np.abs(f(a)))),
          " bf16 ulps apart (max)", int(np.max(np.abs(a[d].astype(np.int32) - b[d].astype(np.int32)))))
    rows = np.unique(d // C); print("  rows differing:", rows.size, "of", a.size // C, " first rows", rows[:12].tolist())
PY
el "bandwidth harness done"
wait $build
tail -1 /tmp/ninja.log >> $R
grep -q "BUILD_RC=0" /tmp/ninja.log || { tail -30 /tmp/cmake.log >> $R; grep -A12 FAILED /tmp/ninja.log | head -60 >> $R; cat $R; exit 1; }
el "built"
timeout 200 build-gpu/bin/mgpu_gpu_tests --gtest_filter='BatchNormActCuda.*:MaxPool*:CudaGraphs.AllSpeedOptionsTogetherOnAResNet:CudaGraphs.GraphedStepsTrainLikeEagerOnesInEveryPrecision' > /tmp/gpu-tests.txt 2>&1
echo "gpu tests rc=$?" >> $R; grep -E "^\[  (PASSED|FAILED)|^\[       OK|FAILED|Failure|apart" /tmp/gpu-tests.txt | head -40 >> $R
el "gpu tests"
mkdir -p $OUT/strongest
timeout $(( 590 - ($(date +%s) - t0) )) python3 bench/strongest_bench.py --build build-gpu --out /tmp/strongest \
  --models resnet18,resnet50 --compile-mode default --run-timeout 300 > /tmp/strongest.txt 2>&1
echo "strongest rc=$?" >> $R
cp /tmp/strongest/strongest-bench.json /tmp/strongest/driver.log $OUT/strongest/ 2>/dev/null
grep -E "^\| (resnet|model)" /tmp/strongest.txt /tmp/strongest/*.md 2>/dev/null | head -20 >> $R; tail -5 /tmp/strongest.txt >> $R
el "done"
cat $R
