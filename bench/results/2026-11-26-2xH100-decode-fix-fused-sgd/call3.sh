#!/bin/bash
# Session 8, call 3 (nvidia-h100-x2): the DDP GPU tests at the final teardown message (gpubin/O),
# then ResNet-18 end to end on 2 GPUs, CPU decode, 16 workers per GPU, with PyTorch's row given 300 s.
source .gpu/prebuilt_env.sh
export NCCL_NVLS_ENABLE=0
t0=$(date +%s); R=$OUT/s8c.txt
E2E=$HOME/.cache/mgpu/bench-e2e/jpeg-40000
( [ -d $E2E/train ] || python3 bench/make_jpeg_folder.py $E2E --images 40000 > /tmp/mk.txt 2>&1 ) &
# BUILT_IN is that checkout on the VM; the GPU host's checkout stands in for it.
BUILT_IN=${BUILT_IN:?the checkout the gpubin binaries were built in}
[ -e "$BUILT_IN" ] || { mkdir -p "$(dirname "$BUILT_IN")" && ln -s "$PWD" "$BUILT_IN"; }
mkdir -p build-gpu/bin "$BUILT_IN/build/bin"
for b in mgpu-worker mgpu-loader-bench; do ln -sf $PWD/gpubin/O/$b build-gpu/bin/$b; done
ln -sf "$PWD/gpubin/O/mgpu-worker" "$BUILT_IN/build/bin/mgpu-worker"
mkdir -p ~/.cache/mgpu/venv-bench/bin; printf "#!/bin/sh\nexec %s \"\$@\"\n" "$(command -v python3)" > ~/.cache/mgpu/venv-bench/bin/python; chmod +x ~/.cache/mgpu/venv-bench/bin/python
export MGPU_BENCH_PYTHON=~/.cache/mgpu/venv-bench/bin/python
timeout 100 gpubin/O/mgpu_gpu_tests --gtest_filter='CudaDdp*' > /tmp/new.txt 2>&1
echo "CudaDdp* (gpubin/O): rc $? at $(( $(date +%s) - t0 )) s" >> $R; grep -E "^\[  (FAILED|     OK|  SKIPPED) " /tmp/new.txt >> $R
grep -B2 -A12 -m2 "Failure" /tmp/new.txt >> $R
wait; echo "jpeg at $(( $(date +%s) - t0 )) s" >> $R
timeout 470 python3 bench/e2e_bench.py --build build-gpu --out /tmp/s8-e2e-w16 --models resnet18 --worlds 2 --workers 16 --run-timeout 300 > /tmp/e2e.log 2>&1
echo "e2e x2 w16 rc $? at $(( $(date +%s) - t0 )) s" >> $R; grep -E "^\|" /tmp/e2e.log >> $R; tail -4 /tmp/e2e.log >> $R
cp /tmp/s8-e2e-w16/e2e-bench.json $OUT/ 2>/dev/null
cat $R
