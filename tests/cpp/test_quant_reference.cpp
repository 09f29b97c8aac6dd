// The quantized oracle itself: ref::quantize_value on hand-computed roundings, the float64
// quantized forward on hand-computed cases, and proof that ref::compare_quant accepts a value
// legitimately rounded across a midpoint but catches wrong codes, scales, exponents, amax and
// transposes.
#include <cfloat>
#include <cmath>
#include <cstring>
#include <limits>

#include "common/quant_rules.h"
#include "reference/quant_reference.h"
#include "support.h"

namespace nktest {
namespace {

using normkit::ref::quantize_value;

TEST(QuantReference, QuantizeValueRoundsToNearestEvenAndSaturates) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  // e4m3: 8 values per binade; [1, 2) has step 1/8, the top binade [256, 448] step 32.
  EXPECT_EQ(quantize_value(1.0, NK_FLOAT8_E4M3), 1.0);
  EXPECT_EQ(quantize_value(1.0625, NK_FLOAT8_E4M3), 1.0);     // tie: even (1.000)
  EXPECT_EQ(quantize_value(1.1875, NK_FLOAT8_E4M3), 1.25);    // tie: even (1.010)
  EXPECT_EQ(quantize_value(1.0626, NK_FLOAT8_E4M3), 1.125);
  EXPECT_EQ(quantize_value(-336.0, NK_FLOAT8_E4M3), -320.0);  // tie in the top binade
  EXPECT_EQ(quantize_value(440.0, NK_FLOAT8_E4M3), 448.0);
  EXPECT_EQ(quantize_value(449.0, NK_FLOAT8_E4M3), 448.0);    // saturates
  EXPECT_EQ(quantize_value(-1e300, NK_FLOAT8_E4M3), -448.0);
  EXPECT_EQ(quantize_value(INFINITY, NK_FLOAT8_E4M3), 448.0);
  EXPECT_EQ(quantize_value(std::ldexp(1.0, -10), NK_FLOAT8_E4M3), 0.0);  // half the smallest
  EXPECT_EQ(quantize_value(std::ldexp(3.0, -10), NK_FLOAT8_E4M3), std::ldexp(1.0, -8));
  EXPECT_EQ(quantize_value(std::ldexp(15.0, -10), NK_FLOAT8_E4M3), std::ldexp(1.0, -6));
  EXPECT_TRUE(std::signbit(quantize_value(-1e-30, NK_FLOAT8_E4M3)));
  EXPECT_TRUE(std::isnan(quantize_value(nan, NK_FLOAT8_E4M3)));
  // e5m2: 4 values per binade, max 57344 (next would be 65536).
  EXPECT_EQ(quantize_value(1.125, NK_FLOAT8_E5M2), 1.0);      // tie: even
  EXPECT_EQ(quantize_value(1.375, NK_FLOAT8_E5M2), 1.5);      // tie: even (1.10)
  EXPECT_EQ(quantize_value(61440.0, NK_FLOAT8_E5M2), 57344.0);
  EXPECT_EQ(quantize_value(std::ldexp(1.0, -17), NK_FLOAT8_E5M2), 0.0);
  EXPECT_EQ(quantize_value(std::ldexp(3.0, -17), NK_FLOAT8_E5M2), std::ldexp(1.0, -15));
  // int8
  EXPECT_EQ(quantize_value(2.5, NK_INT8), 2.0);
  EXPECT_EQ(quantize_value(-3.5, NK_INT8), -4.0);
  EXPECT_EQ(quantize_value(126.6, NK_INT8), 127.0);
  EXPECT_EQ(quantize_value(-300.0, NK_INT8), -127.0);
  EXPECT_EQ(quantize_value(nan, NK_INT8), 0.0);
  EXPECT_THROW(quantize_value(1.0, NK_FLOAT32), std::invalid_argument);
  EXPECT_THROW(quantize_value(1.0, NK_FLOAT8_E8M0), std::invalid_argument);
}

// rows x hidden of ones (x), no weight, eps 0: v = 1 exactly.
struct OnesCase {
  std::vector<float> x;
  float scale = 1.0f;
  nk_rms_norm_fwd_args args;
  OnesCase(int64_t rows, int64_t hidden, nk_quant_mode mode, nk_dtype y)
      : x(static_cast<size_t>(rows * hidden), 1.0f) {
    nk_rms_norm_fwd_args_init(&args);
    args.rows = rows;
    args.hidden = hidden;
    args.x = x.data();
    args.eps = 0.0f;
    args.quant = mode;
    args.y_dtype = y;
    args.scale = &scale;
  }
};

TEST(QuantReference, HandComputedModes) {
  // TOKEN: x = {1, 2}: v = x / sqrt(2.5); amax = v[1]; t = v * 448 / v[1] = {224, 448}.
  {
    const float x[] = {1.0f, 2.0f};
    nk_rms_norm_fwd_args a;
    nk_rms_norm_fwd_args_init(&a);
    a.rows = 1;
    a.hidden = 2;
    a.x = x;
    a.eps = 0.0f;
    a.quant = NK_QUANT_TOKEN;
    a.y_dtype = NK_FLOAT8_E4M3;
    const auto r = normkit::ref::rms_norm_fwd_quant(a);
    const double v1 = 2.0 / std::sqrt(2.5);
    EXPECT_DOUBLE_EQ(r.amax, v1);
    EXPECT_DOUBLE_EQ(r.scales[0], v1 / 448.0);
    EXPECT_EQ(r.q[0], 224.0);
    EXPECT_EQ(r.q[1], 448.0);
    EXPECT_NEAR(r.t[0], 224.0, 1e-12);
    // A bound below amax / qmax binds: scale = ub, t = v / ub.
    a.scale_ub = 1e-3f;
    const auto b = normkit::ref::rms_norm_fwd_quant(a);
    EXPECT_EQ(b.scales[0], double{1e-3f});
    EXPECT_EQ(b.q[1], 448.0);  // v1 / 1e-3 = 1265: saturates
    EXPECT_EQ(b.q[0], quantize_value(v1 / 2 / double{1e-3f}, NK_FLOAT8_E4M3));
  }
  // MXFP8: v = 1, amax = 1: e = 0 - 8, scale 2^-8, t = 256.
  {
    OnesCase c(2, 64, NK_QUANT_MXFP8, NK_FLOAT8_E4M3);
    const auto r = normkit::ref::rms_norm_fwd_quant(c.args);
    ASSERT_EQ(r.exponents.size(), 4u);
    EXPECT_EQ(r.exponents[3], -8);
    EXPECT_EQ(r.scales[3], std::ldexp(1.0, -8));
    EXPECT_EQ(r.q[100], 256.0);
    EXPECT_EQ(r.group_columns, 32);
    c.args.y_dtype = NK_FLOAT8_E5M2;  // emax 15
    EXPECT_EQ(normkit::ref::rms_norm_fwd_quant(c.args).exponents[0], -15);
  }
  // TENSOR: q = Q(v * scale); BLOCK 0 means 128; all-zero rows in TOKEN get FLT_MIN.
  {
    OnesCase c(1, 256, NK_QUANT_TENSOR, NK_INT8);
    c.scale = 100.4f;
    const auto r = normkit::ref::rms_norm_fwd_quant(c.args);
    EXPECT_EQ(r.q[7], 100.0);
    EXPECT_EQ(r.amax, 1.0);
    c.args.quant = NK_QUANT_BLOCK;
    c.args.y_dtype = NK_FLOAT8_E4M3;
    c.args.scale = nullptr;
    EXPECT_EQ(normkit::ref::rms_norm_fwd_quant(c.args).group_columns, 128);
    std::fill(c.x.begin(), c.x.end(), 0.0f);
    c.args.eps = 1e-6f;  // (with eps 0 a zero row has rstd = inf and v = NaN)
    c.args.quant = NK_QUANT_TOKEN;
    const auto z = normkit::ref::rms_norm_fwd_quant(c.args);
    EXPECT_EQ(z.scales[0], double{FLT_MIN});
    EXPECT_EQ(z.q[0], 0.0);
  }
}

TEST(QuantReference, RejectsWhatTheApiRejects) {
  OnesCase c(1, 48, NK_QUANT_BLOCK, NK_FLOAT8_E4M3);
  c.args.quant_block = 32;
  EXPECT_THROW(normkit::ref::rms_norm_fwd_quant(c.args), std::invalid_argument);  // 48 % 32
  c.args.quant_block = 16;
  EXPECT_THROW(normkit::ref::rms_norm_fwd_quant(c.args), std::invalid_argument);
  c.args.quant_block = 0;
  c.args.quant = NK_QUANT_TOKEN;
  c.args.y_dtype = NK_FLOAT32;
  EXPECT_THROW(normkit::ref::rms_norm_fwd_quant(c.args), std::invalid_argument);
  c.args.quant = NK_QUANT_MXFP8;
  c.args.y_dtype = NK_INT8;
  EXPECT_THROW(normkit::ref::rms_norm_fwd_quant(c.args), std::invalid_argument);
}

// ---- compare_quant ----

// Outputs as a perfect backend would write them (from the reference), in host buffers.
// Not copyable: args points into the members.
struct FakeOutputs {
  FakeOutputs(const FakeOutputs&) = delete;
  FakeOutputs& operator=(const FakeOutputs&) = delete;
  std::vector<uint8_t> y, y_t, scales;
  float amax = 0;
  nk_rms_norm_fwd_args args;

  FakeOutputs(const nk_rms_norm_fwd_args& in, const normkit::ref::QuantFwdResult& r) : args(in) {
    const int64_t R = r.rows, H = r.hidden;
    y.resize(static_cast<size_t>(R * H));
    y_t.resize(y.size());
    for (int64_t i = 0; i < R * H; ++i) {
      y[i] = normkit::quantize_code(static_cast<float>(r.q[i]), r.y_dtype);  // exact: q is on the grid
      y_t[(i % H) * R + i / H] = y[i];
    }
    for (size_t g = 0; g < r.scales.size() && r.mode != NK_QUANT_TENSOR; ++g) {
      if (r.mode == NK_QUANT_MXFP8) {
        scales.push_back(static_cast<uint8_t>(r.exponents[g] + 127));
      } else {
        const float s = static_cast<float>(r.scales[g]);
        scales.insert(scales.end(), reinterpret_cast<const uint8_t*>(&s),
                      reinterpret_cast<const uint8_t*>(&s) + 4);
      }
    }
    amax = static_cast<float>(r.amax);
    args.y = y.data();
    args.y_t = r.mode == NK_QUANT_TENSOR ? y_t.data() : nullptr;
    args.scales = scales.empty() ? nullptr : scales.data();
    args.amax = &amax;
  }
  void set_scale(size_t g, float s) { std::memcpy(&scales[4 * g], &s, 4); }
};

constexpr double kTol = 6.5e-5;  // tolerance_for(NK_FLOAT32, ...) at these sizes

normkit::ref::QuantComparison compare(const FakeOutputs& f, const normkit::ref::QuantFwdResult& r) {
  return normkit::ref::compare_quant(f.args, r, kTol);
}

TEST(QuantCompare, PerfectOutputsPassExactly) {
  Rng rng;
  NK_SEED_TRACE(rng);
  for (nk_quant_mode mode : {NK_QUANT_TENSOR, NK_QUANT_TOKEN, NK_QUANT_BLOCK, NK_QUANT_MXFP8}) {
    std::vector<float> x(3 * 256);
    for (float& v : x) v = static_cast<float>(rng.normal());
    float scale = 50.0f;
    nk_rms_norm_fwd_args a;
    nk_rms_norm_fwd_args_init(&a);
    a.rows = 3;
    a.hidden = 256;
    a.x = x.data();
    a.quant = mode;
    a.y_dtype = NK_FLOAT8_E4M3;
    if (mode == NK_QUANT_TENSOR) a.scale = &scale;
    const auto r = normkit::ref::rms_norm_fwd_quant(a);
    const FakeOutputs f(a, r);
    const auto c = compare(f, r);
    EXPECT_TRUE(c.passed) << c.describe();
    EXPECT_EQ(c.exact, 3 * 256);
    EXPECT_EQ(c.boundary, 0);
    EXPECT_EQ(c.transposed_checked, mode == NK_QUANT_TENSOR ? 3 * 256 : 0);
    EXPECT_TRUE(c.amax_checked);
  }
}

TEST(QuantCompare, NearTiesGoEitherWay) {
  // v = 1; TENSOR scale 1.0625 puts t exactly on the e4m3 midpoint between 1 and 1.125: the
  // reference rounds to even (1), a float32 backend may land on either side.
  OnesCase c(1, 64, NK_QUANT_TENSOR, NK_FLOAT8_E4M3);
  c.scale = 1.0625f;
  const auto r = normkit::ref::rms_norm_fwd_quant(c.args);
  ASSERT_EQ(r.q[0], 1.0);
  FakeOutputs f(c.args, r);
  f.y[9] = f.y_t[9] = 0x3a;  // 1.25: two steps away
  EXPECT_EQ(compare(f, r).wrong, 1);
  std::fill(f.y.begin(), f.y.end(), 0x39);  // 1.125 everywhere: the other side of the tie
  std::fill(f.y_t.begin(), f.y_t.end(), 0x39);
  auto cmp = compare(f, r);
  EXPECT_TRUE(cmp.passed) << cmp.describe();
  EXPECT_EQ(cmp.ties, 64);
  EXPECT_EQ(cmp.boundary, 0);
  // Still a tie 4 float32 ulps away from the midpoint.
  c.scale = 1.0625f * (1.0f + 0x1p-22f);
  const auto near = normkit::ref::rms_norm_fwd_quant(c.args);
  FakeOutputs g(c.args, near);
  std::fill(g.y.begin(), g.y.end(), 0x38);
  std::fill(g.y_t.begin(), g.y_t.end(), 0x38);
  cmp = compare(g, near);
  EXPECT_TRUE(cmp.passed) << cmp.describe();
  EXPECT_EQ(cmp.ties, 64);
}

TEST(QuantCompare, NearAMidpointIsABoundaryMismatchAndTheyAreBounded) {
  // t 2^-16 (relative) above the midpoint: the reference rounds up to 1.125; a backend whose
  // float32 error in v (up to ~6.5e-5 relative here) put t below the midpoint writes 1.0: a
  // boundary mismatch. (Within 8 ulps of the midpoint it would be a near tie.)
  OnesCase c(1, 64, NK_QUANT_TENSOR, NK_FLOAT8_E4M3);
  c.scale = 1.0625f * (1.0f + 0x1p-16f);
  const auto r = normkit::ref::rms_norm_fwd_quant(c.args);
  ASSERT_EQ(r.q[0], 1.125);
  FakeOutputs f(c.args, r);
  f.y[5] = f.y_t[5] = 0x38;  // 1.0
  auto cmp = compare(f, r);
  EXPECT_TRUE(cmp.passed) << cmp.describe();
  EXPECT_EQ(cmp.boundary, 1);
  EXPECT_EQ(cmp.ties, 0);
  // Every element across the midpoint: more than 4 + n / 1000 boundary mismatches fail.
  std::fill(f.y.begin(), f.y.end(), 0x38);
  std::fill(f.y_t.begin(), f.y_t.end(), 0x38);
  cmp = compare(f, r);
  EXPECT_FALSE(cmp.passed) << cmp.describe();
  EXPECT_EQ(cmp.boundary, 64);
}

TEST(QuantCompare, CatchesWrongCodesPoisonAndTransposes) {
  OnesCase c(2, 64, NK_QUANT_TENSOR, NK_INT8);
  c.scale = 100.0f;
  const auto r = normkit::ref::rms_norm_fwd_quant(c.args);
  {
    FakeOutputs f(c.args, r);
    f.y[70] = 99;  // a whole integer away from 100: far from any midpoint
    EXPECT_EQ(compare(f, r).wrong, 1);
  }
  {
    FakeOutputs f(c.args, r);
    f.y[3] = 0x80;  // int8 -128 (the poison): never produced
    const auto cmp = compare(f, r);
    EXPECT_FALSE(cmp.passed);
    EXPECT_NE(cmp.first_problem.find("y[0][3]"), std::string::npos) << cmp.first_problem;
  }
  {
    FakeOutputs f(c.args, r);
    f.y_t[10] = 7;  // y_t must be exactly y transposed
    const auto cmp = compare(f, r);
    EXPECT_FALSE(cmp.passed);
    EXPECT_EQ(cmp.transposed_wrong, 1);
  }
  {
    FakeOutputs f(c.args, r);
    f.amax = 1.001f;
    EXPECT_FALSE(compare(f, r).passed);
  }
  OnesCase e(1, 32, NK_QUANT_TENSOR, NK_FLOAT8_E4M3);
  const auto re = normkit::ref::rms_norm_fwd_quant(e.args);
  FakeOutputs f(e.args, re);
  f.y[0] = f.y_t[0] = 0x7f;  // NaN (the FP8 poison)
  EXPECT_EQ(compare(f, re).wrong, 1);
}

TEST(QuantCompare, CatchesWrongFloatScales) {
  Rng rng;
  NK_SEED_TRACE(rng);
  std::vector<float> x(2 * 128);
  for (float& v : x) v = static_cast<float>(rng.normal());
  nk_rms_norm_fwd_args a;
  nk_rms_norm_fwd_args_init(&a);
  a.rows = 2;
  a.hidden = 128;
  a.x = x.data();
  a.quant = NK_QUANT_BLOCK;
  a.quant_block = 64;
  a.y_dtype = NK_FLOAT8_E5M2;
  const auto r = normkit::ref::rms_norm_fwd_quant(a);
  FakeOutputs f(a, r);
  f.set_scale(2, static_cast<float>(r.scales[2] * (1 + 1e-6)));  // within float32 error: ok
  EXPECT_TRUE(compare(f, r).passed) << compare(f, r).describe();
  f.set_scale(2, static_cast<float>(r.scales[2] * 1.01));
  const auto cmp = compare(f, r);
  EXPECT_FALSE(cmp.passed);
  EXPECT_EQ(cmp.scales_wrong, 1);
  EXPECT_EQ(cmp.scales, 4);
  f.scales.clear();
  f.args.scales = nullptr;
  EXPECT_FALSE(compare(f, r).passed);
}

TEST(QuantCompare, E8m0ByteMayBeOneOffOnlyAtAPowerOfTwo) {
  // v = 1 = 2^0 exactly: the block amax sits on the boundary between e = -9 and e = -8.
  OnesCase c(1, 64, NK_QUANT_MXFP8, NK_FLOAT8_E4M3);
  const auto r = normkit::ref::rms_norm_fwd_quant(c.args);
  ASSERT_EQ(r.exponents[0], -8);
  // A backend whose float32 amax came out just below 1 legitimately picks e = -9; the block is
  // then 1 * 2^9 = 512, which saturates to 448.
  FakeOutputs f(c.args, r);
  f.scales[0] = 127 - 9;
  std::fill(f.y.begin(), f.y.begin() + 32, normkit::quantize_code(448.0f, NK_FLOAT8_E4M3));
  auto cmp = compare(f, r);
  EXPECT_TRUE(cmp.passed) << cmp.describe();
  EXPECT_EQ(cmp.scale_boundary, 1);
  // ...but then the codes must follow the backend's exponent.
  f.y[0] = normkit::quantize_code(256.0f, NK_FLOAT8_E4M3);
  EXPECT_FALSE(compare(f, r).passed);
  // Away from a power of two (amax 1.5), one off is wrong.
  OnesCase d(1, 32, NK_QUANT_MXFP8, NK_FLOAT8_E4M3);
  d.x[0] = 1.5f;  // v is no longer a power of two anywhere near
  const auto rd = normkit::ref::rms_norm_fwd_quant(d.args);
  FakeOutputs g(d.args, rd);
  g.scales[0] = static_cast<uint8_t>(g.scales[0] + 1);
  cmp = compare(g, rd);
  EXPECT_FALSE(cmp.passed);
  EXPECT_EQ(cmp.scales_wrong, 1);
}

TEST(QuantCompare, MismatchedCallsNeverPass) {
  OnesCase c(1, 32, NK_QUANT_TOKEN, NK_FLOAT8_E4M3);
  const auto r = normkit::ref::rms_norm_fwd_quant(c.args);
  FakeOutputs f(c.args, r);
  f.args.hidden = 31;
  EXPECT_FALSE(compare(f, r).passed);
  f.args.hidden = 32;
  f.args.y_dtype = NK_FLOAT8_E5M2;
  EXPECT_FALSE(compare(f, r).passed);
}

}  // namespace
}  // namespace nktest
