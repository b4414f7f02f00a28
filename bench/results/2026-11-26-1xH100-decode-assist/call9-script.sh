#!/bin/bash
# B = land40b (split streams + CPU assist + thread-local capture). GPU tests, then bench/gpu_decode_bench.sh.
source .gpu/prebuilt_env.sh
t0=$(date +%s)
E2E=$HOME/.cache/mgpu/bench-e2e/jpeg-40000
python3 bench/make_jpeg_folder.py $E2E --images 40000 > /tmp/make_jpeg.txt 2>&1 &
# The GPU tests start the worker by the absolute path they were built with (MGPU_WORKER_BIN):
# BUILT_IN is that checkout on the VM; the GPU host's checkout stands in for it.
BUILT_IN=${BUILT_IN:?the checkout the gpubin binaries were built in}
[ -e "$BUILT_IN" ] || { mkdir -p "$(dirname "$BUILT_IN")" && ln -s "$PWD" "$BUILT_IN"; }
mkdir -p build-gpu/bin "$BUILT_IN/build/bin"
for b in mgpu-worker mgpu-loader-bench; do ln -sf $PWD/gpubin/B/$b build-gpu/bin/$b; done
ln -sf "$PWD/gpubin/B/mgpu-worker" "$BUILT_IN/build/bin/mgpu-worker"
gpubin/B/mgpu_gpu_tests --gtest_filter='CudaGraphs.GraphedStepsTrainFromJpegs*:GpuDecode*' > /tmp/tB.txt 2>&1
echo "B tests: $(grep -cE '^\[       OK' /tmp/tB.txt) ok, $(grep -cE '^\[  FAILED  \] [A-Z]' /tmp/tB.txt) failed" | tee -a $OUT/bench40.txt
grep -B2 -A20 -m2 "Failure" /tmp/tB.txt | tee -a $OUT/bench40.txt
wait; echo "ready at $(( $(date +%s) - t0 )) s" | tee -a $OUT/bench40.txt
mkdir -p ~/.cache/mgpu/venv-bench/bin; printf "#!/bin/sh\nexec %s \"\$@\"\n" "$(command -v python3)" > ~/.cache/mgpu/venv-bench/bin/python; chmod +x ~/.cache/mgpu/venv-bench/bin/python
export MGPU_BENCH_PYTHON=~/.cache/mgpu/venv-bench/bin/python
timeout 440 bash bench/gpu_decode_bench.sh build-gpu /tmp/gd python3 > /tmp/gd.log 2>&1
echo "bench rc $? at $(( $(date +%s) - t0 )) s" | tee -a $OUT/bench40.txt
grep -vE "Warning|warn\(" /tmp/gd.log | tail -60 >> $OUT/bench40.txt
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader >> $OUT/bench40.txt
lscpu | grep "Model name" >> $OUT/bench40.txt
cd /tmp && find gd -name "*.json" -o -name "*.jsonl" -o -name "*.md" -o -name "*.log" | tar czf $OUT/gd.tgz -T -
