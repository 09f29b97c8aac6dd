// BLOCK's scale for e4m3 codes without the IEEE division, for the kernel compiled for e4m3
// codes in 128-column blocks (KernelFacts::quant_block_e4m3): bit for bit dynamic_scale(amax,
// 448, scale_ub) (src/common/quant_rules.h) for every amax that kernel passes (not NaN, >= +0,
// +inf included); tests/cpp/test_quant_codes.cpp checks every such float32. In the SASS the
// division by the runtime qmax was about 16 instructions per vector (qmax's reciprocal, FCHK
// and its branch, the bound's two tests and select); this is 5, and the bound is tested once.
// Host code too (the test), so plain float operations only: fmaf is a fused multiply-add on
// both sides. Below, MXFP8's e8m0 scale for e4m3 codes, likewise bit for bit the CPU rule.
#pragma once

#include <cmath>
#include <cstdint>

#include "common/quant_rules.h"

namespace normkit {

// 1/448 rounded to float32 (also what nvcc's division by the constant 448 refines to).
constexpr float kInvQmaxE4m3 = 0x1.24924ap-9f;

// scale_ub as a bound for fminf: +inf where it bounds nothing (not > 0: 0 = none, or NaN).
NK_QUANT_HD float block_scale_bound(float scale_ub) {
  return scale_ub > 0.0f ? scale_ub : quant_bits_float(0x7f800000u);
}

// amax / 448 by the reciprocal and one correction step (Markstein: correctly rounded where the
// quotient is a normal float; the test covers the rest), then the bound and the FLT_MIN floor.
// amax = +inf gives a NaN quotient, which fminf drops: the bound, +inf without one, as the
// division's +inf would give.
NK_QUANT_HD float e4m3_block_scale(float amax, float bound) {
  const float q = amax * kInvQmaxE4m3;
  const float r = fmaf(-q, kQmaxE4m3, amax);  // amax - q * 448, exact
  const float s = fmaf(r, kInvQmaxE4m3, q);
  return fmaxf(fminf(s, bound), kFloat32MinNormal);
}

// MXFP8's scale for e4m3 codes (emax 8), for the kernel compiled for them
// (KernelFacts::quant_mxfp8_e4m3): for amax not NaN and >= +0 (+inf included; the sign bit is 0)
// the exponent field f gives e = mx_scale_exponent(amax, 8) = max(f, 8) - 135, in [-127, 120],
// so neither the subnormal test nor the clamp at 127 nor mx_multiplier's 2^-127 case is
// reached; in the SASS those and the runtime emax were about 11 instructions per vector, this
// 4. mx_e4m3_biased: max(f, 8), in [8, 255]; tests/cpp/test_quant_codes.cpp checks every such
// float32.
NK_QUANT_HD uint32_t mx_e4m3_biased(float amax) {
  const uint32_t f = quant_float_bits(amax) >> 23;
  return f > 8u ? f : 8u;
}

// The e8m0 byte: mx_scale_byte(e) = e + 127 = biased - 8.
NK_QUANT_HD uint8_t mx_e4m3_scale_byte(uint32_t biased) {
  return static_cast<uint8_t>(biased - 8u);
}

// The multiplier 2^-e = 2^(135 - biased), a normal float: its exponent field 262 - biased is in
// [7, 254] (bit for bit mx_multiplier(e)).
NK_QUANT_HD float mx_e4m3_multiplier(uint32_t biased) {
  return quant_bits_float((262u - biased) << 23);
}

}  // namespace normkit
