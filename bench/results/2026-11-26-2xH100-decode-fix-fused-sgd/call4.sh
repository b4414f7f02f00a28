#!/bin/bash
# Session 8, call 4 (nvidia-h100-x2): ResNet-18 end to end, CPU decode, 16 workers per GPU, 1 and
# 2 GPUs, with PyTorch's DataLoader timed from the step where its workers' stock ran out.
source .gpu/prebuilt_env.sh
export NCCL_NVLS_ENABLE=0
t0=$(date +%s); R=$OUT/s8d.txt
E2E=$HOME/.cache/mgpu/bench-e2e/jpeg-40000
[ -d $E2E/train ] || python3 bench/make_jpeg_folder.py $E2E --images 40000 > /tmp/mk.txt 2>&1
echo "jpeg at $(( $(date +%s) - t0 )) s" >> $R
mkdir -p build-gpu/bin
for b in mgpu-worker mgpu-loader-bench; do ln -sf $PWD/gpubin/O/$b build-gpu/bin/$b; done
mkdir -p ~/.cache/mgpu/venv-bench/bin; printf "#!/bin/sh\nexec %s \"\$@\"\n" "$(command -v python3)" > ~/.cache/mgpu/venv-bench/bin/python; chmod +x ~/.cache/mgpu/venv-bench/bin/python
export MGPU_BENCH_PYTHON=~/.cache/mgpu/venv-bench/bin/python
timeout 420 python3 bench/e2e_bench.py --build build-gpu --out /tmp/s8-e2e-drain --models resnet18 --worlds 1,2 --workers 16 --run-timeout 200 > /tmp/e2e.log 2>&1
echo "e2e w16 rc $? at $(( $(date +%s) - t0 )) s" >> $R; grep -E "^\|" /tmp/e2e.log >> $R; tail -4 /tmp/e2e.log >> $R
cp /tmp/s8-e2e-drain/e2e-bench.json $OUT/ 2>/dev/null
cat $R
