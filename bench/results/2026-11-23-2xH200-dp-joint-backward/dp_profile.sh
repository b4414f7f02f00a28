set -x
source .devdeps/activate.sh >/dev/null; export NCCL_NVLS_ENABLE=0
cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH="$CMAKE_PREFIX_PATH" -DMPI_CXX_COMPILER=$MPI_CXX_COMPILER >/dev/null 2>&1 && ninja -C build-gpu mgpu-worker >/dev/null || exit 1
nproc; nvidia-smi topo -m
W=build-gpu/bin/mgpu-worker
common="--dataset mnist --data-dir $FASHION_MNIST_DIR --model lenet --epochs 1 --optimizer adam --lr 0.001 --num-workers 4 --log-every 500 --batch-size 32 --progress lines"
for rep in 1 2 3; do
  $W $common --device cuda:0 --out /tmp/p/one$rep > /tmp/p-one$rep.log 2>&1
  $W $common --mode dp --dp-devices cuda:0,cuda:1 --out /tmp/p/dp$rep > /tmp/p-dp$rep.log 2>&1
  python3 -c "
import json
for k in ('one','dp'):
    s=json.load(open('/tmp/p/%s$rep/summary.json'%k)); print(k, $rep, s['epochs_detail'][0]['seconds'], json.dumps(s.get('dp_timing')))"
done
$W $common --device cuda:0 --out /tmp/p/oneprof --profile-steps 500-539 > /tmp/p-oneprof.log 2>&1
$W $common --mode dp --dp-devices cuda:0,cuda:1 --out /tmp/p/dpprof --profile-steps 500-539 > /tmp/p-dpprof.log 2>&1
gzip -c /tmp/p/oneprof/trace-rank0.json > $OUT/one-trace.json.gz
gzip -c /tmp/p/dpprof/trace-rank0.json > $OUT/dp-trace.json.gz
ls -la $OUT
