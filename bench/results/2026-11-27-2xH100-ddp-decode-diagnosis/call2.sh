#!/bin/bash
# Session 21, call 2 (nvidia-h100-x2, main ef3fd0d + .gpu/ahead-switch.diff): why DDP's --decode gpu producer is
# slower: Kineto traces (--profile-steps 40-44) of one GPU alone and of DDP's rank 0 and 1 (nvjpeg_calls.py reads
# them); DDP with 4 batches ahead (MGPU_AB_AHEAD=4) against 2, alternating.
source .devdeps/activate.sh; for f in .devdeps/libutfcpp-dev*.deb; do dpkg -x $f /opt/deps; done
export NCCL_NVLS_ENABLE=0
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export LD_LIBRARY_PATH=/tmp/site/nvidia/cu13/lib:$LD_LIBRARY_PATH PYTHONPATH=/tmp/site
R=$OUT/call2.txt; t0=$(date +%s)
el() { echo "[$(( $(date +%s) - t0 )) s] $*" | tee -a $R; }
nvidia-smi -L >> $R; nproc >> $R; git log --oneline -1 >> $R
E2E=$HOME/.cache/mgpu/bench-e2e/jpeg-40000
[ -d $E2E/train ] || { python3 bench/make_jpeg_folder.py $E2E --images 40000 > /tmp/mk.txt 2>&1 & }
[ -d build-gpu ] || cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DMGPU_PYTHON=$(command -v python3) \
  -DMGPU_TEST_PYTHON=$(command -v python3) -DMGPU_NVJPEG_INCLUDE_DIR=/tmp/site/nvidia/cu13/include -DMPI_CXX_COMPILER=$MPI_CXX_COMPILER > /tmp/cmake.log 2>&1 || { tail -30 /tmp/cmake.log >> $R; cat $R; exit 1; }
ninja -C build-gpu mgpu-worker mgpu_gpu_tests mgpu-loader-bench > /tmp/ninja.log 2>&1 || { grep -A12 FAILED /tmp/ninja.log | head -60 >> $R; cat $R; exit 1; }
B=build-gpu/bin
el "built"; wait; el "jpegs there: $(ls $E2E/train | wc -l) classes"
mkdir -p /tmp/d2
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
one() { # GPU name extra
  env CUDA_VISIBLE_DEVICES=$1 timeout 60 $B/mgpu-worker $COMMON $STREAM --batch-size 256 --max-steps $3 $4 --out /tmp/d2/$2 > /tmp/d2-$2.log 2>&1
  echo "$2 $(rate /tmp/d2/$2 20 256)" >> $R; }
ddp() { # name steps extra-flags env
  port=$(( 29500 + RANDOM % 1000 ))
  for r in 0 1; do env $4 RANK=$r WORLD_SIZE=2 LOCAL_RANK=$r LOCAL_WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=$port \
    timeout 70 $B/mgpu-worker $COMMON $STREAM --mode ddp --backend nccl --batch-size 512 --max-steps $2 $3 --out /tmp/d2/$1 > /tmp/d2-$1-$r.log 2>&1 & done; wait
  echo "$1 $(rate /tmp/d2/$1 20 512)" >> $R; }
mkdir -p $OUT/traces
one 0 prof-single 50 "--profile-steps 40-44"
ddp prof-ddp 50 "--profile-steps 40-44"
for d in prof-single prof-ddp; do ls /tmp/d2/$d >> $R; for t in /tmp/d2/$d/trace-rank*.json; do gzip -c $t > $OUT/traces/$d-$(basename $t).gz; done; done
el "traces done"
for rep in 1 2; do
  ddp ddp-A-$rep 76 "" ""
  ddp ddp-Q-$rep 76 "" MGPU_AB_AHEAD=4
done
ddp ddp-Q8 76 "" MGPU_AB_AHEAD=8
one 0 single-A 150 ""
MGPU_AB_AHEAD=4 one 0 single-Q 150 ""
el "A/B done"
grep -h "rror" /tmp/d2-*.log | head -5 >> $R
cat $R
