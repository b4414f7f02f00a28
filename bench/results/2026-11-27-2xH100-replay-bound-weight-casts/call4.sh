#!/bin/bash
# Session 16, call 4 (same warm nvidia-h100-x2, GPU 0): bench/strongest_bench.py for ResNet-50, ResNet-18 and VGG-19 with
# the weight shadows merged (main + this session's tree).
source .devdeps/activate.sh
export NCCL_NVLS_ENABLE=0 LD_LIBRARY_PATH=/tmp/site/nvidia/cu13/lib:$LD_LIBRARY_PATH CUDA_VISIBLE_DEVICES=0
R=$OUT/call4.txt; t0=$(date +%s)
el() { echo "[$(( $(date +%s) - t0 )) s] $*" | tee -a $R; }
timeout 420 python3 bench/strongest_bench.py --build build-gpu --out /tmp/run/strongest --models resnet50,resnet18,vgg19 \
  --compile-mode default --run-timeout 200 > /tmp/run_all.log 2>&1
el "strongest_bench rc $?"
mkdir -p $OUT/strongest; cp /tmp/run/strongest/strongest-bench.json $OUT/strongest/ 2>/dev/null; cp /tmp/run_all.log $OUT/strongest/driver.log
grep -vE "^\s*$" /tmp/run_all.log | tail -30 >> $R
cat $R
