#!/bin/bash
# Session 14, call 4: the finalizes in the reductions' last blocks: GPU tests, rates, profile.
source .devdeps/activate.sh; for f in .devdeps/libutfcpp-dev*.deb; do dpkg -x $f /opt/deps; done
export NCCL_NVLS_ENABLE=0 CUDA_VISIBLE_DEVICES=0
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export LD_LIBRARY_PATH=/tmp/site/nvidia/cu13/lib:$LD_LIBRARY_PATH
R=$OUT/call4.txt; t0=$(date +%s)
el() { echo "[$(( $(date +%s) - t0 )) s] $*" | tee -a $R; }
nvidia-smi -L >> $R
cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DMGPU_PYTHON=$(command -v python3) \
  -DMGPU_TEST_PYTHON=$(command -v python3) -DMGPU_NVJPEG_INCLUDE_DIR=/tmp/site/nvidia/cu13/include -DMPI_CXX_COMPILER=$MPI_CXX_COMPILER > /tmp/cmake.log 2>&1 || { tail -30 /tmp/cmake.log >> $R; cat $R; exit 1; }
ninja -C build-gpu mgpu-worker mgpu_gpu_tests > /tmp/ninja.log 2>&1 || { grep -A12 FAILED /tmp/ninja.log | head -60 >> $R; cat $R; exit 1; }
el "built"
mg() {  # TAG MODEL SIDE STEPS FROM TRAIN_BATCHES [extra]
  local tag=$1 m=$2 side=$3 steps=$4 from=$5 nb=$6; shift 6
  timeout 120 build-gpu/bin/mgpu-worker --model $m --dataset synthetic --image-size $side --synthetic-channels 3 --synthetic-train $((256*nb)) \
    --synthetic-test 256 --batch-size 256 --max-steps $steps --epochs 100000 --log-every 10 --optimizer sgd --momentum 0.9 --lr 0.01 \
    --progress lines --overwrite --device cuda --precision amp-bf16 --channels-last true --cuda-graphs true --data-on-device true \
    "$@" --out /tmp/m-$m-$tag > /tmp/m-$m-$tag.log 2>&1 || tail -5 /tmp/m-$m-$tag.log >> $R
  el "$tag $m: $(python3 - /tmp/m-$m-$tag/metrics.csv $from <<'PY'
import csv, sys
rows = [r for r in csv.DictReader(open(sys.argv[1])) if r.get("elapsed_seconds")]
a = next(r for r in rows if int(r["step"]) >= int(sys.argv[2])); b = rows[-1]
print(f"{256 * (int(b['step']) - int(a['step'])) / (float(b['elapsed_seconds']) - float(a['elapsed_seconds'])):.0f} img/s, loss {b.get('loss', b.get('train_loss'))}")
PY
)"
}
mg() {  # TAG MODEL SIDE STEPS FROM TRAIN_BATCHES [extra]
  local tag=$1 m=$2 side=$3 steps=$4 from=$5 nb=$6; shift 6
  timeout 120 build-gpu/bin/mgpu-worker --model $m --dataset synthetic --image-size $side --synthetic-channels 3 --synthetic-train $((256*nb)) \
    --synthetic-test 256 --batch-size 256 --max-steps $steps --epochs 100000 --log-every 10 --optimizer sgd --momentum 0.9 --lr 0.01 \
    --progress lines --overwrite --device cuda --precision amp-bf16 --channels-last true --cuda-graphs true --data-on-device true \
    "$@" --out /tmp/m-$m-$tag > /tmp/m-$m-$tag.log 2>&1 || tail -5 /tmp/m-$m-$tag.log >> $R
  el "$tag $m: $(python3 - /tmp/m-$m-$tag/metrics.csv $from <<'PY'
import csv, sys
rows = [r for r in csv.DictReader(open(sys.argv[1])) if r.get("elapsed_seconds")]
a = next(r for r in rows if int(r["step"]) >= int(sys.argv[2])); b = rows[-1]
print(f"{256 * (int(b['step']) - int(a['step'])) / (float(b['elapsed_seconds']) - float(a['elapsed_seconds'])):.0f} img/s, loss {b.get('loss', b.get('train_loss'))}")
PY
)"
}
mg() {  # TAG MODEL SIDE STEPS FROM TRAIN_BATCHES [extra]
  local tag=$1 m=$2 side=$3 steps=$4 from=$5 nb=$6; shift 6
  timeout 120 build-gpu/bin/mgpu-worker --model $m --dataset synthetic --image-size $side --synthetic-channels 3 --synthetic-train $((256*nb)) \
    --synthetic-test 256 --batch-size 256 --max-steps $steps --epochs 100000 --log-every 10 --optimizer sgd --momentum 0.9 --lr 0.01 \
    --progress lines --overwrite --device cuda --precision amp-bf16 --channels-last true --cuda-graphs true --data-on-device true \
    "$@" --out /tmp/m-$m-$tag > /tmp/m-$m-$tag.log 2>&1 || tail -5 /tmp/m-$m-$tag.log >> $R
  el "$tag $m: $(python3 - /tmp/m-$m-$tag/metrics.csv $from <<'PY'
import csv, sys
rows = [r for r in csv.DictReader(open(sys.argv[1])) if r.get("elapsed_seconds")]
a = next(r for r in rows if int(r["step"]) >= int(sys.argv[2])); b = rows[-1]
print(f"{256 * (int(b['step']) - int(a['step'])) / (float(b['elapsed_seconds']) - float(a['elapsed_seconds'])):.0f} img/s, loss {b.get('loss', b.get('train_loss'))}")
PY
)"
}
timeout 300 build-gpu/bin/mgpu_gpu_tests --gtest_filter='BatchNormActCuda.*:CudaGraphs.*:MaxPoolCuda.*:AmpCuda.*:FusedKernels*' > /tmp/t1.log 2>&1; el "tests rc $?"
grep -E "^\[  |Failure|evaluates|apart|error|Which is|Expected" /tmp/t1.log | head -60 >> $R
cp /tmp/t1.log $OUT/gpu-tests.log
variant() {  # TAG
  mg $1 resnet18 32 600 100 700
  mg $1 vgg19 32 600 100 700
  mg $1 resnet50 224 60 20 70
  mg $1 resnet18 32 600 100 700
  mg $1 vgg19 32 600 100 700
  mg $1 resnet50 224 60 20 70
  mg $1p resnet18 32 60 40 700 --profile-steps 40-49
  python3 .gpu/kernels_per_step.py /tmp/m-resnet18-$1p/trace-rank0.json 10 40 | grep -v "sm90\|cutlass\|cudnn" >> $R 2>&1
  mg $1p resnet50 224 30 20 70 --profile-steps 20-24
  python3 .gpu/kernels_per_step.py /tmp/m-resnet50-$1p/trace-rank0.json 5 12 >> $R 2>&1
}
variant lastblock
cat $R
