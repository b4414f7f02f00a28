#!/bin/bash
# Session 13, call 3: conv nets with the max-pool kernels and forked block outputs (in-run rates) beside
# PyTorch's compiled + graphed step, same machine; profiles.
source .devdeps/activate.sh; for f in .devdeps/libutfcpp-dev*.deb; do dpkg -x $f /opt/deps; done
export NCCL_NVLS_ENABLE=0 CUDA_VISIBLE_DEVICES=0
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export LD_LIBRARY_PATH=/tmp/site/nvidia/cu13/lib:$LD_LIBRARY_PATH
R=$OUT/call3.txt; t0=$(date +%s)
el() { echo "[$(( $(date +%s) - t0 )) s] $*" | tee -a $R; }
nvidia-smi -L >> $R
cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DMGPU_PYTHON=$(command -v python3) \
  -DMGPU_TEST_PYTHON=$(command -v python3) -DMGPU_NVJPEG_INCLUDE_DIR=/tmp/site/nvidia/cu13/include -DMPI_CXX_COMPILER=$MPI_CXX_COMPILER > /tmp/cmake.log 2>&1 || { tail -30 /tmp/cmake.log >> $R; cat $R; exit 1; }
ninja -C build-gpu mgpu-worker mgpu_gpu_tests > /tmp/ninja.log 2>&1 || { grep -A12 FAILED /tmp/ninja.log | head -60 >> $R; cat $R; exit 1; }
el "built"
unset CUDA_VISIBLE_DEVICES
timeout 60 build-gpu/bin/mgpu_gpu_tests --gtest_filter='BatchNormActCuda.ResNet*' > /tmp/t1.log 2>&1; el "ResNet tests rc $?"
grep -E "^\[  |Failure|evaluates|step [0-9]|apart" /tmp/t1.log >> $R
for i in 1 2 3; do
  timeout 60 build-gpu/bin/mgpu_gpu_tests --gtest_filter='CudaGraphs.GraphedDdpStepsTrainLikeEagerDdpSteps' > /tmp/t2.log 2>&1; el "graphed DDP test rc $?"
  grep -E "^\[  |Failure|evaluates" /tmp/t2.log >> $R
done
# The same test with ATen's kernels (the worker's --fused-kernels false), for the spread of its accuracies.
sed -i 's/"--gradient-as-bucket-view", "false"}, 10.0}/"--gradient-as-bucket-view", "false", "--fused-kernels", "false"}, 10.0}/' tests/gpu/cuda_graphs_test.cpp
grep -c '"--fused-kernels", "false"}, 10.0}' tests/gpu/cuda_graphs_test.cpp >> $R
ninja -C build-gpu mgpu_gpu_tests > /tmp/ninja2.log 2>&1; el "rebuilt with ATen's kernels in the DDP test"
for i in 1 2; do
  timeout 60 build-gpu/bin/mgpu_gpu_tests --gtest_filter='CudaGraphs.GraphedDdpStepsTrainLikeEagerDdpSteps' > /tmp/t2.log 2>&1; el "graphed DDP test (ATen) rc $?"
  grep -E "^\[  |Failure|evaluates" /tmp/t2.log >> $R
done
export CUDA_VISIBLE_DEVICES=0
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
for f in true true; do mg resnet18 32 700 200 $f; mg vgg19 32 700 200 $f; mg resnet50 224 90 30 $f; done
for m in resnet18 vgg19 resnet50; do
  n=500; [ $m = resnet50 ] && n=40; [ $m = vgg19 ] && n=300
  timeout 200 python3 bench/strongest_reference.py --model $m --batch 256 --steps $n --warmup 20 --compile default \
    --precision bf16 --layout channels-last --optimizer-impl fused > /tmp/ref.txt 2>/tmp/ref.err; el "reference $m rc $?"
  grep "^{" /tmp/ref.txt | python3 -c "import json,sys; [print(' ', r.get('images_per_second', r.get('error'))) for r in map(json.loads, sys.stdin)]" >> $R
done
mg resnet18 32 60 40 true --profile-steps 40-49; python3 bench/results/2026-11-27-1xH100-fused-batch-norm/kernels_per_step.py /tmp/m-resnet18-true/trace-rank0.json 10 25 >> $R 2>&1
mg resnet50 224 30 20 true --profile-steps 20-24; python3 bench/results/2026-11-27-1xH100-fused-batch-norm/kernels_per_step.py /tmp/m-resnet50-true/trace-rank0.json 5 30 >> $R 2>&1
cat $R
