#!/bin/bash
# Session 9, call 4 (nvidia-h100-x2): VGG-19 amp-bf16, mgpu one GPU and DDP on two, eager and with --cuda-graphs true (--data-on-device true both), three rounds
source .devdeps/activate.sh; for f in .devdeps/libutfcpp-dev*.deb; do dpkg -x $f /opt/deps; done
export NCCL_NVLS_ENABLE=0
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export LD_LIBRARY_PATH=/tmp/site/nvidia/cu13/lib:$LD_LIBRARY_PATH
R=$OUT/call4.txt; t0=$(date +%s)
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
for rep in range(3):
    for graphs in ("false", "true"):
        for world in (1, 2):
            r = mgpu_run(args, "vgg19", "amp-bf16", world, f"/tmp/vgg-{rep}-{graphs}-{world}",
                         extra_flags=["--cuda-graphs", graphs, "--data-on-device", "true"])
            ph = {k: round(v * 1e3, 2) for k, v in (r.get("device_seconds_per_step") or {}).items()}
            print(f"[{time.time() - t0:.0f} s] rep {rep} graphs {graphs} world {world}: "
                  f"{r.get('images_per_second') or r.get('error')} img/s, step {1e3 * (r.get('step_seconds') or 0):.2f} ms, "
                  f"phases ms {ph}", flush=True)
PY
el "done rc $?"
cat $R
