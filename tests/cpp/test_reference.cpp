// The oracle itself: the float64 reference on hand-computed cases and against finite
// differences, compare()'s error measure, and proof that the tolerances catch real bugs (a wrong
// eps, a missing bias, a row off by one, truncating instead of rounding).
#include <algorithm>
#include <cmath>
#include <functional>

#include "fwd_harness.h"

namespace nktest {
namespace {

TEST(Reference, ForwardHandComputedExample) {
  const float x[] = {3.0f, 4.0f}, weight[] = {2.0f, 0.5f}, bias[] = {1.0f, -1.0f};
  nk_rms_norm_fwd_args a;
  nk_rms_norm_fwd_args_init(&a);
  a.rows = 1;
  a.hidden = 2;
  a.x = x;
  a.weight = weight;
  a.bias = bias;
  a.eps = 0.0f;
  normkit::ref::FwdResult r = normkit::ref::rms_norm_fwd(a);
  const double rstd = 1.0 / std::sqrt(12.5);  // mean of 9 and 16
  EXPECT_DOUBLE_EQ(r.rstd[0], rstd);
  EXPECT_DOUBLE_EQ(r.y[0], 3.0 * rstd * 2.0 + 1.0);
  EXPECT_DOUBLE_EQ(r.y[1], 4.0 * rstd * 0.5 - 1.0);
  EXPECT_TRUE(r.residual_out.empty());

  a.zero_centered = 1;  // scale by 1 + weight
  a.eps = 0.5f;
  r = normkit::ref::rms_norm_fwd(a);
  const double rstd_eps = 1.0 / std::sqrt(12.5 + 0.5);
  EXPECT_DOUBLE_EQ(r.y[0], 3.0 * rstd_eps * 3.0 + 1.0);
  EXPECT_DOUBLE_EQ(r.y[1], 4.0 * rstd_eps * 1.5 - 1.0);
}

TEST(Reference, ResidualIsRoundedToXDtypeBeforeNormalizing) {
  // float16 1 + 2^-11 is a tie between 1 and 1 + 2^-10: residual_out rounds to even (1.0), and
  // y is computed from that stored 1.0, so with hidden 1 and eps 0, y = 1 exactly.
  const uint16_t x[] = {normkit::float_to_half_bits(1.0f)};
  const uint16_t residual[] = {normkit::float_to_half_bits(std::ldexp(1.0f, -11))};
  nk_rms_norm_fwd_args a;
  nk_rms_norm_fwd_args_init(&a);
  a.rows = 1;
  a.hidden = 1;
  a.x = x;
  a.x_dtype = NK_FLOAT16;
  a.residual = residual;
  a.eps = 0.0f;
  const normkit::ref::FwdResult r = normkit::ref::rms_norm_fwd(a);
  ASSERT_EQ(r.residual_out.size(), 1u);
  EXPECT_EQ(r.residual_out[0], 1.0);
  EXPECT_EQ(r.y[0], 1.0);
}

TEST(Reference, StridedInputsAreRead) {
  // Two rows of hidden 2 with stride 3; the padding holds NaN and must not be read.
  const float nan = std::nanf("");
  const float x[] = {1.0f, 1.0f, nan, 2.0f, -2.0f, nan};
  nk_rms_norm_fwd_args a;
  nk_rms_norm_fwd_args_init(&a);
  a.rows = 2;
  a.hidden = 2;
  a.x = x;
  a.x_row_stride = 3;
  a.eps = 0.0f;
  const normkit::ref::FwdResult r = normkit::ref::rms_norm_fwd(a);
  EXPECT_DOUBLE_EQ(r.y[0], 1.0);
  EXPECT_DOUBLE_EQ(r.y[1], 1.0);
  EXPECT_DOUBLE_EQ(r.y[2], 1.0);
  EXPECT_DOUBLE_EQ(r.y[3], -1.0);
  EXPECT_DOUBLE_EQ(r.rstd[1], 0.5);
}

TEST(Reference, BackwardMatchesFiniteDifferencesOfForward) {
  Rng rng;
  NK_SEED_TRACE(rng);
  const int64_t R = 3, H = 7;
  std::vector<float> x(R * H), w(H), dy(R * H), dres(R * H);
  for (float& v : x) v = static_cast<float>(rng.normal());
  for (float& v : w) v = static_cast<float>(0.2 * rng.normal());
  for (float& v : dy) v = static_cast<float>(rng.normal());
  for (float& v : dres) v = static_cast<float>(rng.normal());
  nk_rms_norm_fwd_args f;
  nk_rms_norm_fwd_args_init(&f);
  f.rows = R;
  f.hidden = H;
  f.weight = w.data();
  f.zero_centered = 1;
  f.eps = 0.25f;
  // loss = sum(y * dy) + sum(x * dres): the second term is what dresidual_out stands for.
  auto loss = [&] {
    f.x = x.data();
    const normkit::ref::FwdResult r = normkit::ref::rms_norm_fwd(f);
    double l = 0;
    for (int64_t i = 0; i < R * H; ++i) l += r.y[i] * dy[i] + double{x[i]} * dres[i];
    return l;
  };
  f.x = x.data();
  const normkit::ref::FwdResult fwd = normkit::ref::rms_norm_fwd(f);
  std::vector<float> rstd(R);
  for (int64_t r = 0; r < R; ++r) rstd[r] = static_cast<float>(fwd.rstd[r]);

  nk_rms_norm_bwd_args b;
  nk_rms_norm_bwd_args_init(&b);
  b.rows = R;
  b.hidden = H;
  b.dy = dy.data();
  b.x = x.data();
  b.rstd = rstd.data();
  b.weight = w.data();
  b.zero_centered = 1;
  b.dresidual_out = dres.data();
  const normkit::ref::BwdResult g = normkit::ref::rms_norm_bwd(b);

  // Central differences in double over the float32 inputs; the step is measured after the
  // inputs are stored (x + h rounds in float32), not assumed to be 2h.
  auto derivative = [&](float& v) {
    const float original = v, h = 0x1p-12f;
    v = original + h;
    const double plus_at = v, plus = loss();
    v = original - h;
    const double minus_at = v, minus = loss();
    v = original;
    return (plus - minus) / (plus_at - minus_at);
  };
  // Error: h^2 truncation (~1e-7) and the float32 rstd the reference is given (~1e-7).
  for (int64_t i = 0; i < R * H; ++i) {
    EXPECT_NEAR(g.dx[i], derivative(x[i]), 2e-6 * (1 + std::fabs(g.dx[i]))) << "dx element " << i;
  }
  for (int64_t j = 0; j < H; ++j) {
    EXPECT_NEAR(g.dweight[j], derivative(w[j]), 2e-6 * (1 + std::fabs(g.dweight[j])))
        << "dweight element " << j;
    double dbias = 0;
    for (int64_t r = 0; r < R; ++r) dbias += dy[r * H + j];
    EXPECT_NEAR(g.dbias[j], dbias, 1e-12);
  }
}

TEST(Reference, CompareMeasuresErrorAgainstValuePlusFloor) {
  const std::vector<double> expected{1.0, 0.0, -2.0, 4.0};
  std::vector<float> actual{1.0f, 0.001f, -2.0f, 4.0f};
  normkit::ref::Comparison c =
      normkit::ref::compare(actual.data(), NK_FLOAT32, 2, 2, 0, expected, 1.0);
  // floor = 1% of rms(expected) = 0.01 * sqrt(21 / 4)
  const double floor = 0.01 * std::sqrt(21.0 / 4.0);
  EXPECT_NEAR(c.worst_error, double{0.001f} / floor, 1e-12);
  EXPECT_EQ(c.worst_row, 0);
  EXPECT_EQ(c.worst_col, 1);
  EXPECT_TRUE(c.passed);
  EXPECT_NE(c.describe().find("row 0 col 1"), std::string::npos) << c.describe();

  actual[3] = std::nanf("");  // an unwritten element
  c = normkit::ref::compare(actual.data(), NK_FLOAT32, 2, 2, 0, expected, 1e9);
  EXPECT_TRUE(std::isinf(c.worst_error));
  EXPECT_FALSE(c.passed);
  EXPECT_EQ(c.worst_row, 1);
  EXPECT_EQ(c.worst_col, 1);
  EXPECT_NE(c.describe().find("MISMATCH"), std::string::npos) << c.describe();

  // Strided actual: row 1 starts at element 3.
  const std::vector<float> strided{1.0f, 0.0f, 99.0f, -2.0f, 4.0f};
  c = normkit::ref::compare(strided.data(), NK_FLOAT32, 2, 2, 3, expected, 0.0);
  EXPECT_TRUE(c.passed) << c.describe();
}

TEST(Reference, ToleranceOrderAndScale) {
  using normkit::ref::tolerance_for;
  for (int64_t n : {1, 4096, 1 << 20}) {
    EXPECT_GT(tolerance_for(NK_BFLOAT16, NK_FLOAT32, n), tolerance_for(NK_FLOAT16, NK_FLOAT32, n));
    EXPECT_GT(tolerance_for(NK_FLOAT16, NK_FLOAT32, n), tolerance_for(NK_FLOAT32, NK_FLOAT32, n));
  }
  EXPECT_LT(tolerance_for(NK_FLOAT32, NK_FLOAT32, 1), tolerance_for(NK_FLOAT32, NK_FLOAT32, 65537));
  // Round-to-nearest costs up to half an ulp (u); a truncation up to a full ulp (2u). The
  // tolerance lies between the two for the 16-bit types.
  EXPECT_GT(tolerance_for(NK_BFLOAT16, NK_BFLOAT16, 4096), 0x1p-8);
  EXPECT_LT(tolerance_for(NK_BFLOAT16, NK_BFLOAT16, 4096), 0x1p-7 * 0.6);
  EXPECT_GT(tolerance_for(NK_FLOAT16, NK_FLOAT16, 4096), 0x1p-11);
  EXPECT_LT(tolerance_for(NK_FLOAT16, NK_FLOAT16, 4096), 0x1p-10 * 0.7);
  EXPECT_LT(tolerance_for(NK_FLOAT32, NK_FLOAT32, 1), 1e-4);
}

// ---- the tolerances catch real bugs ----

// Runs the CPU backend on a case, and returns the y it wrote plus the case's inputs.
struct CpuForward {
  FwdCase c;
  FwdInputs in;
  FwdRun run;
};

CpuForward cpu_forward(const FwdCase& c, Rng& rng) {
  CpuForward f{c, make_fwd_inputs(c, rng), {}};
  f.run = run_fwd(NK_BACKEND_CPU, c, f.in);
  return f;
}

// compare(y, reference computed by `mutate`d args): expected to fail.
normkit::ref::Comparison compare_with_mutated_reference(
    const CpuForward& f, const std::function<void(nk_rms_norm_fwd_args&)>& mutate) {
  nk_rms_norm_fwd_args host = host_fwd_args(f.c, f.in);
  mutate(host);
  const normkit::ref::FwdResult ref = normkit::ref::rms_norm_fwd(host);
  return compare_matrix(f.in.y, f.run.y, ref.y,
                        normkit::ref::tolerance_for(f.c.y, f.c.x, f.c.hidden));
}

class ToleranceCatchesBugs : public ::testing::TestWithParam<nk_dtype> {};

TEST_P(ToleranceCatchesBugs, WrongEps) {
  Rng rng;
  NK_SEED_TRACE(rng);
  FwdCase c;
  c.rows = 7;
  c.hidden = 1000;
  c.x = c.y = GetParam();
  c.x_scale = 1e-3;  // mean square ~1e-6, comparable to eps
  c.eps = 1e-6f;
  const CpuForward f = cpu_forward(c, rng);
  EXPECT_TRUE(compare_with_mutated_reference(f, [](auto&) {}).passed);
  const auto wrong = compare_with_mutated_reference(f, [](auto& a) { a.eps = 1e-5f; });
  EXPECT_FALSE(wrong.passed) << wrong.describe();
}

TEST_P(ToleranceCatchesBugs, MissingBias) {
  Rng rng;
  NK_SEED_TRACE(rng);
  FwdCase c;
  c.rows = 7;
  c.hidden = 1000;
  c.x = c.y = GetParam();
  c.bias = true;
  const CpuForward f = cpu_forward(c, rng);
  EXPECT_TRUE(compare_with_mutated_reference(f, [](auto&) {}).passed);
  const auto wrong = compare_with_mutated_reference(f, [](auto& a) { a.bias = nullptr; });
  EXPECT_FALSE(wrong.passed) << wrong.describe();
}

TEST_P(ToleranceCatchesBugs, RowOffByOne) {
  Rng rng;
  NK_SEED_TRACE(rng);
  FwdCase c;
  c.rows = 7;
  c.hidden = 1000;
  c.x = c.y = GetParam();
  const CpuForward f = cpu_forward(c, rng);
  nk_rms_norm_fwd_args host = host_fwd_args(f.c, f.in);
  std::vector<double> expected = normkit::ref::rms_norm_fwd(host).y;
  std::rotate(expected.begin(), expected.begin() + c.hidden, expected.end());
  const auto wrong = compare_matrix(f.in.y, f.run.y, expected,
                                    normkit::ref::tolerance_for(c.y, c.x, c.hidden));
  EXPECT_FALSE(wrong.passed) << wrong.describe();
}

// Only the 16-bit outputs are rounded.
class RoundingToleranceCatchesTruncation : public ::testing::TestWithParam<nk_dtype> {};

TEST_P(RoundingToleranceCatchesTruncation, TruncationInsteadOfRounding) {
  const nk_dtype d = GetParam();
  Rng rng;
  NK_SEED_TRACE(rng);
  FwdCase c;
  c.rows = 4;
  c.hidden = 4096;
  c.x = c.y = d;
  const FwdInputs in = make_fwd_inputs(c, rng);
  const normkit::ref::FwdResult ref = normkit::ref::rms_norm_fwd(host_fwd_args(c, in));
  // Store the exact results twice: rounded to nearest even, and truncated toward zero.
  Matrix rounded(d, c.rows, c.hidden), truncated(d, c.rows, c.hidden);
  for (int64_t r = 0; r < c.rows; ++r) {
    for (int64_t j = 0; j < c.hidden; ++j) {
      const float v = static_cast<float>(ref.y[r * c.hidden + j]);
      rounded.set(r, j, v);
      float t = normkit::round_float_to_dtype(v, d);
      if (std::fabs(t) > std::fabs(v)) {  // rounded away from zero: step one value back
        const uint16_t bits = d == NK_FLOAT16 ? normkit::float_to_half_bits(t)
                                              : normkit::float_to_bf16_bits(t);
        const uint16_t back = static_cast<uint16_t>(bits - 1);
        t = d == NK_FLOAT16 ? normkit::half_bits_to_float(back) : normkit::bf16_bits_to_float(back);
      }
      truncated.set(r, j, t);
    }
  }
  const double tol = normkit::ref::tolerance_for(d, d, c.hidden);
  const auto good = compare_matrix(rounded, rounded.bytes, ref.y, tol);
  const auto bad = compare_matrix(truncated, truncated.bytes, ref.y, tol);
  EXPECT_TRUE(good.passed) << good.describe();
  EXPECT_FALSE(bad.passed) << bad.describe();
}

INSTANTIATE_TEST_SUITE_P(OutputDtypes, ToleranceCatchesBugs, ::testing::ValuesIn(all_dtypes()),
                         [](const auto& info) { return dtype_label(info.param); });
INSTANTIATE_TEST_SUITE_P(OutputDtypes, RoundingToleranceCatchesTruncation,
                         ::testing::Values(NK_FLOAT16, NK_BFLOAT16),
                         [](const auto& info) { return dtype_label(info.param); });

}  // namespace
}  // namespace nktest
