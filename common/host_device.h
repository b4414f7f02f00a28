// Marks for functions that mgpu's CUDA kernels and their CPU tests share (models/kernels/,
// data/kernels/): compiled by nvcc for both the host and the device, by the C++ compiler for the
// host alone.
#pragma once

#ifdef __CUDACC__
#define MGPU_HOST_DEVICE __host__ __device__
#define MGPU_UNROLL _Pragma("unroll")
#define MGPU_UNROLL_BY_8 _Pragma("unroll 8")
#else
#define MGPU_HOST_DEVICE
#define MGPU_UNROLL
#define MGPU_UNROLL_BY_8
#endif
