#!/bin/bash
# Next GPU session, call 1: main (gpubin/M, rebuild it first: cp build/bin/{mgpu-worker,mgpu-loader-bench,mgpu_gpu_tests} gpubin/M/). GPU tests (pow2 DCT scales), LeNet traces, gpu_decode_bench.sh.
source .gpu/prebuilt_env.sh
export NCCL_NVLS_ENABLE=0
t0=$(date +%s); R=$OUT/call1.txt
E2E=$HOME/.cache/mgpu/bench-e2e/jpeg-40000
python3 bench/make_jpeg_folder.py $E2E --images 40000 > /tmp/mk.txt 2>&1 &
# BUILT_IN is that checkout on the VM; the GPU host's checkout stands in for it.
BUILT_IN=${BUILT_IN:?the checkout the gpubin binaries were built in}
[ -e "$BUILT_IN" ] || { mkdir -p "$(dirname "$BUILT_IN")" && ln -s "$PWD" "$BUILT_IN"; }
mkdir -p build-gpu/bin "$BUILT_IN/build/bin"
for b in mgpu-worker mgpu-loader-bench; do ln -sf $PWD/gpubin/M/$b build-gpu/bin/$b; done
ln -sf "$PWD/gpubin/M/mgpu-worker" "$BUILT_IN/build/bin/mgpu-worker"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader >> $R; lscpu | grep "Model name" >> $R; nproc >> $R
gpubin/M/mgpu_gpu_tests --gtest_filter='GpuDecode*:*GpuDecodeEachDecoder*:CudaGraphs.*:DevicePrefetcherCuda*:CudaTraining*' > /tmp/t.txt 2>&1
echo "tests: $(grep -cE '^\[       OK' /tmp/t.txt) ok, $(grep -cE '^\[  FAILED  \] [A-Z]' /tmp/t.txt) failed at $(( $(date +%s) - t0 )) s" | tee -a $R
grep -E '^\[       OK|^\[  FAILED' /tmp/t.txt >> $R
grep -B2 -A25 -m3 "Failure" /tmp/t.txt >> $R
mkdir -p /tmp/tr
W=gpubin/M/mgpu-worker
L="--model lenet --dataset synthetic --synthetic-channels 1 --image-size 28 --synthetic-train 3232 --synthetic-test 256 --batch-size 32 --epochs 100000 --optimizer sgd --momentum 0.9 --lr 0.01 --precision amp-bf16 --progress lines --device cuda --channels-last true --cuda-graphs true --data-on-device true"
$W $L --max-steps 6000 --log-every 500 --out /tmp/tr/lenet > /tmp/tr/lenet.log 2>&1; echo "lenet rc $?" >> $R
cat /tmp/tr/lenet/metrics.csv >> $R
$W $L --max-steps 1200 --log-every 100 --profile-steps 1000-1029 --out /tmp/tr/lenet-prof > /tmp/tr/lenet-prof.log 2>&1; echo "lenet prof rc $?" >> $R
python3 bench/trace_gaps.py /tmp/tr/lenet-prof/trace-rank0.json --top 8 >> $R 2>&1
timeout 150 python3 .gpu/lenet_trace.py /tmp/tr >> $R 2>&1
echo "traces done at $(( $(date +%s) - t0 )) s" >> $R
wait; echo "jpeg ready at $(( $(date +%s) - t0 )) s" | tee -a $R
mkdir -p ~/.cache/mgpu/venv-bench/bin; printf "#!/bin/sh\nexec %s \"\$@\"\n" "$(command -v python3)" > ~/.cache/mgpu/venv-bench/bin/python; chmod +x ~/.cache/mgpu/venv-bench/bin/python
export MGPU_BENCH_PYTHON=~/.cache/mgpu/venv-bench/bin/python
(cd /tmp && tar czf $OUT/traces.tgz tr/lenet-prof/trace-rank0.json tr/pt-lenet-none.json tr/pt-lenet-default.json tr/lenet/metrics.csv 2>/dev/null)
# The uint8 batches and the in-run e2e measurement: ResNet-18 from JPEGs on the CPU path, 1 GPU, 16 workers.
timeout 200 python3 bench/e2e_bench.py --build build-gpu --out /tmp/e2e-cpu --models resnet18 --worlds 1 --workers 16 --run-timeout 120 > /tmp/e2e-cpu.log 2>&1
echo "e2e cpu rc $? at $(( $(date +%s) - t0 )) s" >> $R; grep -vE "Warning|warn\(" /tmp/e2e-cpu.log | tail -12 >> $R
cp /tmp/e2e-cpu/e2e-bench.json $OUT/e2e-cpu.json 2>/dev/null; echo "end at $(( $(date +%s) - t0 )) s" >> $R
