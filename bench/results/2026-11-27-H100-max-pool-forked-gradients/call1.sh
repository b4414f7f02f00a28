#!/bin/bash
# Session 13, call 1: max-pool kernels: GPU tests; conv nets with them (in-run rates), profiles.
source .devdeps/activate.sh; for f in .devdeps/libutfcpp-dev*.deb; do dpkg -x $f /opt/deps; done
export NCCL_NVLS_ENABLE=0
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export LD_LIBRARY_PATH=/tmp/site/nvidia/cu13/lib:$LD_LIBRARY_PATH
R=$OUT/call1.txt; t0=$(date +%s)
el() { echo "[$(( $(date +%s) - t0 )) s] $*" | tee -a $R; }
nvidia-smi -L >> $R
cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DMGPU_PYTHON=$(command -v python3) \
  -DMGPU_TEST_PYTHON=$(command -v python3) -DMGPU_NVJPEG_INCLUDE_DIR=/tmp/site/nvidia/cu13/include -DMPI_CXX_COMPILER=$MPI_CXX_COMPILER > /tmp/cmake.log 2>&1 || { tail -30 /tmp/cmake.log >> $R; cat $R; exit 1; }
ninja -C build-gpu mgpu-worker mgpu_gpu_tests > /tmp/ninja.log 2>&1 || { grep -A12 FAILED /tmp/ninja.log | head -60 >> $R; cat $R; exit 1; }
el "built"
timeout 150 build-gpu/bin/mgpu_gpu_tests --gtest_filter='MaxPoolCuda.*:BatchNormActCuda.*:CudaGraphs.*:Amp*:CudaTraining*' > /tmp/new.log 2>&1
el "GPU tests rc $?"; grep -E "^\[  |Failure|Which is|actual|Actual|apart|evaluates" /tmp/new.log | head -60 >> $R
mg() {  # MODEL SIDE STEPS FROM FUSED [extra]
  local m=$1 side=$2 steps=$3 from=$4 f=$5; shift 5
  timeout 200 build-gpu/bin/mgpu-worker --model $m --dataset synthetic --image-size $side --synthetic-channels 3 --synthetic-train $((256*12)) \
    --synthetic-test 256 --batch-size 256 --max-steps $steps --epochs 100000 --log-every 10 --optimizer sgd --momentum 0.9 --lr 0.01 \
    --progress lines --overwrite --device cuda --precision amp-bf16 --channels-last true --cuda-graphs true --data-on-device true \
    --fused-kernels $f "$@" --out /tmp/m-$m-$f > /tmp/m-$m-$f.log 2>&1 || tail -5 /tmp/m-$m-$f.log >> $R
  el "mgpu $m fused=$f: $(python3 - /tmp/m-$m-$f/metrics.csv $from <<'PY'
import csv, sys
rows = [r for r in csv.DictReader(open(sys.argv[1])) if r.get("elapsed_seconds")]
a = next(r for r in rows if int(r["step"]) >= int(sys.argv[2])); b = rows[-1]
print(f"{256 * (int(b['step']) - int(a['step'])) / (float(b['elapsed_seconds']) - float(a['elapsed_seconds'])):.0f} img/s, loss {b.get('loss', b.get('train_loss'))}")
PY
)"
}
for f in true false true; do mg resnet18 32 700 200 $f; mg vgg19 32 700 200 $f; mg resnet50 224 90 30 $f; done
mg vgg19 32 60 40 true --profile-steps 40-49; python3 bench/results/2026-11-27-1xH100-fused-batch-norm/kernels_per_step.py /tmp/m-vgg19-true/trace-rank0.json 10 25 >> $R 2>&1
mg resnet50 224 30 20 true --profile-steps 20-24; python3 bench/results/2026-11-27-1xH100-fused-batch-norm/kernels_per_step.py /tmp/m-resnet50-true/trace-rank0.json 5 30 >> $R 2>&1
cp /tmp/new.log $OUT/gpu-tests.log; cat $R
