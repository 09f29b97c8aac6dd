// The CPU backend's whole-array float16 conversions (src/cpu/half_rows.cpp), each implementation
// this CPU supports, against the element-wise ones of common/dtype_host.h, which
// test_dtype_host.cpp checks against the definition: every float32 bit pattern encoded, every
// float16 pattern decoded (NaNs as bits, payload and quiet bit included), ragged lengths, and the
// same bits whatever MXCSR holds (flush-to-zero, denormals-are-zero, each rounding mode).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

#include "common/dtype_host.h"
#include "cpu/half_rows.h"
#include "support.h"

#if defined(__SSE__)
#include <xmmintrin.h>
#endif

namespace normkit::cpu {
inline const char* half_path_name(HalfPath path) {
  switch (path) {
    case HalfPath::kElementWise: return "ElementWise";
    case HalfPath::kF16c: return "F16c";
    case HalfPath::kAvx512: return "Avx512";
  }
  return "Unknown";
}
// (gtest writes the parameter into each test's ctest entry.)
inline void PrintTo(HalfPath path, std::ostream* os) { *os << half_path_name(path); }
}  // namespace normkit::cpu

namespace nktest {
namespace {

using normkit::bits_to_float;
using normkit::float_to_bits;
using normkit::float_to_half_bits;
using normkit::half_bits_to_float;
using normkit::cpu::floats_to_halves;
using normkit::cpu::HalfPath;
using normkit::cpu::halves_to_floats;

// Each implementation, skipped where the CPU lacks it.
class HalfRows : public ::testing::TestWithParam<HalfPath> {
 protected:
  void SetUp() override {
    if (!normkit::cpu::half_path_supported(GetParam())) GTEST_SKIP() << "not on this CPU";
  }
};

bool is_half_nan(uint16_t h) { return (h & 0x7fff) > 0x7c00; }

TEST_P(HalfRows, EncodesEveryFloat32AsFloatToHalfBits) {
  if (GetParam() == HalfPath::kElementWise) GTEST_SKIP() << "the oracle itself";
  expect_every_float32_encodes_as(
      [&](const float* in, uint16_t* out, int64_t n) { floats_to_halves(GetParam(), in, out, n); },
      float_to_half_bits);
}

// Every pattern but the NaNs, in order: arrays without a NaN (the fast path where there is one).
std::vector<uint16_t> every_non_nan_half() {
  std::vector<uint16_t> h;
  for (uint32_t i = 0; i <= 0xffff; ++i) {
    if (!is_half_nan(static_cast<uint16_t>(i))) h.push_back(static_cast<uint16_t>(i));
  }
  return h;
}

// Decoded bits of halves_to_floats against half_bits_to_float's (as bits: -0 and NaNs too).
void expect_decodes_like_scalar(HalfPath path, const std::vector<uint16_t>& in) {
  std::vector<float> out(in.size());
  halves_to_floats(path, in.data(), out.data(), static_cast<int64_t>(in.size()));
  for (size_t j = 0; j < in.size(); ++j) {
    ASSERT_EQ(float_to_bits(out[j]), float_to_bits(half_bits_to_float(in[j])))
        << "half 0x" << std::hex << in[j] << " at index " << std::dec << j;
  }
}

TEST_P(HalfRows, DecodesEveryPatternAsHalfBitsToFloat) {
  expect_decodes_like_scalar(GetParam(), every_non_nan_half());
  // A NaN anywhere among finite values: a signaling NaN must keep its quiet bit clear, as
  // half_bits_to_float leaves it (VCVTPH2PS would set it).
  std::vector<uint16_t> row(43);  // (whole vectors of 8 and 16, then a tail of 3 or 11)
  for (size_t j = 0; j < row.size(); ++j) row[j] = static_cast<uint16_t>(0x3c00 + 37 * j);
  for (uint32_t nan = 0x7c01; nan <= 0xffff; ++nan) {
    if (!is_half_nan(static_cast<uint16_t>(nan))) continue;
    const size_t at = nan % row.size();
    std::vector<uint16_t> with_nan = row;
    with_nan[at] = static_cast<uint16_t>(nan);
    expect_decodes_like_scalar(GetParam(), with_nan);
  }
}

TEST_P(HalfRows, RaggedLengthsAndOffsets) {
  std::vector<float> in(80);
  for (size_t j = 0; j < in.size(); ++j) {
    in[j] = std::ldexp(1.0f + 0.013f * j, static_cast<int>(j % 40) - 26);  // subnormals too
  }
  for (int64_t offset = 0; offset < 9; ++offset) {
    for (int64_t n = 0; n <= 40; ++n) {
      std::vector<uint16_t> h(n + 2, 0xabcd);
      floats_to_halves(GetParam(), in.data() + offset, h.data() + 1, n);
      EXPECT_EQ(h[0], 0xabcd);
      EXPECT_EQ(h[n + 1], 0xabcd) << "written past the end, n " << n;
      for (int64_t j = 0; j < n; ++j) ASSERT_EQ(h[j + 1], float_to_half_bits(in[offset + j]));
      std::vector<float> back(n + 2, -7.0f);
      halves_to_floats(GetParam(), h.data() + 1, back.data() + 1, n);
      EXPECT_EQ(back[0], -7.0f);
      EXPECT_EQ(back[n + 1], -7.0f) << "written past the end, n " << n;
      for (int64_t j = 0; j < n; ++j) ASSERT_EQ(back[j + 1], half_bits_to_float(h[j + 1]));
    }
  }
}

#if defined(__SSE__)
// Floats where the mode could matter, both signs: every float16 value, every tie between two
// neighbours (65520 above the largest) and the floats on either side of it, float32 subnormals
// (DAZ reads them as 0) and Inf and NaN patterns (every 7th, and the extremes of each range).
std::vector<float> mode_sensitive_floats() {
  std::vector<float> v;
  for (uint32_t h = 0; h < 0x7c00; ++h) {
    const double value = half_bits_to_float(static_cast<uint16_t>(h));
    const double next = h == 0x7bff ? 65536.0 : half_bits_to_float(static_cast<uint16_t>(h + 1));
    const float tie = static_cast<float>((value + next) / 2);  // exact in float32
    for (float f : {static_cast<float>(value), tie, std::nextafter(tie, 0.0f),
                    std::nextafter(tie, INFINITY)}) {
      v.push_back(f);
      v.push_back(-f);
    }
  }
  for (uint32_t u = 1; u < 0x00800000u; u += 7) v.push_back(bits_to_float(u));
  for (uint32_t u = 0x7f800000u; u < 0x80000000u; u += 7) v.push_back(bits_to_float(u));
  for (uint32_t u : {0x007fffffu, 0x7f800001u, 0x7fbfffffu, 0x7fc00000u, 0x7fffffffu}) {
    v.push_back(bits_to_float(u));
  }
  const size_t positive = v.size();
  for (size_t j = 0; j < positive; ++j) {
    v.push_back(bits_to_float(float_to_bits(v[j]) ^ 0x80000000u));
  }
  return v;
}

struct Mode {
  const char* name;
  unsigned set;  // MXCSR bits set over the default (rounding field cleared first)
  bool rounding;
};

// FTZ is bit 15, DAZ bit 6, the rounding field bits 13-14 (1 down, 2 up, 3 toward zero).
constexpr Mode kModes[] = {{"FTZ+DAZ", 0x8040u, false},
                           {"round down", 0x2000u, true},
                           {"round up", 0x4000u, true},
                           {"round toward zero", 0x6000u, true},
                           {"FTZ+DAZ, toward zero", 0xe040u, true}};

// The bits under every mode are the bits under the default one (the element-wise forms, as the
// oracle, run under the default mode). The element-wise implementation is exact under FTZ and
// DAZ but rounds float16 subnormals by MXCSR.RC (and decodes +0 as -0 when rounding down).
TEST_P(HalfRows, SameBitsWhateverMxcsrHolds) {
  const std::vector<float> floats = mode_sensitive_floats();
  std::vector<uint16_t> want(floats.size());
  for (size_t j = 0; j < floats.size(); ++j) want[j] = float_to_half_bits(floats[j]);
  std::vector<uint16_t> halves;  // every pattern, NaNs included
  for (uint32_t i = 0; i <= 0xffff; ++i) halves.push_back(static_cast<uint16_t>(i));
  std::vector<uint32_t> want_back(halves.size());
  for (size_t j = 0; j < halves.size(); ++j) {
    want_back[j] = float_to_bits(half_bits_to_float(halves[j]));
  }

  const unsigned saved = _mm_getcsr();
  for (const Mode& mode : kModes) {
    if (mode.rounding && GetParam() == HalfPath::kElementWise) continue;
    SCOPED_TRACE(mode.name);
    std::vector<uint16_t> got(floats.size());
    std::vector<float> got_back(halves.size());
    _mm_setcsr((saved & ~0x6000u) | mode.set);
    floats_to_halves(GetParam(), floats.data(), got.data(), static_cast<int64_t>(floats.size()));
    halves_to_floats(GetParam(), halves.data(), got_back.data(),
                     static_cast<int64_t>(halves.size()));
    _mm_setcsr(saved);
    for (size_t j = 0; j < floats.size(); ++j) {
      ASSERT_EQ(got[j], want[j]) << "float32 bits 0x" << std::hex << float_to_bits(floats[j]);
    }
    for (size_t j = 0; j < halves.size(); ++j) {
      ASSERT_EQ(float_to_bits(got_back[j]), want_back[j]) << "half 0x" << std::hex << halves[j];
    }
  }
}
#endif

// The plain functions, which the row kernels call, use the best implementation there is.
TEST(HalfRowsDispatch, PlainFunctionsUseTheLastSupportedPath) {
  const HalfPath best = normkit::cpu::half_path();
  EXPECT_TRUE(normkit::cpu::half_path_supported(best));
  RecordProperty("half_path", static_cast<int>(best));
  const float in[] = {1.0f, -0.0f, 65520.0f, 3e-8f, 0.1f};
  uint16_t h[5], want[5];
  floats_to_halves(in, h, 5);
  floats_to_halves(best, in, want, 5);
  for (int j = 0; j < 5; ++j) EXPECT_EQ(h[j], want[j]);
}

INSTANTIATE_TEST_SUITE_P(Paths, HalfRows,
                         ::testing::Values(HalfPath::kElementWise, HalfPath::kF16c,
                                           HalfPath::kAvx512),
                         [](const auto& info) {
                           return std::string(normkit::cpu::half_path_name(info.param));
                         });

}  // namespace
}  // namespace nktest
