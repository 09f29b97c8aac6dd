// The CPU backend's whole-array float32 -> bfloat16 rounding (src/cpu/bf16_rows.cpp), each
// implementation this CPU supports, against the element-wise float_to_bf16_bits of
// common/dtype_host.h, which test_dtype_host.cpp checks against the definition: every float32
// bit pattern (subnormals, which VCVTNEPS2BF16 reads as zero, and NaNs included), ragged lengths
// and offsets, and the same bits whatever MXCSR holds.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

#include "common/dtype_host.h"
#include "cpu/bf16_rows.h"
#include "support.h"

#if defined(__SSE__)
#include <xmmintrin.h>
#endif

namespace normkit::cpu {
inline const char* bf16_path_name(Bf16Path path) {
  switch (path) {
    case Bf16Path::kElementWise: return "ElementWise";
    case Bf16Path::kAvx512Bf16: return "Avx512Bf16";
  }
  return "Unknown";
}
// (gtest writes the parameter into each test's ctest entry.)
inline void PrintTo(Bf16Path path, std::ostream* os) { *os << bf16_path_name(path); }
}  // namespace normkit::cpu

namespace nktest {
namespace {

using normkit::bits_to_float;
using normkit::float_to_bf16_bits;
using normkit::float_to_bits;
using normkit::cpu::Bf16Path;
using normkit::cpu::floats_to_bf16s;

// Each implementation, skipped where the CPU lacks it.
class Bf16Rows : public ::testing::TestWithParam<Bf16Path> {
 protected:
  void SetUp() override {
    if (!normkit::cpu::bf16_path_supported(GetParam())) GTEST_SKIP() << "not on this CPU";
  }
};

TEST_P(Bf16Rows, RoundsEveryFloat32AsFloatToBf16Bits) {
  if (GetParam() == Bf16Path::kElementWise) GTEST_SKIP() << "the oracle itself";
  expect_every_float32_encodes_as(
      [&](const float* in, uint16_t* out, int64_t n) { floats_to_bf16s(GetParam(), in, out, n); },
      float_to_bf16_bits);
}

// Subnormals at every position of a vector and in the tail, among normal values: each lane that
// the instruction reads as zero is rounded again, and no other.
TEST_P(Bf16Rows, SubnormalsAnywhereInARow) {
  std::vector<float> row(37);  // (two vectors of 16, then a tail of 5)
  for (size_t j = 0; j < row.size(); ++j) row[j] = 1.0f + 0.37f * static_cast<float>(j);
  for (size_t at = 0; at < row.size(); ++at) {
    for (uint32_t sub : {0x00000001u, 0x00400000u, 0x807fffffu, 0x00008000u}) {
      std::vector<float> in = row;
      in[at] = bits_to_float(sub);
      in[(at + 5) % in.size()] = bits_to_float(sub ^ 0x80000000u);
      std::vector<uint16_t> out(in.size());
      floats_to_bf16s(GetParam(), in.data(), out.data(), static_cast<int64_t>(in.size()));
      for (size_t j = 0; j < in.size(); ++j) {
        ASSERT_EQ(out[j], float_to_bf16_bits(in[j]))
            << "subnormal 0x" << std::hex << sub << " at " << std::dec << at << ", index " << j;
      }
    }
  }
}

TEST_P(Bf16Rows, RaggedLengthsAndOffsets) {
  std::vector<float> in(80);
  for (size_t j = 0; j < in.size(); ++j) {
    in[j] = std::ldexp(1.0f + 0.013f * j, static_cast<int>(j % 40) * 7 - 150);  // subnormals too
  }
  for (int64_t offset = 0; offset < 17; ++offset) {
    for (int64_t n = 0; n <= 50; ++n) {
      std::vector<uint16_t> out(n + 2, 0xabcd);
      floats_to_bf16s(GetParam(), in.data() + offset, out.data() + 1, n);
      EXPECT_EQ(out[0], 0xabcd);
      EXPECT_EQ(out[n + 1], 0xabcd) << "written past the end, n " << n;
      for (int64_t j = 0; j < n; ++j) ASSERT_EQ(out[j + 1], float_to_bf16_bits(in[offset + j]));
    }
  }
}

#if defined(__SSE__)
// Floats where the mode could matter, both signs: ties between bfloat16 neighbours and the floats
// on either side, subnormals (DAZ would read them as 0), Inf and NaN patterns.
std::vector<float> mode_sensitive_floats() {
  std::vector<float> v;
  for (uint32_t h = 0; h < 0x7f80; h += 3) {
    const uint32_t tie = (h << 16) | 0x8000u;
    for (uint32_t u : {h << 16, tie, tie - 1, tie + 1}) v.push_back(bits_to_float(u));
  }
  for (uint32_t u = 1; u < 0x00800000u; u += 4099) v.push_back(bits_to_float(u));
  for (uint32_t u = 0x7f800000u; u < 0x80000000u; u += 4099) v.push_back(bits_to_float(u));
  for (uint32_t u : {0x007fffffu, 0x7f7fffffu, 0x7f800001u, 0x7fbfffffu, 0x7fc00000u}) {
    v.push_back(bits_to_float(u));
  }
  const size_t positive = v.size();
  for (size_t j = 0; j < positive; ++j) {
    v.push_back(bits_to_float(float_to_bits(v[j]) ^ 0x80000000u));
  }
  return v;
}

// FTZ is bit 15, DAZ bit 6, the rounding field bits 13-14 (1 down, 2 up, 3 toward zero). The
// element-wise form works on integers: no mode reaches it either.
constexpr unsigned kModes[] = {0x8040u, 0x2000u, 0x4000u, 0x6000u, 0xe040u};

TEST_P(Bf16Rows, SameBitsWhateverMxcsrHolds) {
  const std::vector<float> floats = mode_sensitive_floats();
  std::vector<uint16_t> want(floats.size());
  for (size_t j = 0; j < floats.size(); ++j) want[j] = float_to_bf16_bits(floats[j]);
  const unsigned saved = _mm_getcsr();
  for (const unsigned mode : kModes) {
    SCOPED_TRACE("MXCSR bits 0x" + std::to_string(mode));
    std::vector<uint16_t> got(floats.size());
    _mm_setcsr((saved & ~0x6000u) | mode);
    floats_to_bf16s(GetParam(), floats.data(), got.data(), static_cast<int64_t>(floats.size()));
    _mm_setcsr(saved);
    for (size_t j = 0; j < floats.size(); ++j) {
      ASSERT_EQ(got[j], want[j]) << "float32 bits 0x" << std::hex << float_to_bits(floats[j]);
    }
  }
}
#endif

// The plain function, which the row kernels call, uses the best implementation there is.
TEST(Bf16RowsDispatch, PlainFunctionUsesTheLastSupportedPath) {
  const Bf16Path best = normkit::cpu::bf16_path();
  EXPECT_TRUE(normkit::cpu::bf16_path_supported(best));
  RecordProperty("bf16_path", static_cast<int>(best));
  std::vector<float> in(21);
  for (size_t j = 0; j < in.size(); ++j) in[j] = 0.1f * static_cast<float>(j) - 1.0f;
  in[3] = bits_to_float(0x00000003u);
  std::vector<uint16_t> got(in.size()), want(in.size());
  floats_to_bf16s(in.data(), got.data(), static_cast<int64_t>(in.size()));
  floats_to_bf16s(best, in.data(), want.data(), static_cast<int64_t>(in.size()));
  EXPECT_EQ(got, want);
}

INSTANTIATE_TEST_SUITE_P(Paths, Bf16Rows,
                         ::testing::Values(Bf16Path::kElementWise, Bf16Path::kAvx512Bf16),
                         [](const auto& info) {
                           return std::string(normkit::cpu::bf16_path_name(info.param));
                         });

}  // namespace
}  // namespace nktest
