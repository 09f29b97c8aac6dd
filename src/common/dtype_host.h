// Host-side (C++ only, no CUDA) conversions between float32 and the 16-bit dtypes, and
// element access by nk_dtype. Shared by the CPU backend, the float64 reference, the tool and
// the tests. Header-only so that every user gets the same bits without a link dependency.
//
// Rounding is IEEE round-to-nearest-even everywhere. NaN stays NaN (quiet, sign kept),
// +-Inf stays +-Inf, overflow rounds to +-Inf, and float16 subnormals are produced and read
// exactly. half_bits_to_float relies on subnormal float arithmetic, so do not build users of
// this header with flush-to-zero (-ffast-math / DAZ).
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <string>

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

// Branch-free (vectorizes): place the 15 magnitude bits under a float32 exponent and rescale by
// 2^112, which turns half normals and subnormals into the right float32 values exactly; then
// patch Inf/NaN (half exponent 31), which the rescale would get wrong.
inline float half_bits_to_float(uint16_t h) {
  const uint32_t sign = uint32_t{h & 0x8000u} << 16;
  const uint32_t magnitude = uint32_t{h & 0x7fffu} << 13;
  const float scaled = bits_to_float(magnitude) * 0x1p112f;
  const bool inf_or_nan = magnitude >= 0x0f800000u;
  const uint32_t out = inf_or_nan ? (magnitude | 0x7f800000u) : float_to_bits(scaled);
  return bits_to_float(out | sign);
}

inline uint16_t float_to_half_bits(float f) {
  const uint32_t u = float_to_bits(f);
  const uint16_t sign = static_cast<uint16_t>((u >> 16) & 0x8000u);
  const uint32_t a = u & 0x7fffffffu;
  if (a >= 0x7f800000u) {  // Inf or NaN
    if (a == 0x7f800000u) return sign | 0x7c00u;
    return static_cast<uint16_t>(sign | 0x7e00u | ((a >> 13) & 0x3ffu));  // quiet NaN
  }
  // 65520 = 65504 + half an ulp: it and everything above round to Inf (65504 is odd).
  if (a >= 0x477ff000u) return sign | 0x7c00u;
  if (a >= 0x38800000u) {  // >= 2^-14: a half normal. Rebias the exponent (127 -> 15).
    const uint32_t m = a - 0x38000000u;
    return static_cast<uint16_t>(sign | ((m + 0x0fffu + ((m >> 13) & 1u)) >> 13));
  }
  // Half subnormal (or zero): the result counts units of 2^-24. The float is
  // mant * 2^(e - 150) with the implicit bit, so units = mant >> (126 - e), rounded.
  const uint32_t e = a >> 23;
  const uint32_t shift = 126u - e;  // >= 14 here
  if (shift > 24u) return sign;     // below 2^-25 (or zero / float subnormal): rounds to 0
  const uint32_t mant = (a & 0x7fffffu) | 0x800000u;
  uint32_t q = mant >> shift;
  const uint32_t rem = mant & ((1u << shift) - 1u);
  const uint32_t halfway = 1u << (shift - 1u);
  if (rem > halfway || (rem == halfway && (q & 1u))) ++q;  // may carry to 0x400: smallest normal
  return static_cast<uint16_t>(sign | q);
}

// float -> dtype -> float: the value a float32 result has after it is stored in `dtype`.
inline float round_float_to_dtype(float v, nk_dtype dtype) {
  switch (dtype) {
    case NK_FLOAT32: return v;
    case NK_FLOAT16: return half_bits_to_float(float_to_half_bits(v));
    case NK_BFLOAT16: return bf16_bits_to_float(float_to_bf16_bits(v));
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
  }
  throw std::invalid_argument("load_as_float: invalid dtype " +
                              std::to_string(static_cast<int>(dtype)));
}

// Stores `value` rounded (nearest even) to `dtype`.
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
