// The CPU forward's quantization loops (quantize_span.h): branch-free forms of the rules of
// common/quant_rules.h, inlined into each target clone.
#include "cpu/quantize_span.h"

#include <cstring>

#include "common/dtype_host.h"
#include "common/quant_rules.h"
#include "cpu/row_kernels.h"

namespace normkit::cpu {
namespace {

// float8_magnitude_code (common/quant_codes.h) without branches: both cases computed, one
// selected. a: |f| in float32 bits, not NaN. Below the smallest normal, |f| + 2^(24 - BIAS -
// MANT) has an ulp of one subnormal unit, 2^(1 - BIAS - MANT), so the float addition rounds |f|
// to whole units, to nearest even (the default rounding mode), and the low bits of the sum
// count them; a float32 subnormal gives 0 with or without denormals-are-zero, as it should.
template <int MANT, int BIAS, uint32_t MAXC>
inline uint32_t magnitude_code(uint32_t a) {
  constexpr uint32_t kMinNormal = static_cast<uint32_t>(128 - BIAS) << 23;
  constexpr int kDrop = 23 - MANT;
  const uint32_t r = a - (static_cast<uint32_t>(127 - BIAS) << 23);  // (wraps below kMinNormal)
  uint32_t normal = (r + ((1u << (kDrop - 1)) - 1u) + ((r >> kDrop) & 1u)) >> kDrop;
  normal = normal < MAXC ? normal : MAXC;  // also Inf
  constexpr float kUnits = static_cast<float>(1u << (24 - BIAS - MANT));
  const uint32_t subnormal = float_to_bits(bits_to_float(a) + kUnits) - float_to_bits(kUnits);
  return a >= kMinNormal ? normal : subnormal;
}

template <int MANT, int BIAS, uint32_t MAXC>
inline uint8_t float8_code(float f) {
  const uint32_t u = float_to_bits(f);
  const uint32_t sign = (u >> 24) & 0x80u, a = u & 0x7fffffffu;
  const uint32_t code = a > 0x7f800000u ? 0x7fu : magnitude_code<MANT, BIAS, MAXC>(a);
  return static_cast<uint8_t>(sign | code);
}

// float_to_int8 without the early return: NaN goes through as 0.
inline uint8_t int8_code(float f) {
  const float g = f == f ? f : 0.0f;
  const float c = g < -127.0f ? -127.0f : (g > 127.0f ? 127.0f : g);
  const float r = (c + 12582912.0f) - 12582912.0f;
  return static_cast<uint8_t>(static_cast<int8_t>(static_cast<int>(r)));
}

template <typename Code>
inline void encode(uint8_t* y, const float* v, int64_t n, float multiplier, Code code) {
  for (int64_t j = 0; j < n; ++j) y[j] = code(v[j] * multiplier);
}

inline void encode_span(uint8_t* y, const float* v, int64_t n, float multiplier,
                        nk_dtype dtype) {
  switch (dtype) {
    case NK_FLOAT8_E4M3: return encode(y, v, n, multiplier, float8_code<3, 7, 0x7eu>);
    case NK_FLOAT8_E5M2: return encode(y, v, n, multiplier, float8_code<2, 15, 0x7bu>);
    default: return encode(y, v, n, multiplier, int8_code);  // (RowQuantizer checks the dtype)
  }
}

// Per-lane maxima, then combined: the maximum of non-negative values is the same in any order
// (a zero never replaces the +0 each lane starts from), NaN ignored as fold_abs_max does (its
// comparisons are false). The lanes are one GCC vector, |v| a cleared sign bit: written as 16
// scalar folds, GCC kept them scalar (24% of a per-tensor forward's time at 4096 x 4096).
inline float lanes_abs_max(const float* v, int64_t n) {
  constexpr int kMaxLanes = 16;
  using Lanes = float __attribute__((vector_size(kMaxLanes * sizeof(float))));
  using LaneBits = uint32_t __attribute__((vector_size(kMaxLanes * sizeof(float))));
  Lanes lane = {};
  const int64_t whole = n / kMaxLanes * kMaxLanes;
  for (int64_t j = 0; j < whole; j += kMaxLanes) {
    Lanes x;
    std::memcpy(&x, v + j, sizeof(x));
    const Lanes a = reinterpret_cast<Lanes>(reinterpret_cast<LaneBits>(x) & 0x7fffffffu);
    lane = a > lane ? a : lane;
  }
  // The lanes (never NaN) halved in vectors down to one: MXFP8's 32-element blocks spent most of
  // their time in 16 scalar folds here.
  using Half = float __attribute__((vector_size(kMaxLanes / 2 * sizeof(float))));
  using Quarter = float __attribute__((vector_size(kMaxLanes / 4 * sizeof(float))));
  Half lo, hi;
  std::memcpy(&lo, &lane, sizeof(lo));
  std::memcpy(&hi, reinterpret_cast<const char*>(&lane) + sizeof(lo), sizeof(hi));
  const Half h = hi > lo ? hi : lo;
  Quarter qlo, qhi;
  std::memcpy(&qlo, &h, sizeof(qlo));
  std::memcpy(&qhi, reinterpret_cast<const char*>(&h) + sizeof(qlo), sizeof(qhi));
  const Quarter q = qhi > qlo ? qhi : qlo;
  float m = 0.0f;
  for (int64_t j = whole; j < n; ++j) m = fold_abs_max(m, v[j]);
  for (int l = 0; l < kMaxLanes / 4; ++l) m = fold_abs_max(m, q[l]);
  return m;
}

}  // namespace

NK_CPU_ROW_CLONES
void quantize_span(uint8_t* y, const float* v, int64_t n, float multiplier, nk_dtype dtype) {
  encode_span(y, v, n, multiplier, dtype);
}

NK_CPU_ROW_CLONES
float abs_max(const float* v, int64_t n) { return lanes_abs_max(v, n); }

NK_CPU_ROW_CLONES
float quantize_scaled_blocks(uint8_t* y, float* scales, const float* v, int64_t n,
                             int64_t block, float qmax, float scale_ub, nk_dtype dtype) {
  float row_max = 0.0f;
  for (int64_t b = 0; b < n / block; ++b) {
    const float* vb = v + b * block;
    const float m = lanes_abs_max(vb, block);
    const float scale = dynamic_scale(m, qmax, scale_ub);
    encode_span(y + b * block, vb, block, dynamic_multiplier(scale), dtype);
    scales[b] = scale;
    row_max = row_max > m ? row_max : m;
  }
  return row_max;
}

NK_CPU_ROW_CLONES
float quantize_mx_blocks(uint8_t* y, uint8_t* scales, const float* v, int64_t n,
                         nk_dtype dtype) {
  const int emax = mx_emax(dtype);
  float row_max = 0.0f;
  for (int64_t b = 0; b < n / kMxfp8Block; ++b) {
    const float* vb = v + b * kMxfp8Block;
    const float m = lanes_abs_max(vb, kMxfp8Block);
    const int e = mx_scale_exponent(m, emax);
    encode_span(y + b * kMxfp8Block, vb, kMxfp8Block, mx_multiplier(e), dtype);
    scales[b] = mx_scale_byte(e);
    row_max = row_max > m ? row_max : m;
  }
  return row_max;
}

}  // namespace normkit::cpu
