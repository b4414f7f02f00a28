#!/bin/bash
# Session 8, call 2 (nvidia-h100-x2): the failed-rank NCCL teardown (gpubin/O) against the old
# worker (gpubin/N), the DDP GPU tests, strongest_bench LeNet with foreach and fused SGD anchors,
# ResNet-18's PyTorch graphed step with foreach and fused SGD.
source .gpu/prebuilt_env.sh
export NCCL_NVLS_ENABLE=0
t0=$(date +%s); R=$OUT/s8b.txt
nvidia-smi --query-gpu=name --format=csv,noheader >> $R
echo "nsys: $(command -v nsys) $(ls -d /usr/local/cuda*/bin/nsys 2>/dev/null) $(ls /opt/nvidia 2>/dev/null | head -3)" >> $R
# BUILT_IN is that checkout on the VM; the GPU host's checkout stands in for it.
BUILT_IN=${BUILT_IN:?the checkout the gpubin binaries were built in}
[ -e "$BUILT_IN" ] || { mkdir -p "$(dirname "$BUILT_IN")" && ln -s "$PWD" "$BUILT_IN"; }
mkdir -p build-gpu/bin "$BUILT_IN/build/bin"
for b in mgpu-worker mgpu-loader-bench; do ln -sf $PWD/gpubin/O/$b build-gpu/bin/$b; done
mkdir -p ~/.cache/mgpu/venv-bench/bin; printf "#!/bin/sh\nexec %s \"\$@\"\n" "$(command -v python3)" > ~/.cache/mgpu/venv-bench/bin/python; chmod +x ~/.cache/mgpu/venv-bench/bin/python
export MGPU_BENCH_PYTHON=~/.cache/mgpu/venv-bench/bin/python
NEW=CudaDdp.ARankThatFailsExitsWhileItsPeerWaitsInTheNextCollective
ln -sf "$PWD/gpubin/N/mgpu-worker" "$BUILT_IN/build/bin/mgpu-worker"
timeout 100 gpubin/O/mgpu_gpu_tests --gtest_filter=$NEW > /tmp/old.txt 2>&1
echo "OLD worker (gpubin/N), $NEW: rc $? at $(( $(date +%s) - t0 )) s" >> $R; grep -E "^\[  (FAILED|     OK|  PASSED) |exit_code|Which is" /tmp/old.txt | head -8 >> $R
ln -sf "$PWD/gpubin/O/mgpu-worker" "$BUILT_IN/build/bin/mgpu-worker"
timeout 200 gpubin/O/mgpu_gpu_tests --gtest_filter='CudaDdp*:GpuDecode.BatchesOnTheLastDevice*' > /tmp/new.txt 2>&1
echo "NEW worker (gpubin/O): rc $? at $(( $(date +%s) - t0 )) s" >> $R; grep -E "^\[  (FAILED|     OK|  SKIPPED) " /tmp/new.txt >> $R
grep -B2 -A12 -m2 "Failure" /tmp/new.txt >> $R
timeout 60 python3 bench/strongest_reference.py --model resnet18 --compile none --optimizer-impl foreach,fused,foreach,fused --steps 300 >> $R 2>/tmp/r18.err || tail -3 /tmp/r18.err >> $R
echo "r18 ref at $(( $(date +%s) - t0 )) s" >> $R
timeout 270 python3 bench/strongest_bench.py --build build-gpu --out /tmp/s8-strong --models lenet --compile-mode default --run-timeout 240 > /tmp/sb.log 2>&1
echo "strongest lenet rc $? at $(( $(date +%s) - t0 )) s" >> $R; grep -E "^\|" /tmp/sb.log >> $R; tail -3 /tmp/sb.log >> $R
cp /tmp/s8-strong/strongest-bench.json $OUT/ 2>/dev/null
cat $R
