// The CPU forward's vectorized quantization (src/cpu/quantize_span.cpp) against the shared
// per-element rules of common/quant_rules.h: every float32 bit pattern through each output
// format, and the row maximum against the sequential fold, NaN, -0 and ragged lengths included;
// MXFP8's blocks (maxima, e8m0 bytes, codes) and TOKEN's and BLOCK's blocks (maxima, scales,
// codes) against the scalar rules, every float32 a block's encoder can be handed included.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <ostream>
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

// Values for the ragged tests: normal at a random scale, with -0, NaN and +-Inf mixed in.
std::vector<float> ragged_values(int64_t n, std::mt19937& rng) {
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::uniform_int_distribution<int> exponent(-140, 20), pick(0, 29);
  const float nan = bits_to_float(0x7fc00000u), inf = bits_to_float(0x7f800000u);
  const float scale = std::ldexp(1.0f, exponent(rng));
  std::vector<float> v(static_cast<size_t>(n));
  for (float& x : v) {
    const int special = pick(rng);
    x = special == 0 ? -0.0f : special == 1 ? nan : special == 2 ? -inf : normal(rng) * scale;
  }
  return v;
}

// quantize_span's 16-code steps and the codes after the last whole vector (its unrolled steps and
// their remainder included), from unaligned starts.
TEST(QuantizeSpan, RaggedLengthsAndStartsAreCodedAsQuantizeCode) {
  std::mt19937 rng(14);
  for (int64_t n = 0; n <= 140; ++n) {
    for (int64_t start : {0, 1, 3}) {
      const std::vector<float> v = ragged_values(start + n, rng);
      std::vector<uint8_t> y(static_cast<size_t>(start + n) + 1, 0xa5);
      for (nk_dtype dtype : {NK_FLOAT8_E4M3, NK_FLOAT8_E5M2, NK_INT8}) {
        const float multiplier = 1.7f;
        normkit::cpu::quantize_span(y.data() + start, v.data() + start, n, multiplier, dtype);
        for (int64_t j = start; j < start + n; ++j) {
          ASSERT_EQ(y[j], normkit::quantize_code(v[j] * multiplier, dtype))
              << "n " << n << " start " << start << " element " << j;
        }
        ASSERT_EQ(y[static_cast<size_t>(start + n)], 0xa5) << "n " << n;  // (nothing past n)
      }
    }
  }
}

// abs_max's four chains of vectors, the vectors after the last whole step and the elements
// after the last whole vector, with NaN, -0 and the maximum in each of them.
TEST(QuantizeSpan, AbsMaxOverRaggedLengthsIsTheSequentialFold) {
  std::mt19937 rng(15);
  const float nan = bits_to_float(0x7fc00000u);
  for (int64_t n = 0; n <= 200; ++n) {
    for (int64_t peak = 0; peak < n; peak += 7) {
      std::vector<float> v = ragged_values(n, rng);
      for (float& x : v) x = std::isinf(x) ? nan : x;  // (an Inf would be every row's max)
      v[static_cast<size_t>(peak)] = -1e30f;
      float expected = 0.0f;
      for (float x : v) expected = normkit::fold_abs_max(expected, x);
      const float got = normkit::cpu::abs_max(v.data(), n);
      ASSERT_EQ(float_to_bits(got), float_to_bits(expected)) << "n " << n << " peak " << peak;
    }
  }
}

// TOKEN and BLOCK blocks against the scalar rules, block by block: fold_abs_max, dynamic_scale,
// quantize_code of v * dynamic_multiplier, and the row maximum. Block lengths that are and are
// not whole vectors, up to and past the longest that go 16 at a time; rows of fewer than 16
// blocks, of whole groups of 16 and of groups and more; with and without scale_ub.
TEST(QuantizeSpan, ScaledBlocksFollowTheScalarRules) {
  std::mt19937 rng(16);
  for (int64_t block : {1, 15, 16, 17, 32, 100, 128, 144, 256, 272, 512}) {
    for (int64_t blocks : {1, 3, 16, 17, 32, 35}) {
      const int64_t n = block * blocks;
      for (nk_dtype dtype : {NK_FLOAT8_E4M3, NK_FLOAT8_E5M2, NK_INT8}) {
        for (float scale_ub : {0.0f, 0x1p-30f, 3.0f}) {
          // Each block at its own scale (mx_row's blocks are 32 long; these take any length).
          std::vector<float> v(static_cast<size_t>(n));
          for (int64_t b = 0; b < blocks; ++b) {
            const std::vector<float> vb = ragged_values(block, rng);
            std::copy(vb.begin(), vb.end(), v.begin() + b * block);
          }
          if (blocks > 2) std::fill(v.begin() + block, v.begin() + 2 * block, -0.0f);
          const float qmax = normkit::quant_qmax(dtype);
          std::vector<uint8_t> y(static_cast<size_t>(n));
          std::vector<float> scales(static_cast<size_t>(blocks));
          const float got_max = normkit::cpu::quantize_scaled_blocks(
              y.data(), scales.data(), v.data(), n, block, qmax, scale_ub, dtype);
          float row_max = 0.0f;
          for (int64_t b = 0; b < blocks; ++b) {
            float m = 0.0f;
            for (int64_t j = 0; j < block; ++j) m = normkit::fold_abs_max(m, v[b * block + j]);
            row_max = normkit::fold_abs_max(row_max, m);
            const float scale = normkit::dynamic_scale(m, qmax, scale_ub);
            ASSERT_EQ(float_to_bits(scales[b]), float_to_bits(scale))
                << "block " << block << " n " << n << " b " << b;
            const float multiplier = normkit::dynamic_multiplier(scale);
            for (int64_t j = 0; j < block; ++j) {
              const int64_t k = b * block + j;
              ASSERT_EQ(y[k], normkit::quantize_code(v[k] * multiplier, dtype))
                  << "block " << block << " n " << n << " element " << k;
            }
          }
          ASSERT_EQ(float_to_bits(got_max), float_to_bits(row_max)) << "block " << block;
        }
      }
    }
  }
}

// TOKEN (one block a row) and BLOCK (the default 128, blocks 16 at a time).
struct ScaledBlocksCase {
  nk_dtype dtype;
  int64_t block;
  int64_t row;  // elements per quantize_scaled_blocks call
};

void PrintTo(const ScaledBlocksCase& c, std::ostream* os) {
  *os << nk_dtype_name(c.dtype) << ", block " << c.block << ", row " << c.row;
}

// Codes of quantize_scaled_blocks disagreeing with quantize_code over the bit patterns in
// [first, last): with scale_ub 1, every float32 is reachable (t = v * 1 / min(amax / qmax, 1)).
// Each block holds qmax besides block - 1 patterns, so that its scale is exactly 1 and t is the
// pattern itself; a scale other than 1 or a wrong row maximum counts too. The codes are compared
// byte for byte with quantize_span's at multiplier 1, which QuantizeSpanCodes checks against
// quantize_code over every float32, and the maximum with abs_max's. The first disagreement's
// input in *example.
int64_t count_scaled_mismatches(const ScaledBlocksCase& c, uint64_t first, uint64_t last,
                                uint32_t* example) {
  constexpr int64_t kRows = 64;
  const float qmax = normkit::quant_qmax(c.dtype);
  std::vector<float> v(static_cast<size_t>(c.row * kRows)), scales(v.size() / c.block);
  std::vector<uint8_t> y(v.size()), expected(v.size());
  int64_t mismatches = 0;
  const auto check = [&] {
    normkit::cpu::quantize_span(expected.data(), v.data(), static_cast<int64_t>(v.size()), 1.0f,
                                c.dtype);
    for (int64_t r = 0; r < kRows; ++r) {
      const int64_t at = r * c.row;
      const float got_max = normkit::cpu::quantize_scaled_blocks(
          y.data() + at, scales.data() + at / c.block, v.data() + at, c.row, c.block, qmax,
          1.0f, c.dtype);
      for (int64_t b = at; b < at + c.row; b += c.block) {
        const bool bad_scale = scales[b / c.block] != 1.0f;
        for (int64_t k = b; k < b + c.block; ++k) {
          if ((bad_scale || y[k] != expected[k]) && mismatches++ == 0) {
            *example = float_to_bits(v[k]);
          }
        }
      }
      const float row_max = normkit::cpu::abs_max(v.data() + at, c.row);
      if (float_to_bits(got_max) != float_to_bits(row_max) && mismatches++ == 0) {
        *example = float_to_bits(v[at]);
      }
    }
  };
  for (uint64_t p = first; p < last;) {
    for (size_t b = 0; b < v.size(); b += static_cast<size_t>(c.block)) {
      v[b] = qmax;  // (the padding after `last` keeps scale 1 too)
      for (size_t k = b + 1; k < b + static_cast<size_t>(c.block); ++k) {
        v[k] = p < last ? bits_to_float(static_cast<uint32_t>(p++)) : 0.0f;
      }
    }
    check();
  }
  return mismatches;
}

class QuantizeScaledBlockCodes : public ::testing::TestWithParam<ScaledBlocksCase> {};

TEST_P(QuantizeScaledBlockCodes, EveryFloat32IsCodedAsQuantizeCode) {
  const ScaledBlocksCase c = GetParam();
  expect_no_mismatch_over_every_float32([&](uint64_t begin, uint64_t end, uint32_t* example) {
    return count_scaled_mismatches(c, begin, end, example);
  });
}

INSTANTIATE_TEST_SUITE_P(
    Formats, QuantizeScaledBlockCodes,
    ::testing::Values(ScaledBlocksCase{NK_FLOAT8_E4M3, 4096, 4096},
                      ScaledBlocksCase{NK_FLOAT8_E5M2, 4096, 4096},
                      ScaledBlocksCase{NK_INT8, 4096, 4096},
                      ScaledBlocksCase{NK_FLOAT8_E4M3, 128, 4096},
                      ScaledBlocksCase{NK_FLOAT8_E5M2, 128, 4096},
                      ScaledBlocksCase{NK_INT8, 128, 4096}),
    [](const auto& info) {
      return std::string(info.param.block == info.param.row ? "token_" : "block_") +
             nk_dtype_name(info.param.dtype);
    });

}  // namespace
}  // namespace nktest
