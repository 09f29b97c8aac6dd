// src/common/quant_codes.h and quant_rules.h against oracles written from the formats'
// definitions: every 8-bit code decoded, every finite code round-tripped, round-to-nearest-even
// encoding checked against a search over the format's values (all midpoints and their float32
// neighbours, and a strided sweep of float32), saturation, NaN, subnormals, and flush-to-zero.
#include <algorithm>
#include <cfloat>
#include <cmath>
#include <limits>

#include "common/quant_rules.h"
#include "cuda/block_scale_e4m3.h"
#include "reference/quant_reference.h"
#include "support.h"

#if defined(__SSE__)
#include <xmmintrin.h>
#endif

namespace nktest {
namespace {

using normkit::bits_to_float;
using normkit::float_to_bits;

struct Float8 {
  nk_dtype dtype;
  int exponent_bits, mantissa_bits, bias;
  uint8_t max_code;  // largest finite magnitude code
  double max_value;
};

void PrintTo(const Float8& f, std::ostream* os) { *os << dtype_label(f.dtype); }

const Float8 kE4m3{NK_FLOAT8_E4M3, 4, 3, 7, 0x7e, 448.0};
const Float8 kE5m2{NK_FLOAT8_E5M2, 5, 2, 15, 0x7b, 57344.0};

// The value of a float8 code from the OCP definition (NaN for NaN codes, +-Inf for e5m2's).
double value_by_definition(const Float8& f, uint8_t code) {
  const int sign = code >> 7;
  const int exponent = (code >> f.mantissa_bits) & ((1 << f.exponent_bits) - 1);
  const int mantissa = code & ((1 << f.mantissa_bits) - 1);
  const int top = (1 << f.exponent_bits) - 1;
  double v;
  if (f.dtype == NK_FLOAT8_E4M3 && exponent == top && mantissa == 7) {
    v = std::numeric_limits<double>::quiet_NaN();
  } else if (f.dtype == NK_FLOAT8_E5M2 && exponent == top) {
    v = mantissa ? std::numeric_limits<double>::quiet_NaN() : INFINITY;
  } else if (exponent == 0) {
    v = std::ldexp(mantissa, 1 - f.bias - f.mantissa_bits);
  } else {
    v = std::ldexp((1 << f.mantissa_bits) + mantissa, exponent - f.bias - f.mantissa_bits);
  }
  return sign ? -v : v;
}

float decode(const Float8& f, uint8_t c) {
  return f.dtype == NK_FLOAT8_E4M3 ? normkit::e4m3_bits_to_float(c) : normkit::e5m2_bits_to_float(c);
}
uint8_t encode(const Float8& f, float v) {
  return f.dtype == NK_FLOAT8_E4M3 ? normkit::float_to_e4m3_bits(v) : normkit::float_to_e5m2_bits(v);
}

// Non-negative finite values, index = magnitude code.
std::vector<double> table(const Float8& f) {
  std::vector<double> t;
  for (int c = 0; c <= f.max_code; ++c) t.push_back(value_by_definition(f, static_cast<uint8_t>(c)));
  return t;
}

// Round to nearest even by search, then saturate: the oracle for encode().
uint8_t oracle(const Float8& f, const std::vector<double>& t, double v) {
  const uint8_t sign = std::signbit(v) ? 0x80 : 0;
  const double a = std::fabs(v);
  if (a >= f.max_value) return sign | f.max_code;
  const size_t hi = static_cast<size_t>(std::lower_bound(t.begin(), t.end(), a) - t.begin());
  if (t[hi] == a) return sign | static_cast<uint8_t>(hi);
  const size_t lo = hi - 1;
  const double below = a - t[lo], above = t[hi] - a;
  const size_t pick = below < above ? lo : above < below ? hi : (lo % 2 == 0 ? lo : hi);
  return sign | static_cast<uint8_t>(pick);
}

class Float8Codes : public ::testing::TestWithParam<Float8> {};

TEST_P(Float8Codes, DecodesEveryCodeExactly) {
  const Float8 f = GetParam();
  for (int i = 0; i < 256; ++i) {
    const uint8_t c = static_cast<uint8_t>(i);
    const float got = decode(f, c);
    const double want = value_by_definition(f, c);
    ASSERT_EQ(std::signbit(got), (c & 0x80) != 0) << "code 0x" << std::hex << i;
    if (std::isnan(want)) {
      ASSERT_TRUE(std::isnan(got)) << "code 0x" << std::hex << i;
    } else {
      ASSERT_EQ(double{got}, want) << "code 0x" << std::hex << i;
    }
    // The generic accessors agree.
    const uint8_t held[4] = {c, 0, 0, 0};  // (room for any dtype: no out-of-bounds warning)
    ASSERT_EQ(float_to_bits(normkit::load_as_float(held, f.dtype, 0)), float_to_bits(got));
  }
}

TEST_P(Float8Codes, EveryFiniteCodeRoundTrips) {
  const Float8 f = GetParam();
  int finite = 0;
  for (int i = 0; i < 256; ++i) {
    const uint8_t c = static_cast<uint8_t>(i);
    if (!std::isfinite(decode(f, c))) continue;
    ASSERT_EQ(encode(f, decode(f, c)), c) << "code 0x" << std::hex << i;
    ++finite;
  }
  EXPECT_EQ(finite, f.dtype == NK_FLOAT8_E4M3 ? 254 : 248);
}

TEST_P(Float8Codes, MidpointsRoundToEven) {
  const Float8 f = GetParam();
  const std::vector<double> t = table(f);
  for (size_t lo = 0; lo + 1 < t.size(); ++lo) {
    const float mid = static_cast<float>((t[lo] + t[lo + 1]) / 2);  // exact in float32
    const uint8_t even = static_cast<uint8_t>(lo % 2 == 0 ? lo : lo + 1);
    for (float s : {1.0f, -1.0f}) {
      const uint8_t sign = s < 0 ? 0x80 : 0;
      ASSERT_EQ(encode(f, s * mid), sign | even) << "midpoint " << s * mid;
      ASSERT_EQ(encode(f, s * std::nextafter(mid, 0.0f)), sign | lo) << "below " << s * mid;
      ASSERT_EQ(encode(f, s * std::nextafter(mid, INFINITY)), sign | (lo + 1))
          << "above " << s * mid;
    }
  }
}

TEST_P(Float8Codes, EncodingMatchesSearchOverFloat32Sweep) {
  const Float8 f = GetParam();
  const std::vector<double> t = table(f);
  // From well below half the smallest subnormal to well above the largest value.
  const int lowest = 1 - f.bias - f.mantissa_bits - 3, highest = f.dtype == NK_FLOAT8_E4M3 ? 11 : 18;
  const uint32_t from = float_to_bits(std::ldexp(1.0f, lowest));
  const uint32_t to = float_to_bits(std::ldexp(1.0f, highest));
  int64_t checked = 0;
  for (uint64_t u = from; u < to; u += 211) {
    const float v = bits_to_float(static_cast<uint32_t>(u));
    ASSERT_EQ(encode(f, v), oracle(f, t, v)) << "float " << v << " (0x" << std::hex << u << ")";
    ASSERT_EQ(encode(f, -v), oracle(f, t, -v)) << "float " << -v;
    checked += 2;
  }
  EXPECT_GT(checked, 1000000);
  // The float64 reference's Q agrees with the code on every value of the sweep's grid.
  for (uint64_t u = from; u < to; u += 4099) {
    const float v = bits_to_float(static_cast<uint32_t>(u));
    ASSERT_EQ(normkit::ref::quantize_value(v, f.dtype), double{decode(f, encode(f, v))}) << v;
  }
}

TEST_P(Float8Codes, SaturatesNaNAndSubnormalInputs) {
  const Float8 f = GetParam();
  const std::vector<double> t = table(f);
  const double step = f.max_value - t[f.max_code - 1];  // spacing below the max
  const float max = static_cast<float>(f.max_value);
  EXPECT_EQ(encode(f, max), f.max_code);
  EXPECT_EQ(encode(f, static_cast<float>(f.max_value + step / 2)), f.max_code);  // tie: saturates
  EXPECT_EQ(encode(f, static_cast<float>(f.max_value + step)), f.max_code);
  EXPECT_EQ(encode(f, FLT_MAX), f.max_code);
  EXPECT_EQ(encode(f, INFINITY), f.max_code);
  EXPECT_EQ(encode(f, -INFINITY), 0x80 | f.max_code);
  EXPECT_EQ(encode(f, -1e30f), 0x80 | f.max_code);
  EXPECT_EQ(encode(f, std::numeric_limits<float>::quiet_NaN()), 0x7f);
  EXPECT_EQ(encode(f, -std::numeric_limits<float>::quiet_NaN()), 0xff);
  EXPECT_EQ(encode(f, bits_to_float(0x7f800001u)), 0x7f);  // signalling NaN stays NaN
  EXPECT_TRUE(std::isnan(decode(f, 0x7f)));
  // Subnormal codes: the smallest is 2^(1 - bias - M); half of it is a tie that goes to 0.
  const float smallest = std::ldexp(1.0f, 1 - f.bias - f.mantissa_bits);
  EXPECT_EQ(encode(f, smallest), 0x01);
  EXPECT_EQ(encode(f, smallest / 2), 0x00);
  EXPECT_EQ(encode(f, std::nextafter(smallest / 2, 1.0f)), 0x01);
  EXPECT_EQ(encode(f, -smallest * 1.5f), 0x82);  // tie between 1 and 2 units: even
  EXPECT_EQ(encode(f, FLT_TRUE_MIN), 0x00);
  EXPECT_EQ(encode(f, -FLT_MIN), 0x80);
  EXPECT_EQ(encode(f, -0.0f), 0x80);
}

#if defined(__SSE__)
// Flush-to-zero / denormals-are-zero (XLA's CPU runtime) must not change any code or value.
TEST_P(Float8Codes, UnaffectedByFlushToZero) {
  const Float8 f = GetParam();
  float plain[256], flushed[256];
  uint8_t plain_codes[256], flushed_codes[256];
  for (int i = 0; i < 256; ++i) {
    plain[i] = decode(f, static_cast<uint8_t>(i));
    plain_codes[i] = encode(f, std::ldexp(static_cast<float>(i), -20) * 1.37f);
  }
  const unsigned saved = _mm_getcsr();
  _mm_setcsr(saved | 0x8040u);
  for (int i = 0; i < 256; ++i) {
    flushed[i] = decode(f, static_cast<uint8_t>(i));
    flushed_codes[i] = encode(f, std::ldexp(static_cast<float>(i), -20) * 1.37f);
  }
  const float e8m0_zero = normkit::e8m0_bits_to_float(0);
  _mm_setcsr(saved);
  for (int i = 0; i < 256; ++i) {
    ASSERT_EQ(float_to_bits(flushed[i]), float_to_bits(plain[i])) << "code " << i;
    ASSERT_EQ(flushed_codes[i], plain_codes[i]) << "value " << i;
  }
  EXPECT_EQ(float_to_bits(e8m0_zero), 0x00400000u);  // 2^-127 built from bits
}
#endif

INSTANTIATE_TEST_SUITE_P(Formats, Float8Codes, ::testing::Values(kE4m3, kE5m2),
                         [](const auto& info) { return dtype_label(info.param.dtype); });

TEST(E8m0Codes, DecodesEveryByte) {
  for (int b = 0; b < 256; ++b) {
    const float got = normkit::e8m0_bits_to_float(static_cast<uint8_t>(b));
    if (b == 255) {
      EXPECT_TRUE(std::isnan(got));
    } else {
      ASSERT_EQ(double{got}, std::ldexp(1.0, b - 127)) << "byte " << b;
    }
  }
}

TEST(Int8Codes, RoundsToNearestEvenAndSaturates) {
  // Oracle: nearbyint (ties to even) of the clamped value.
  for (int k = -140 * 8; k <= 140 * 8; ++k) {
    const float v = static_cast<float>(k) / 8.0f;  // every eighth, so ties at .5 are included
    const double want = std::max(-127.0, std::min(127.0, std::nearbyint(static_cast<double>(v))));
    ASSERT_EQ(normkit::float_to_int8(v), static_cast<int>(want)) << v;
    ASSERT_EQ(normkit::float_to_int8(std::nextafter(v, 1e9f)),
              std::max(-127.0, std::min(127.0, std::nearbyint(double{std::nextafter(v, 1e9f)}))))
        << std::nextafter(v, 1e9f);
  }
  EXPECT_EQ(normkit::float_to_int8(0.5f), 0);
  EXPECT_EQ(normkit::float_to_int8(1.5f), 2);
  EXPECT_EQ(normkit::float_to_int8(2.5f), 2);
  EXPECT_EQ(normkit::float_to_int8(-2.5f), -2);
  EXPECT_EQ(normkit::float_to_int8(126.5f), 126);
  EXPECT_EQ(normkit::float_to_int8(127.49f), 127);
  EXPECT_EQ(normkit::float_to_int8(-128.0f), -127);  // -128 is never produced
  EXPECT_EQ(normkit::float_to_int8(-INFINITY), -127);
  EXPECT_EQ(normkit::float_to_int8(FLT_MAX), 127);
  EXPECT_EQ(normkit::float_to_int8(std::numeric_limits<float>::quiet_NaN()), 0);
  EXPECT_EQ(normkit::float_to_int8(FLT_TRUE_MIN), 0);
  int8_t codes[4] = {};
  normkit::store_from_float(codes, NK_INT8, 0, 3.5f);
  EXPECT_EQ(codes[0], 4);
  EXPECT_EQ(normkit::load_as_float(codes, NK_INT8, 0), 4.0f);
}

// ---- scale rules ----

TEST(QuantRules, DynamicScale) {
  using normkit::dynamic_scale;
  EXPECT_EQ(dynamic_scale(448.0f, 448.0f, 0.0f), 1.0f);
  EXPECT_EQ(dynamic_scale(3.0f, 127.0f, 0.0f), 3.0f / 127.0f);  // float32 division
  EXPECT_EQ(dynamic_scale(1000.0f, 448.0f, 0.5f), 0.5f);        // the bound binds
  EXPECT_EQ(dynamic_scale(100.0f, 448.0f, 0.5f), 100.0f / 448.0f);
  EXPECT_EQ(dynamic_scale(0.0f, 448.0f, 0.0f), FLT_MIN);        // an all-zero row
  EXPECT_EQ(dynamic_scale(1e-37f, 448.0f, 0.0f), FLT_MIN);      // would be subnormal
  EXPECT_EQ(dynamic_scale(0.0f, 448.0f, 1e-3f), FLT_MIN);       // FLT_MIN wins over the bound
  EXPECT_EQ(normkit::dynamic_multiplier(FLT_MIN), std::ldexp(1.0f, 126));
  EXPECT_EQ(normkit::dynamic_multiplier(3.0f), 1.0f / 3.0f);
}

// The per-block kernel for e4m3 (src/cuda/block_scale_e4m3.h) takes amax / 448 as a product by
// 1/448 and one fma correction instead of the IEEE division: the same scale for every amax that
// kernel passes (+0 to +inf; never NaN, fmaxf drops them) and every bound. Checked for every
// float32 below 2^-101 (subnormal quotients and remainders) and for every float32 of two whole
// binades, [1, 2) and the largest. Above 2^-101 the quotient, the remainder (exact: checked) and
// the result are normal floats, so every step scales exactly by powers of two and each binade
// behaves as [1, 2); the largest adds nothing that overflows.
TEST(QuantRules, E4m3BlockScaleWithoutDivisionIsDynamicScale) {
  using normkit::dynamic_scale;
  using normkit::e4m3_block_scale;
  using normkit::quant_bits_float;
  const float inf = std::numeric_limits<float>::infinity();
  const float none = normkit::block_scale_bound(0.0f);
  EXPECT_EQ(none, inf);
  EXPECT_EQ(normkit::block_scale_bound(-1.0f), inf);
  EXPECT_EQ(normkit::block_scale_bound(std::nanf("")), inf);
  EXPECT_EQ(normkit::block_scale_bound(0.5f), 0.5f);
  EXPECT_EQ(normkit::kInvQmaxE4m3, 1.0f / 448.0f);
  int64_t mismatches = 0;
  int64_t inexact_remainders = 0;
  auto check = [&](uint32_t u, bool remainder) {
    const float amax = quant_bits_float(u);
    const float expected = dynamic_scale(amax, 448.0f, 0.0f);
    const float got = e4m3_block_scale(amax, none);
    if (normkit::quant_float_bits(got) != normkit::quant_float_bits(expected)) {
      if (++mismatches <= 5) ADD_FAILURE() << "amax " << amax << ": " << got << " != " << expected;
    }
    if (remainder) {
      const float q = amax * normkit::kInvQmaxE4m3;
      const double exact = double(amax) - double(q) * 448.0;  // exact in double
      if (double(std::fma(-q, 448.0f, amax)) != exact) ++inexact_remainders;
    }
  };
  for (uint32_t u = 0; u < (26u << 23); ++u) check(u, false);  // below 2^-101
  for (uint32_t field : {127u, 254u}) {
    for (uint32_t m = 0; m < (1u << 23); ++m) check((field << 23) | m, true);
  }
  EXPECT_EQ(mismatches, 0);
  EXPECT_EQ(inexact_remainders, 0);
  // Bounds (none, negative, NaN, subnormal, binding or not, +inf) over a stride of every amax.
  const float bounds[] = {0.0f, -1.0f, std::nanf(""), 0x1p-130f, 1e-30f, 1e-3f, 3.0f, inf};
  for (uint64_t u = 0; u <= 0x7f800000u; u += 4093) {
    const float amax = quant_bits_float(static_cast<uint32_t>(u));
    for (float ub : bounds) {
      ASSERT_EQ(normkit::quant_float_bits(e4m3_block_scale(amax, normkit::block_scale_bound(ub))),
                normkit::quant_float_bits(dynamic_scale(amax, 448.0f, ub)))
          << "amax " << amax << " bound " << ub;
    }
  }
  for (float ub : bounds) {  // amax +inf: the division's +inf, bounded
    EXPECT_EQ(normkit::quant_float_bits(e4m3_block_scale(inf, normkit::block_scale_bound(ub))),
              normkit::quant_float_bits(dynamic_scale(inf, 448.0f, ub)))
        << "bound " << ub;
  }
}

// The MXFP8 kernel for e4m3 (src/cuda/block_scale_e4m3.h) takes the e8m0 byte and the
// multiplier from max(exponent field, 8) alone, without the runtime emax, the clamps or the
// subnormal case: the same byte and multiplier bits as the CPU rule (mx_scale_exponent,
// mx_scale_byte, mx_multiplier with emax 8) for every float32 that kernel sees: every one from
// +0 to +inf (never NaN or negative: fmaxf of |v| from 0). Integer work only, so exhaustively.
TEST(QuantRules, Mxfp8E4m3ScaleIsTheCpuRule) {
  using normkit::quant_bits_float;
  using normkit::quant_float_bits;
  int64_t mismatches = 0;
  for (uint32_t u = 0;; ++u) {
    const float amax = quant_bits_float(u);
    const int e = normkit::mx_scale_exponent(amax, 8);
    const uint32_t biased = normkit::mx_e4m3_biased(amax);
    if (normkit::mx_e4m3_scale_byte(biased) != normkit::mx_scale_byte(e) ||
        quant_float_bits(normkit::mx_e4m3_multiplier(biased)) !=
            quant_float_bits(normkit::mx_multiplier(e))) {
      if (++mismatches <= 5) ADD_FAILURE() << "amax bits " << std::hex << u;
    }
    if (u == 0x7f800000u) break;  // +inf
  }
  EXPECT_EQ(mismatches, 0);
  EXPECT_EQ(normkit::mx_e4m3_scale_byte(normkit::mx_e4m3_biased(0.0f)), 0);
  EXPECT_EQ(normkit::mx_e4m3_scale_byte(normkit::mx_e4m3_biased(448.0f)), 127);  // 2^0
  EXPECT_EQ(normkit::mx_e4m3_multiplier(normkit::mx_e4m3_biased(448.0f)), 1.0f);
  EXPECT_EQ(normkit::mx_e4m3_scale_byte(normkit::mx_e4m3_biased(
                std::numeric_limits<float>::infinity())),
            247);  // 2^120
}

TEST(QuantRules, MxScaleExponent) {
  using normkit::mx_scale_exponent;
  EXPECT_EQ(mx_scale_exponent(0.0f, 8), -127);
  EXPECT_EQ(mx_scale_exponent(1.0f, 8), -8);
  EXPECT_EQ(mx_scale_exponent(1.0f, 15), -15);
  EXPECT_EQ(mx_scale_exponent(448.0f, 8), 0);
  EXPECT_EQ(mx_scale_exponent(std::nextafter(512.0f, 0.0f), 8), 0);  // floor(log2) = 8
  EXPECT_EQ(mx_scale_exponent(512.0f, 8), 1);
  EXPECT_EQ(mx_scale_exponent(57344.0f, 15), 0);
  EXPECT_EQ(mx_scale_exponent(std::ldexp(1.0f, -100), 8), -108);
  EXPECT_EQ(mx_scale_exponent(std::ldexp(1.0f, -118), 8), -126);
  EXPECT_EQ(mx_scale_exponent(std::ldexp(1.0f, -119), 8), -127);  // clamped
  EXPECT_EQ(mx_scale_exponent(FLT_MIN, 8), -127);
  EXPECT_EQ(mx_scale_exponent(FLT_TRUE_MIN, 8), -127);            // float32 subnormal
  EXPECT_EQ(mx_scale_exponent(FLT_MAX, 8), 119);
  EXPECT_EQ(mx_scale_exponent(-4.0f, 8), -6);                     // sign ignored
  for (int e = -127; e <= 127; ++e) {
    ASSERT_EQ(double{normkit::mx_multiplier(e)}, std::ldexp(1.0, -e)) << e;
    ASSERT_EQ(normkit::mx_scale_byte(e), e + 127);
    ASSERT_EQ(double{normkit::e8m0_bits_to_float(normkit::mx_scale_byte(e))}, std::ldexp(1.0, e));
  }
  // After scaling, the block max lies in [2^emax, 2^(emax+1)): at most qmax, or saturating.
  for (float a : {1.0f, 3.7f, 447.0f, 500.0f, 0.013f}) {
    const int e = mx_scale_exponent(a, 8);
    const float scaled = a * normkit::mx_multiplier(e);
    EXPECT_GE(scaled, 256.0f) << a;
    EXPECT_LT(scaled, 512.0f) << a;
  }
}

TEST(QuantRules, QmaxAndCodes) {
  EXPECT_EQ(normkit::quant_qmax(NK_FLOAT8_E4M3), 448.0f);
  EXPECT_EQ(normkit::quant_qmax(NK_FLOAT8_E5M2), 57344.0f);
  EXPECT_EQ(normkit::quant_qmax(NK_INT8), 127.0f);
  EXPECT_EQ(normkit::quant_qmax(NK_FLOAT32), 0.0f);
  EXPECT_EQ(normkit::mx_emax(NK_FLOAT8_E4M3), 8);
  EXPECT_EQ(normkit::mx_emax(NK_FLOAT8_E5M2), 15);
  EXPECT_EQ(normkit::quantize_code(-3.5f, NK_INT8), static_cast<uint8_t>(-4));
  EXPECT_EQ(normkit::dequantize_code(static_cast<uint8_t>(-4), NK_INT8), -4.0f);
  EXPECT_EQ(normkit::quantize_code(1.0f, NK_FLOAT8_E4M3), 0x38);
  EXPECT_EQ(normkit::quantize_code(1.0f, NK_FLOAT8_E5M2), 0x3c);
  EXPECT_EQ(normkit::fold_abs_max(2.0f, -3.0f), 3.0f);
  EXPECT_EQ(normkit::fold_abs_max(2.0f, std::numeric_limits<float>::quiet_NaN()), 2.0f);
  EXPECT_EQ(normkit::round_float_to_dtype(500.0f, NK_FLOAT8_E4M3), 448.0f);
  EXPECT_EQ(normkit::round_float_to_dtype(-300.7f, NK_INT8), -127.0f);
}

}  // namespace
}  // namespace nktest
