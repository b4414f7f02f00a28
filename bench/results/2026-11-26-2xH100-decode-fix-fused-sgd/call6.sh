#!/bin/bash
# Session 8, call 6 (nvidia-h100-x2): e2e_reference.py's final timing rule (three waits in a row), ResNet-18, 16 workers per GPU.
source .gpu/prebuilt_env.sh
export NCCL_NVLS_ENABLE=0
t0=$(date +%s); R=$OUT/s8f.txt
E2E=$HOME/.cache/mgpu/bench-e2e/jpeg-40000
[ -d $E2E/train ] || python3 bench/make_jpeg_folder.py $E2E --images 40000 > /tmp/mk.txt 2>&1
echo "jpeg at $(( $(date +%s) - t0 )) s" >> $R
for w in 2 1; do
  steps=$([ $w = 2 ] && echo 62 || echo 135)
  timeout 150 python3 bench/e2e_reference.py --data-dir $E2E --model resnet18 --world $w --workers 16 --warmup 15 --steps $steps >> $R 2>/tmp/ref$w.err || tail -5 /tmp/ref$w.err >> $R
  echo "world $w at $(( $(date +%s) - t0 )) s" >> $R
done
cat $R
