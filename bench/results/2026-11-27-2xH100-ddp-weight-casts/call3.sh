#!/bin/bash
# Session 17, call 3 (nvidia-h100-x2): branch ddp-weight-casts; is VGG-19's DDP gap partly cuDNN's per-process algorithm
# choice (--cudnn-benchmark true times them in each process, with the peer's collectives beside)? Repeated processes with
# the benchmark on and off, one GPU and DDP; --broadcast-buffers false.
source .devdeps/activate.sh; for f in .devdeps/libutfcpp-dev*.deb; do dpkg -x $f /opt/deps; done
export NCCL_NVLS_ENABLE=0
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export LD_LIBRARY_PATH=/tmp/site/nvidia/cu13/lib:$LD_LIBRARY_PATH
R=$OUT/call3.txt; t0=$(date +%s)
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
for i in 1 2 3; do one vgg19 t$i 580; done
for i in 1 2; do one vgg19 f$i 580 --cudnn-benchmark false; done
el "VGG-19 one GPU, benchmark on: $(rate vgg19-one-t1 256) $(rate vgg19-one-t2 256) $(rate vgg19-one-t3 256); off: $(rate vgg19-one-f1 256) $(rate vgg19-one-f2 256)"
for i in 1 2 3; do two vgg19 t$i 580; done
for i in 1 2; do two vgg19 f$i 580 --cudnn-benchmark false; done
two vgg19 nobuf 580 --broadcast-buffers false
el "VGG-19 DDP, benchmark on: $(rate vgg19-two-t1 512) $(rate vgg19-two-t2 512) $(rate vgg19-two-t3 512); off: $(rate vgg19-two-f1 512) $(rate vgg19-two-f2 512); on, --broadcast-buffers false: $(rate vgg19-two-nobuf 512)"
for i in 1 2; do one resnet18 f$i 1500 --cudnn-benchmark false; two resnet18 f$i 1500 --cudnn-benchmark false; done
el "ResNet-18 benchmark off: one GPU $(rate resnet18-one-f1 256) $(rate resnet18-one-f2 256); DDP $(rate resnet18-two-f1 512) $(rate resnet18-two-f2 512)"
cat $R
