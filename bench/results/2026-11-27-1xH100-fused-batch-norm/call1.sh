#!/bin/bash
# Session 12, call 1: kernel-time breakdown of a step, mgpu (strongest config) vs PyTorch graphed and compiled+graphed.
source .devdeps/activate.sh; for f in .devdeps/libutfcpp-dev*.deb; do dpkg -x $f /opt/deps; done
export NCCL_NVLS_ENABLE=0
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export LD_LIBRARY_PATH=/tmp/site/nvidia/cu13/lib:$LD_LIBRARY_PATH
R=$OUT/call1.txt; t0=$(date +%s)
el() { echo "[$(( $(date +%s) - t0 )) s] $*" | tee -a $R; }
nvidia-smi -L >> $R
cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DMGPU_PYTHON=$(command -v python3) \
  -DMGPU_TEST_PYTHON=$(command -v python3) -DMGPU_NVJPEG_INCLUDE_DIR=/tmp/site/nvidia/cu13/include -DMPI_CXX_COMPILER=$MPI_CXX_COMPILER > /tmp/cmake.log 2>&1 || { tail -30 /tmp/cmake.log >> $R; cat $R; exit 1; }
ninja -C build-gpu mgpu-worker > /tmp/ninja.log 2>&1 || { grep -A12 FAILED /tmp/ninja.log | head -60 >> $R; cat $R; exit 1; }
el "built"
mg() {  # MODEL SIDE STEPS PROFILE
  build-gpu/bin/mgpu-worker --model $1 --dataset synthetic --image-size $2 --synthetic-channels 3 --synthetic-train $((256*12)) \
    --synthetic-test 256 --batch-size 256 --max-steps $3 --epochs 100000 --log-every 10 --optimizer sgd --momentum 0.9 --lr 0.01 \
    --progress lines --overwrite --device cuda --precision amp-bf16 --channels-last true --cuda-graphs true --data-on-device true \
    --profile-steps $4 --out /tmp/m-$1 > /tmp/m-$1.log 2>&1
  el "mgpu $1 rc $?"; python3 bench/results/2026-11-27-1xH100-fused-batch-norm/kernels_per_step.py /tmp/m-$1/trace-rank0.json $5 40 >> $R 2>&1
}
mg resnet18 32 60 40-49 10
mg vgg19 32 60 40-49 10
mg resnet50 224 30 20-24 5
for m in resnet18 vgg19 resnet50; do for mode in none default; do
  n=10; [ $m = resnet50 ] && n=5
  timeout 200 python3 bench/results/2026-11-27-1xH100-fused-batch-norm/torch_profile.py $m $mode $n /tmp/t-$m-$mode.json > /tmp/t.log 2>&1; el "torch $m $mode rc $?"; tail -2 /tmp/t.log >> $R
  python3 bench/results/2026-11-27-1xH100-fused-batch-norm/kernels_per_step.py /tmp/t-$m-$mode.json $n 40 >> $R 2>&1
done; done
cat $R
