#!/bin/bash
source .gpu/prebuilt_env.sh
export NCCL_NVLS_ENABLE=0
mkdir -p /tmp/sw; t0=$(date +%s); R=$OUT/lenet_sweep.txt
nvidia-smi --query-gpu=name --format=csv,noheader >> $R
W=gpubin/M/mgpu-worker
L="--model lenet --dataset synthetic --synthetic-channels 1 --image-size 28 --synthetic-train 3232 --synthetic-test 256 --batch-size 32 --epochs 100000 --optimizer sgd --momentum 0.9 --lr 0.01 --progress lines --device cuda --cuda-graphs true --data-on-device true --max-steps 9000 --log-every 1000"
rate() { python3 -c "
import csv,sys
r=list(csv.DictReader(open(sys.argv[1]+'/metrics.csv')))
a=[x for x in r if int(x['step'])==3000][0]; b=r[-1]
print('%.0f steps/s' % ((int(b['step'])-3000)/(float(b['elapsed_seconds'])-float(a['elapsed_seconds']))))" $1; }
for rep in 1 2; do
for p in amp-bf16 tf32 fp32 fp16; do for cl in true false; do
  $W $L --precision $p --channels-last $cl --out /tmp/sw/$p-$cl-$rep > /tmp/sw/$p-$cl-$rep.log 2>&1 || tail -3 /tmp/sw/$p-$cl-$rep.log >> $R
  echo "mgpu $p cl=$cl rep $rep: $(rate /tmp/sw/$p-$cl-$rep)" >> $R
done; done; done
echo "mgpu done at $(( $(date +%s) - t0 )) s" >> $R
timeout 400 python3 .gpu/lenet_sweep.py bf16,tf32 none,default >> $R 2>/tmp/sw/pt.err || tail -5 /tmp/sw/pt.err >> $R
echo "end at $(( $(date +%s) - t0 )) s" >> $R
cat $R
