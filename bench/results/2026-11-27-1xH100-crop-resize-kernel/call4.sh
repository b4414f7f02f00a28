#!/bin/bash
# Session 19, call 4 (nvidia-h100-x1): main at 01f8c3f with .gpu/s19_format_ab.sh applied (uncommitted): nvJPEG's
# output as planar RGB (main), YUV or interleaved RGB, ResNet-18 e2e alternating; then a trace of main's --decode gpu
# ResNet-18 steps (every thread's CUDA calls and every kernel, nvJPEG's included).
source .devdeps/activate.sh; for f in .devdeps/libutfcpp-dev*.deb; do dpkg -x $f /opt/deps; done
export NCCL_NVLS_ENABLE=0
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export LD_LIBRARY_PATH=/tmp/site/nvidia/cu13/lib:$LD_LIBRARY_PATH
R=$OUT/call4.txt; t0=$(date +%s)
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
build N; el "built"
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
for rep in 1 2; do
  for F in rgb yuv rgbi; do
    MGPU_AB_NVJPEG_FORMAT=$F /usr/bin/time -f "cpu %U+%S s wall %e s" timeout 90 gpubin/N/mgpu-worker $COMMON $STREAM --num-workers 4 --max-steps 150 --out /tmp/ab/r18-$F-$rep > /tmp/ab-r18-$F-$rep.log 2> /tmp/ab-r18-$F-$rep.time
    echo "$F $(rate /tmp/ab/r18-$F-$rep 20) $(tail -1 /tmp/ab-r18-$F-$rep.time)" >> $R
  done
  el "round $rep"
done
timeout 120 gpubin/N/mgpu-worker $COMMON $STREAM --num-workers 4 --max-steps 70 --profile-steps 60-64 --out /tmp/ab/prof > /tmp/ab-prof.log 2>&1
el "trace rc $?"
ls /tmp/ab/prof >> $R
mkdir -p $OUT/traces; for t in /tmp/ab/prof/trace-rank*.json; do gzip -c $t > $OUT/traces/$(basename $t).gz; done
grep -h "rror" /tmp/ab-*.log | head -5 >> $R
el "end"
cat $R
