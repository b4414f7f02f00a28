#!/bin/bash
# The loader's float32 (normalized) batches against its uint8 ones (as mgpu-worker makes them for one GPU),
# alternated, three rounds, 0 and 2 loader threads, 6,144 images of the loader benchmark's folder.
#   bash bench/results/2026-11-26-cpu2core-loader-uint8-batches/run.sh build/bin/mgpu-loader-bench ~/.cache/mgpu/bench-loader/jpeg-20k
BENCH=${1:?mgpu-loader-bench}; DATA=${2:?the JPEG folder}
for workers in 0 2; do
  for round in 1 2 3; do
    for pixels in normalized uint8; do
      "$BENCH" --data-dir "$DATA" --num-workers "$workers" --max-images 6144 --pixels "$pixels"
    done
  done
done
