#!/bin/bash
# Call 5 (the machine of call 4, still warm): ResNet-50 end to end, CPU decode, 16 workers per GPU, 1 and 2 GPUs.
source .gpu/prebuilt_env.sh; export NCCL_NVLS_ENABLE=0 MGPU_BENCH_PYTHON=~/.cache/mgpu/venv-bench/bin/python; t0=$(date +%s)
timeout 400 python3 bench/e2e_bench.py --build build-gpu --out /tmp/s8-e2e-r50 --models resnet50 --worlds 1,2 --workers 16 --run-timeout 150 > /tmp/e2e50.log 2>&1
echo "rc $? at $(( $(date +%s) - t0 )) s"; grep -E "^\|" /tmp/e2e50.log | head -12; tail -3 /tmp/e2e50.log; cp /tmp/s8-e2e-r50/e2e-bench.json $OUT/e2e-bench-r50.json
