// The per-element and per-scale rules of the quantized forward (see nk_quant_mode in
// include/normkit/normkit.h), in float32 exactly as documented. Plain functions of floats and
// ints with no library calls, usable in CUDA device code (NK_QUANT_HD), so the CPU backend and
// the CUDA kernels compute the same bits.
#pragma once

#include <cstdint>

#include "common/quant_codes.h"
#include "normkit/normkit.h"

namespace normkit {

constexpr float kQmaxE4m3 = 448.0f;
constexpr float kQmaxE5m2 = 57344.0f;
constexpr float kQmaxInt8 = 127.0f;
constexpr float kFloat32MinNormal = 0x1p-126f;  // FLT_MIN
constexpr int kMxfp8Block = 32;
constexpr int kDefaultQuantBlock = 128;

// Largest finite magnitude Q produces for an output dtype (0 for a dtype Q does not produce).
NK_QUANT_HD float quant_qmax(nk_dtype y) {
  return y == NK_FLOAT8_E4M3 ? kQmaxE4m3
                             : y == NK_FLOAT8_E5M2 ? kQmaxE5m2 : y == NK_INT8 ? kQmaxInt8 : 0.0f;
}

// MXFP8's emax: the exponent of the largest power of two the element format holds.
NK_QUANT_HD int mx_emax(nk_dtype y) { return y == NK_FLOAT8_E5M2 ? 15 : 8; }

// Q(t): t rounded to nearest even in `y` and saturated to [-qmax, qmax], as the stored byte.
NK_QUANT_HD uint8_t quantize_code(float t, nk_dtype y) {
  if (y == NK_FLOAT8_E4M3) return float_to_e4m3_bits(t);
  if (y == NK_FLOAT8_E5M2) return float_to_e5m2_bits(t);
  return static_cast<uint8_t>(float_to_int8(t));
}

// The value a code of `y` stands for.
NK_QUANT_HD float dequantize_code(uint8_t code, nk_dtype y) {
  if (y == NK_FLOAT8_E4M3) return e4m3_bits_to_float(code);
  if (y == NK_FLOAT8_E5M2) return e5m2_bits_to_float(code);
  return static_cast<float>(static_cast<int8_t>(code));
}

// |v| folded into a running maximum. NaN elements are ignored (a NaN compares false), so a
// single NaN does not poison a scale; the NaN itself still quantizes to NaN (FP8) or 0 (int8).
NK_QUANT_HD float fold_abs_max(float running, float v) {
  const float a = v < 0.0f ? -v : v;
  return a > running ? a : running;
}

// TOKEN and BLOCK: scale = max(min(amax / qmax, scale_ub or +inf), FLT_MIN), scale_ub 0 = none.
// The division is IEEE float32 (correctly rounded; CUDA's default, not a fast approximation).
NK_QUANT_HD float dynamic_scale(float amax, float qmax, float scale_ub) {
  float s = amax / qmax;
  if (scale_ub > 0.0f && s > scale_ub) s = scale_ub;
  return s < kFloat32MinNormal ? kFloat32MinNormal : s;  // also catches a flushed subnormal
}

// The multiplier applied before Q: 1 / scale rounded to float32 (scale >= FLT_MIN, so finite).
NK_QUANT_HD float dynamic_multiplier(float scale) { return 1.0f / scale; }

// MXFP8: e = clamp(floor(log2(amax)) - emax, -127, 127), -127 when amax is 0 or a float32
// subnormal. floor(log2) of a normal float is its unbiased exponent field: integer only.
NK_QUANT_HD int mx_scale_exponent(float amax, int emax) {
  const int field = static_cast<int>((quant_float_bits(amax) >> 23) & 0xffu);
  if (field == 0) return -127;
  const int e = field - 127 - emax;
  return e < -127 ? -127 : (e > 127 ? 127 : e);
}

// The e8m0 byte of an exponent from mx_scale_exponent.
NK_QUANT_HD uint8_t mx_scale_byte(int e) { return static_cast<uint8_t>(e + 127); }

// 2^-e as a float32 for e in [-127, 127]: the MXFP8 multiplier, exact and built from bits
// (2^-127, for e = 127, is a float32 subnormal; finite amax gives e <= 120, a normal).
NK_QUANT_HD float mx_multiplier(int e) {
  const int k = -e;  // in [-127, 127]
  return k >= -126 ? quant_bits_float(static_cast<uint32_t>(k + 127) << 23)
                   : quant_bits_float(0x00400000u);  // 2^-127
}

}  // namespace normkit
