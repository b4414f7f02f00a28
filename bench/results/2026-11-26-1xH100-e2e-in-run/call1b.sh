#!/bin/bash
# Next GPU session, call 1: main (gpubin/M, rebuild it first: cp build/bin/{mgpu-worker,mgpu-loader-bench,mgpu_gpu_tests} gpubin/M/). GPU tests (pow2 DCT scales), LeNet traces, gpu_decode_bench.sh.
source .gpu/prebuilt_env.sh
export NCCL_NVLS_ENABLE=0
t0=$(date +%s); R=$OUT/call1b.txt
# BUILT_IN is that checkout on the VM; the GPU host's checkout stands in for it.
BUILT_IN=${BUILT_IN:?the checkout the gpubin binaries were built in}
[ -e "$BUILT_IN" ] || { mkdir -p "$(dirname "$BUILT_IN")" && ln -s "$PWD" "$BUILT_IN"; }
mkdir -p build-gpu/bin "$BUILT_IN/build/bin"
for b in mgpu-worker mgpu-loader-bench; do ln -sf $PWD/gpubin/M/$b build-gpu/bin/$b; done
ln -sf "$PWD/gpubin/M/mgpu-worker" "$BUILT_IN/build/bin/mgpu-worker"
E2E=$HOME/.cache/mgpu/bench-e2e/jpeg-40000
ls $E2E/train | head -3 >> $R
mkdir -p ~/.cache/mgpu/venv-bench/bin; printf "#!/bin/sh\nexec %s \"\$@\"\n" "$(command -v python3)" > ~/.cache/mgpu/venv-bench/bin/python; chmod +x ~/.cache/mgpu/venv-bench/bin/python
export MGPU_BENCH_PYTHON=~/.cache/mgpu/venv-bench/bin/python
timeout 330 bash bench/gpu_decode_bench.sh build-gpu /tmp/gd python3 > /tmp/gd.log 2>&1
echo "bench rc $? at $(( $(date +%s) - t0 )) s" | tee -a $R
grep -vE "Warning|warn\(" /tmp/gd.log | tail -40 >> $R
cd /tmp
find gd -name "*.json" -o -name "*.jsonl" -o -name "metrics.csv" -o -name "*.log" | tar czf $OUT/gd.tgz -T -
