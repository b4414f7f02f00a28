#!/bin/bash
# Call 6: the producer pinned alone to the last CPU and every other thread of the decode off it (scratch switch MGPU_X_PIN=1), against no pinning: ResNet-18 --decode gpu at 12 threads, alternating.
# producer timers MGPU_X_TIMES) against calls of 64 only (divisor 1): GPU decode tests, then ResNet-18 --decode gpu
# GPU decode tests; ResNet-18 --decode gpu at 12 threads, alternating, beside synthetic; then e2e_bench.py for ResNet-18.
t0=$(date +%s); R=$OUT/call6.txt
el() { echo "[$(( $(date +%s) - t0 )) s] $*" | tee -a $R; }
xz -dc .pack/pack.tar.xz | tar xf - --no-overwrite-dir -C / || { echo "unpack failed"; exit 1; }
dpkg -x .gpu/libutfcpp-dev_*.deb /opt/deps
source .pack/activate.sh
export LD_LIBRARY_PATH=/tmp/site/nvidia/cu13/lib:$LD_LIBRARY_PATH PYTHONPATH=/tmp/site PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0
nvidia-smi -L >> $R; nproc >> $R
find . -path ./build-gpu -prune -o \( -name '*.cpp' -o -name '*.h' -o -name '*.cu' \) -print | sort | xargs cat | md5sum >> $R
E2E=$HOME/.cache/mgpu/bench-e2e/jpeg-40000
( python3 bench/make_jpeg_folder.py $E2E --images 40000 > /tmp/mk.txt 2>&1; echo "MK_RC=$?" >> /tmp/mk.txt ) &
mk=$!
( cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DMGPU_PYTHON=$(command -v python3) \
    -DMGPU_TEST_PYTHON=$(command -v python3) -DMGPU_NVJPEG_INCLUDE_DIR=/tmp/site/nvidia/cu13/include \
    -DMPI_CXX_COMPILER=$MPI_CXX_COMPILER > /tmp/cmake.log 2>&1 && \
  ninja -C build-gpu mgpu-worker > /tmp/ninja.log 2>&1; echo "BUILD_RC=$?" >> /tmp/ninja.log ) &
build=$!
wait $build; tail -1 /tmp/ninja.log >> $R
grep -q "BUILD_RC=0" /tmp/ninja.log || { tail -30 /tmp/cmake.log >> $R; grep -A12 FAILED /tmp/ninja.log | head -60 >> $R; cat $R; exit 1; }
el "built"
B=build-gpu/bin
wait $mk; tail -2 /tmp/mk.txt >> $R
el "jpegs"
COMMON="--model resnet18 --precision amp-bf16 --optimizer sgd --momentum 0.9 --lr 0.01 --epochs 1000 --progress lines --device cuda --channels-last true --cuda-graphs true"
STREAM="--dataset imagefolder --data-dir $E2E --data-loading stream --augment rrc-flip --resize 224 --image-size 224 --decode gpu --num-workers 12"
SYN="--dataset synthetic --image-size 224 --synthetic-train 200000 --synthetic-test 256 --num-workers 4"
rate() { python3 bench/run_rate.py $1 --warmup 30 2>&1 | tail -1; }
mkdir -p /tmp/d
one() { # name pin(0/1) data
  if [ "$2" = 1 ]; then export MGPU_X_PIN=1; else unset MGPU_X_PIN; fi
  timeout 40 $B/mgpu-worker $COMMON $3 --batch-size 256 --max-steps 150 --log-every 10 --num-workers 12 --out /tmp/d/$1 > /tmp/d/$1.log 2>&1
  unset MGPU_X_PIN
  el "$1 (pin $2): $(rate /tmp/d/$1)"; }
STREAM="${STREAM/--num-workers 12/}"; SYN="${SYN/--num-workers 4/}"
one syn-a 0 "$SYN"
one pin-a 1 "$STREAM"; one free-a 0 "$STREAM"
one free-b 0 "$STREAM"; one pin-b 1 "$STREAM"
one pin-c 1 "$STREAM"; one free-c 0 "$STREAM"
one syn-b 0 "$SYN"
grep -h "rror" /tmp/d/*.log | head -5 >> $R
grep -h "decod" /tmp/d/pin-a.log | head -5 >> $R
el "runs done"
el "done"
cat $R
