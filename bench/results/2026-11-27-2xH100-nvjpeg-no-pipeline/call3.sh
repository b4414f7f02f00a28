#!/bin/bash
# Session 20, call 3 (nvidia-h100-x2, warm after call 2: build-gpu and the JPEGs kept): the stale ResNet-18 e2e rows
# through bench/e2e_bench.py (host python3 as the bench Python): CPU decode at 16 workers per GPU on 1 and 2 GPUs
# against PyTorch; --decode gpu at 4 threads per GPU on 1 and 2 GPUs with nvJPEG's HW_DECODE_NO_PIPELINE flag
# (MGPU_AB_NVJPEG_FLAGS=1), then without it if time is left.
source .devdeps/activate.sh; for f in .devdeps/libutfcpp-dev*.deb; do dpkg -x $f /opt/deps; done
export NCCL_NVLS_ENABLE=0
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export LD_LIBRARY_PATH=/tmp/site/nvidia/cu13/lib:$LD_LIBRARY_PATH
R=$OUT/call3.txt; t0=$(date +%s)
el() { echo "[$(( $(date +%s) - t0 )) s] $*" | tee -a $R; }
E2E=$HOME/.cache/mgpu/bench-e2e/jpeg-40000
[ -d build-gpu ] && [ -d $E2E/train ] || { el "not warm: no build or JPEGs"; cat $R; exit 1; }
P="--build build-gpu --data-dir $E2E --models resnet18 --bench-python $(command -v python3)"
MGPU_AB_NVJPEG_FLAGS=1 timeout 200 python3 bench/e2e_bench.py $P --out $OUT/e2e-r18-gpu-N --worlds 1,2 --workers 4 \
  --e2e-flags "--decode gpu" --run-timeout 90 > $OUT/e2e-r18-gpu-N.log 2>&1
el "gpu decode N rc $?"
timeout 250 python3 bench/e2e_bench.py $P --out $OUT/e2e-r18-w16 --worlds 1,2 --workers 16 --run-timeout 90 > $OUT/e2e-r18-w16.log 2>&1
el "cpu decode rc $?"
[ $(( $(date +%s) - t0 )) -gt 400 ] && { el 'no time for A'; cat $R; exit 0; }
timeout $(( 580 - $(date +%s) + t0 )) python3 bench/e2e_bench.py $P --out $OUT/e2e-r18-gpu-A --worlds 1,2 --workers 4 \
  --e2e-flags "--decode gpu" --run-timeout 90 > $OUT/e2e-r18-gpu-A.log 2>&1
el "gpu decode A rc $?"
cat $R
