#!/bin/bash
# Session 16, call 2 (same warm nvidia-h100-x2): A/B of the weight shadows (MGPU_AB_NO_SHADOWS=1 turns them off),
# A on one GPU and B on the other at once, then swapped; and a kernel profile of ResNet-50 and ResNet-18 with them.
source .devdeps/activate.sh
export NCCL_NVLS_ENABLE=0 LD_LIBRARY_PATH=/tmp/site/nvidia/cu13/lib:$LD_LIBRARY_PATH
R=$OUT/call2.txt; t0=$(date +%s)
el() { echo "[$(( $(date +%s) - t0 )) s] $*" | tee -a $R; }
ninja -C build-gpu mgpu-worker > /tmp/ninja2.log 2>&1 || { tail -30 /tmp/ninja2.log >> $R; cat $R; exit 1; }
mg() {  # GPU TAG MODEL SIDE STEPS TRAIN_BATCHES [extra]
  local gpu=$1 tag=$2 m=$3 side=$4 steps=$5 nb=$6; shift 6
  CUDA_VISIBLE_DEVICES=$gpu timeout 150 build-gpu/bin/mgpu-worker --model $m --dataset synthetic --image-size $side --synthetic-channels 3 \
    --synthetic-train $((256*nb)) --synthetic-test 256 --batch-size 256 --max-steps $steps --epochs 100000 --log-every 10 --optimizer sgd \
    --momentum 0.9 --lr 0.01 --progress lines --overwrite --device cuda --precision amp-bf16 --channels-last true --cuda-graphs true \
    --data-on-device true "$@" --out /tmp/ab/$m-$tag > /tmp/ab/$m-$tag.log 2>&1 || tail -5 /tmp/ab/$m-$tag.log >> $R
}
rate() { python3 -c "import sys; sys.path.insert(0, 'bench'); from gpu_bench import elapsed_throughput as e; print(round(e('/tmp/ab/$1', $2, 256)))"; }
mkdir -p /tmp/ab
for round in 1 2; do
  if [ $round = 1 ]; then ga=0; gb=1; else ga=1; gb=0; fi
  for spec in "resnet18 32 1520 700 20" "resnet50 224 170 150 10" "vgg19 32 1020 700 20"; do
    set -- $spec
    MGPU_AB_NO_SHADOWS=1 mg $ga A$round $1 $2 $3 $4 & mg $gb B$round $1 $2 $3 $4; wait
    el "round $round $1: main (gpu $ga) $(rate $1-A$round $5) img/s, shadows (gpu $gb) $(rate $1-B$round $5) img/s"
  done
done
mg 0 prof resnet50 224 30 70 --profile-steps 20-24
python3 .gpu/kernels_per_step.py /tmp/ab/resnet50-prof/trace-rank0.json 5 400 | grep -E "kernels/step|elementwise|foreach|multi_tensor|copy" >> $R 2>&1
mg 0 prof resnet18 32 60 700 --profile-steps 40-44
python3 .gpu/kernels_per_step.py /tmp/ab/resnet18-prof/trace-rank0.json 5 400 | grep -E "kernels/step|elementwise|foreach|multi_tensor|copy" >> $R 2>&1
MGPU_AB_NO_SHADOWS=1 mg 0 profA resnet18 32 60 700 --profile-steps 40-44
python3 .gpu/kernels_per_step.py /tmp/ab/resnet18-profA/trace-rank0.json 5 400 | grep -E "kernels/step" >> $R 2>&1
el "profiles"
cat $R
