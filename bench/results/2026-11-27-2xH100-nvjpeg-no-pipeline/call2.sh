#!/bin/bash
# Session 20, call 2 (nvidia-h100-x2; builds and makes the JPEGs where the machine is fresh): A (main's path) against N (nvJPEG's
# HW_DECODE_NO_PIPELINE flag, MGPU_AB_NVJPEG_FLAGS=1), N first in each round, on GPU 0; ResNet-50 once each; then
# the stale ResNet-18 e2e rows through bench/e2e_bench.py: CPU decode at 16 workers per GPU on 1 and 2 GPUs
# against PyTorch, and --decode gpu (main's path) on 1 and 2 GPUs.
source .devdeps/activate.sh; for f in .devdeps/libutfcpp-dev*.deb; do dpkg -x $f /opt/deps; done
export NCCL_NVLS_ENABLE=0
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export LD_LIBRARY_PATH=/tmp/site/nvidia/cu13/lib:$LD_LIBRARY_PATH
R=$OUT/call2.txt; t0=$(date +%s)
el() { echo "[$(( $(date +%s) - t0 )) s] $*" | tee -a $R; }
E2E=$HOME/.cache/mgpu/bench-e2e/jpeg-40000
[ -d $E2E/train ] || { python3 bench/make_jpeg_folder.py $E2E --images 40000 > /tmp/mk.txt 2>&1 & }
[ -d build-gpu ] || cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DMGPU_PYTHON=$(command -v python3) \
  -DMGPU_TEST_PYTHON=$(command -v python3) -DMGPU_NVJPEG_INCLUDE_DIR=/tmp/site/nvidia/cu13/include -DMPI_CXX_COMPILER=$MPI_CXX_COMPILER > /tmp/cmake.log 2>&1
ninja -C build-gpu mgpu-worker mgpu-loader-bench > /tmp/ninja.log 2>&1 || { tail -20 /tmp/ninja.log >> $R; cat $R; exit 1; }
wait; el "built, jpegs there"
B=build-gpu/bin; mkdir -p /tmp/ab2
ls $E2E/train | wc -l >> $R
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
envof() { case $1 in A) ;; N) echo MGPU_AB_NVJPEG_FLAGS=1;; esac; }
for rep in 1 2; do
  for V in N A; do
    env CUDA_VISIBLE_DEVICES=0 $(envof $V) timeout 60 $B/mgpu-worker $COMMON $STREAM --num-workers 4 --max-steps 150 --out /tmp/ab2/r18-$V-$rep > /tmp/ab2-r18-$V-$rep.log 2>&1
    echo "$V $(rate /tmp/ab2/r18-$V-$rep 20)" >> $R
  done
done
for V in N A; do
  env CUDA_VISIBLE_DEVICES=0 $(envof $V) timeout 60 $B/mgpu-worker ${COMMON/resnet18/resnet50} $STREAM --num-workers 2 --max-steps 80 --out /tmp/ab2/r50-$V > /tmp/ab2-r50-$V.log 2>&1
  echo "$V $(rate /tmp/ab2/r50-$V 20)" >> $R
done
el "A/N done"
python3 bench/e2e_bench.py --build build-gpu --out $OUT/e2e-r18-w16 --data-dir $E2E --models resnet18 --worlds 1,2 --workers 16 \
  --run-timeout 120 > $OUT/e2e-r18-w16.log 2>&1
el "cpu decode rc $?"
[ $(( $(date +%s) - t0 )) -gt 470 ] && { el 'no time for --decode gpu'; cat $R; exit 0; }
python3 bench/e2e_bench.py --build build-gpu --out $OUT/e2e-r18-gpu --data-dir $E2E --models resnet18 --worlds 2 --workers 4 \
  --e2e-flags "--decode gpu" --run-timeout 100 > $OUT/e2e-r18-gpu.log 2>&1
el "gpu decode rc $?"
cat $R
