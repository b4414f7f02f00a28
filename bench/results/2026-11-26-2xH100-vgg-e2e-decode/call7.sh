#!/bin/bash
source .gpu/prebuilt_env.sh
export NCCL_NVLS_ENABLE=0
t0=$(date +%s); R=$OUT/twob.txt
export MGPU_BENCH_PYTHON=~/.cache/mgpu/venv-bench/bin/python
for rep in 1 2; do
  timeout 140 python3 bench/gpu_bench.py --build build-gpu --out /tmp/vggL$rep --models vgg19 --precisions amp-bf16 --modes ddp --steps 600 --warmup 40 --run-timeout 90 > /tmp/vggL$rep.log 2>&1
  echo "vgg 600 steps rep $rep rc $? at $(( $(date +%s) - t0 )) s" >> $R; grep -E "^\|" /tmp/vggL$rep.log | grep -v -- "---" >> $R
done
timeout 200 python3 bench/e2e_bench.py --build build-gpu --out /tmp/e2e2g --models resnet18 --worlds 2 --workers 4 --e2e-flags "--decode gpu" --run-timeout 180 > /tmp/e2e2g.log 2>&1
echo "e2e2 gpu rc $? at $(( $(date +%s) - t0 )) s" >> $R; grep -E "^\|" /tmp/e2e2g.log >> $R; tail -3 /tmp/e2e2g.log >> $R
cd /tmp && find vggL1 vggL2 e2e2g -name "*.json" -o -name "metrics.csv" -o -name "*.log" | tar czf $OUT/twob.tgz -T - 2>/dev/null
cat $R
