// Device-side element access: conversion of float32/float16/bfloat16 to and from float, and
// loads/stores of VEC consecutive elements as one aligned access (16 bytes at most per access).
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>

namespace normkit::cuda {

__device__ __forceinline__ float to_float(float v) { return v; }
__device__ __forceinline__ float to_float(__half v) { return __half2float(v); }
__device__ __forceinline__ float to_float(__nv_bfloat16 v) { return __bfloat162float(v); }

template <typename T>
__device__ __forceinline__ T from_float(float v);
template <>
__device__ __forceinline__ float from_float<float>(float v) { return v; }
template <>
__device__ __forceinline__ __half from_float<__half>(float v) { return __float2half_rn(v); }
template <>
__device__ __forceinline__ __nv_bfloat16 from_float<__nv_bfloat16>(float v) {
  return __float2bfloat16_rn(v);
}

// The float value that storing v as T and reading it back gives.
template <typename T>
__device__ __forceinline__ float round_to(float v) { return to_float(from_float<T>(v)); }

constexpr int min_int(int a, int b) { return a < b ? a : b; }

// VEC elements of T, aligned to the size of one access (at most 16 bytes), so the compiler
// emits the widest loads/stores that the launcher proved aligned.
template <typename T, int VEC>
struct alignas(min_int(16, int(sizeof(T)) * VEC)) Pack {
  T v[VEC];
};

// Loads VEC elements at p[0..VEC) into out (as float). Full, aligned vector.
template <typename T, int VEC>
__device__ __forceinline__ void load_vec(const T* p, float* out) {
  Pack<T, VEC> pack = *reinterpret_cast<const Pack<T, VEC>*>(p);
#pragma unroll
  for (int k = 0; k < VEC; ++k) out[k] = to_float(pack.v[k]);
}

// Loads the first `n` (< VEC) elements one at a time; the rest of out becomes 0.
template <typename T, int VEC>
__device__ __forceinline__ void load_partial(const T* p, int n, float* out) {
#pragma unroll
  for (int k = 0; k < VEC; ++k) out[k] = k < n ? to_float(p[k]) : 0.0f;
}

// Loads min(VEC, n) elements: a vector when n >= VEC, else element by element.
template <typename T, int VEC>
__device__ __forceinline__ void load_upto(const T* p, int64_t n, float* out) {
  if (n >= VEC) {
    load_vec<T, VEC>(p, out);
  } else {
    load_partial<T, VEC>(p, static_cast<int>(n), out);
  }
}

template <typename T, int VEC>
__device__ __forceinline__ void store_upto(T* p, int64_t n, const float* in) {
  if (n >= VEC) {
    Pack<T, VEC> pack;
#pragma unroll
    for (int k = 0; k < VEC; ++k) pack.v[k] = from_float<T>(in[k]);
    *reinterpret_cast<Pack<T, VEC>*>(p) = pack;
  } else {
#pragma unroll
    for (int k = 0; k < VEC; ++k) {
      if (k < n) p[k] = from_float<T>(in[k]);
    }
  }
}

}  // namespace normkit::cuda
