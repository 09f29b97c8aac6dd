// The bf16 RMSNorm pieces of the plain-kernel probes (launch_probe.cu, rows_probe.cu): a row's
// sum of squares and its scaled output, 16-byte vectors of 8 bf16 values at a time, and their
// device inputs.
#pragma once

#include <cuda_bf16.h>

#include <cstdint>
#include <vector>

#include "probe_timing.cuh"

namespace probe {

__device__ __forceinline__ float2 bf2(uint32_t v) {
  return __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(&v));
}
__device__ __forceinline__ uint32_t pack(float a, float b) {
  const __nv_bfloat162 h = __floats2bfloat162_rn(a, b);
  return *reinterpret_cast<const uint32_t*>(&h);
}

// The sum of the squares of x's 8 values.
__device__ __forceinline__ float sum_of_squares(const uint4& x) {
  float sum = 0.f;
  for (const uint32_t v : {x.x, x.y, x.z, x.w}) {
    const float2 f = bf2(v);
    sum += f.x * f.x + f.y * f.y;
  }
  return sum;
}

// x * rstd * w, value by value, rounded to bf16.
__device__ __forceinline__ uint4 scaled(const uint4& x, const uint4& w, float rstd) {
  const uint32_t xs[4] = {x.x, x.y, x.z, x.w};
  const uint32_t ws[4] = {w.x, w.y, w.z, w.w};
  uint32_t out[4];
#pragma unroll
  for (int k = 0; k < 4; ++k) {
    const float2 a = bf2(xs[k]), b = bf2(ws[k]);
    out[k] = pack(a.x * rstd * b.x, a.y * rstd * b.y);
  }
  return make_uint4(out[0], out[1], out[2], out[3]);
}

// x of `elements` bf16 values in [0.5, 2) (nonzero, finite), its first `weight_elements` also
// the weight, on the device; y beside them.
struct Bf16Inputs {
  uint4* x = nullptr;
  uint4* w = nullptr;
  uint4* y = nullptr;

  Bf16Inputs(size_t elements, size_t weight_elements) {
    std::vector<uint16_t> host(elements);
    uint32_t state = 12345;
    for (auto& v : host) {
      state = state * 1664525u + 1013904223u;
      v = static_cast<uint16_t>(0x3f00 + (state >> 24));
    }
    check(cudaMalloc(&x, elements * 2), "x");
    check(cudaMalloc(&w, weight_elements * 2), "w");
    check(cudaMalloc(&y, elements * 2), "y");
    check(cudaMemcpy(x, host.data(), elements * 2, cudaMemcpyHostToDevice), "x copy");
    check(cudaMemcpy(w, host.data(), weight_elements * 2, cudaMemcpyHostToDevice), "w copy");
  }
};

}  // namespace probe
