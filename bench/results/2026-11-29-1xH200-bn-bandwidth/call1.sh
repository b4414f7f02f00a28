#!/bin/bash
# Call 1: mgpu's batch-norm kernels alone (bn_bandwidth.cu), over ResNet-50's 53 and ResNet-18's 20 batch norms
# at batch 256, for the kernels at HEAD (.gpu/head, 5ca802e) and variants of the working tree's packed loads:
#   pR-G   kBnRowsInFlight = R (statistics, apply), kBnGradientRowsInFlight = G (gradient sums, apply);
#   b3     p4-2 with three blocks per SM and 396 blocks a kernel (other splits: other bits).
# Each binary runs twice, in alternating order.
t0=$(date +%s); R=$OUT/call1.txt
el() { echo "[$(( $(date +%s) - t0 )) s] $*" | tee -a $R; }
H=bench/results/2026-11-29-1xH200-bn-bandwidth
nvidia-smi -L >> $R; nvcc --version | tail -1 >> $R
variant() {  # variant NAME ROWS GRADIENT_ROWS [BLOCKS_PER_SM TARGET_BLOCKS]
  mkdir -p /tmp/v/$1/models/kernels && cp models/kernels/* /tmp/v/$1/models/kernels/
  sed -i "s/^constexpr int kBnRowsInFlight = .*/constexpr int kBnRowsInFlight = $2;/; s/^constexpr int kBnGradientRowsInFlight = .*/constexpr int kBnGradientRowsInFlight = $3;/" /tmp/v/$1/models/kernels/batch_norm_math.h
  if [ -n "$4" ]; then
    sed -i "s/^constexpr int kBnBlocksPerSm = .*/constexpr int kBnBlocksPerSm = $4;/" /tmp/v/$1/models/kernels/batch_norm_kernels.cu
    sed -i "s/^constexpr int kBnTargetBlocks = .*/constexpr int kBnTargetBlocks = $5;/" /tmp/v/$1/models/kernels/batch_norm_math.h
  fi
}
mkdir -p /tmp/v && cp -r .gpu/head /tmp/v/head
variant p4-2 4 2; variant p8-2 8 2; variant p4-3 4 3; variant p8-3 8 3; variant b3 4 2 3 396
NAMES="head p4-2 p8-2 p4-3 p8-3 b3"
for v in $NAMES; do
  nvcc -std=c++17 -O3 -arch=sm_90 -I/tmp/v/$v -I. -Xptxas -v $H/bn_bandwidth.cu /tmp/v/$v/models/kernels/batch_norm_kernels.cu \
    -o /tmp/v/$v/bnb > /tmp/v/$v/nvcc.log 2>&1 &
done
wait
for v in $NAMES; do
  echo "== $v: Bf16 kernels' registers, spills" >> $R
  grep -A1 -E "Compiling entry.*(Statistics|Apply|GradientSums|GradientApply)KernelINS0_4Bf16" /tmp/v/$v/nvcc.log \
    | grep -E "registers|spill" | sed 's/ptxas info    ://' | paste - - >> $R
  ls /tmp/v/$v/bnb > /dev/null || tail -20 /tmp/v/$v/nvcc.log >> $R
done
el "built"
for round in 1 2; do
  order="$NAMES"; [ $round = 2 ] && order=$(echo $NAMES | tr ' ' '\n' | tac | tr '\n' ' ')
  for v in $order; do
    for m in resnet50 resnet18; do echo "$v $(/tmp/v/$v/bnb $m)" | tee -a $R; done
  done
done
el "timed"
BN_VERBOSE=1 /tmp/v/head/bnb resnet50 > $OUT/head-resnet50-verbose.txt
BN_VERBOSE=1 /tmp/v/p4-2/bnb resnet50 > $OUT/p4-2-resnet50-verbose.txt
el "done"
cat $R
