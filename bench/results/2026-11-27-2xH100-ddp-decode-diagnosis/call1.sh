#!/bin/bash
# Session 21, call 1 (nvidia-h100-x2, main ef3fd0d): (a) why two GPUs lose a fifth of --decode gpu's per-GPU rate:
# one process alone, two independent processes (one a GPU), DDP, DDP --nccl-max-ctas 4; (b) issue 39's
# ResNet-18 e2e row with --decode gpu at 16 threads a GPU (e2e_bench.py, worlds 1,2, --no-pytorch).
source .devdeps/activate.sh; for f in .devdeps/libutfcpp-dev*.deb; do dpkg -x $f /opt/deps; done
export NCCL_NVLS_ENABLE=0
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export LD_LIBRARY_PATH=/tmp/site/nvidia/cu13/lib:$LD_LIBRARY_PATH PYTHONPATH=/tmp/site
R=$OUT/call1.txt; t0=$(date +%s)
el() { echo "[$(( $(date +%s) - t0 )) s] $*" | tee -a $R; }
nvidia-smi -L >> $R; nproc >> $R; git log --oneline -1 >> $R
E2E=$HOME/.cache/mgpu/bench-e2e/jpeg-40000
[ -d $E2E/train ] || { python3 bench/make_jpeg_folder.py $E2E --images 40000 > /tmp/mk.txt 2>&1 & }
[ -d build-gpu ] || cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DMGPU_PYTHON=$(command -v python3) \
  -DMGPU_TEST_PYTHON=$(command -v python3) -DMGPU_NVJPEG_INCLUDE_DIR=/tmp/site/nvidia/cu13/include -DMPI_CXX_COMPILER=$MPI_CXX_COMPILER > /tmp/cmake.log 2>&1 || { tail -30 /tmp/cmake.log >> $R; cat $R; exit 1; }
ninja -C build-gpu mgpu-worker mgpu_gpu_tests mgpu-loader-bench > /tmp/ninja.log 2>&1 || { grep -A12 FAILED /tmp/ninja.log | head -60 >> $R; cat $R; exit 1; }
B=build-gpu/bin
el "built"; wait; el "jpegs there: $(ls $E2E/train | wc -l) classes"
mkdir -p /tmp/d1
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
one() { # GPU name
  env CUDA_VISIBLE_DEVICES=$1 /usr/bin/time -f "cpu %U+%S s wall %e s" timeout 60 $B/mgpu-worker $COMMON $STREAM --batch-size 256 --max-steps 150 --out /tmp/d1/$2 > /tmp/d1-$2.log 2> /tmp/d1-$2.time
  echo "$2 $(rate /tmp/d1/$2 20 256) $(tail -1 /tmp/d1-$2.time)" >> $R; }
ddp() { # name extra
  port=$(( 29500 + RANDOM % 1000 ))
  for r in 0 1; do env RANK=$r WORLD_SIZE=2 LOCAL_RANK=$r LOCAL_WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=$port \
    timeout 70 $B/mgpu-worker $COMMON $STREAM --mode ddp --backend nccl --batch-size 512 --max-steps 76 $2 --out /tmp/d1/$1 > /tmp/d1-$1-$r.log 2>&1 & done; wait
  echo "$1 $(rate /tmp/d1/$1 20 512)" >> $R; }
one 0 alone-a
( one 0 indep0 ) & ( one 1 indep1 ) & wait
ddp ddp-a
ddp ddp-ctas4 "--nccl-max-ctas 4"
one 1 alone-b
( one 0 indep0b ) & ( one 1 indep1b ) & wait
ddp ddp-b
el "diagnosis done"
grep -h "rror" /tmp/d1-*.log | head -5 >> $R
python3 bench/e2e_bench.py --build build-gpu --out $OUT/e2e-r18-w16-gpu --data-dir $E2E --models resnet18 --worlds 1,2 --workers 16 \
  --e2e-flags "--decode gpu" --no-pytorch --bench-python $(command -v python3) --run-timeout 100 > $OUT/e2e-r18-w16-gpu.log 2>&1
el "e2e rc $?"
tail -25 $OUT/e2e-r18-w16-gpu.log >> $R
cat $R
