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

// kVector elements of T as a load brings them, before they are widened to float: what a load in
// flight holds in registers. Keeping bfloat16 packed until it is used halves those registers (4
// words, not 8 floats), so a thread can have twice the rows in flight without spilling.
template <typename T>
struct Packed {
  float v[kVector];
};
template <>
struct Packed<Bf16> {
  uint32_t words[kVector / 2];  // element 2 i in the low half of words[i], 2 i + 1 in the high half
};

// *out <- the kVector elements at p (16-byte aligned), as single 16-byte loads on the GPU.
MGPU_HOST_DEVICE inline void LoadPacked(const Bf16* p, Packed<Bf16>* out) {
#ifdef __CUDA_ARCH__
  const uint4 packed = *reinterpret_cast<const uint4*>(p);
  out->words[0] = packed.x, out->words[1] = packed.y, out->words[2] = packed.z, out->words[3] = packed.w;
#else
  for (int i = 0; i < kVector / 2; ++i) out->words[i] = p[2 * i].bits | uint32_t{p[2 * i + 1].bits} << 16;
#endif
}

MGPU_HOST_DEVICE inline void LoadPacked(const float* p, Packed<float>* out) {
#ifdef __CUDA_ARCH__
  const float4 a = reinterpret_cast<const float4*>(p)[0], b = reinterpret_cast<const float4*>(p)[1];
  float* v = out->v;
  v[0] = a.x, v[1] = a.y, v[2] = a.z, v[3] = a.w, v[4] = b.x, v[5] = b.y, v[6] = b.z, v[7] = b.w;
#else
  for (int i = 0; i < kVector; ++i) out->v[i] = p[i];
#endif
}

// v <- the packed elements as floats (exact).
MGPU_HOST_DEVICE inline void Unpack(const Packed<Bf16>& in, float* v) {
  MGPU_UNROLL
  for (int i = 0; i < kVector / 2; ++i) {
    v[2 * i] = BitsToFloat(in.words[i] << 16);
    v[2 * i + 1] = BitsToFloat(in.words[i] & 0xffff0000u);
  }
}
MGPU_HOST_DEVICE inline void Unpack(const Packed<float>& in, float* v) {
  MGPU_UNROLL
  for (int i = 0; i < kVector; ++i) v[i] = in.v[i];
}

// v <- the kVector elements at p (16-byte aligned) as floats.
template <typename T>
MGPU_HOST_DEVICE inline void LoadVector(const T* p, float* v) {
  Packed<T> packed;
  LoadPacked(p, &packed);
  Unpack(packed, v);
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
