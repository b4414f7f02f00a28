#!/bin/bash
# Session 21, call 3 (nvidia-h100-x2, main ef3fd0d + .gpu/ab-switches.diff): DDP's --decode gpu producer waits
# 2.2 ms a batch for its side stream (0.2 alone): A main; P side stream high priority (MGPU_AB_PRIO=1); P3 both
# streams; N no host wait (MGPU_AB_NOSYNC=1: chunks released by recordStream, pinned labels, the compute stream waits
# for the batch's event); NP both. GPU decode tests under N first.
source .devdeps/activate.sh; for f in .devdeps/libutfcpp-dev*.deb; do dpkg -x $f /opt/deps; done
export NCCL_NVLS_ENABLE=0
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export LD_LIBRARY_PATH=/tmp/site/nvidia/cu13/lib:$LD_LIBRARY_PATH PYTHONPATH=/tmp/site
R=$OUT/call3.txt; t0=$(date +%s)
el() { echo "[$(( $(date +%s) - t0 )) s] $*" | tee -a $R; }
nvidia-smi -L >> $R; nproc >> $R; git log --oneline -1 >> $R
E2E=$HOME/.cache/mgpu/bench-e2e/jpeg-40000
[ -d $E2E/train ] || { python3 bench/make_jpeg_folder.py $E2E --images 40000 > /tmp/mk.txt 2>&1 & }
[ -d build-gpu ] || cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DMGPU_PYTHON=$(command -v python3) \
  -DMGPU_TEST_PYTHON=$(command -v python3) -DMGPU_NVJPEG_INCLUDE_DIR=/tmp/site/nvidia/cu13/include -DMPI_CXX_COMPILER=$MPI_CXX_COMPILER > /tmp/cmake.log 2>&1 || { tail -30 /tmp/cmake.log >> $R; cat $R; exit 1; }
ninja -C build-gpu mgpu-worker mgpu_gpu_tests mgpu-loader-bench > /tmp/ninja.log 2>&1 || { grep -A12 FAILED /tmp/ninja.log | head -60 >> $R; cat $R; exit 1; }
B=build-gpu/bin
el "built"; wait; el "jpegs there: $(ls $E2E/train | wc -l) classes"
mkdir -p /tmp/d3
COMMON="--model resnet18 --precision amp-bf16 --optimizer sgd --momentum 0.9 --lr 0.01 --epochs 1000 --progress lines --device cuda --channels-last true --log-every 10"
STREAM="--dataset imagefolder --data-dir $E2E --data-loading stream --augment rrc-flip --resize 224 --image-size 224 --decode gpu --num-workers 4"
rate() { python3 - "$1" "$2" "$3" <<'PY'
import sys, json, os, csv
sys.path.insert(0, "bench")
from gpu_bench import elapsed_throughput
out, warm, batch = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
try:
    r = elapsed_throughput(out, warm, batch)
    rows = [x for x in csv.DictReader(open(os.path.join(out, "metrics.csv"))) if int(x["step"]) > warm]
    wait = sum(float(x.get("input_seconds") or 0) for x in rows) / max(sum(float(x["step_seconds"]) for x in rows), 1e-9)
    s = json.load(open(os.path.join(out, "summary.json")))
    g = s.get("gpu_decode", {}); a = g.get("cpu_assisted", 0); n = g.get("images", 0)
    print(f"{os.path.basename(out)}: {r:.0f} img/s; data wait {100*wait:.0f}%; assisted {a} of {a+n} ({100*a/max(a+n,1):.0f}%)")
except Exception as e:
    print(f"{out}: no rate ({e})")
PY
}
one() { # GPU name steps extra
  env CUDA_VISIBLE_DEVICES=$1 timeout 60 $B/mgpu-worker $COMMON $STREAM --batch-size 256 --max-steps $3 $4 --out /tmp/d3/$2 > /tmp/d3-$2.log 2>&1
  echo "$2 $(rate /tmp/d3/$2 20 256)" >> $R; }
ddp() { # name steps extra-flags env
  port=$(( 29500 + RANDOM % 1000 ))
  for r in 0 1; do env $4 RANK=$r WORLD_SIZE=2 LOCAL_RANK=$r LOCAL_WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=$port \
    timeout 70 $B/mgpu-worker $COMMON $STREAM --mode ddp --backend nccl --batch-size 512 --max-steps $2 $3 --out /tmp/d3/$1 > /tmp/d3-$1-$r.log 2>&1 & done; wait
  echo "$1 $(rate /tmp/d3/$1 20 512)" >> $R; }
envof() { case $1 in A) ;; P) echo MGPU_AB_PRIO=1;; P3) echo MGPU_AB_PRIO=3;; N) echo MGPU_AB_NOSYNC=1;; NP) echo MGPU_AB_NOSYNC=1 MGPU_AB_PRIO=1;; esac; }
F='CropResize*:GpuDecode*:*GpuDecodeEachDecoder*:CudaGraphs.GraphedStepsTrainFromJpegs*'
MGPU_AB_NOSYNC=1 timeout 120 $B/mgpu_gpu_tests --gtest_filter="$F" > $OUT/gpu-tests-N.log 2>&1
el "tests N rc $?: $(grep -cE '^\[       OK' $OUT/gpu-tests-N.log) ok, $(grep -cE '^\[  FAILED  \] [A-Z]' $OUT/gpu-tests-N.log) failed"
for rep in 1 2; do for V in A P N NP P3; do
  [ $rep = 2 ] && [ $V = P3 ] && continue
  port=$(( 29500 + RANDOM % 1000 ))
  for r in 0 1; do env $(envof $V) RANK=$r WORLD_SIZE=2 LOCAL_RANK=$r LOCAL_WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=$port \
    timeout 70 $B/mgpu-worker $COMMON $STREAM --mode ddp --backend nccl --batch-size 512 --max-steps 76 --out /tmp/d3/x2-$V-$rep > /tmp/d3-x2-$V-$rep-$r.log 2>&1 & done; wait
  echo "x2 $V $(rate /tmp/d3/x2-$V-$rep 20 512)" >> $R
done; el "DDP round $rep"; done
for V in N A NP P; do
  env $(envof $V) CUDA_VISIBLE_DEVICES=0 timeout 60 $B/mgpu-worker $COMMON $STREAM --batch-size 256 --max-steps 150 --out /tmp/d3/x1-$V > /tmp/d3-x1-$V.log 2>&1
  echo "x1 $V $(rate /tmp/d3/x1-$V 20 256)" >> $R
done
el "single done"
CUDA_VISIBLE_DEVICES=0 timeout 60 $B/mgpu-worker $COMMON --dataset synthetic --image-size 224 --synthetic-train 60000 --synthetic-test 256 --batch-size 256 --max-steps 150 --out /tmp/d3/syn > /dev/null 2>&1
echo "x1 synthetic $(rate /tmp/d3/syn 20 256)" >> $R
grep -B2 -A20 -m3 "Failure" $OUT/gpu-tests-N.log | cut -c1-300 | head -40 >> $R
grep -h "rror" /tmp/d3-*.log | head -5 >> $R
cat $R
