#!/bin/bash
# Session 19, call 2 (nvidia-h100-x1): --decode gpu's crop resize as one kernel per chunk (N, the working tree) against
# main's per-image ATen resizes (M: the tree with .gpu/s19_crop_resize.diff reverted), both built here. GPU tests of N;
# decode only and ResNet-18 / ResNet-50 end to end alternating; ResNet-18 synthetic.
source .devdeps/activate.sh; for f in .devdeps/libutfcpp-dev*.deb; do dpkg -x $f /opt/deps; done
export NCCL_NVLS_ENABLE=0
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export LD_LIBRARY_PATH=/tmp/site/nvidia/cu13/lib:$LD_LIBRARY_PATH
R=$OUT/call2.txt; t0=$(date +%s)
el() { echo "[$(( $(date +%s) - t0 )) s] $*" | tee -a $R; }
nvidia-smi -L >> $R; nproc >> $R
mkdir -p /tmp/ab
E2E=$HOME/.cache/mgpu/bench-e2e/jpeg-40000
python3 bench/make_jpeg_folder.py $E2E --images 40000 > /tmp/mk.txt 2>&1 &
mk=$!
build() {
  cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DMGPU_PYTHON=$(command -v python3) \
    -DMGPU_TEST_PYTHON=$(command -v python3) -DMGPU_NVJPEG_INCLUDE_DIR=/tmp/site/nvidia/cu13/include -DMPI_CXX_COMPILER=$MPI_CXX_COMPILER > /tmp/cmake.log 2>&1 || { tail -30 /tmp/cmake.log >> $R; cat $R; exit 1; }
  ninja -C build-gpu mgpu-worker mgpu_gpu_tests mgpu-loader-bench > /tmp/ninja.log 2>&1 || { grep -A12 FAILED /tmp/ninja.log | head -60 >> $R; cat $R; exit 1; }
  mkdir -p gpubin/$1; cp build-gpu/bin/{mgpu-worker,mgpu_gpu_tests,mgpu-loader-bench} gpubin/$1/
}
build N; el "built N"
git apply -R .gpu/s19_crop_resize.diff || { el "revert failed"; cat $R; exit 1; }
build M; el "built M"
git apply .gpu/s19_crop_resize.diff
timeout 150 gpubin/N/mgpu_gpu_tests --gtest_filter='CropResize*:GpuDecode*:*GpuDecodeEachDecoder*:CudaGraphs.GraphedStepsTrainFromJpegs*' > $OUT/gpu-tests.log 2>&1
el "tests rc $?: $(grep -cE '^\[       OK' $OUT/gpu-tests.log) ok, $(grep -cE '^\[  FAILED  \] [A-Z]' $OUT/gpu-tests.log) failed"
grep -E '^\[       OK|^\[  FAILED|^\[  SKIPPED' $OUT/gpu-tests.log >> $R; grep -B2 -A20 -m3 "Failure" $OUT/gpu-tests.log >> $R
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
for V in N M N M; do gpubin/$V/mgpu-loader-bench --data-dir $E2E --decode gpu --num-workers 4 --max-images 20000 | python3 -c "import json,sys; d=json.loads(sys.stdin.read().strip().splitlines()[-1]); print('$V decode only', round(d['images_per_second']), 'assisted', d['cpu_assisted'])" >> $R 2>&1; done
el "decode only done"
for rep in 1 2; do
  for V in N M; do
    /usr/bin/time -f "cpu %U+%S s wall %e s" timeout 90 gpubin/$V/mgpu-worker $COMMON $STREAM --num-workers 4 --max-steps 150 --out /tmp/ab/r18-$V-$rep > /tmp/ab-r18-$V-$rep.log 2> /tmp/ab-r18-$V-$rep.time
    echo "$(rate /tmp/ab/r18-$V-$rep 20) $(tail -1 /tmp/ab-r18-$V-$rep.time)" >> $R
  done
  timeout 90 gpubin/N/mgpu-worker $COMMON --dataset synthetic --image-size 224 --synthetic-train 60000 --synthetic-test 256 --num-workers 4 --max-steps 150 --out /tmp/ab/syn-$rep > /dev/null 2>&1
  echo "$(rate /tmp/ab/syn-$rep 20)" >> $R
  el "round $rep"
done
[ $(( $(date +%s) - t0 )) -gt 500 ] && { el 'no time for ResNet-50'; cat $R; exit 0; }
for V in N M; do
  /usr/bin/time -f "cpu %U+%S s wall %e s" timeout 60 gpubin/$V/mgpu-worker ${COMMON/resnet18/resnet50} $STREAM --num-workers 2 --max-steps 80 --out /tmp/ab/r50-$V > /tmp/ab-r50-$V.log 2> /tmp/ab-r50-$V.time
  echo "$(rate /tmp/ab/r50-$V 20) $(tail -1 /tmp/ab-r50-$V.time)" >> $R
done
grep -h "rror" /tmp/ab-*.log | head -5 >> $R
el "end"
cat $R
