#!/bin/bash
source .gpu/prebuilt_env.sh
export NCCL_NVLS_ENABLE=0 TORCH_SHOW_CPP_STACKTRACES=1
R=$OUT/dbg.txt
E2E=$HOME/.cache/mgpu/bench-e2e/jpeg-40000
[ -d $E2E/train ] || python3 bench/make_jpeg_folder.py $E2E --images 6000 > /tmp/mk.txt 2>&1
C="--model resnet18 --precision amp-bf16 --optimizer sgd --momentum 0.9 --lr 0.01 --epochs 1000 --progress lines --channels-last true --log-every 5 --dataset imagefolder --data-dir $E2E --data-loading stream --augment rrc-flip --resize 224 --image-size 224 --decode gpu --num-workers 4 --max-steps 20"
timeout 60 gpubin/M/mgpu-worker $C --batch-size 256 --device cuda:1 --out /tmp/d1 > /tmp/d1.log 2>&1; echo "single cuda:1 rc $?" >> $R
grep -A40 -m1 "error" /tmp/d1.log | head -60 >> $R
for r in 0 1; do RANK=$r WORLD_SIZE=2 LOCAL_RANK=$r LOCAL_WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=29533 timeout 60 gpubin/M/mgpu-worker $C --batch-size 512 --mode ddp --backend nccl --device cuda --out /tmp/d2 > /tmp/d2-$r.log 2>&1 & done; wait
echo "ddp done" >> $R
grep -A60 -m1 "error" /tmp/d2-1.log | head -80 >> $R
cat $R | head -150
