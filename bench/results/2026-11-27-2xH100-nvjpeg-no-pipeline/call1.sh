#!/bin/bash
# Session 20, call 1 (nvidia-h100-x2, GPU 0 only): branch nvjpeg-device-bitstreams (env switches, default = main):
# A main's path; N nvJPEG flag HW_DECODE_NO_PIPELINE (MGPU_AB_NVJPEG_FLAGS=1); D backend HARDWARE_DEVICE with each
# chunk's bitstreams packed into pinned memory and copied to the device at once (MGPU_AB_DEVICE_BITSTREAMS=1).
# GPU decode tests (A and D), decode only, ResNet-18 e2e alternating; eager and graphed (--cuda-graphs true) against
# synthetic. The build stays in build-gpu for call 2.
source .devdeps/activate.sh; for f in .devdeps/libutfcpp-dev*.deb; do dpkg -x $f /opt/deps; done
export NCCL_NVLS_ENABLE=0 CUDA_VISIBLE_DEVICES=0
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export LD_LIBRARY_PATH=/tmp/site/nvidia/cu13/lib:$LD_LIBRARY_PATH
R=$OUT/call1.txt; t0=$(date +%s)
el() { echo "[$(( $(date +%s) - t0 )) s] $*" | tee -a $R; }
nvidia-smi -L >> $R; nproc >> $R
mkdir -p /tmp/ab
E2E=$HOME/.cache/mgpu/bench-e2e/jpeg-40000
python3 bench/make_jpeg_folder.py $E2E --images 40000 > /tmp/mk.txt 2>&1 &
mk=$!
cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DMGPU_PYTHON=$(command -v python3) \
  -DMGPU_TEST_PYTHON=$(command -v python3) -DMGPU_NVJPEG_INCLUDE_DIR=/tmp/site/nvidia/cu13/include -DMPI_CXX_COMPILER=$MPI_CXX_COMPILER > /tmp/cmake.log 2>&1 || { tail -30 /tmp/cmake.log >> $R; cat $R; exit 1; }
ninja -C build-gpu mgpu-worker mgpu_gpu_tests mgpu-loader-bench > /tmp/ninja.log 2>&1 || { grep -A12 FAILED /tmp/ninja.log | head -60 >> $R; cat $R; exit 1; }
B=build-gpu/bin
el "built"
wait $mk; el "jpeg folder: $(tail -1 /tmp/mk.txt)"
COMMON="--model resnet18 --precision amp-bf16 --optimizer sgd --momentum 0.9 --lr 0.01 --epochs 1000 --progress lines --device cuda --channels-last true --batch-size 256 --log-every 10"
STREAM="--dataset imagefolder --data-dir $E2E --data-loading stream --augment rrc-flip --resize 224 --image-size 224 --decode gpu"
rate() { python3 - "$1" "$2" <<'PY'
import sys, json, os
sys.path.insert(0, "bench")
from gpu_bench import elapsed_throughput
out, warm = sys.argv[1], int(sys.argv[2])
r = elapsed_throughput(out, warm, 256)
s = json.load(open(os.path.join(out, "summary.json")))
g = s.get("gpu_decode", {})
a = g.get("cpu_assisted", 0); n = g.get("images", 0)
print(f"{os.path.basename(out)}: {r:.0f} img/s; assisted {a} of {a+n} ({100*a/max(a+n,1):.0f}%)" if r else f"{out}: no rate")
PY
}
envof() { case $1 in A) ;; N) echo MGPU_AB_NVJPEG_FLAGS=1;; D) echo MGPU_AB_DEVICE_BITSTREAMS=1;; esac; }
F='CropResize*:GpuDecode*:*GpuDecodeEachDecoder*:CudaGraphs.GraphedStepsTrainFromJpegs*'
timeout 100 $B/mgpu_gpu_tests --gtest_filter="$F" > $OUT/gpu-tests-A.log 2>&1
el "tests A rc $?: $(grep -cE '^\[       OK' $OUT/gpu-tests-A.log) ok, $(grep -cE '^\[  FAILED  \] [A-Z]' $OUT/gpu-tests-A.log) failed"
MGPU_AB_DEVICE_BITSTREAMS=1 timeout 60 $B/mgpu_gpu_tests --gtest_filter='GpuDecode*' > $OUT/gpu-tests-D.log 2>&1
el "tests D rc $?: $(grep -cE '^\[       OK' $OUT/gpu-tests-D.log) ok, $(grep -cE '^\[  FAILED  \] [A-Z]' $OUT/gpu-tests-D.log) failed"
grep -B2 -A20 -m3 "Failure" $OUT/gpu-tests-*.log | cut -c1-300 | head -50 >> $R
for rep in 1 2; do for V in A N D; do
  env $(envof $V) timeout 30 $B/mgpu-loader-bench --data-dir $E2E --decode gpu --num-workers 4 --max-images 20000 2>/tmp/lb-$V.err | python3 -c "import json,sys; d=json.loads(sys.stdin.read().strip().splitlines()[-1]); print('$V decode only', round(d['images_per_second']), 'assisted', d['cpu_assisted'])" >> $R 2>&1 || tail -3 /tmp/lb-$V.err >> $R
done; done
el "decode only done"
for rep in 1 2; do
  for V in A N D; do
    env $(envof $V) /usr/bin/time -f "cpu %U+%S s wall %e s" timeout 60 $B/mgpu-worker $COMMON $STREAM --num-workers 4 --max-steps 150 --out /tmp/ab/r18-$V-$rep > /tmp/ab-r18-$V-$rep.log 2> /tmp/ab-r18-$V-$rep.time
    echo "$V $(rate /tmp/ab/r18-$V-$rep 20) $(tail -1 /tmp/ab-r18-$V-$rep.time)" >> $R
  done
  el "round $rep"
done
for V in A D; do
  env $(envof $V) timeout 60 $B/mgpu-worker $COMMON $STREAM --cuda-graphs true --num-workers 4 --max-steps 150 --out /tmp/ab/g-r18-$V > /tmp/ab-g-r18-$V.log 2>&1
  echo "graphed $V $(rate /tmp/ab/g-r18-$V 20)" >> $R
done
timeout 60 $B/mgpu-worker $COMMON --dataset synthetic --image-size 224 --synthetic-train 60000 --synthetic-test 256 --num-workers 4 --max-steps 150 --out /tmp/ab/syn > /dev/null 2>&1
echo "synthetic eager $(rate /tmp/ab/syn 20)" >> $R
timeout 60 $B/mgpu-worker $COMMON --cuda-graphs true --dataset synthetic --image-size 224 --synthetic-train 60000 --synthetic-test 256 --num-workers 4 --max-steps 150 --out /tmp/ab/gsyn > /dev/null 2>&1
echo "synthetic graphed $(rate /tmp/ab/gsyn 20)" >> $R
grep -h "rror" /tmp/ab-*.log | head -5 >> $R
grep -h "decode\|nvJPEG" /tmp/ab-r18-D-1.log | head -3 >> $R
el "end"
cat $R
