// Host-side (C++ only, no CUDA) conversions between float32 and the 16-bit dtypes, and
// element access by nk_dtype (the 8-bit output dtypes through common/quant_rules.h). Shared by
// the CPU backend, the float64 reference, the tool and the tests. Header-only so that every user
// gets the same bits without a link dependency.
//
// Rounding is IEEE round-to-nearest-even everywhere. NaN stays NaN (quiet, sign kept),
// +-Inf stays +-Inf, overflow rounds to +-Inf, and float16 subnormals are produced and read
// exactly. (The 8-bit dtypes saturate instead: see nk_quant_mode and quant_codes.h.) The float16 conversions use float32 arithmetic on subnormals in the default rounding
// mode, so do not build users of this header with flush-to-zero or -ffast-math.
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <string>

#include "common/quant_rules.h"
#include "normkit/normkit.h"

namespace normkit {

inline uint32_t float_to_bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return u;
}

inline float bits_to_float(uint32_t u) {
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

// ---- bfloat16: the top 16 bits of a float32 ----

inline float bf16_bits_to_float(uint16_t h) { return bits_to_float(uint32_t{h} << 16); }

inline uint16_t float_to_bf16_bits(float f) {
  const uint32_t u = float_to_bits(f);
  // Round to nearest even on the 16 dropped bits. Overflow carries into the exponent and
  // yields Inf, as IEEE rounding does.
  const uint32_t rounded = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
  // NaN: keep the sign and the top payload bits, force the quiet bit so it cannot become Inf.
  const uint32_t nan = (u >> 16) | 0x0040u;
  const bool is_nan = (u & 0x7fffffffu) > 0x7f800000u;
  return static_cast<uint16_t>(is_nan ? nan : rounded);
}

// ---- IEEE binary16 ----

// Branch-free (vectorizes): the 15 magnitude bits under a float32 exponent rebiased by 112 are
// the value of every half normal; a subnormal (exponent 0) is placed at exponent 113 instead,
// where it reads 2^-14 * (1 + m/1024), and 2^-14 is subtracted (exact: m * 2^-24, a normal
// float or zero); Inf and NaN (exponent 31) get float32 exponent 255, the payload kept.
inline float half_bits_to_float(uint16_t h) {
  // No float operand or result is subnormal, so flush-to-zero / denormals-are-zero modes (set
  // by XLA's CPU runtime, or torch.set_flush_denormal) cannot turn half subnormals into 0.
  const uint32_t sign = uint32_t{h & 0x8000u} << 16;
  const uint32_t magnitude = h & 0x7fffu;
  const uint32_t is_subnormal = 0u - static_cast<uint32_t>(magnitude < 0x0400u);  // masks: the
  const uint32_t is_special = 0u - static_cast<uint32_t>(magnitude >= 0x7c00u);  // loop vectorizes
  const uint32_t placed = (magnitude << 13) + (112u << 23) + (is_subnormal & (1u << 23));
  const float value = bits_to_float(placed) - bits_to_float(is_subnormal & 0x38800000u);  // 2^-14
  return bits_to_float(float_to_bits(value) | (is_special & 0x7f800000u) | sign);
}

// Branch-free (vectorizes): every case is computed and the right one selected.
inline uint16_t float_to_half_bits(float f) {
  const uint32_t u = float_to_bits(f);
  const uint32_t sign = (u >> 16) & 0x8000u;
  const uint32_t a = u & 0x7fffffffu;
  // Half normals (a >= 2^-14): rebias the exponent (127 -> 15) and round the 13 dropped bits to
  // nearest even. A carry out of the mantissa bumps the exponent, up to 0x7c00 (Inf).
  const uint32_t normal = (a - 0x38000000u + 0x0fffu + ((a >> 13) & 1u)) >> 13;
  // Half subnormals (a < 2^-14): 0.5f has an ulp of 2^-24, half's smallest subnormal, so the
  // float addition rounds |f| to a multiple of 2^-24 (to nearest even, the default rounding
  // mode) and the low mantissa bits count those units (1024 = the smallest normal, 0x0400).
  const uint32_t subnormal = float_to_bits(bits_to_float(a) + 0.5f) - 0x3f000000u;
  // NaN stays NaN (quiet, top payload bits kept); Inf and everything that rounds past 65504
  // (from 65520 = 65504 + half an ulp, a tie that goes to the even Inf) becomes Inf.
  const uint32_t nan_mask = 0u - static_cast<uint32_t>(a > 0x7f800000u);
  const uint32_t special = 0x7c00u | (nan_mask & (0x0200u | ((a >> 13) & 0x3ffu)));
  // Select with masks rather than branches so loops of conversions vectorize.
  const uint32_t is_subnormal = 0u - static_cast<uint32_t>(a < 0x38800000u);
  const uint32_t is_special = 0u - static_cast<uint32_t>(a >= 0x477ff000u);
  const uint32_t finite = (subnormal & is_subnormal) | (normal & ~is_subnormal);
  const uint32_t r = (special & is_special) | (finite & ~is_special);
  return static_cast<uint16_t>(sign | r);
}

// The dtypes arithmetic inputs and unquantized outputs may have.
inline bool is_float_dtype(nk_dtype dtype) {
  return dtype == NK_FLOAT32 || dtype == NK_FLOAT16 || dtype == NK_BFLOAT16;
}

// The dtypes a quantized y may have (Q of nk_quant_mode); e8m0 holds scales only.
inline bool is_quantized_dtype(nk_dtype dtype) {
  return dtype == NK_FLOAT8_E4M3 || dtype == NK_FLOAT8_E5M2 || dtype == NK_INT8;
}

// float -> dtype -> float: the value a float32 result has after it is stored in `dtype`. For the
// 8-bit dtypes the store is Q: round to nearest even and saturate (NaN -> 0 for int8).
inline float round_float_to_dtype(float v, nk_dtype dtype) {
  switch (dtype) {
    case NK_FLOAT32: return v;
    case NK_FLOAT16: return half_bits_to_float(float_to_half_bits(v));
    case NK_BFLOAT16: return bf16_bits_to_float(float_to_bf16_bits(v));
    case NK_FLOAT8_E4M3:
    case NK_FLOAT8_E5M2:
    case NK_INT8: return dequantize_code(quantize_code(v, dtype), dtype);
    case NK_FLOAT8_E8M0: break;  // scales are exponents, not rounded values
  }
  throw std::invalid_argument("round_float_to_dtype: invalid dtype " +
                              std::to_string(static_cast<int>(dtype)));
}

// ---- element access by dtype ----

// Bytes per element; 0 for an invalid dtype (same as nk_dtype_size, without linking libnormkit).
inline size_t host_dtype_size(nk_dtype dtype) {
  switch (dtype) {
    case NK_FLOAT32: return 4;
    case NK_FLOAT16:
    case NK_BFLOAT16: return 2;
    case NK_FLOAT8_E4M3:
    case NK_FLOAT8_E5M2:
    case NK_INT8:
    case NK_FLOAT8_E8M0: return 1;
  }
  return 0;
}

inline float load_as_float(const void* base, nk_dtype dtype, int64_t index) {
  switch (dtype) {
    case NK_FLOAT32: {
      float v;
      std::memcpy(&v, static_cast<const char*>(base) + index * 4, 4);
      return v;
    }
    case NK_FLOAT16:
    case NK_BFLOAT16: {
      uint16_t h;
      std::memcpy(&h, static_cast<const char*>(base) + index * 2, 2);
      return dtype == NK_FLOAT16 ? half_bits_to_float(h) : bf16_bits_to_float(h);
    }
    case NK_FLOAT8_E4M3:
    case NK_FLOAT8_E5M2:
    case NK_INT8:
    case NK_FLOAT8_E8M0: {
      const uint8_t b = static_cast<const uint8_t*>(base)[index];
      return dtype == NK_FLOAT8_E8M0 ? e8m0_bits_to_float(b) : dequantize_code(b, dtype);
    }
  }
  throw std::invalid_argument("load_as_float: invalid dtype " +
                              std::to_string(static_cast<int>(dtype)));
}

// Stores `value` rounded (nearest even) to `dtype`; for the 8-bit output dtypes that is Q
// (saturating). An e8m0 scale is not a rounded value: storing one throws.
inline void store_from_float(void* base, nk_dtype dtype, int64_t index, float value) {
  switch (dtype) {
    case NK_FLOAT32:
      std::memcpy(static_cast<char*>(base) + index * 4, &value, 4);
      return;
    case NK_FLOAT16:
    case NK_BFLOAT16: {
      const uint16_t h =
          dtype == NK_FLOAT16 ? float_to_half_bits(value) : float_to_bf16_bits(value);
      std::memcpy(static_cast<char*>(base) + index * 2, &h, 2);
      return;
    }
    case NK_FLOAT8_E4M3:
    case NK_FLOAT8_E5M2:
    case NK_INT8:
      static_cast<uint8_t*>(base)[index] = quantize_code(value, dtype);
      return;
    case NK_FLOAT8_E8M0: break;
  }
  throw std::invalid_argument("store_from_float: invalid dtype " +
                              std::to_string(static_cast<int>(dtype)));
}

// The value `v` has after a float32 computation stores it in `dtype`. Exact rule: v is rounded
// to float32 (nearest even), and that float is rounded to `dtype` (nearest even). For float32
// this is one rounding. For float16/bfloat16 it is the double rounding the backends perform
// (they compute in float32 and round once when storing); it can differ from rounding v directly
// to the dtype when v lies within half a float32 ulp of a dtype tie. This is how the reference
// reproduces residual_out bit-for-bit: x + residual of two stored values is exact in double, so
// rounding it this way equals the float32 sum rounded to x's dtype.
inline double round_to_dtype(double v, nk_dtype dtype) {
  return static_cast<double>(round_float_to_dtype(static_cast<float>(v), dtype));
}

}  // namespace normkit
