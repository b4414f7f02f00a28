#!/bin/bash
# Call 4: as call 3 (bn_bandwidth.cu, now with a hash per output), for budgets around call 3's best, float32 for
# the best, and the variant whose hash differed in call 3 (s8-a16-g16): per batch norm hashes beside s8-a8-g8's, and
# compute-sanitizer's initcheck and memcheck on it (ResNet-18).
#   head      the kernels at HEAD (.gpu/head, 5ca802e);
#   sS-aA-gG  the working tree with budgets S (statistics), A (apply), G (gradients) vectors in flight.
# Each binary runs twice, in alternating order.
t0=$(date +%s); R=$OUT/call4.txt
el() { echo "[$(( $(date +%s) - t0 )) s] $*" | tee -a $R; }
H=bench/results/2026-11-29-1xH200-bn-bandwidth
nvidia-smi -L >> $R; nvcc --version | tail -1 >> $R
variant() {  # variant STATISTICS APPLY GRADIENT
  local v=s$1-a$2-g$3
  mkdir -p /tmp/v/$v/models/kernels && cp models/kernels/* /tmp/v/$v/models/kernels/
  sed -i "s/^constexpr int kBnStatisticsVectorsInFlight = .*/constexpr int kBnStatisticsVectorsInFlight = $1;/; s/^constexpr int kBnApplyVectorsInFlight = .*/constexpr int kBnApplyVectorsInFlight = $2;/; s/^constexpr int kBnGradientVectorsInFlight = .*/constexpr int kBnGradientVectorsInFlight = $3;/" /tmp/v/$v/models/kernels/batch_norm_math.h
}
mkdir -p /tmp/v && cp -r .gpu/head /tmp/v/head
variant 8 8 8; variant 8 8 10; variant 8 8 12; variant 8 12 8; variant 8 16 16
NAMES="head s8-a8-g8 s8-a8-g10 s8-a8-g12 s8-a12-g8 s8-a16-g16"
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
for v in head s8-a8-g8 s8-a8-g12 head s8-a8-g8 s8-a8-g12; do echo "$v $(/tmp/v/$v/bnb resnet50 float)" | tee -a $R; done
el "timed"
for v in s8-a8-g8 s8-a16-g16; do
  for m in resnet50 resnet18; do BN_VERBOSE=1 /tmp/v/$v/bnb $m > /tmp/$v-$m-verbose.txt; done
done
cat /tmp/s8-a8-g8-resnet50-verbose.txt /tmp/s8-a8-g8-resnet18-verbose.txt > $OUT/s8-a8-g8-verbose.txt
cat /tmp/s8-a16-g16-resnet50-verbose.txt /tmp/s8-a16-g16-resnet18-verbose.txt > $OUT/s8-a16-g16-verbose.txt
el "verbose"
for tool in initcheck memcheck; do
  timeout 150 compute-sanitizer --tool $tool --print-limit 5 /tmp/v/s8-a16-g16/bnb resnet18 > /tmp/$tool.txt 2>&1
  echo "$tool rc=$?" >> $R; tail -15 /tmp/$tool.txt >> $R
done
el "done"
cat $R
