#!/bin/bash
# Session 31, call 5 (a fresh nvidia-h200; this folder's one call): where ResNet-50's and ResNet-18's graphed amp-bf16 channels-last step
# spends its GPU time on an H200, mgpu (--profile-steps over graphed steps) against PyTorch's compiled + graphed
# step (torch_profile.py of 2026-11-27-1xH100-fused-batch-norm/), by kernel and category (kernels_per_step.py).
# run-all 11-29: ResNet-50 0.96x, ResNet-18 0.99x the compiled step.
t0=$(date +%s); R=$OUT/call1.txt
el() { echo "[$(( $(date +%s) - t0 )) s] $*" | tee -a $R; }
left() { echo $(( 350 - ($(date +%s) - t0) )); }
xz -dc .pack/pack.tar.xz | tar xf - --no-overwrite-dir -C / || { echo "unpack failed"; exit 1; }
dpkg -x .gpu/libutfcpp-dev_*.deb /opt/deps
source .pack/activate.sh
export LD_LIBRARY_PATH=/tmp/site/nvidia/cu13/lib:$LD_LIBRARY_PATH PYTHONPATH=/tmp/site PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0
nvidia-smi -L >> $R
cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DMGPU_PYTHON=$(command -v python3) \
  -DMGPU_TEST_PYTHON=$(command -v python3) -DMGPU_NVJPEG_INCLUDE_DIR=/tmp/site/nvidia/cu13/include -DMPI_CXX_COMPILER=$MPI_CXX_COMPILER > /tmp/cmake.log 2>&1 || { tail -30 /tmp/cmake.log >> $R; cat $R; exit 1; }
ninja -C build-gpu mgpu-worker > /tmp/ninja.log 2>&1 || { grep -A12 FAILED /tmp/ninja.log | head -60 >> $R; cat $R; exit 1; }
el "built"
mkdir -p $OUT/p
mgpu() {  # mgpu MODEL SIDE STEPS_BEFORE
  timeout $(left) build-gpu/bin/mgpu-worker --model $1 --dataset synthetic --image-size $2 --synthetic-channels 3 \
    --synthetic-train $(( 256 * 50 )) --synthetic-test 256 --batch-size 256 --max-steps $(( $3 + 6 )) --epochs 100000 \
    --log-every 5 --optimizer sgd --momentum 0.9 --lr 0.01 --progress lines --out /tmp/p/$1 --overwrite --device cuda \
    --precision amp-bf16 --channels-last true --cuda-graphs true --data-on-device true --profile-steps $(( $3 + 1 ))-$(( $3 + 5 )) \
    > /tmp/p-$1.log 2>&1
  el "mgpu $1 rc=$?: $(ls /tmp/p/$1 | tr '\n' ' ')"
  cp /tmp/p/$1/trace-rank0.json $OUT/p/mgpu-$1-trace.json 2>/dev/null && gzip -f $OUT/p/mgpu-$1-trace.json
  python3 .gpu/kernels_per_step.py /tmp/p/$1/trace-rank0.json 5 40 > $OUT/p/mgpu-$1-kernels.txt 2>&1
}
torchp() {  # torchp MODEL
  timeout $(left) python3 .gpu/torch_profile.py $1 default 5 /tmp/pt-$1.json > /tmp/pt-$1.log 2>&1
  el "torch $1 rc=$?"
  python3 .gpu/kernels_per_step.py /tmp/pt-$1.json 5 40 > $OUT/p/torch-$1-kernels.txt 2>&1
  gzip -c /tmp/pt-$1.json > $OUT/p/torch-$1-trace.json.gz 2>/dev/null
}
mkdir -p /tmp/p
mgpu resnet50 224 30
torchp resnet50
mgpu resnet18 32 200
torchp resnet18
tail -12 /tmp/pt-resnet50.log /tmp/p-resnet50.log >> $R
for f in $OUT/p/*-kernels.txt; do echo "== $f"; grep -E "kernels/step|^\s+\[" $f; done
cat $R
