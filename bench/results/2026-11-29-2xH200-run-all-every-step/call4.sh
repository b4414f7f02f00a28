#!/bin/bash
# Session 33, call 4 (the same warm machine, after run_all): the GPU tests that need two GPUs, in the device
# time left. Output: call4-gpu-tests.txt.
source .pack/activate.sh; export LD_LIBRARY_PATH=/tmp/site/nvidia/cu13/lib:$LD_LIBRARY_PATH PYTHONPATH=/tmp/site NCCL_NVLS_ENABLE=0; t0=$(date +%s); ninja -C build-gpu mgpu_gpu_tests > /tmp/nt.log 2>&1; echo "built rc=$? in $(( $(date +%s)-t0 )) s" | tee $OUT/gt.txt; timeout $(( 195 - ($(date +%s)-t0) )) build-gpu/bin/mgpu_gpu_tests --gtest_brief=1 --gtest_filter='*TwoGpus*:CudaDdp.*:CudaDp.*:CudaGraphs.*' > $OUT/gpu-tests-2gpu.txt 2>&1; echo "tests rc=$? at $(( $(date +%s)-t0 )) s" | tee -a $OUT/gt.txt; grep -E "^\[  (PASSED|FAILED|SKIPPED)|^\[==|Failure" $OUT/gpu-tests-2gpu.txt | head
