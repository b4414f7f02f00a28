#!/bin/bash
# Session 8, first call, on nvidia-h100-x2: verify the --decode gpu device fix (gpubin/N), then the 2-GPU rows it blocked.
source .gpu/prebuilt_env.sh
export NCCL_NVLS_ENABLE=0
t0=$(date +%s); R=$OUT/s8.txt
E2E=$HOME/.cache/mgpu/bench-e2e/jpeg-40000
( [ -d $E2E/train ] || python3 bench/make_jpeg_folder.py $E2E --images 40000 > /tmp/mk.txt 2>&1 ) &
# BUILT_IN is that checkout on the VM; the GPU host's checkout stands in for it.
BUILT_IN=${BUILT_IN:?the checkout the gpubin binaries were built in}
[ -e "$BUILT_IN" ] || { mkdir -p "$(dirname "$BUILT_IN")" && ln -s "$PWD" "$BUILT_IN"; }
mkdir -p build-gpu/bin "$BUILT_IN/build/bin"
for b in mgpu-worker mgpu-loader-bench; do ln -sf $PWD/gpubin/N/$b build-gpu/bin/$b; done
ln -sf "$PWD/gpubin/N/mgpu-worker" "$BUILT_IN/build/bin/mgpu-worker"
mkdir -p ~/.cache/mgpu/venv-bench/bin; printf "#!/bin/sh\nexec %s \"\$@\"\n" "$(command -v python3)" > ~/.cache/mgpu/venv-bench/bin/python; chmod +x ~/.cache/mgpu/venv-bench/bin/python
export MGPU_BENCH_PYTHON=~/.cache/mgpu/venv-bench/bin/python
timeout 150 gpubin/N/mgpu_gpu_tests --gtest_filter='GpuDecode*:CudaDdp*:CudaGraphs.*' > /tmp/t.txt 2>&1
echo "tests: $(grep -cE '^\[       OK' /tmp/t.txt) ok, $(grep -cE '^\[  FAILED  \] [A-Z]' /tmp/t.txt) failed at $(( $(date +%s) - t0 )) s" >> $R
grep -E '^\[  FAILED|^\[  SKIPPED|OnTheLastDevice' /tmp/t.txt >> $R; grep -B2 -A20 -m2 "Failure" /tmp/t.txt >> $R
wait; echo "jpeg at $(( $(date +%s) - t0 )) s" >> $R
timeout 220 python3 bench/e2e_bench.py --build build-gpu --out /tmp/s8-e2e-gpu --models resnet18 --worlds 2 --workers 4 --e2e-flags "--decode gpu" --run-timeout 120 > /tmp/s8a.log 2>&1
echo "e2e x2 decode gpu rc $? at $(( $(date +%s) - t0 )) s" >> $R; grep -E "^\|" /tmp/s8a.log >> $R
(cd /tmp && find s8-e2e-gpu -name "*.json" -o -name "*.log" | tar czf $OUT/s8.tgz -T - 2>/dev/null)
timeout 120 python3 bench/results/2026-11-26-2xH100-decode-fix-fused-sgd/lenet_alt.py >> $R 2>&1; echo "lenet_alt rc $? at $(( $(date +%s) - t0 )) s" >> $R
cat $R
