#!/bin/bash
# Session 11, call 3 (nvidia-h100-x1): the parameter gradients in tiles (a block per 16 x 64 of a layer's
# weights and bias, from shared copies); new GPU tests; LeNet fused (A, conv stages + head) / ATen (B), twice; kernel
# profiles; Nsight Compute on the head kernels of one eager step; PyTorch anchors twice, between mgpu's runs.
source .devdeps/activate.sh; for f in .devdeps/libutfcpp-dev*.deb; do dpkg -x $f /opt/deps; done
export NCCL_NVLS_ENABLE=0
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export LD_LIBRARY_PATH=/tmp/site/nvidia/cu13/lib:$LD_LIBRARY_PATH
R=$OUT/call3.txt; t0=$(date +%s)
el() { echo "[$(( $(date +%s) - t0 )) s] $*" | tee -a $R; }
nvidia-smi -L >> $R; which nvcc >> $R; nvcc --version | tail -2 >> $R
cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DMGPU_PYTHON=$(command -v python3) \
  -DMGPU_TEST_PYTHON=$(command -v python3) -DMGPU_NVJPEG_INCLUDE_DIR=/tmp/site/nvidia/cu13/include -DMPI_CXX_COMPILER=$MPI_CXX_COMPILER > /tmp/cmake.log 2>&1 || { tail -30 /tmp/cmake.log >> $R; cat $R; exit 1; }
ninja -C build-gpu mgpu mgpu-worker mgpu_gpu_tests mgpu-loader-bench mgpu-allreduce-bench mgpu_example_plugin > /tmp/ninja.log 2>&1 || { grep -A12 FAILED /tmp/ninja.log | head -60 >> $R; cat $R; exit 1; }
el "built"
timeout 200 build-gpu/bin/mgpu_gpu_tests --gtest_filter='ConvReluPoolCuda.*:LinearReluChainCuda.*:LeNetFusedKernelsCuda.*' > /tmp/new.log 2>&1
el "new GPU tests rc $?"; grep -E "^\[  |Failure|Expected|Which is|actual|Actual|abs\(\)|max" /tmp/new.log | head -40 >> $R
LENET="--model lenet --dataset synthetic --image-size 28 --synthetic-channels 1 --synthetic-train 684032 --synthetic-test 256 --batch-size 32 --epochs 100000 --log-every 100 --optimizer sgd --momentum 0.9 --lr 0.01 --progress lines --overwrite --device cuda --precision tf32 --channels-last false --cuda-graphs true --data-on-device true"
run() {  # FUSED STEPS -> wall seconds
  local s=$(date +%s.%N); timeout 120 build-gpu/bin/mgpu-worker $LENET --fused-kernels $1 --max-steps $2 --out /tmp/l-$1-$2 > /tmp/l-$2.log 2>&1 || tail -3 /tmp/l-$2.log >> $R
  awk -v a=$(date +%s.%N) -v b=$s 'BEGIN{printf "%.3f", a - b}'
}
pair() {  # LABEL FUSED
  local a=$(run $2 1300) b=$(run $2 21300)
  el "lenet $1: $a s / $b s -> $(awk -v a=$a -v b=$b 'BEGIN{printf "%.0f", 20000 / (b - a)}') steps/s; metrics.csv: $(python3 - /tmp/l-$2-21300/metrics.csv <<'PY'
import csv, sys
rows = [r for r in csv.DictReader(open(sys.argv[1]))]
a = next(r for r in rows if int(r["step"]) >= 3000); b = rows[-1]
print(f"{(int(b['step']) - int(a['step'])) / (float(b['elapsed_seconds']) - float(a['elapsed_seconds'])):.0f} steps/s, final loss {b['loss'] if 'loss' in b else b.get('train_loss')}")
PY
)"
}
run true 400 > /dev/null
for v in A B B A A B; do [ $v = A ] && pair A-fused true || pair B-aten false; done
for f in true false; do
  build-gpu/bin/mgpu-worker $LENET --fused-kernels $f --max-steps 1200 --profile-steps 1000-1029 --out /tmp/prof-$f > /tmp/prof-$f.log 2>&1
  el "profile fused=$f rc $?"; python3 .gpu/kernels_per_step.py /tmp/prof-$f/trace-rank0.json 30 >> $R 2>&1
done
grep -A1 -i "fused kernels" /tmp/prof-true/logs/rank-0.log | head -2 >> $R
NCU=$(command -v ncu || ls /usr/local/cuda/bin/ncu 2>/dev/null || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
el "ncu: $NCU"
[ -n "$NCU" ] && timeout 150 $NCU -k regex:"^Chain" -c 6 --section SpeedOfLight --section LaunchStats --section Occupancy \
  --section WarpStateStats build-gpu/bin/mgpu-worker ${LENET/--cuda-graphs true/--cuda-graphs false} --max-steps 4 --out /tmp/ncu-run > $OUT/ncu.txt 2>&1
el "ncu rc $?"; grep -E "mgpu::kernels|Duration|Registers Per|Achieved Occupancy|Theoretical Occupancy|Block Limit|Stall|Warp Cycles Per Issued|Compute \(SM\) Throughput|Memory Throughput" $OUT/ncu.txt | head -80 >> $R
timeout 240 python3 bench/strongest_reference.py --model lenet --batch 32 --steps 10000 --warmup 300 --compile none,default \
  --precision tf32 --layout nchw --optimizer-impl fused > /tmp/ref.txt 2>/tmp/ref.err; el "reference rc $?"
grep "^{" /tmp/ref.txt >> $R; tail -3 /tmp/ref.err >> $R
for v in A B A; do [ $v = A ] && pair A-fused true || pair B-aten false; done
timeout 240 python3 bench/strongest_reference.py --model lenet --batch 32 --steps 10000 --warmup 300 --compile none,default \
  --precision tf32 --layout nchw --optimizer-impl fused > /tmp/ref.txt 2>/tmp/ref.err; el "reference (2) rc $?"
grep "^{" /tmp/ref.txt >> $R; tail -3 /tmp/ref.err >> $R

cp /tmp/new.log $OUT/new-tests.log; cat $R
