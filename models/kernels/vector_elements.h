// The elements of mgpu's CUDA kernels over channels-last activations (batch_norm_math.h,
// max_pool_math.h): bfloat16 as its bits, rounding as c10::BFloat16 rounds, and vectors of kVector
// channels, loaded and stored as single 16-byte accesses on the GPU and element by element on the
// CPU (block_phases.h says why the same code runs on both).
#pragma once

#include <cstring>

#include "models/kernels/block_phases.h"

namespace mgpu::kernels {

// A bfloat16 element, as its bits (c10::BFloat16's layout).
struct Bf16 {
  uint16_t bits;
};

constexpr int kVector = 8;  // channels a thread loads at once: 16 bytes of bfloat16

MGPU_HOST_DEVICE inline float BitsToFloat(uint32_t bits) {
#ifdef __CUDA_ARCH__
  return __uint_as_float(bits);
#else
  float value;
  std::memcpy(&value, &bits, sizeof value);
  return value;
#endif
}

MGPU_HOST_DEVICE inline uint32_t FloatToBits(float value) {
#ifdef __CUDA_ARCH__
  return __float_as_uint(value);
#else
  uint32_t bits;
  std::memcpy(&bits, &value, sizeof bits);
  return bits;
#endif
}

MGPU_HOST_DEVICE inline float ToFloat(Bf16 value) { return BitsToFloat(uint32_t{value.bits} << 16); }
MGPU_HOST_DEVICE inline float ToFloat(float value) { return value; }

// Rounds to the nearest bfloat16, ties to even, as c10::BFloat16 does; a NaN stays a NaN.
MGPU_HOST_DEVICE inline void FromFloat(float value, Bf16* out) {
  const uint32_t bits = FloatToBits(value);
  out->bits = value != value ? uint16_t{0x7fc0} : static_cast<uint16_t>((bits + 0x7fffu + ((bits >> 16) & 1u)) >> 16);
}
MGPU_HOST_DEVICE inline void FromFloat(float value, float* out) { *out = value; }

// value rounded to T, as StoreVector rounds it.
template <typename T>
MGPU_HOST_DEVICE inline float RoundedTo(float value) {
  T element;
  FromFloat(value, &element);
  return ToFloat(element);
}

// v <- the kVector elements at p (16-byte aligned), as single 16-byte loads on the GPU.
MGPU_HOST_DEVICE inline void LoadVector(const Bf16* p, float* v) {
#ifdef __CUDA_ARCH__
  const uint4 packed = *reinterpret_cast<const uint4*>(p);
  const uint32_t words[4] = {packed.x, packed.y, packed.z, packed.w};
  MGPU_UNROLL
  for (int i = 0; i < 4; ++i) {
    v[2 * i] = __uint_as_float(words[i] << 16);
    v[2 * i + 1] = __uint_as_float(words[i] & 0xffff0000u);
  }
#else
  for (int i = 0; i < kVector; ++i) v[i] = ToFloat(p[i]);
#endif
}

MGPU_HOST_DEVICE inline void LoadVector(const float* p, float* v) {
#ifdef __CUDA_ARCH__
  const float4 a = reinterpret_cast<const float4*>(p)[0], b = reinterpret_cast<const float4*>(p)[1];
  v[0] = a.x, v[1] = a.y, v[2] = a.z, v[3] = a.w, v[4] = b.x, v[5] = b.y, v[6] = b.z, v[7] = b.w;
#else
  for (int i = 0; i < kVector; ++i) v[i] = p[i];
#endif
}

template <typename T>
MGPU_HOST_DEVICE inline void StoreVector(const float* v, T* p) {
#ifdef __CUDA_ARCH__
  if constexpr (sizeof(T) == 2) {
    Bf16 e[kVector];
    MGPU_UNROLL
    for (int i = 0; i < kVector; ++i) FromFloat(v[i], &e[i]);
    uint4 packed;
    packed.x = e[0].bits | uint32_t{e[1].bits} << 16, packed.y = e[2].bits | uint32_t{e[3].bits} << 16;
    packed.z = e[4].bits | uint32_t{e[5].bits} << 16, packed.w = e[6].bits | uint32_t{e[7].bits} << 16;
    *reinterpret_cast<uint4*>(p) = packed;
  } else {
    reinterpret_cast<float4*>(p)[0] = make_float4(v[0], v[1], v[2], v[3]);
    reinterpret_cast<float4*>(p)[1] = make_float4(v[4], v[5], v[6], v[7]);
  }
#else
  for (int i = 0; i < kVector; ++i) FromFloat(v[i], &p[i]);
#endif
}

}  // namespace mgpu::kernels
