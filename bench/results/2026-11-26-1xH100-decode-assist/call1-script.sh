#!/bin/bash
# Next session's first call (1 GPU, no build: binaries from the VM, gpubin/MANIFEST says which branch):
# A main, S split-streams, C cpu-assist (pinned gather), SC both. GPU decode tests of S, C, SC; then
# decode-only and ResNet-18 e2e pairs (30/150 steps, wall clock + metrics.csv steady), order-balanced.
# Run: bash .gpu/next40.sh  with carry [gpubin, .devdeps, .whl, .gpu], timeout ~420 s.
source .gpu/prebuilt_env.sh
t0=$(date +%s)
E2E=$HOME/.cache/mgpu/bench-e2e/jpeg-40000
python3 bench/make_jpeg_folder.py $E2E --images 40000 > /tmp/make_jpeg.txt 2>&1 &
for v in S C SC; do
  gpubin/$v/mgpu_gpu_tests --gtest_filter='*GpuDecode*' --gtest_repeat=2 > /tmp/t$v.txt 2>&1
  echo "$v tests: $(grep -cE '^\[       OK' /tmp/t$v.txt) ok, $(grep -cE '^\[  FAILED  \] [A-Z]' /tmp/t$v.txt) failed" | tee -a $OUT/next40.txt
  grep -A10 -m1 "Failure" /tmp/t$v.txt | tee -a $OUT/next40.txt
done
wait; echo "ready at $(( $(date +%s) - t0 )) s" | tee -a $OUT/next40.txt
COMMON="--precision amp-bf16 --optimizer sgd --momentum 0.9 --lr 0.01 --epochs 1000 --progress lines --device cuda --channels-last true --batch-size 256 --log-every 15"
STREAM="--dataset imagefolder --data-dir $E2E --data-loading stream --augment rrc-flip --resize 224 --image-size 224 --decode gpu"
SYNTH="--dataset synthetic --image-size 224 --synthetic-test 256 --synthetic-train 40000"
one() {  # BIN LABEL STEPS FLAGS -> wall seconds (timeout: a stall or a collapse shows)
  local s=$(date +%s.%N)
  timeout 45 $1 $COMMON $4 --max-steps $3 --out /tmp/r-$2-$3 > /dev/null 2> /tmp/$2-$3.err
  local rc=$?
  awk -v a=$(date +%s.%N) -v b=$s -v rc=$rc 'BEGIN{printf "%.2f%s\n", a - b, rc ? " rc" rc : ""}'
  [ $rc = 0 ] || tail -3 /tmp/$2-$3.err >> $OUT/next40.txt
}
pair() {  # SIDE LABEL FLAGS
  local bin=gpubin/$1/mgpu-worker
  a=$(one $bin $2 30 "$3"); b=$(one $bin $2 150 "$3")
  local extra=$(python3 - /tmp/r-$2-150 <<'PY'
import csv, json, statistics, sys
rows = [r for r in csv.DictReader(open(sys.argv[1] + "/metrics.csv")) if int(r["step"]) > 45]
g = json.load(open(sys.argv[1] + "/summary.json")).get("gpu_decode") or {}
print(f"steady {statistics.median(float(r['images_per_second']) for r in rows):.0f} img/s, data wait "
      f"{statistics.median(float(r['data_wait_seconds']) for r in rows)*1e3:.2f} ms/step; gpu_decode {g}")
PY
)
  echo "$1 $2: $a / $b -> $(awk -v a="$a" -v b="$b" 'BEGIN{printf "%.0f", 120 * 256 / (b - a)}') img/s; $extra" | tee -a $OUT/next40.txt
  rm -rf /tmp/r-*
}
decode_only() {  # SIDE
  timeout 45 gpubin/$1/mgpu-loader-bench --data-dir $E2E --decode gpu --num-workers 4 --max-images 20000 > /tmp/d.json 2>/tmp/d.err
  echo "$1 decode-only: $(python3 -c "import json; d=json.load(open('/tmp/d.json')); print(round(d['images_per_second']), 'assisted', d.get('cpu_assisted'), 'gpu', d.get('gpu_images'))" 2>&1 | tail -1)" | tee -a $OUT/next40.txt
}
R18="--model resnet18 --num-workers 4"
one gpubin/A/mgpu-worker warm 5 "$R18 $SYNTH" > /dev/null
pair A r18-synthetic "$R18 $SYNTH"
for side in A S C SC SC C S A; do
  decode_only $side
  pair $side r18-e2e "$R18 $STREAM"
done
pair A r18-synthetic "$R18 $SYNTH"
echo "done at $(( $(date +%s) - t0 )) s" | tee -a $OUT/next40.txt
