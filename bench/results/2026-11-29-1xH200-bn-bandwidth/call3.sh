#!/bin/bash
# Call 3: bn_bandwidth.cu over ResNet-50 and ResNet-18 (bf16; ResNet-50 also float32) for the kernels' instances per set
# of tensors read, with rows in flight from a budget of vectors per pass:
#   head  the kernels at HEAD (.gpu/head, 5ca802e);
#   m8-3  call 2's m8-3 (.gpu/m8-3): one instance a kernel, 8 rows (statistics, apply), 3 (gradients);
#   new   the working tree: budgets of 8 (statistics), 16 (apply), 12 (gradients) vectors;
#   sS-aA-gG  the working tree with budgets S, A, G.
# Each binary runs twice, in alternating order.
t0=$(date +%s); R=$OUT/call3.txt
el() { echo "[$(( $(date +%s) - t0 )) s] $*" | tee -a $R; }
H=bench/results/2026-11-29-1xH200-bn-bandwidth
nvidia-smi -L >> $R; nvcc --version | tail -1 >> $R
variant() {  # variant STATISTICS APPLY GRADIENT
  local v=s$1-a$2-g$3
  mkdir -p /tmp/v/$v/models/kernels && cp models/kernels/* /tmp/v/$v/models/kernels/
  sed -i "s/^constexpr int kBnStatisticsVectorsInFlight = .*/constexpr int kBnStatisticsVectorsInFlight = $1;/; s/^constexpr int kBnApplyVectorsInFlight = .*/constexpr int kBnApplyVectorsInFlight = $2;/; s/^constexpr int kBnGradientVectorsInFlight = .*/constexpr int kBnGradientVectorsInFlight = $3;/" /tmp/v/$v/models/kernels/batch_norm_math.h
}
mkdir -p /tmp/v && cp -r .gpu/head /tmp/v/head && cp -r .gpu/m8-3 /tmp/v/m8-3
mkdir -p /tmp/v/new/models && cp -r models/kernels /tmp/v/new/models/
variant 8 16 16; variant 8 16 8; variant 8 8 12; variant 12 16 12; variant 16 24 12
NAMES="head m8-3 new s8-a16-g16 s8-a16-g8 s8-a8-g12 s12-a16-g12 s16-a24-g12"
for v in $NAMES; do
  nvcc -std=c++17 -O3 -arch=sm_90 -I/tmp/v/$v -I. -Xptxas -v $H/bn_bandwidth.cu /tmp/v/$v/models/kernels/batch_norm_kernels.cu \
    -o /tmp/v/$v/bnb > /tmp/v/$v/nvcc.log 2>&1 &
done
wait
for v in $NAMES; do
  echo "== $v: spills of its kernels" >> $R
  grep -E "spill" /tmp/v/$v/nvcc.log | sort | uniq -c >> $R
  ls /tmp/v/$v/bnb > /dev/null || tail -20 /tmp/v/$v/nvcc.log >> $R
done
el "built"
for round in 1 2; do
  order="$NAMES"; [ $round = 2 ] && order=$(echo $NAMES | tr ' ' '\n' | tac | tr '\n' ' ')
  for v in $order; do
    for m in resnet50 resnet18; do echo "$v $(/tmp/v/$v/bnb $m)" | tee -a $R; done
  done
done
for v in head m8-3 new head m8-3 new; do echo "$v $(/tmp/v/$v/bnb resnet50 float)" | tee -a $R; done
el "timed"
BN_VERBOSE=1 /tmp/v/new/bnb resnet50 > $OUT/new-resnet50-verbose.txt
BN_VERBOSE=1 /tmp/v/new/bnb resnet18 > $OUT/new-resnet18-verbose.txt
BN_VERBOSE=1 /tmp/v/head/bnb resnet18 > $OUT/head-resnet18-verbose.txt
el "done"
cat $R
