// Device side of the quantized outputs (include/normkit/normkit.h, nk_quant_mode): rounding
// float32 values to e4m3 / e5m2 / int8 codes with saturation, the scale rules, and stores of
// VEC one-byte codes as one word.
#pragma once

#include <cuda_fp8.h>

#include <cstdint>

#include "common/quant_rules.h"  // the scale rules, shared with the CPU backend
#include "cuda/kernel_params.h"

namespace normkit::cuda {

// Two values to two codes, the first in the low byte. FP8 conversions round to nearest even
// and saturate to the finite range (cvt.rn.satfinite; NaN stays NaN); int8 rounds to nearest
// even, clamps to [-127, 127] and turns NaN into 0 (cvt.rni.s32.f32 gives 0 for NaN).
__device__ __forceinline__ unsigned quantize_pair(float a, float b, QuantFormat fmt) {
  if (fmt == QuantFormat::kE4M3) {
    return __nv_cvt_float2_to_fp8x2(make_float2(a, b), __NV_SATFINITE, __NV_E4M3);
  }
  if (fmt == QuantFormat::kE5M2) {
    return __nv_cvt_float2_to_fp8x2(make_float2(a, b), __NV_SATFINITE, __NV_E5M2);
  }
  const int qa = min(127, max(-127, __float2int_rn(a)));
  const int qb = min(127, max(-127, __float2int_rn(b)));
  return (static_cast<unsigned>(qa) & 0xffu) | ((static_cast<unsigned>(qb) & 0xffu) << 8);
}

// VEC values, each multiplied by `factor` first, as codes of format FMT packed in words.
template <QuantFormat FMT, int VEC>
__device__ __forceinline__ void quantize_words(const float* v, float factor, unsigned* word) {
#pragma unroll
  for (int k = 0; k < VEC; k += 2) {
    const unsigned pair = quantize_pair(v[k] * factor, k + 1 < VEC ? v[k + 1] * factor : 0.0f, FMT);
    word[k / 4] |= pair << (8 * (k % 4));
  }
}

// VEC values, each multiplied by `factor` first, as codes of the runtime format in words
// (zeroed here). The format is tested once per vector, not per pair (per pair, the SASS spent 2
// branches on it per 2 values).
template <int VEC>
__device__ __forceinline__ void quantize_to_words(const float* v, float factor, QuantFormat fmt,
                                                  unsigned (&word)[(VEC + 3) / 4]) {
#pragma unroll
  for (int j = 0; j < (VEC + 3) / 4; ++j) word[j] = 0;
  if (fmt == QuantFormat::kE4M3) {
    quantize_words<QuantFormat::kE4M3, VEC>(v, factor, word);
  } else if (fmt == QuantFormat::kE5M2) {
    quantize_words<QuantFormat::kE5M2, VEC>(v, factor, word);
  } else {
    quantize_words<QuantFormat::kInt8, VEC>(v, factor, word);
  }
}

// Quantizes VEC values, each multiplied by `factor` first, and stores min(VEC, n) codes at p
// (one word store, cached in L2 only, when the whole vector is in range).
template <int VEC>
__device__ __forceinline__ void store_quantized(uint8_t* p, int64_t n, const float* v,
                                                float factor, QuantFormat fmt) {
  unsigned word[(VEC + 3) / 4];
  quantize_to_words<VEC>(v, factor, fmt, word);
  if (n >= VEC) {
    if constexpr (VEC == 8) {
      __stcg(reinterpret_cast<uint2*>(p), make_uint2(word[0], word[1]));
    } else if constexpr (VEC == 4) {
      __stcg(reinterpret_cast<unsigned*>(p), word[0]);
    } else if constexpr (VEC == 2) {
      __stcg(reinterpret_cast<unsigned short*>(p), static_cast<unsigned short>(word[0]));
    } else {
      *p = static_cast<uint8_t>(word[0]);
    }
  } else {
#pragma unroll
    for (int k = 0; k < VEC; ++k) {
      if (k < n) p[k] = static_cast<uint8_t>(word[k / 4] >> (8 * (k % 4)));
    }
  }
}

// Adds this CTA's largest |v| to the global amax. Float bit patterns of non-negative values
// order like unsigned integers, so an integer atomicMax is exact (and order-independent, so
// deterministic); amax was zeroed before the launch. Every thread of the CTA calls this.
__device__ __forceinline__ void cta_amax_to_global(float v, float* scratch, float* amax) {
  const int lane = (threadIdx.y * blockDim.x + threadIdx.x) % 32;
  const int warp = (threadIdx.y * blockDim.x + threadIdx.x) / 32;
  const int warps = (blockDim.x * blockDim.y + 31) / 32;
  for (int offset = 16; offset > 0; offset /= 2) {
    v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, offset));
  }
  __syncthreads();
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  if (warp == 0 && lane == 0) {
    float m = 0.0f;
    for (int w = 0; w < warps; ++w) m = fmaxf(m, scratch[w]);
    atomicMax(reinterpret_cast<unsigned*>(amax), __float_as_uint(m));
  }
}

// The global amax as it stands (from L2), read at a kernel's start for
// warp_amax_to_global: during the launch it only grows (the launcher zeroed it before).
__device__ __forceinline__ unsigned amax_seen(const float* amax) {
  return __ldcg(reinterpret_cast<const unsigned*>(amax));
}

// Adds this warp's largest |v| (non-negative and not NaN, so its bits order like unsigned
// integers) to the global amax: one warp max, then one atomic from the first lane, only where it
// exceeds `seen` (amax_seen: the global already holds at least that). No barrier and no shared
// memory, so the CTA's warps leave as they finish (cta_amax_to_global makes every warp wait for
// the last one, twice). Deterministic as the max is. Every thread of the CTA calls this.
// Measured slower than cta_amax_to_global at most shapes of the sweep (twelfth session: the
// whole first wave reads 0 and updates the one word), so off by default.
__device__ __forceinline__ void warp_amax_to_global(float v, unsigned seen, float* amax) {
  const unsigned lanes = __activemask();  // whole warps but in CTAs of fewer than 32 threads
  const unsigned m = __reduce_max_sync(lanes, __float_as_uint(v));
  const unsigned lane = (threadIdx.y * blockDim.x + threadIdx.x) % 32;
  if (lane == 0 && m > seen) atomicMax(reinterpret_cast<unsigned*>(amax), m);
}

// Shared state of cta_amax_by_ticket: the CTA's largest |v| so far (its float bits) and how
// many warps have folded theirs in.
struct CtaAmaxTicket {
  unsigned max_bits;
  unsigned warps_in;
};

// Zeroes t (from thread (0, 0)). It must come before a barrier that every thread of the CTA
// passes before any calls cta_amax_by_ticket: in the registers kernels, the row sum's over rows
// of more than one warp (add_amax). Once per CTA: a second zeroing could overtake a slower warp's
// ticket of the first (the kernels here take one row group per CTA).
__device__ __forceinline__ void cta_amax_ticket_init(CtaAmaxTicket& t) {
  if (threadIdx.x == 0 && threadIdx.y == 0) {
    t.max_bits = 0;
    t.warps_in = 0;
  }
}

// cta_amax_to_global without its two barriers: each warp takes its maximum in one reduction
// (redux, not five shuffles); its first lane folds it into t by a shared atomicMax, then takes a
// ticket; the lane that takes the last ticket finds every warp's maximum in t and adds the CTA's
// to the global amax: one global atomic per CTA, as there. The warps leave as they finish
// instead of waiting for the slowest twice. The fences order each warp's fold before its ticket
// and the last ticket before the read. The same value as cta_amax_to_global (a maximum).
__device__ __forceinline__ void cta_amax_by_ticket(float v, CtaAmaxTicket& t, float* amax) {
  const unsigned m = __reduce_max_sync(0xffffffffu, __float_as_uint(v));
  if ((threadIdx.y * blockDim.x + threadIdx.x) % 32 != 0) return;
  atomicMax(&t.max_bits, m);
  __threadfence_block();
  const unsigned warps = (blockDim.x * blockDim.y + 31) / 32;
  if (atomicAdd(&t.warps_in, 1u) != warps - 1) return;
  __threadfence_block();
  atomicMax(reinterpret_cast<unsigned*>(amax), *static_cast<volatile unsigned*>(&t.max_bits));
}

// The registers kernels' amax (q.amax set), this thread's largest |v| being `v`: per warp
// (q.amax_per_warp; `seen` from amax_seen at the kernel's start), by ticket (q.amax_ticket,
// `ticket` zeroed at the start by cta_amax_ticket_init; only where the row sum spans warps, so
// that its barrier ordered the zeroing), else per CTA after two barriers (`scratch`: kMaxWarps
// floats that no thread reads any more). Every thread of the CTA calls this.
__device__ __forceinline__ void add_amax(const QuantParams& q, float v, unsigned seen,
                                         float* scratch, CtaAmaxTicket& ticket) {
  if (q.amax_per_warp) {
    warp_amax_to_global(v, seen, q.amax);
  } else if (q.amax_ticket && blockDim.x > 32) {
    cta_amax_by_ticket(v, ticket, q.amax);
  } else {
    cta_amax_to_global(v, scratch, q.amax);
  }
}

}  // namespace normkit::cuda
