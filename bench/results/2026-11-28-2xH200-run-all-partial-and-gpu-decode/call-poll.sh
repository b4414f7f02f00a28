#!/bin/bash
# Session 26: waits up to $1 s for run_all (/tmp/ra.sh) to end, then returns its log and the small files of its results.
t0=$(date +%s)
while ! grep -q RUN_ALL_RC /tmp/ra.log 2>/dev/null && [ $(( $(date +%s) - t0 )) -lt $1 ]; do sleep 5; done
cp /tmp/ra.log $OUT/run_all.log
cd /tmp && find ra -type f \( -name '*.json' -o -name '*.jsonl' -o -name '*.csv' -o -name '*.log' -o -name '*.md' -o -name '*.txt' \) -size -3M -print0 \
  | tar czf $OUT/ra.tgz --null -T - 2>/dev/null
ls -la $OUT/ra.tgz
grep -E "^== |RUN_ALL_RC|jpegs:" /tmp/ra.log
nvidia-smi --query-gpu=index,utilization.gpu,memory.used --format=csv
tail -5 /tmp/ra.log
