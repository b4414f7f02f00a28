#!/bin/bash
# A/B of the CPU assist's stop (M: stops when the previous batch's decodes are enqueued; A: at Take).
source .gpu/prebuilt_env.sh
export NCCL_NVLS_ENABLE=0
t0=$(date +%s); R=$OUT/ab40.txt
E2E=$HOME/.cache/mgpu/bench-e2e/jpeg-40000
[ -d $E2E/train ] || python3 bench/make_jpeg_folder.py $E2E --images 40000 > /tmp/mk.txt 2>&1
echo "jpeg ready at $(( $(date +%s) - t0 )) s" >> $R
nvidia-smi --query-gpu=name --format=csv,noheader >> $R
COMMON="--model resnet18 --precision amp-bf16 --optimizer sgd --momentum 0.9 --lr 0.01 --epochs 1000 --progress lines --device cuda --channels-last true --batch-size 256 --log-every 10"
STREAM="--dataset imagefolder --data-dir $E2E --data-loading stream --augment rrc-flip --resize 224 --image-size 224 --decode gpu"
rate() { python3 - "$1" "$2" <<'PY'
import sys, json, os
sys.path.insert(0, "bench")
from gpu_bench import elapsed_throughput
out, warm = sys.argv[1], int(sys.argv[2])
r = elapsed_throughput(out, warm, 256)
s = json.load(open(os.path.join(out, "summary.json")))
g = s.get("gpu_decode", {})
a = g.get("cpu_assisted", 0); n = g.get("images", 0)
print(f"{os.path.basename(out)}: {r:.0f} img/s; assisted {a} of {a+n} ({100*a/max(a+n,1):.0f}%)" if r else f"{out}: no rate")
PY
}
gpubin/M/mgpu-worker $COMMON --dataset synthetic --image-size 224 --synthetic-train 60000 --synthetic-test 256 --max-steps 20 --num-workers 4 --out /tmp/ab/warm > /dev/null 2>&1
for rep in 1 2 3; do
  for V in M A; do
    /usr/bin/time -f "cpu %U+%S s wall %e s" gpubin/$V/mgpu-worker $COMMON $STREAM --num-workers 4 --max-steps 150 --out /tmp/ab/r18-$V-$rep > /tmp/ab/r18-$V-$rep.log 2> /tmp/ab/r18-$V-$rep.time
    echo "$(rate /tmp/ab/r18-$V-$rep 20) $(tail -1 /tmp/ab/r18-$V-$rep.time)" >> $R
  done
  gpubin/M/mgpu-worker $COMMON --dataset synthetic --image-size 224 --synthetic-train 60000 --synthetic-test 256 --num-workers 4 --max-steps 150 --out /tmp/ab/syn-$rep > /dev/null 2>&1
  echo "$(rate /tmp/ab/syn-$rep 20)" >> $R
done
for V in M A; do
  /usr/bin/time -f "cpu %U+%S s wall %e s" gpubin/$V/mgpu-worker ${COMMON/resnet18/resnet50} $STREAM --num-workers 2 --max-steps 80 --out /tmp/ab/r50-$V > /tmp/ab/r50-$V.log 2> /tmp/ab/r50-$V.time
  echo "$(rate /tmp/ab/r50-$V 20) $(tail -1 /tmp/ab/r50-$V.time)" >> $R
done
gpubin/M/mgpu-worker ${COMMON/resnet18/resnet50} --dataset synthetic --image-size 224 --synthetic-train 60000 --synthetic-test 256 --num-workers 2 --max-steps 80 --out /tmp/ab/syn50 > /dev/null 2>&1
echo "$(rate /tmp/ab/syn50 20)" >> $R
for V in M A; do gpubin/$V/mgpu-loader-bench --data-dir $E2E --decode gpu --num-workers 4 --max-images 20000 >> $R 2>&1; done
grep -h "error\|Error" /tmp/ab/*.log | head -5 >> $R
echo "end at $(( $(date +%s) - t0 )) s" >> $R
cat $R
