// The CPU forward's vectorized quantization (src/cpu/quantize_span.cpp) against the shared
// per-element rules of common/quant_rules.h: every float32 bit pattern through each output
// format, and the row maximum against the sequential fold, NaN, -0 and ragged lengths included.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <random>
#include <thread>
#include <vector>

#include "common/dtype_host.h"
#include "common/quant_rules.h"
#include "cpu/quantize_span.h"

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
  constexpr uint64_t kAll = uint64_t{1} << 32;
  constexpr int kThreads = 2;  // (halves of the bit patterns)
  int64_t mismatches[kThreads] = {};
  uint32_t example[kThreads] = {};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      mismatches[t] = count_mismatches(dtype, kAll / kThreads * t, kAll / kThreads * (t + 1),
                                       &example[t]);
    });
  }
  for (auto& t : threads) t.join();
  for (int t = 0; t < kThreads; ++t) {
    EXPECT_EQ(mismatches[t], 0) << "first at float32 bits 0x" << std::hex << example[t];
  }
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

}  // namespace
}  // namespace nktest
