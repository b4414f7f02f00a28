#!/bin/bash
# Session 17, call 1 (nvidia-h100-x2): branch ddp-weight-casts (the reducer takes the bf16 copies' gradients) against
# main's path (uncommitted MGPU_AB_MAIN switch: no copies under DDP), VGG-19 and ResNet-18 amp-bf16 graphed DDP with the
# data on the device, alternating; NCCL's protocol choice (TUNING log) and NCCL_PROTO variants.
source .devdeps/activate.sh; for f in .devdeps/libutfcpp-dev*.deb; do dpkg -x $f /opt/deps; done
export NCCL_NVLS_ENABLE=0
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export LD_LIBRARY_PATH=/tmp/site/nvidia/cu13/lib:$LD_LIBRARY_PATH
R=$OUT/call1.txt; t0=$(date +%s)
el() { echo "[$(( $(date +%s) - t0 )) s] $*" | tee -a $R; }
nvidia-smi -L >> $R
cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DMGPU_PYTHON=$(command -v python3) \
  -DMGPU_TEST_PYTHON=$(command -v python3) -DMGPU_NVJPEG_INCLUDE_DIR=/tmp/site/nvidia/cu13/include -DMPI_CXX_COMPILER=$MPI_CXX_COMPILER > /tmp/cmake.log 2>&1 || { tail -30 /tmp/cmake.log >> $R; cat $R; exit 1; }
ninja -C build-gpu mgpu-worker mgpu_gpu_tests mgpu-loader-bench > /tmp/ninja.log 2>&1 || { grep -A12 FAILED /tmp/ninja.log | head -60 >> $R; cat $R; exit 1; }
el "built"
COMMON="--dataset synthetic --synthetic-channels 3 --synthetic-test 256 --epochs 100000 --log-every 20
  --optimizer sgd --momentum 0.9 --lr 0.01 --progress lines --overwrite --precision amp-bf16 --channels-last true --cuda-graphs true
  --data-on-device true"
one() {  # MODEL TAG STEPS [extra]
  local m=$1 tag=$2 steps=$3; shift 3
  CUDA_VISIBLE_DEVICES=0 timeout 120 build-gpu/bin/mgpu-worker $COMMON --model $m --image-size 32 --device cuda \
    --synthetic-train $((256 * 600)) --batch-size 256 --max-steps $steps "$@" --out /tmp/v/$m-one-$tag > /tmp/v/$m-one-$tag.log 2>&1 \
    || tail -5 /tmp/v/$m-one-$tag.log >> $R
}
two() {  # MODEL TAG STEPS [extra]; env passes through
  local m=$1 tag=$2 steps=$3; shift 3; local port=$((29700 + RANDOM % 200))
  for r in 0 1; do
    RANK=$r LOCAL_RANK=$r WORLD_SIZE=2 LOCAL_WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=$port timeout 120 build-gpu/bin/mgpu-worker \
      $COMMON --model $m --image-size 32 --mode ddp --backend nccl --synthetic-train $((512 * 600)) --batch-size 512 \
      --max-steps $steps "$@" --out /tmp/v/$m-two-$tag > /tmp/v/$m-two-$tag-r$r.log 2>&1 &
  done
  wait; tail -3 /tmp/v/$m-two-$tag-r0.log | grep -iE "error|fail" >> $R
}
rate() { python3 -c "import sys; sys.path.insert(0, 'bench'); from gpu_bench import elapsed_throughput as e; print(round(e('/tmp/v/$1', 100, $2)))"; }
mkdir -p /tmp/v
one vgg19 a 580
for round in 1 2; do
  MGPU_AB_MAIN=1 two vgg19 main$round 580; two vgg19 branch$round 580
  el "VGG-19 round $round: DDP main $(rate vgg19-two-main$round 512), branch $(rate vgg19-two-branch$round 512) img/s"
done
one vgg19 b 580
el "VGG-19 one GPU: $(rate vgg19-one-a 256), $(rate vgg19-one-b 256) img/s"
grep -m2 -iE "step execution|weight casts" /tmp/v/vgg19-two-branch1-r0.log >> $R
NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,TUNING two vgg19 tuning 60
grep -hiE "tuning|proto|algo|channels|LL128|Simple" /tmp/v/vgg19-two-tuning-r0.log | head -60 > $OUT/nccl-tuning-r0.txt
for proto in Simple LL128 LL; do
  NCCL_PROTO=$proto two vgg19 $proto 580; el "VGG-19 branch NCCL_PROTO=$proto: $(rate vgg19-two-$proto 512)"
done
NCCL_PROTO=LL128 MGPU_AB_MAIN=1 two vgg19 mainLL128 580; el "VGG-19 main NCCL_PROTO=LL128: $(rate vgg19-two-mainLL128 512)"
one resnet18 a 1500
for round in 1 2; do
  MGPU_AB_MAIN=1 two resnet18 main$round 1500; two resnet18 branch$round 1500
  el "ResNet-18 round $round: DDP main $(rate resnet18-two-main$round 512), branch $(rate resnet18-two-branch$round 512) img/s"
done
NCCL_PROTO=LL128 two resnet18 LL128 1500; el "ResNet-18 branch NCCL_PROTO=LL128: $(rate resnet18-two-LL128 512)"
el "ResNet-18 one GPU: $(rate resnet18-one-a 256)"
cat $R
