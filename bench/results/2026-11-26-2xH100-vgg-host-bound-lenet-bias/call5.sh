#!/bin/bash
# Session 9, call 5 (nvidia-h100-x2): VGG-19 amp-bf16 graphed (--cuda-graphs, --data-on-device): one GPU, and DDP on two as it is, with bf16 gradient all-reduces, and with NCCL on at most 4 SMs, two rounds
source .devdeps/activate.sh; for f in .devdeps/libutfcpp-dev*.deb; do dpkg -x $f /opt/deps; done
export NCCL_NVLS_ENABLE=0
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export LD_LIBRARY_PATH=/tmp/site/nvidia/cu13/lib:$LD_LIBRARY_PATH
R=$OUT/call5.txt; t0=$(date +%s)
el() { echo "[$(( $(date +%s) - t0 )) s] $*" | tee -a $R; }
cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DMGPU_PYTHON=$(command -v python3) \
  -DMGPU_TEST_PYTHON=$(command -v python3) -DMGPU_NVJPEG_INCLUDE_DIR=/tmp/site/nvidia/cu13/include -DMPI_CXX_COMPILER=$MPI_CXX_COMPILER > /tmp/cmake.log 2>&1 || { tail -30 /tmp/cmake.log >> $R; cat $R; exit 1; }
ninja -C build-gpu mgpu-worker > /tmp/ninja.log 2>&1 || { grep -A8 FAILED /tmp/ninja.log >> $R; cat $R; exit 1; }
el "built"
timeout 400 python3 - >> $R 2>&1 <<'PY'
import argparse, sys, time
sys.path.insert(0, "bench")
from gpu_bench import mgpu_run
args = argparse.Namespace(build="build-gpu", warmup=20, steps=300, batch=256, loader_workers=4, run_timeout=90)
t0 = time.time()
G = ["--cuda-graphs", "true", "--data-on-device", "true"]
VARIANTS = [("one GPU", 1, []), ("DDP", 2, []), ("DDP bf16 all-reduce", 2, ["--ddp-compression", "bf16"]),
            ("DDP NCCL at most 4 CTAs", 2, ["--nccl-max-ctas", "4"])]
for rep in range(2):
    for i, (label, world, flags) in enumerate(VARIANTS):
        r = mgpu_run(args, "vgg19", "amp-bf16", world, f"/tmp/vgg-{rep}-{i}", extra_flags=G + flags)
        print(f"[{time.time() - t0:.0f} s] rep {rep} {label}: {r.get('images_per_second') or r.get('error')} img/s, "
              f"step {1e3 * (r.get('step_seconds') or 0):.2f} ms, buckets {r.get('buckets')}", flush=True)
PY
el "done rc $?"
cat $R
