#!/bin/bash
# 2 GPUs: VGG-19 amp-bf16 DDP scaling (2 reps), e2e ResNet-18 at 2 GPUs from JPEGs (CPU decode 16 workers/GPU; --decode gpu 4 threads/GPU).
source .gpu/prebuilt_env.sh
export NCCL_NVLS_ENABLE=0
t0=$(date +%s); R=$OUT/two.txt
E2E=$HOME/.cache/mgpu/bench-e2e/jpeg-40000
( [ -d $E2E/train ] || python3 bench/make_jpeg_folder.py $E2E --images 40000 > /tmp/mk.txt 2>&1 ) &
# BUILT_IN is that checkout on the VM; the GPU host's checkout stands in for it.
BUILT_IN=${BUILT_IN:?the checkout the gpubin binaries were built in}
[ -e "$BUILT_IN" ] || { mkdir -p "$(dirname "$BUILT_IN")" && ln -s "$PWD" "$BUILT_IN"; }
mkdir -p build-gpu/bin "$BUILT_IN/build/bin"
for b in mgpu-worker mgpu-loader-bench; do ln -sf $PWD/gpubin/M/$b build-gpu/bin/$b; done
ln -sf "$PWD/gpubin/M/mgpu-worker" "$BUILT_IN/build/bin/mgpu-worker"
mkdir -p ~/.cache/mgpu/venv-bench/bin; printf "#!/bin/sh\nexec %s \"\$@\"\n" "$(command -v python3)" > ~/.cache/mgpu/venv-bench/bin/python; chmod +x ~/.cache/mgpu/venv-bench/bin/python
export MGPU_BENCH_PYTHON=~/.cache/mgpu/venv-bench/bin/python
nvidia-smi --query-gpu=name --format=csv,noheader >> $R; nproc >> $R; nvidia-smi topo -m | head -4 >> $R
for rep in 1 2; do
  timeout 150 python3 bench/gpu_bench.py --build build-gpu --out /tmp/vgg$rep --models vgg19 --precisions amp-bf16 --modes ddp --steps 60 --warmup 20 --run-timeout 90 > /tmp/vgg$rep.log 2>&1
  echo "vgg rep $rep rc $? at $(( $(date +%s) - t0 )) s" >> $R; grep -E "^\|" /tmp/vgg$rep.log | grep -v -- "---" >> $R
done
wait; echo "jpeg at $(( $(date +%s) - t0 )) s" >> $R
timeout 150 python3 bench/e2e_bench.py --build build-gpu --out /tmp/e2e2 --models resnet18 --worlds 2 --workers 16 --run-timeout 100 > /tmp/e2e2.log 2>&1
echo "e2e2 cpu rc $? at $(( $(date +%s) - t0 )) s" >> $R; grep -E "^\|" /tmp/e2e2.log >> $R
timeout 120 python3 bench/e2e_bench.py --build build-gpu --out /tmp/e2e2g --models resnet18 --worlds 2 --workers 4 --e2e-flags "--decode gpu" --run-timeout 100 > /tmp/e2e2g.log 2>&1
echo "e2e2 gpu rc $? at $(( $(date +%s) - t0 )) s" >> $R; grep -E "^\|" /tmp/e2e2g.log >> $R
cd /tmp && find vgg1 vgg2 e2e2 e2e2g -name "*.json" -o -name "metrics.csv" | tar czf $OUT/two.tgz -T - 2>/dev/null
cat $R
