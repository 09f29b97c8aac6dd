// src/common/dtype_host.h against independent oracles: exhaustive decoding of every 16-bit
// pattern, and round-to-nearest-even encoding checked against a search over all representable
// values (ties, subnormals, overflow, NaN).
#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstring>
#include <limits>

#include "support.h"

#if defined(__SSE__)
#include <xmmintrin.h>
#endif

namespace nktest {
namespace {

using normkit::bf16_bits_to_float;
using normkit::bits_to_float;
using normkit::float_to_bf16_bits;
using normkit::float_to_bits;
using normkit::float_to_half_bits;
using normkit::half_bits_to_float;

// IEEE binary16 value of a bit pattern, from the definition.
double half_value_by_definition(uint16_t h) {
  const int sign = h >> 15, exponent = (h >> 10) & 0x1f, mantissa = h & 0x3ff;
  double v;
  if (exponent == 0) {
    v = std::ldexp(mantissa, -24);
  } else if (exponent == 31) {
    v = mantissa ? std::numeric_limits<double>::quiet_NaN() : std::numeric_limits<double>::infinity();
  } else {
    v = std::ldexp(1024 + mantissa, exponent - 25);
  }
  return sign ? -v : v;
}

bool is_half_nan(uint16_t h) { return (h & 0x7c00) == 0x7c00 && (h & 0x3ff) != 0; }
bool is_bf16_nan(uint16_t h) { return (h & 0x7f80) == 0x7f80 && (h & 0x7f) != 0; }

// Round-to-nearest-even by search: `values[i]` are the non-negative finite values of a format
// in increasing order with bit patterns i; `overflow` is the threshold at and above which IEEE
// rounding gives infinity (max finite + half an ulp); `inf_bits` the pattern of +infinity.
uint16_t nearest_even(double v, const std::vector<double>& values, double overflow,
                      uint16_t inf_bits, uint16_t sign_bit) {
  const uint16_t sign = std::signbit(v) ? sign_bit : 0;
  const double a = std::fabs(v);
  if (a >= overflow) return sign | inf_bits;
  const size_t hi = static_cast<size_t>(std::lower_bound(values.begin(), values.end(), a) - values.begin());
  if (hi == values.size()) return sign | static_cast<uint16_t>(hi - 1);  // max < a < overflow
  if (values[hi] == a) return sign | static_cast<uint16_t>(hi);
  const size_t lo = hi - 1;  // values[lo] < a < values[hi]
  const double below = a - values[lo], above = values[hi] - a;
  size_t pick = below < above ? lo : above < below ? hi : (lo % 2 == 0 ? lo : hi);
  return sign | static_cast<uint16_t>(pick);
}

std::vector<double> half_table() {
  std::vector<double> t;
  for (uint32_t h = 0; h <= 0x7bff; ++h) t.push_back(half_value_by_definition(static_cast<uint16_t>(h)));
  return t;
}

std::vector<double> bf16_table() {
  std::vector<double> t;
  for (uint32_t h = 0; h <= 0x7f7f; ++h) t.push_back(bits_to_float(h << 16));
  return t;
}

// Floats to test encoding with: every `step`-th pattern (a prime, so the dropped low bits vary)
// of the interesting magnitudes, both signs, plus exact ties and their float neighbours.
std::vector<float> sweep(uint32_t from_bits, uint32_t to_bits, uint32_t step,
                         const std::vector<double>& table) {
  std::vector<float> out;
  for (uint64_t u = from_bits; u < to_bits; u += step) {
    out.push_back(bits_to_float(static_cast<uint32_t>(u)));
    out.push_back(-bits_to_float(static_cast<uint32_t>(u)));
  }
  for (size_t i = 0; i + 1 < table.size(); i += 7) {
    const float tie = static_cast<float>((table[i] + table[i + 1]) / 2);  // exact in float32
    out.push_back(tie);
    out.push_back(std::nextafter(tie, 0.0f));
    out.push_back(std::nextafter(tie, INFINITY));
  }
  return out;
}

TEST(DtypeHost, Float16DecodesEveryPatternExactly) {
  for (uint32_t i = 0; i <= 0xffff; ++i) {
    const uint16_t h = static_cast<uint16_t>(i);
    const float f = half_bits_to_float(h);
    const double expected = half_value_by_definition(h);
    if (is_half_nan(h)) {
      ASSERT_TRUE(std::isnan(f)) << std::hex << i;
      ASSERT_EQ(std::signbit(f), (h & 0x8000) != 0) << std::hex << i;
    } else {
      ASSERT_EQ(double{f}, expected) << "pattern 0x" << std::hex << i;
      ASSERT_EQ(std::signbit(f), (h & 0x8000) != 0) << "sign of 0x" << std::hex << i;
    }
  }
}

#if defined(__SSE__)
// XLA's CPU runtime (and torch.set_flush_denormal) run with flush-to-zero and
// denormals-are-zero set; float16 subnormals must still decode to their values.
TEST(DtypeHost, Float16DecodesSubnormalsUnderFlushToZero) {
  volatile uint16_t smallest_bits = 0x0001, largest_bits = 0x83ff;  // no constant folding
  const unsigned saved = _mm_getcsr();
  _mm_setcsr(saved | 0x8040u);  // FTZ (bit 15) and DAZ (bit 6)
  const float smallest = normkit::half_bits_to_float(smallest_bits);
  const float largest_subnormal = normkit::half_bits_to_float(largest_bits);
  _mm_setcsr(saved);
  EXPECT_EQ(smallest, std::ldexp(1.0f, -24));
  EXPECT_EQ(largest_subnormal, -1023.0f * std::ldexp(1.0f, -24));
}
#endif

TEST(DtypeHost, Float16RoundTripsEveryPattern) {
  for (uint32_t i = 0; i <= 0xffff; ++i) {
    const uint16_t h = static_cast<uint16_t>(i);
    const uint16_t back = float_to_half_bits(half_bits_to_float(h));
    if (is_half_nan(h)) {
      ASSERT_TRUE(is_half_nan(back)) << std::hex << i << " -> " << back;
      ASSERT_EQ(back & 0x8000, h & 0x8000);
    } else {
      ASSERT_EQ(back, h) << "pattern 0x" << std::hex << i;
    }
  }
}

TEST(DtypeHost, Float16EncodingIsRoundToNearestEven) {
  const std::vector<double> table = half_table();
  const double overflow = 65504.0 + 16.0;  // max + half an ulp (ulp 32 at the top binade)
  // From below 2^-25 (rounds to zero) through the subnormals to above the overflow threshold.
  const std::vector<float> values = sweep(0x32800000u, 0x47900000u, 211, table);
  int64_t checked = 0;
  for (float f : values) {
    const uint16_t got = float_to_half_bits(f);
    const uint16_t want = nearest_even(f, table, overflow, 0x7c00, 0x8000);
    ASSERT_EQ(got, want) << "float " << f << " (0x" << std::hex << float_to_bits(f) << ")";
    ++checked;
  }
  EXPECT_GT(checked, 1000000);
}

TEST(DtypeHost, Float16SpecialValues) {
  EXPECT_EQ(float_to_half_bits(0.0f), 0x0000);
  EXPECT_EQ(float_to_half_bits(-0.0f), 0x8000);
  EXPECT_EQ(float_to_half_bits(INFINITY), 0x7c00);
  EXPECT_EQ(float_to_half_bits(-INFINITY), 0xfc00);
  EXPECT_EQ(float_to_half_bits(65504.0f), 0x7bff);
  EXPECT_EQ(float_to_half_bits(65519.996f), 0x7bff);  // just below the overflow tie
  EXPECT_EQ(float_to_half_bits(65520.0f), 0x7c00);    // the tie rounds to even: infinity
  EXPECT_EQ(float_to_half_bits(1e30f), 0x7c00);
  EXPECT_EQ(float_to_half_bits(std::ldexp(1.0f, -24)), 0x0001);      // smallest subnormal
  EXPECT_EQ(float_to_half_bits(std::ldexp(1.0f, -25)), 0x0000);      // tie to even: zero
  EXPECT_EQ(float_to_half_bits(std::ldexp(1.5f, -25)), 0x0001);      // above the tie
  EXPECT_EQ(float_to_half_bits(std::ldexp(3.0f, -25)), 0x0002);      // 1.5 units: tie to even 2
  EXPECT_EQ(float_to_half_bits(std::ldexp(1023.5f, -24)), 0x0400);   // carries into normal
  EXPECT_EQ(float_to_half_bits(std::ldexp(1.0f, -14)), 0x0400);      // smallest normal
  EXPECT_EQ(float_to_half_bits(1.0f + std::ldexp(1.0f, -11)), 0x3c00);  // tie: even (1.0)
  EXPECT_EQ(float_to_half_bits(1.0f + std::ldexp(3.0f, -11)), 0x3c02);  // tie: even (up)
  EXPECT_EQ(float_to_half_bits(FLT_TRUE_MIN), 0x0000);
  const uint16_t nan = float_to_half_bits(bits_to_float(0x7f800001u));  // payload only in low bits
  EXPECT_TRUE(is_half_nan(nan)) << std::hex << nan;
  EXPECT_TRUE(is_half_nan(float_to_half_bits(-std::numeric_limits<float>::quiet_NaN())));
}

#if defined(__FLT16_MAX__) && (defined(__x86_64__) || defined(__aarch64__))
// The compiler's own float -> _Float16 conversion as a second, independent oracle.
TEST(DtypeHost, Float16EncodingMatchesCompilerConversion) {
  Rng rng;
  NK_SEED_TRACE(rng);
  for (int i = 0; i < 200000; ++i) {
    const float f = static_cast<float>(std::ldexp(rng.uniform(-1.0, 1.0), static_cast<int>(rng.below(44)) - 27));
    const _Float16 h = static_cast<_Float16>(f);
    uint16_t bits;
    std::memcpy(&bits, &h, 2);
    ASSERT_EQ(float_to_half_bits(f), bits) << "float " << f;
    ASSERT_EQ(half_bits_to_float(bits), static_cast<float>(h)) << "bits 0x" << std::hex << bits;
  }
}
#endif

TEST(DtypeHost, Bfloat16RoundTripsEveryPattern) {
  for (uint32_t i = 0; i <= 0xffff; ++i) {
    const uint16_t h = static_cast<uint16_t>(i);
    const float f = bf16_bits_to_float(h);
    ASSERT_EQ(float_to_bits(f), i << 16);
    const uint16_t back = float_to_bf16_bits(f);
    if (is_bf16_nan(h)) {
      ASSERT_TRUE(is_bf16_nan(back)) << std::hex << i;
    } else {
      ASSERT_EQ(back, h) << "pattern 0x" << std::hex << i;
    }
  }
}

TEST(DtypeHost, Bfloat16EncodingIsRoundToNearestEven) {
  const std::vector<double> table = bf16_table();
  // max finite 0x7f7f = (2 - 2^-7) 2^127; half an ulp above it rounds to infinity.
  const double overflow = std::ldexp(2.0 - std::ldexp(1.0, -8), 127);
  const std::vector<float> values = sweep(0x00000001u, 0x7f800000u, 1009, table);
  for (float f : values) {
    ASSERT_EQ(float_to_bf16_bits(f), nearest_even(f, table, overflow, 0x7f80, 0x8000))
        << "float " << f << " (0x" << std::hex << float_to_bits(f) << ")";
  }
}

TEST(DtypeHost, Bfloat16SpecialValues) {
  EXPECT_EQ(float_to_bf16_bits(1.0f), 0x3f80);
  EXPECT_EQ(float_to_bf16_bits(bits_to_float(0x3f808000u)), 0x3f80);  // tie: even (down)
  EXPECT_EQ(float_to_bf16_bits(bits_to_float(0x3f818000u)), 0x3f82);  // tie: even (up)
  EXPECT_EQ(float_to_bf16_bits(bits_to_float(0x3f808001u)), 0x3f81);  // above the tie
  EXPECT_EQ(float_to_bf16_bits(FLT_MAX), 0x7f80);                     // overflow: infinity
  EXPECT_EQ(float_to_bf16_bits(-INFINITY), 0xff80);
  EXPECT_EQ(float_to_bf16_bits(-0.0f), 0x8000);
  // A NaN whose payload is only in the dropped bits must stay NaN, not become infinity.
  EXPECT_TRUE(is_bf16_nan(float_to_bf16_bits(bits_to_float(0x7f800001u))));
  EXPECT_TRUE(is_bf16_nan(float_to_bf16_bits(bits_to_float(0xffc00000u))));
}

TEST(DtypeHost, LoadAndStoreByDtypeAndIndex) {
  for (nk_dtype d : all_dtypes()) {
    SCOPED_TRACE(dtype_label(d));
    std::vector<uint8_t> bytes(16 * normkit::host_dtype_size(d), 0xab);
    const float values[] = {1.5f, -2.25f, 0.1f, 65504.0f};
    for (int i = 0; i < 4; ++i) normkit::store_from_float(bytes.data(), d, 3 + 2 * i, values[i]);
    for (int i = 0; i < 4; ++i) {
      EXPECT_EQ(normkit::load_as_float(bytes.data(), d, 3 + 2 * i),
                normkit::round_float_to_dtype(values[i], d));
    }
    // Neighbours untouched.
    EXPECT_EQ(bytes[0], 0xab);
    EXPECT_EQ(bytes[4 * normkit::host_dtype_size(d)], 0xab);
  }
  EXPECT_EQ(normkit::round_float_to_dtype(0.1f, NK_FLOAT32), 0.1f);
  EXPECT_EQ(normkit::round_float_to_dtype(0.1f, NK_BFLOAT16), bits_to_float(0x3dcd0000u));
  EXPECT_EQ(normkit::round_float_to_dtype(0.1f, NK_FLOAT16), half_bits_to_float(0x2e66));
}

TEST(DtypeHost, RoundToDtypeGoesThroughFloat32) {
  // 1 + 2^-11 + 2^-30: rounded directly to float16 it is above the tie and would go up to
  // 1 + 2^-10; through float32 (the documented rule) it first becomes the exact tie 1 + 2^-11,
  // which rounds to even: 1.
  const double v = 1.0 + std::ldexp(1.0, -11) + std::ldexp(1.0, -30);
  EXPECT_EQ(normkit::round_to_dtype(v, NK_FLOAT16), 1.0);
  EXPECT_EQ(normkit::round_to_dtype(v, NK_FLOAT32), 1.0 + std::ldexp(1.0, -11));
  EXPECT_EQ(normkit::round_to_dtype(1.0 / 3.0, NK_BFLOAT16), double{bits_to_float(0x3eab0000u)});
}

TEST(DtypeHost, InvalidDtypeThrows) {
  float v = 0;
  EXPECT_EQ(normkit::host_dtype_size(static_cast<nk_dtype>(7)), 0u);
  EXPECT_THROW(normkit::load_as_float(&v, static_cast<nk_dtype>(7), 0), std::invalid_argument);
  EXPECT_THROW(normkit::store_from_float(&v, static_cast<nk_dtype>(-1), 0, 1.0f),
               std::invalid_argument);
  EXPECT_THROW(normkit::round_to_dtype(1.0, static_cast<nk_dtype>(7)), std::invalid_argument);
  // e8m0 holds scale exponents: it can be read but is never the rounding of a value.
  EXPECT_THROW(normkit::store_from_float(&v, NK_FLOAT8_E8M0, 0, 1.0f), std::invalid_argument);
  EXPECT_THROW(normkit::round_float_to_dtype(1.0f, NK_FLOAT8_E8M0), std::invalid_argument);
}

}  // namespace
}  // namespace nktest
