// The 8-bit codes of the quantized forward, bit-exact and portable: float32 <-> OCP float8
// e4m3fn and e5m2, float32 -> int8, and decoding of e8m0 scale bytes. Header-only and usable in
// CUDA device code too (NK_QUANT_HD), so every backend, the reference and the tests share one
// definition of the codes.
//
// Encoding (float32 -> e4m3/e5m2): round to nearest even, then saturate to the largest finite
// value (+-448 e4m3, +-57344 e5m2); +-Inf saturates as well. NaN stays NaN: 0x7F with the sign
// kept, in both formats (e4m3fn has no other NaN; 0x7F is a NaN of e5m2 too). Subnormal codes
// are produced exactly. Integer operations only, so flush-to-zero / denormals-are-zero modes on
// the host cannot change a result (every float32 subnormal is far below half the smallest
// float8 subnormal and encodes to +-0 anyway).
//
// Decoding returns the exact value. e8m0 byte b is 2^(b - 127) (0xFF is NaN); byte 0 is 2^-127,
// a float32 subnormal, built from bits so flush-to-zero cannot touch the decode itself.
#pragma once

#include <cstdint>
#include <cstring>

#if defined(__CUDACC__)
#define NK_QUANT_HD __host__ __device__ __forceinline__
#else
#define NK_QUANT_HD inline
#endif

namespace normkit {

NK_QUANT_HD uint32_t quant_float_bits(float f) {
#if defined(__CUDA_ARCH__)
  return __float_as_uint(f);
#else
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return u;
#endif
}

NK_QUANT_HD float quant_bits_float(uint32_t u) {
#if defined(__CUDA_ARCH__)
  return __uint_as_float(u);
#else
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
#endif
}

// A float8 format: MANT mantissa bits, exponent bias BIAS, largest finite magnitude code MAXC.
// Encodes |f| (float32 bits with the sign cleared, not NaN) to a magnitude code in [0, MAXC].
template <int MANT, int BIAS, uint32_t MAXC>
NK_QUANT_HD uint32_t float8_magnitude_code(uint32_t a) {
  // Codes of the smallest normal, 2^(1 - BIAS), in float32 bits.
  constexpr uint32_t kMinNormal = static_cast<uint32_t>(128 - BIAS) << 23;
  constexpr int kDrop = 23 - MANT;  // float32 mantissa bits dropped
  if (a >= 0x7f800000u) return MAXC;  // Inf (NaN is handled by the caller)
  if (a >= kMinNormal) {
    // Rebias the exponent (127 -> BIAS) and round the dropped bits to nearest even; a carry out
    // of the mantissa bumps the exponent, and anything past MAXC saturates.
    const uint32_t r = a - (static_cast<uint32_t>(127 - BIAS) << 23);
    const uint32_t code = (r + ((1u << (kDrop - 1)) - 1u) + ((r >> kDrop) & 1u)) >> kDrop;
    return code < MAXC ? code : MAXC;
  }
  // Subnormal codes count units of 2^(1 - BIAS - MANT). A float32 with exponent field E and
  // significand m (implicit bit included) is m * 2^(E - 150), so the code is m shifted right by
  // (1 - BIAS - MANT) - (E - 150) bits, rounded to nearest even. Code 1 << MANT (reached by
  // rounding up) is the smallest normal, as it should be.
  const int exponent = static_cast<int>(a >> 23);
  if (exponent == 0) return 0;  // a float32 subnormal (or zero): below half a float8 unit
  const uint32_t m = (a & 0x7fffffu) | 0x800000u;
  const int shift = (151 - BIAS - MANT) - exponent;  // >= kDrop + 1 here
  if (shift > 25) return 0;  // m < 2^24 <= half a unit
  const uint32_t q = m >> shift;
  const uint32_t rest = m & ((1u << shift) - 1u), half = 1u << (shift - 1);
  return q + ((rest > half || (rest == half && (q & 1u))) ? 1u : 0u);
}

NK_QUANT_HD uint8_t float_to_e4m3_bits(float f) {
  const uint32_t u = quant_float_bits(f);
  const uint32_t sign = (u >> 24) & 0x80u, a = u & 0x7fffffffu;
  if (a > 0x7f800000u) return static_cast<uint8_t>(sign | 0x7fu);
  return static_cast<uint8_t>(sign | float8_magnitude_code<3, 7, 0x7eu>(a));
}

NK_QUANT_HD uint8_t float_to_e5m2_bits(float f) {
  const uint32_t u = quant_float_bits(f);
  const uint32_t sign = (u >> 24) & 0x80u, a = u & 0x7fffffffu;
  if (a > 0x7f800000u) return static_cast<uint8_t>(sign | 0x7fu);
  return static_cast<uint8_t>(sign | float8_magnitude_code<2, 15, 0x7bu>(a));
}

// e4m3fn: exponent 4 bits (bias 7), mantissa 3 bits; S.1111.111 is NaN, no infinities.
NK_QUANT_HD float e4m3_bits_to_float(uint8_t b) {
  const uint32_t sign = uint32_t{b & 0x80u} << 24;
  const uint32_t exponent = (b >> 3) & 0xfu, mantissa = b & 0x7u;
  uint32_t out;
  if (exponent == 0) {
    out = quant_float_bits(static_cast<float>(mantissa) * 0x1p-9f);  // exact, a normal float
  } else if (exponent == 0xfu && mantissa == 0x7u) {
    out = 0x7fc00000u;
  } else {
    out = ((exponent + 120u) << 23) | (mantissa << 20);
  }
  return quant_bits_float(out | sign);
}

// e5m2: the top byte of an IEEE binary16 (exponent 5 bits, bias 15; Inf and NaN as IEEE).
NK_QUANT_HD float e5m2_bits_to_float(uint8_t b) {
  const uint32_t sign = uint32_t{b & 0x80u} << 24;
  const uint32_t exponent = (b >> 2) & 0x1fu, mantissa = b & 0x3u;
  uint32_t out;
  if (exponent == 0) {
    out = quant_float_bits(static_cast<float>(mantissa) * 0x1p-16f);
  } else if (exponent == 0x1fu) {
    out = mantissa ? 0x7fc00000u : 0x7f800000u;
  } else {
    out = ((exponent + 112u) << 23) | (mantissa << 21);
  }
  return quant_bits_float(out | sign);
}

// e8m0: 2^(b - 127); 0xFF is NaN.
NK_QUANT_HD float e8m0_bits_to_float(uint8_t b) {
  if (b == 0xffu) return quant_bits_float(0x7fc00000u);
  if (b == 0) return quant_bits_float(0x00400000u);  // 2^-127, a float32 subnormal
  return quant_bits_float(uint32_t{b} << 23);
}

// int8: round to nearest even, saturate to [-127, 127] (-128 is never produced), NaN -> 0.
NK_QUANT_HD int8_t float_to_int8(float f) {
  if (!(f == f)) return 0;
  const float c = f < -127.0f ? -127.0f : (f > 127.0f ? 127.0f : f);
  // Adding 1.5 * 2^23 leaves no fraction bits, so the sum is c rounded to nearest even (for
  // |c| < 2^22); subtracting gives that integer exactly.
  const float r = (c + 12582912.0f) - 12582912.0f;
  return static_cast<int8_t>(static_cast<int>(r));
}

}  // namespace normkit
