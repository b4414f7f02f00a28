source .devdeps/activate.sh >/dev/null 2>&1; export NCCL_NVLS_ENABLE=0
cfg="-G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH=$CMAKE_PREFIX_PATH -DMPI_CXX_COMPILER=$MPI_CXX_COMPILER"
cmake -S . -B build-gpu $cfg >/dev/null 2>&1 && ninja -C build-gpu mgpu-worker mgpu mgpu_gpu_tests >/dev/null || { echo BUILD FAILED; exit 1; }
mkdir -p /tmp/old && tar --exclude=./build-gpu --exclude=./.devdeps --exclude=./.git -cf - . | (cd /tmp/old && tar xf -)
cp scratch/old_rdp.cpp /tmp/old/dataparallel/replicated_data_parallel.cpp; cp scratch/old_rdp.h /tmp/old/dataparallel/replicated_data_parallel.h
(cmake -S /tmp/old -B /tmp/old/build $cfg >/dev/null 2>&1 && ninja -C /tmp/old/build mgpu-worker > /tmp/oldbuild.log 2>&1; echo old build rc $?; tail -5 /tmp/oldbuild.log) &
build-gpu/bin/mgpu_gpu_tests --gtest_filter='CudaDp.*' 2>&1 | grep -E "^\[ +(OK|FAILED|PASSED) |Failure|error" | head -20
wait
common="--dataset mnist --data-dir $FASHION_MNIST_DIR --model lenet --epochs 1 --optimizer adam --lr 0.001 --num-workers 4 --log-every 500 --batch-size 32 --progress lines"
dp="--mode dp --dp-devices cuda:0,cuda:1"
ep() { python3 -c "import json,sys; s=json.load(open('$1/summary.json')); t=s.get('dp_timing') or {}; print('$2', round(s['epochs_detail'][0]['seconds'],3), s.get('test_accuracy'), [round(x,3) for x in t.get('backward_seconds',[])], [round(x,3) for x in t.get('forward_seconds',[])])"; }
for rep in 1 2 3 4 5 6; do
  build-gpu/bin/mgpu-worker $common --device cuda:0 --out /tmp/r/one$rep >/dev/null 2>&1; ep /tmp/r/one$rep "rep$rep one"
  if [ $((rep % 2)) = 1 ]; then order="new old"; else order="old new"; fi
  for v in $order; do
    W=build-gpu/bin/mgpu-worker; [ $v = old ] && W=/tmp/old/build/bin/mgpu-worker
    $W $common $dp --out /tmp/r/dp$v$rep >/dev/null 2>&1; ep /tmp/r/dp$v$rep "rep$rep dp-$v"
  done
done
for rep in 1 2; do
  build-gpu/bin/mgpu-worker $common --device cuda:0 --cuda-graphs true --out /tmp/r/gone$rep >/dev/null 2>&1; ep /tmp/r/gone$rep "rep$rep one-graphs"
  build-gpu/bin/mgpu-worker $common $dp --cuda-graphs true --out /tmp/r/gdp$rep >/dev/null 2>&1; ep /tmp/r/gdp$rep "rep$rep dp-new-graphs"
  /tmp/old/build/bin/mgpu-worker $common $dp --cuda-graphs true --out /tmp/r/godp$rep >/dev/null 2>&1; ep /tmp/r/godp$rep "rep$rep dp-old-graphs"
done
rn="--model resnet18 --dataset synthetic --image-size 32 --synthetic-train 60000 --synthetic-test 1000 --batch-size 512 --max-steps 50 --log-every 10 --lr 0.01 --precision fp32 --num-workers 8 --progress lines"
ips() { python3 -c "
import csv; rows=list(csv.DictReader(open('$1/metrics.csv'))); print('$2', rows[-1].keys() if False else '', [round(float(r.get('images_per_second') or 0)) for r in rows])"; }
build-gpu/bin/mgpu-worker $rn --device cuda:0 --out /tmp/r/rone >/dev/null 2>&1; ips /tmp/r/rone "resnet one"
build-gpu/bin/mgpu-worker $rn $dp --out /tmp/r/rdpnew >/dev/null 2>&1; ips /tmp/r/rdpnew "resnet dp-new"
/tmp/old/build/bin/mgpu-worker $rn $dp --out /tmp/r/rdpold >/dev/null 2>&1; ips /tmp/r/rdpold "resnet dp-old"
build-gpu/bin/mgpu-worker $rn $dp --out /tmp/r/rdpnew2 >/dev/null 2>&1; ips /tmp/r/rdpnew2 "resnet dp-new"
