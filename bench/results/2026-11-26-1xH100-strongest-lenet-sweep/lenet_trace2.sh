#!/bin/bash
source .gpu/prebuilt_env.sh
mkdir -p /tmp/tr2; R=$OUT/trace2.txt
W=gpubin/M/mgpu-worker
L="--model lenet --dataset synthetic --synthetic-channels 1 --image-size 28 --synthetic-train 3232 --synthetic-test 256 --batch-size 32 --epochs 100000 --optimizer sgd --momentum 0.9 --lr 0.01 --progress lines --device cuda --cuda-graphs true --data-on-device true --precision tf32 --channels-last false"
$W $L --max-steps 1200 --log-every 100 --profile-steps 1000-1029 --out /tmp/tr2/mgpu > /tmp/tr2/mgpu.log 2>&1; echo "mgpu prof rc $?" >> $R
$W $L --max-steps 1200 --log-every 100 --profile-steps 1000-1029 --data-on-device false --out /tmp/tr2/mgpu-host > /tmp/tr2/mgpu-host.log 2>&1; echo "mgpu host prof rc $?" >> $R
timeout 200 python3 .gpu/lenet_trace2.py tf32 none,default /tmp/tr2 nchw >> $R 2>&1
cd /tmp/tr2 && tar czf $OUT/tr2.tgz mgpu/trace-rank0.json mgpu-host/trace-rank0.json pt-*.json mgpu/metrics.csv
cat $R
