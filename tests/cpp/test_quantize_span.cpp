// The CPU forward's vectorized quantization (src/cpu/quantize_span.cpp) against the shared
// per-element rules of common/quant_rules.h: every float32 bit pattern through each output
// format, and the row maximum against the sequential fold, NaN, -0 and ragged lengths included;
// MXFP8's blocks (maxima, e8m0 bytes, codes) against the scalar rules, every float32 a block's
// encoder can be handed included.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "common/dtype_host.h"
#include "common/quant_rules.h"
#include "cpu/quantize_span.h"
#include "support.h"

namespace nktest {
namespace {

using normkit::bits_to_float;
using normkit::float_to_bits;

// Codes of quantize_span and of quantize_code disagreeing over bit patterns [first, last), one
// span of kSpan at a time; the first disagreement's input in *example.
constexpr int64_t kSpan = 1 << 16;
int64_t count_mismatches(nk_dtype dtype, uint64_t first, uint64_t last, uint32_t* example) {
  std::vector<float> v(kSpan);
  std::vector<uint8_t> y(kSpan);
  int64_t mismatches = 0;
  for (uint64_t base = first; base < last; base += kSpan) {
    for (int64_t j = 0; j < kSpan; ++j) v[j] = bits_to_float(static_cast<uint32_t>(base + j));
    normkit::cpu::quantize_span(y.data(), v.data(), kSpan, 1.0f, dtype);
    for (int64_t j = 0; j < kSpan; ++j) {
      if (y[j] != normkit::quantize_code(v[j], dtype)) {
        if (mismatches++ == 0) *example = static_cast<uint32_t>(base + j);
      }
    }
  }
  return mismatches;
}

class QuantizeSpanCodes : public ::testing::TestWithParam<nk_dtype> {};

TEST_P(QuantizeSpanCodes, EveryFloat32IsCodedAsQuantizeCode) {
  const nk_dtype dtype = GetParam();
  expect_no_mismatch_over_every_float32([&](uint64_t begin, uint64_t end, uint32_t* example) {
    return count_mismatches(dtype, begin, end, example);
  });
}

INSTANTIATE_TEST_SUITE_P(Formats, QuantizeSpanCodes,
                         ::testing::Values(NK_FLOAT8_E4M3, NK_FLOAT8_E5M2, NK_INT8),
                         [](const auto& info) { return std::string(nk_dtype_name(info.param)); });

TEST(QuantizeSpan, AppliesTheMultiplierFirst) {
  std::mt19937 rng(11);
  std::normal_distribution<float> normal(0.0f, 300.0f);
  std::vector<float> v(1000);
  for (float& x : v) x = normal(rng);
  std::vector<uint8_t> y(v.size());
  for (nk_dtype dtype : {NK_FLOAT8_E4M3, NK_FLOAT8_E5M2, NK_INT8}) {
    const float multiplier = 0.37f;
    normkit::cpu::quantize_span(y.data(), v.data(), static_cast<int64_t>(v.size()), multiplier,
                                dtype);
    for (size_t j = 0; j < v.size(); ++j) {
      ASSERT_EQ(y[j], normkit::quantize_code(v[j] * multiplier, dtype)) << j;
    }
  }
}

TEST(QuantizeSpan, AbsMaxIsTheSequentialFold) {
  std::mt19937 rng(12);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  const float nan = bits_to_float(0x7fc00000u);
  for (int64_t n : {0, 1, 15, 16, 17, 100, 1023}) {
    std::vector<float> v(static_cast<size_t>(n));
    for (float& x : v) x = normal(rng);
    if (n > 3) v[1] = nan, v[2] = -0.0f;
    float expected = 0.0f;
    for (float x : v) expected = normkit::fold_abs_max(expected, x);
    const float got = normkit::cpu::abs_max(v.data(), n);
    EXPECT_EQ(float_to_bits(got), float_to_bits(expected)) << "n " << n;
  }
  // All zeros, some negative: +0, as the fold gives.
  const std::vector<float> zeros = {-0.0f, 0.0f, -0.0f, -0.0f, 0.0f, -0.0f, -0.0f, -0.0f,
                                    -0.0f, 0.0f, -0.0f, -0.0f, 0.0f, -0.0f, -0.0f, -0.0f, -0.0f};
  const float z = normkit::cpu::abs_max(zeros.data(), static_cast<int64_t>(zeros.size()));
  EXPECT_FALSE(std::signbit(z));
  EXPECT_EQ(z, 0.0f);
}

// A row for quantize_mx_blocks: each 32-element block at its own scale, from float32
// subnormals to near the largest finite value, with whole zero blocks, -0, NaN and +-Inf mixed in.
std::vector<float> mx_row(int64_t n, std::mt19937& rng) {
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::uniform_int_distribution<int> exponent(-150, 127), pick(0, 39);
  const float nan = bits_to_float(0x7fc00000u), inf = bits_to_float(0x7f800000u);
  std::vector<float> v(static_cast<size_t>(n));
  for (int64_t b = 0; b < n / normkit::kMxfp8Block; ++b) {
    const int kind = pick(rng);  // (a few blocks all zero or all subnormal)
    const float scale = kind == 0 ? 0.0f : std::ldexp(1.0f, kind == 1 ? -140 : exponent(rng));
    for (int j = 0; j < normkit::kMxfp8Block; ++j) {
      float x = normal(rng) * scale;
      const int special = pick(rng);
      if (special == 0) x = -0.0f;
      if (special == 1 && kind % 3 == 0) x = nan;
      if (special == 2 && kind % 7 == 0) x = kind % 2 ? inf : -inf;
      v[static_cast<size_t>(b * normkit::kMxfp8Block + j)] = x;
    }
  }
  return v;
}

// MXFP8 blocks against the scalar rules, block by block: fold_abs_max, mx_scale_exponent, its
// e8m0 byte, quantize_code of v * mx_multiplier, and the row maximum; row lengths that are and
// are not whole groups of blocks.
TEST(QuantizeSpan, MxBlocksFollowTheScalarRules) {
  std::mt19937 rng(13);
  constexpr int kBlock = normkit::kMxfp8Block;
  for (int64_t n : {32, 64, 160, 480, 512, 544, 1024, 4096 + 5 * 32}) {
    for (nk_dtype dtype : {NK_FLOAT8_E4M3, NK_FLOAT8_E5M2, NK_INT8}) {
      for (int trial = 0; trial < 20; ++trial) {
        const std::vector<float> v = mx_row(n, rng);
        std::vector<uint8_t> y(static_cast<size_t>(n)), scales(static_cast<size_t>(n / kBlock));
        const float got_max =
            normkit::cpu::quantize_mx_blocks(y.data(), scales.data(), v.data(), n, dtype);
        float row_max = 0.0f;
        for (int64_t b = 0; b < n / kBlock; ++b) {
          float m = 0.0f;
          for (int j = 0; j < kBlock; ++j) m = normkit::fold_abs_max(m, v[b * kBlock + j]);
          row_max = normkit::fold_abs_max(row_max, m);
          const int e = normkit::mx_scale_exponent(m, normkit::mx_emax(dtype));
          ASSERT_EQ(scales[b], normkit::mx_scale_byte(e)) << "n " << n << " block " << b;
          for (int j = 0; j < kBlock; ++j) {
            const int64_t k = b * kBlock + j;
            ASSERT_EQ(y[k], normkit::quantize_code(v[k] * normkit::mx_multiplier(e), dtype))
                << "n " << n << " element " << k;
          }
        }
        ASSERT_EQ(float_to_bits(got_max), float_to_bits(row_max)) << "n " << n;
      }
    }
  }
}

// Codes of quantize_mx_blocks disagreeing with quantize_code over the bit patterns in [first,
// last) that an MXFP8 block can hand to its encoder: after the multiplier, |t| < 2^(emax + 1),
// or NaN. Each block holds, besides 31 such patterns, the largest float below 2^(emax + 1), so
// that its exponent is 0 and t is the pattern itself; the first disagreement's input in
// *example.
int64_t count_mx_mismatches(nk_dtype dtype, uint64_t first, uint64_t last, uint32_t* example) {
  constexpr int64_t kBlock = normkit::kMxfp8Block, kBlocks = 1 << 12;
  const uint32_t top = ((127u + normkit::mx_emax(dtype)) << 23) | 0x7fffffu;
  const float multiplier = normkit::mx_multiplier(0);
  std::vector<float> v(kBlock * kBlocks);
  std::vector<uint8_t> y(v.size()), scales(kBlocks);
  int64_t mismatches = 0;
  const auto check = [&] {
    normkit::cpu::quantize_mx_blocks(y.data(), scales.data(), v.data(), kBlock * kBlocks, dtype);
    for (size_t k = 0; k < v.size(); ++k) {
      const bool bad = y[k] != normkit::quantize_code(v[k] * multiplier, dtype) ||
                       scales[k / kBlock] != normkit::mx_scale_byte(0);
      if (bad && mismatches++ == 0) *example = float_to_bits(v[k]);
    }
  };
  int64_t filled = 0;
  for (uint64_t p = first; p < last; ++p) {
    const uint32_t a = static_cast<uint32_t>(p) & 0x7fffffffu;
    if (a > top && a <= 0x7f800000u) continue;  // (out of reach: larger than any t, or Inf)
    if (filled % kBlock == 0) v[filled++] = bits_to_float(top);
    v[filled++] = bits_to_float(static_cast<uint32_t>(p));
    if (filled == static_cast<int64_t>(v.size())) check(), filled = 0;
  }
  if (filled > 0) {
    std::fill(v.begin() + filled, v.end(), 0.0f);
    for (int64_t k = filled; k < static_cast<int64_t>(v.size()); k += kBlock) {
      v[k] = bits_to_float(top);  // (the padding's blocks keep exponent 0 too)
    }
    check();
  }
  return mismatches;
}

class QuantizeMxCodes : public ::testing::TestWithParam<nk_dtype> {};

TEST_P(QuantizeMxCodes, EveryReachableFloat32IsCodedAsQuantizeCode) {
  const nk_dtype dtype = GetParam();
  expect_no_mismatch_over_every_float32([&](uint64_t begin, uint64_t end, uint32_t* example) {
    return count_mx_mismatches(dtype, begin, end, example);
  });
}

INSTANTIATE_TEST_SUITE_P(Formats, QuantizeMxCodes,
                         ::testing::Values(NK_FLOAT8_E4M3, NK_FLOAT8_E5M2, NK_INT8),
                         [](const auto& info) { return std::string(nk_dtype_name(info.param)); });

}  // namespace
}  // namespace nktest
