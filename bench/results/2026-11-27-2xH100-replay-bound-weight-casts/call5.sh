#!/bin/bash
# Session 16, call 5 (nvidia-h100-x2): VGG-19 amp-bf16 graphed with the data on the device, one GPU against DDP on two
# (issue 39's 89% scaling): rates, DDP variants, and kernel traces of both compared (.gpu/ddp_compare.py).
source .devdeps/activate.sh; for f in .devdeps/libutfcpp-dev*.deb; do dpkg -x $f /opt/deps; done
export NCCL_NVLS_ENABLE=0
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export LD_LIBRARY_PATH=/tmp/site/nvidia/cu13/lib:$LD_LIBRARY_PATH
R=$OUT/call5.txt; t0=$(date +%s)
el() { echo "[$(( $(date +%s) - t0 )) s] $*" | tee -a $R; }
nvidia-smi -L >> $R
cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DMGPU_PYTHON=$(command -v python3) \
  -DMGPU_TEST_PYTHON=$(command -v python3) -DMGPU_NVJPEG_INCLUDE_DIR=/tmp/site/nvidia/cu13/include -DMPI_CXX_COMPILER=$MPI_CXX_COMPILER > /tmp/cmake.log 2>&1 || { tail -30 /tmp/cmake.log >> $R; cat $R; exit 1; }
ninja -C build-gpu mgpu-worker > /tmp/ninja.log 2>&1 || { grep -A12 FAILED /tmp/ninja.log | head -60 >> $R; cat $R; exit 1; }
el "built"
COMMON="--model vgg19 --dataset synthetic --image-size 32 --synthetic-channels 3 --synthetic-test 256 --epochs 100000 --log-every 20
  --optimizer sgd --momentum 0.9 --lr 0.01 --progress lines --overwrite --precision amp-bf16 --channels-last true --cuda-graphs true
  --data-on-device true"
one() {  # TAG STEPS [extra]
  local tag=$1 steps=$2; shift 2
  CUDA_VISIBLE_DEVICES=0 timeout 120 build-gpu/bin/mgpu-worker $COMMON --device cuda --synthetic-train $((256 * 600)) --batch-size 256 \
    --max-steps $steps "$@" --out /tmp/v/one-$tag > /tmp/v/one-$tag.log 2>&1 || tail -5 /tmp/v/one-$tag.log >> $R
}
two() {  # TAG STEPS [extra]
  local tag=$1 steps=$2; shift 2; local port=$((29700 + RANDOM % 200))
  for r in 0 1; do
    RANK=$r LOCAL_RANK=$r WORLD_SIZE=2 LOCAL_WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=$port timeout 120 build-gpu/bin/mgpu-worker \
      $COMMON --mode ddp --backend nccl --synthetic-train $((512 * 600)) --batch-size 512 --max-steps $steps "$@" \
      --out /tmp/v/two-$tag > /tmp/v/two-$tag-r$r.log 2>&1 &
  done
  wait
}
rate() { python3 -c "import sys; sys.path.insert(0, 'bench'); from gpu_bench import elapsed_throughput as e; print(round(e('/tmp/v/$1', 100, $2)))"; }
mkdir -p /tmp/v
one a 580; two a 580
el "one GPU $(rate one-a 256) img/s; DDP $(rate two-a 512) img/s"
two nobuf 580 --broadcast-buffers false; el "DDP --broadcast-buffers false: $(rate two-nobuf 512)"
two big 580 --bucket-cap-mb 100; el "DDP --bucket-cap-mb 100: $(rate two-big 512)"
two small 580 --bucket-cap-mb 5; el "DDP --bucket-cap-mb 5: $(rate two-small 512)"
two bf16 580 --ddp-compression bf16; el "DDP --ddp-compression bf16: $(rate two-bf16 512)"
one b 580; two b 580
el "again: one GPU $(rate one-b 256) img/s; DDP $(rate two-b 512) img/s"
one prof 60 --profile-steps 40-44; two prof 60 --profile-steps 40-44
python3 .gpu/ddp_compare.py /tmp/v/one-prof/trace-rank0.json /tmp/v/two-prof/trace-rank0.json 5 >> $R 2>&1
python3 .gpu/ddp_compare.py /tmp/v/one-prof/trace-rank0.json /tmp/v/two-prof/trace-rank1.json 5 | head -1 >> $R 2>&1
python3 .gpu/step_gaps.py /tmp/v/two-prof/trace-rank0.json 5 | head -8 >> $R 2>&1
python3 .gpu/kernels_per_step.py /tmp/v/two-prof/trace-rank0.json 5 400 | grep -iE "kernels/step|nccl|multi_tensor|copy|\[" >> $R 2>&1
mkdir -p $OUT/traces; gzip -c /tmp/v/one-prof/trace-rank0.json > $OUT/traces/one-rank0.json.gz; gzip -c /tmp/v/two-prof/trace-rank0.json > $OUT/traces/two-rank0.json.gz
el "profiles"
cat $R
