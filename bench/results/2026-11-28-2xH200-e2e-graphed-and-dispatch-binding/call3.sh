#!/bin/bash
# Session 29, call 3 (a fresh nvidia-h200-x2, ~340 s of device time left): the training thread alone pinned to one
# CPU (X_PIN_MAIN_CPU, an uncommitted experiment in TrainingSession::Run; the loader's threads, started before,
# keep every CPU) against unbound and against the whole process on one CPU (taskset). Writes each result as it comes.
t0=$(date +%s); R=$OUT/call3.txt
el() { echo "[$(( $(date +%s) - t0 )) s] $*" | tee -a $R; }
xz -dc .pack/pack.tar.xz | tar xf - --no-overwrite-dir -C / || { echo "unpack failed"; exit 1; }
source .pack/activate.sh
export LD_LIBRARY_PATH=/tmp/site/nvidia/cu13/lib:$LD_LIBRARY_PATH PYTHONPATH=/tmp/site NCCL_NVLS_ENABLE=0
git diff --stat >> $R
cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DMGPU_PYTHON=$(command -v python3) \
  -DMGPU_TEST_PYTHON=$(command -v python3) -DMGPU_NVJPEG_INCLUDE_DIR=/tmp/site/nvidia/cu13/include -DMPI_CXX_COMPILER=$MPI_CXX_COMPILER > /tmp/cmake.log 2>&1 || { tail -30 /tmp/cmake.log >> $R; cat $R; exit 1; }
ninja -C build-gpu mgpu-worker > /tmp/ninja.log 2>&1 || { grep -A12 FAILED /tmp/ninja.log | head -60 >> $R; cat $R; exit 1; }
el "built"
W="build-gpu/bin/mgpu-worker --model resnet18 --dataset synthetic --image-size 32 --synthetic-test 256 --epochs 1000
  --log-every 100 --optimizer sgd --momentum 0.9 --lr 0.01 --precision amp-bf16 --num-workers 4 --progress lines
  --overwrite --device cuda"
one() {  # name, then the command's prefix
  name=$1; shift
  "$@" $W --synthetic-train 140000 --batch-size 256 --max-steps 500 --out /tmp/ab/$name > /tmp/ab/$name.log 2>&1
  el "AB $name rc=$? $(python3 bench/run_rate.py /tmp/ab/$name --warmup 100)"
}
ddp() {  # name, CPU for rank 0's training thread, for rank 1's ("" for unbound)
  name=$1
  for rank in 0 1; do
    cpu=$([ $rank = 0 ] && echo "$2" || echo "$3")
    env RANK=$rank LOCAL_RANK=$rank WORLD_SIZE=2 LOCAL_WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=29611 \
      ${cpu:+X_PIN_MAIN_CPU=$cpu} $W --synthetic-train 200000 --batch-size 512 --max-steps 400 --mode ddp \
      --backend nccl --out /tmp/ab/$name > /tmp/ab/$name.rank$rank.log 2>&1 &
  done
  wait
  el "AB $name $(python3 bench/run_rate.py /tmp/ab/$name --warmup 100)"
}
mkdir -p /tmp/ab
one pinmain-1 env X_PIN_MAIN_CPU=0
one unbound-1 env
one core0-1 taskset -c 0
ddp ddp-pinmain 0 16
ddp ddp-unbound "" ""
one pinmain-2 env X_PIN_MAIN_CPU=0
one unbound-2 env
one core0-2 taskset -c 0
ddp ddp-pinmain-2 0 16
ddp ddp-unbound-2 "" ""
grep -h "intra-op\|rank source" /tmp/ab/pinmain-1.log /tmp/ab/ddp-pinmain.rank0.log | head -4 >> $R
cat $R
