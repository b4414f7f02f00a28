#!/bin/bash
# Session 9, call 2 (nvidia-h100-x2): rebuild (fresh machine); LeNet A (AddChannelBias) / B (bias in the
# convolution) interleaved, longer runs; VGG-19 amp-bf16 mgpu one GPU / DDP on two, alternated four times;
# the GPUs' clocks, power and throttle reasons sampled every 200 ms through it all.
source .devdeps/activate.sh; for f in .devdeps/libutfcpp-dev*.deb; do dpkg -x $f /opt/deps; done
export NCCL_NVLS_ENABLE=0
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export LD_LIBRARY_PATH=/tmp/site/nvidia/cu13/lib:$LD_LIBRARY_PATH
R=$OUT/call2.txt; t0=$(date +%s)
el() { echo "[$(( $(date +%s) - t0 )) s] $*" | tee -a $R; }
nvidia-smi --query-gpu=index,power.limit,clocks.max.sm,clocks.max.mem --format=csv >> $R
nvidia-smi --query-gpu=timestamp,index,clocks.sm,clocks.mem,power.draw,temperature.gpu,utilization.gpu,clocks_throttle_reasons.active \
  --format=csv,noheader -lms 200 > $OUT/smi.csv 2>&1 &
SMI=$!
cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DMGPU_PYTHON=$(command -v python3) \
  -DMGPU_TEST_PYTHON=$(command -v python3) -DMGPU_NVJPEG_INCLUDE_DIR=/tmp/site/nvidia/cu13/include -DMPI_CXX_COMPILER=$MPI_CXX_COMPILER > /tmp/cmake.log 2>&1 || { tail -30 /tmp/cmake.log >> $R; cat $R; exit 1; }
cp models/lenet.cpp /tmp/lenet.orig && sed -i 's/  if (!x.is_cuda()) return conv(x);/  return conv(x);/' models/lenet.cpp
ninja -C build-gpu mgpu-worker > /tmp/ninja.log 2>&1 || { grep -A8 FAILED /tmp/ninja.log >> $R; cat $R; exit 1; }
cp build-gpu/bin/mgpu-worker /tmp/worker-B; cp /tmp/lenet.orig models/lenet.cpp; touch models/lenet.cpp
ninja -C build-gpu mgpu-worker > /tmp/ninja.log 2>&1 || { grep -A8 FAILED /tmp/ninja.log >> $R; cat $R; exit 1; }
el "built"
LENET="--model lenet --dataset synthetic --image-size 28 --synthetic-channels 1 --synthetic-train 684032 --synthetic-test 256 --batch-size 32 --epochs 100000 --log-every 100 --optimizer sgd --momentum 0.9 --lr 0.01 --progress lines --overwrite --device cuda --precision tf32 --channels-last false --cuda-graphs true --data-on-device true"
run() {  # BIN STEPS -> wall seconds
  local s=$(date +%s.%N); timeout 120 $1 $LENET --max-steps $2 --out /tmp/l-$2 > /tmp/l-$2.log 2>&1 || tail -3 /tmp/l-$2.log >> $R
  awk -v a=$(date +%s.%N) -v b=$s 'BEGIN{printf "%.3f", a - b}'
}
pair() {  # LABEL BIN
  local a=$(run $2 1300) b=$(run $2 31300)
  el "lenet $1: $a s / $b s -> $(awk -v a=$a -v b=$b 'BEGIN{printf "%.0f", 30000 / (b - a)}') steps/s"
}
run build-gpu/bin/mgpu-worker 400 > /dev/null
for v in A B B A A B B A; do [ $v = A ] && pair A-channel-bias build-gpu/bin/mgpu-worker || pair B-conv-bias /tmp/worker-B; done
el "vgg start"
timeout 330 python3 - >> $R 2>&1 <<'PY'
import argparse, sys, time
sys.path.insert(0, "bench")
from gpu_bench import mgpu_run
args = argparse.Namespace(build="build-gpu", warmup=20, steps=300, batch=256, loader_workers=4, run_timeout=90)
t0 = time.time()
for rep in range(4):
    for world in (1, 2):
        r = mgpu_run(args, "vgg19", "amp-bf16", world, f"/tmp/vgg-{rep}-{world}")
        ph = {k: round(v * 1e3, 2) for k, v in (r.get("device_seconds_per_step") or {}).items()}
        print(f"[{time.time() - t0:.0f} s in vgg] rep {rep} world {world}: {r.get('images_per_second') or r.get('error')} img/s, "
              f"step {1e3 * (r.get('step_seconds') or 0):.2f} ms, phases ms {ph}", flush=True)
PY
el "vgg done rc $?"
kill $SMI
python3 - $OUT/smi.csv >> $R <<'PY'
import collections, sys
by = collections.defaultdict(list)
for line in open(sys.argv[1]):
    f = [x.strip() for x in line.split(",")]
    if len(f) < 8 or not f[2].split()[0].isdigit() or int(f[6].split()[0]) < 50: continue  # busy samples only
    by[(f[1], f[7])].append((int(f[2].split()[0]), float(f[4].split()[0])))
for (gpu, reason), s in sorted(by.items()):
    c = sorted(x[0] for x in s); p = sorted(x[1] for x in s)
    print(f"  gpu {gpu} throttle {reason}: {len(s)} busy samples, sm MHz min {c[0]} median {c[len(c)//2]} max {c[-1]}, W median {p[len(p)//2]:.0f} max {p[-1]:.0f}")
PY
cat $R
