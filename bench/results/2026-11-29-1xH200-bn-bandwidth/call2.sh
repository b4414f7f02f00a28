#!/bin/bash
# Call 2: as call 1 (bn_bandwidth.cu over ResNet-50 and ResNet-18), for the working tree's relu mask compared
# with a threshold (LargestMaskedInput) instead of relu's rounded output recomputed:
#   head    the kernels at HEAD (.gpu/head, 5ca802e);
#   nomask  call 1's p8-2: packed loads, relu's output recomputed (.gpu/nomask);
#   mR-G    the working tree: packed loads, the threshold; R rows in flight (statistics, apply), G (gradients).
# Each binary runs twice, in alternating order.
t0=$(date +%s); R=$OUT/call2.txt
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
variant m4-2 4 2; variant m8-2 8 2; variant m8-3 8 3; variant m4-3 4 3
cp -r .gpu/nomask /tmp/v/nomask; sed -i "s/^constexpr int kBnRowsInFlight = .*/constexpr int kBnRowsInFlight = 8;/" /tmp/v/nomask/models/kernels/batch_norm_math.h
NAMES="head nomask m4-2 m8-2 m4-3 m8-3"
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
BN_VERBOSE=1 /tmp/v/m8-2/bnb resnet50 > $OUT/m8-2-resnet50-verbose.txt
el "done"
cat $R
