#!/bin/bash
# Session 9, call 1 (nvidia-h100-x2): build on the host; GPU tests; LeNet with AddChannelBias (HEAD)
# against LeNet adding the bias in cuDNN's convolution (B), PyTorch's TF32 NCHW anchors in the same call;
# topology for the 2-GPU decode question.
source .devdeps/activate.sh; for f in .devdeps/libutfcpp-dev*.deb; do dpkg -x $f /opt/deps; done
export NCCL_NVLS_ENABLE=0
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export LD_LIBRARY_PATH=/tmp/site/nvidia/cu13/lib:$LD_LIBRARY_PATH
R=$OUT/call1.txt; t0=$(date +%s)
el() { echo "[$(( $(date +%s) - t0 )) s] $*" | tee -a $R; }
nvidia-smi -L >> $R; nvidia-smi topo -m >> $R 2>&1; lscpu | grep -iE "numa|model name|^cpu\(s\)" >> $R
NVJ=/tmp/site/nvidia/cu13/include; ls $NVJ/nvjpeg.h >> $R
cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DMGPU_PYTHON=$(command -v python3) \
  -DMGPU_TEST_PYTHON=$(command -v python3) -DMGPU_NVJPEG_INCLUDE_DIR=$NVJ -DMPI_CXX_COMPILER=$MPI_CXX_COMPILER > /tmp/cmake.log 2>&1 || { tail -30 /tmp/cmake.log >> $R; cat $R; exit 1; }
T="mgpu mgpu-worker mgpu_gpu_tests mgpu-loader-bench mgpu-allreduce-bench mgpu_example_plugin"
# B: LeNet's bias inside the convolution (the commit before e598f9d)
cp models/lenet.cpp /tmp/lenet.orig && sed -i 's/  if (!x.is_cuda()) return conv(x);/  return conv(x);/' models/lenet.cpp
ninja -C build-gpu mgpu-worker > /tmp/ninja.log 2>&1 || { tail -30 /tmp/ninja.log >> $R; cat $R; exit 1; }
cp build-gpu/bin/mgpu-worker /tmp/worker-B; cp /tmp/lenet.orig models/lenet.cpp; touch models/lenet.cpp
ninja -C build-gpu $T > /tmp/ninja.log 2>&1 || { tail -30 /tmp/ninja.log >> $R; cat $R; exit 1; }
el "built"
ctest --test-dir build-gpu -L gpu --timeout 300 -j1 > /tmp/ctest.log 2>&1
el "ctest -L gpu rc $?"; grep -E "tests passed|Failed|\*\*\*|Not Run|Timeout" /tmp/ctest.log | tail -20 >> $R
cp /tmp/ctest.log $OUT/ctest-gpu.log
LENET="--model lenet --dataset synthetic --image-size 28 --synthetic-channels 1 --synthetic-train 684032 --synthetic-test 256 --batch-size 32 --epochs 100000 --log-every 100 --optimizer sgd --momentum 0.9 --lr 0.01 --progress lines --overwrite --device cuda --precision tf32 --channels-last false --cuda-graphs true --data-on-device true"
run() {  # BIN STEPS -> wall seconds
  local s=$(date +%s.%N); timeout 120 $1 $LENET --max-steps $2 --out /tmp/l-$2 > /tmp/l-$2.log 2>&1 || tail -3 /tmp/l-$2.log >> $R
  awk -v a=$(date +%s.%N) -v b=$s 'BEGIN{printf "%.3f", a - b}'
}
pair() {  # LABEL BIN
  local a=$(run $2 1300) b=$(run $2 21300)
  el "lenet $1: $a s / $b s -> $(awk -v a=$a -v b=$b 'BEGIN{printf "%.0f", 20000 / (b - a)}') steps/s"
}
run build-gpu/bin/mgpu-worker 400 > /dev/null
for v in A B B A A B; do [ $v = A ] && pair A-channel-bias build-gpu/bin/mgpu-worker || pair B-conv-bias /tmp/worker-B; done
timeout 240 python3 bench/strongest_reference.py --model lenet --batch 32 --steps 10000 --warmup 300 --compile none,default \
  --precision tf32 --layout nchw --optimizer-impl fused > /tmp/ref.txt 2>/tmp/ref.err; el "reference rc $?"
grep "^{" /tmp/ref.txt >> $R; tail -3 /tmp/ref.err >> $R
cat $R
