#!/bin/bash
# Session 16, call 1 (nvidia-h100-x2): the branch weight-shadows (+ an uncommitted A/B switch MGPU_AB_NO_SHADOWS).
# Why the graphed-DDP hang test hangs: the hang scenario run by hand, rank 0 attached with cuda-gdb mid-hang;
# then the ARank test three times with the watchdog guard; then the one-GPU graph and amp tests.
source .devdeps/activate.sh; for f in .devdeps/libutfcpp-dev*.deb; do dpkg -x $f /opt/deps; done
export NCCL_NVLS_ENABLE=0
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export LD_LIBRARY_PATH=/tmp/site/nvidia/cu13/lib:$LD_LIBRARY_PATH
R=$OUT/call1.txt; t0=$(date +%s)
el() { echo "[$(( $(date +%s) - t0 )) s] $*" | tee -a $R; }
nvidia-smi -L >> $R; nproc >> $R
cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DMGPU_PYTHON=$(command -v python3) \
  -DMGPU_TEST_PYTHON=$(command -v python3) -DMGPU_NVJPEG_INCLUDE_DIR=/tmp/site/nvidia/cu13/include -DMPI_CXX_COMPILER=$MPI_CXX_COMPILER > /tmp/cmake.log 2>&1 || { tail -30 /tmp/cmake.log >> $R; cat $R; exit 1; }
ninja -C build-gpu mgpu-worker mgpu_gpu_tests > /tmp/ninja.log 2>&1 || { grep -A12 FAILED /tmp/ninja.log | head -60 >> $R; cat $R; exit 1; }
el "built"
hang() {  # I ATTACH_AFTER_S
  local i=$1 attach=$2 dir=/tmp/hang$1 port=$((29400 + $1))
  for r in 0 1; do
    RANK=$r LOCAL_RANK=$r WORLD_SIZE=2 LOCAL_WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=$port MGPU_TEST_FAULTS=hang-at-step=6,hang-rank=1 \
      build-gpu/bin/mgpu-worker --mode ddp --backend nccl --dataset synthetic --synthetic-channels 1 --image-size 28 \
      --synthetic-train 6400 --synthetic-test 256 --batch-size 64 --epochs 1000 --seed 9 --lr 0.003 --scheduler cosine \
      --cuda-graphs true --collective-timeout 5 --progress lines --out $dir-r$r --overwrite > $OUT/hang$i-rank$r.log 2>&1 &
    eval pid$r=$!
  done
  local s=0
  while kill -0 $pid0 2>/dev/null && [ $s -lt 70 ]; do
    sleep 1; s=$((s + 1))
    if [ $s -eq $attach ] && kill -0 $pid0 2>/dev/null; then
      el "hang $i: attaching to rank 0 at $s s"
      timeout 60 cuda-gdb -p $pid0 -batch -ex "info threads" -ex "thread apply all bt 30" > $OUT/hang$i-rank0-bt.txt 2>&1
      el "hang $i: cuda-gdb rc $?"
    fi
  done
  wait $pid0; local rc=$?
  el "hang $i: rank 0 ended after ${s} s, rc $rc; stderr lines: $(grep -c mgpu-worker: $OUT/hang$i-rank0.log)"
  grep -E "mgpu-worker:|did not complete|watchdog" $OUT/hang$i-rank0.log | head -8 >> $R
  kill -9 $pid1 2>/dev/null; wait $pid1 2>/dev/null
}
hang 1 16
hang 2 16
hang 3 22
timeout 300 build-gpu/bin/mgpu_gpu_tests --gtest_filter='CudaGraphs.ARank*' --gtest_repeat=3 > $OUT/gpu-tests-arank.log 2>&1
el "ARank x3 rc $?: $(grep -cE '^\[       OK' $OUT/gpu-tests-arank.log) ok, $(grep -cE '^\[  FAILED  \] CudaGraphs' $OUT/gpu-tests-arank.log) failed"
grep -E "^\[       OK|^\[  FAILED" $OUT/gpu-tests-arank.log >> $R
CUDA_VISIBLE_DEVICES=0 timeout 200 build-gpu/bin/mgpu_gpu_tests --gtest_filter='CudaGraphs.*:AmpCuda.*' > $OUT/gpu-tests-graphs-amp.log 2>&1
el "one-GPU CudaGraphs, AmpCuda (weight shadows on) rc $?: $(grep -E '^\[  (PASSED|FAILED) ' $OUT/gpu-tests-graphs-amp.log | tr '\n' ' ')"
grep -E "^\[  FAILED" $OUT/gpu-tests-graphs-amp.log >> $R
cat $R
