// Forward pass against the float64 reference on both backends: every dtype combination with
// each option, awkward shapes, large GPU shapes, strided rows, misaligned pointers, in place.
#include <tuple>

#include "fwd_harness.h"

namespace nktest {
namespace {

using DtypeTriple = std::tuple<nk_dtype, nk_dtype, nk_dtype>;

std::vector<DtypeTriple> all_dtype_triples() {
  std::vector<DtypeTriple> out;
  for (nk_dtype a : all_dtypes())
    for (nk_dtype b : all_dtypes())
      for (nk_dtype c : all_dtypes()) out.emplace_back(a, b, c);
  return out;
}

// ---- every (x, weight, y) dtype combination, each option on and off ----

class FwdEveryDtypeCombination
    : public ::testing::TestWithParam<std::tuple<nk_backend, DtypeTriple>> {};

TEST_P(FwdEveryDtypeCombination, MatchesReferenceWithEachOption) {
  const nk_backend backend = std::get<0>(GetParam());
  NK_SKIP_IF_UNAVAILABLE(backend);
  const auto [x, w, y] = std::get<1>(GetParam());
  struct Options {
    int64_t rows, hidden;
    bool weight, bias, zero_centered, residual, rstd;
    float eps;
  };
  // Each option appears both on and off; shapes cover 1, odd, vector-width and large hidden.
  const Options options[] = {
      {3, 29, false, false, false, false, false, 1e-6f},   // plain normalization
      {7, 71, true, false, false, false, true, 1e-5f},     // weight
      {1, 1000, true, true, false, false, true, 0.5f},     // weight + bias, eps that matters
      {64, 128, true, true, true, false, true, 1e-6f},     // zero-centered (Gemma)
      {3, 4096, true, false, false, true, true, 1e-6f},    // fused residual
      {7, 1, true, true, true, true, true, 0.1f},          // everything, hidden 1
      {1, 17389, false, true, false, true, false, 1e-6f},  // bias without weight, residual
      // Rows past the pipelined plan's limit that the registers plan covers exactly (the
      // EXACT kernels on a GPU; test_launch_config.cpp checks that they are planned so).
      {272, 1024, true, true, true, true, true, 1e-6f},
      {528, 2048, true, false, false, false, false, 1e-6f},
      {272, 4096, false, false, false, false, true, 1e-6f},
  };
  Rng rng;
  for (const Options& o : options) {
    FwdCase c;
    c.rows = o.rows;
    c.hidden = o.hidden;
    c.x = x;
    c.w = w;
    c.y = y;
    c.weight = o.weight;
    c.bias = o.bias;
    c.zero_centered = o.zero_centered;
    c.residual = o.residual;
    c.rstd = o.rstd;
    c.eps = o.eps;
    test_fwd_case(backend, c, rng);
  }
}

std::string dtype_triple_name(const DtypeTriple& t) {
  return "x_" + dtype_label(std::get<0>(t)) + "_w_" + dtype_label(std::get<1>(t)) + "_y_" +
         dtype_label(std::get<2>(t));
}

INSTANTIATE_TEST_SUITE_P(
    AllBackends, FwdEveryDtypeCombination,
    ::testing::Combine(::testing::ValuesIn(all_backends()),
                       ::testing::ValuesIn(all_dtype_triples())),
    [](const auto& info) {
      return std::string(backend_label(std::get<0>(info.param))) + "_" +
             dtype_triple_name(std::get<1>(info.param));
    });

// ---- awkward shapes: hidden x rows, all options on ----

class FwdShapes
    : public ::testing::TestWithParam<std::tuple<nk_backend, int64_t /*rows*/, int64_t /*hidden*/>> {};

TEST_P(FwdShapes, MatchesReferenceWithResidualWeightBias) {
  const auto [backend, rows, hidden] = GetParam();
  NK_SKIP_IF_UNAVAILABLE(backend);
  // Rotate through representative dtype sets so each shape sees a different one.
  static const DtypeTriple kSets[] = {{NK_BFLOAT16, NK_FLOAT32, NK_BFLOAT16},
                                      {NK_FLOAT16, NK_FLOAT16, NK_FLOAT16},
                                      {NK_FLOAT32, NK_FLOAT32, NK_FLOAT32},
                                      {NK_BFLOAT16, NK_BFLOAT16, NK_FLOAT32}};
  Rng rng;
  FwdCase c;
  c.rows = rows;
  c.hidden = hidden;
  std::tie(c.x, c.w, c.y) = kSets[(rows + hidden) % 4];
  c.bias = c.residual = true;
  c.zero_centered = hidden % 2 == 1;
  test_fwd_case(backend, c, rng);
  // The same shape without residual and with only a weight: the simplest kernel path.
  c.bias = c.residual = c.zero_centered = false;
  test_fwd_case(backend, c, rng);
}

INSTANTIATE_TEST_SUITE_P(
    AllBackends, FwdShapes,
    ::testing::Combine(::testing::ValuesIn(all_backends()), ::testing::Values(1, 3, 7, 64),
                       ::testing::Values(1, 29, 71, 128, 1000, 4096, 17389, 65537)),
    ShapeTestName());

// ---- large shapes (the GPU's multi-block / cluster paths) ----

class FwdLargeShapes : public ::testing::TestWithParam<std::tuple<nk_backend, RowsHidden>> {};

TEST_P(FwdLargeShapes, MatchesReference) {
  const nk_backend backend = std::get<0>(GetParam());
  const auto [rows, hidden] = std::get<1>(GetParam());
  NK_SKIP_IF_UNAVAILABLE(backend);
  NK_SKIP_IF_SLOW_ON_CPU(backend, rows, hidden, "FwdShapes");
  Rng rng;
  FwdCase c;
  c.rows = rows;
  c.hidden = hidden;
  c.x = c.y = NK_BFLOAT16;
  c.w = NK_FLOAT32;
  c.bias = c.residual = true;
  test_fwd_case(backend, c, rng);
}

INSTANTIATE_TEST_SUITE_P(AllBackends, FwdLargeShapes,
                         ::testing::Combine(::testing::ValuesIn(all_backends()),
                                            ::testing::Values(RowsHidden{4096, 4096},
                                                              RowsHidden{2, 262144},
                                                              RowsHidden{3, 1048576},
                                                              RowsHidden{100, 8192},
                                                              RowsHidden{300, 32768},
                                                              RowsHidden{37, 65536},
                                                              // wide rows on clusters of 9-16
                                                              // CTAs of 256 threads
                                                              // (fwd_wide_row_max_cluster)
                                                              RowsHidden{5, 131072},
                                                              RowsHidden{9, 100000},
                                                              // one CTA per row, 8 vectors
                                                              // per thread (rows >= 4 x SMs)
                                                              RowsHidden{531, 32768})),
                         ShapeTestName());

// ---- float32 rows that the plain forward splits over clusters by default ----

// Rows of 12K-32K float32 columns on 4 x SMs rows or more, which one CTA would hold at more
// than 4 vectors per thread: since the forty-second session on clusters of 2-4 CTAs
// (plain_fwd_facts). The plain call, then with a bias, a residual and zero-centring (the
// general cluster kernel), then float32 x beside a bf16 weight and y.
class FwdFloat32WideRows : public ::testing::TestWithParam<std::tuple<nk_backend, RowsHidden>> {
};

TEST_P(FwdFloat32WideRows, MatchesReference) {
  const nk_backend backend = std::get<0>(GetParam());
  const auto [rows, hidden] = std::get<1>(GetParam());
  NK_SKIP_IF_UNAVAILABLE(backend);
  NK_SKIP_IF_SLOW_ON_CPU(backend, rows, hidden, "FwdShapes");
  Rng rng;
  FwdCase c;
  c.rows = rows;
  c.hidden = hidden;
  c.x = c.w = c.y = NK_FLOAT32;
  test_fwd_case(backend, c, rng);
  c.bias = c.residual = c.zero_centered = true;
  test_fwd_case(backend, c, rng);
  c.bias = c.residual = c.zero_centered = false;
  c.w = c.y = NK_BFLOAT16;
  test_fwd_case(backend, c, rng);
}

INSTANTIATE_TEST_SUITE_P(AllBackends, FwdFloat32WideRows,
                         ::testing::Combine(::testing::ValuesIn(all_backends()),
                                            ::testing::Values(RowsHidden{531, 32768},
                                                              RowsHidden{600, 16384},
                                                              RowsHidden{545, 12288})),
                         ShapeTestName());

// ---- the hidden sizes of current models (bench --shapes models), both kernel variants ----

// Rows that a power of two threads leaves partly empty (5120, 5376, 2304, 2560, 3584 columns),
// which NK_TUNE_FWD_WHOLE_WARPS reshapes to whole warps, or that no whole-warp shape covers
// (896, 1152); per-head norms of 128 columns; rows of 16 warps (16384, 32768 columns); two rows
// per group of 7 and 8 warps (7168, 6144 columns). Each with a bf16 weight alone (the EXACT
// kernels without the weight's extras) and with a float32 weight, bias, residual and
// zero-centring.
class FwdModelShapes : public ::testing::TestWithParam<std::tuple<nk_backend, RowsHidden>> {};

TEST_P(FwdModelShapes, MatchesReference) {
  const nk_backend backend = std::get<0>(GetParam());
  const auto [rows, hidden] = std::get<1>(GetParam());
  NK_SKIP_IF_UNAVAILABLE(backend);
  Rng rng;
  FwdCase c;
  c.rows = rows;
  c.hidden = hidden;
  c.x = c.w = c.y = NK_BFLOAT16;
  test_fwd_case(backend, c, rng);
  c.w = NK_FLOAT32;
  c.bias = c.residual = c.zero_centered = true;
  test_fwd_case(backend, c, rng);
  // float32 x beside 16-bit y: 8-element vectors, but one row per group (plan_fwd_with_reads)
  c.x = NK_FLOAT32;
  c.w = NK_BFLOAT16;
  c.bias = c.residual = c.zero_centered = false;
  test_fwd_case(backend, c, rng);
}

INSTANTIATE_TEST_SUITE_P(AllBackends, FwdModelShapes,
                         ::testing::Combine(::testing::ValuesIn(all_backends()),
                                            ::testing::Values(RowsHidden{600, 5120},
                                                              RowsHidden{64, 5376},
                                                              RowsHidden{1000, 2304},
                                                              RowsHidden{999, 2304},
                                                              RowsHidden{300, 2560},
                                                              RowsHidden{128, 3584},
                                                              RowsHidden{777, 896},
                                                              RowsHidden{1000, 1152},
                                                              RowsHidden{4096, 128},
                                                              // (2 rows per row group where
                                                              // NK_TUNE_FWD_ROWS_PER_GROUP=2)
                                                              RowsHidden{67584, 64},
                                                              RowsHidden{67584, 128},
                                                              RowsHidden{33792, 256},
                                                              RowsHidden{4224, 1024},
                                                              // (rows of 64-256 threads at 2
                                                              // rows per group where
                                                              // NK_TUNE_FWD_ROWS_PER_GROUP_
                                                              // MAX_THREADS allows)
                                                              RowsHidden{2112, 2048},
                                                              RowsHidden{1056, 4096},
                                                              RowsHidden{2112, 1536},
                                                              // 16 warps per row, 4 and 8
                                                              // vectors per thread (the sums
                                                              // of NK_TUNE_FWD_ROW_SUM_QUADS)
                                                              RowsHidden{64, 16384},
                                                              RowsHidden{24, 32768},
                                                              // two rows per group of 7 and 8
                                                              // warps (the sums of
                                                              // NK_TUNE_FWD_ROWS_ROW_SUM_QUADS)
                                                              RowsHidden{2000, 7168},
                                                              RowsHidden{1000, 6144})),
                         ShapeTestName());

// ---- layouts: strides, alignment, in place ----

class FwdLayouts : public ::testing::TestWithParam<nk_backend> {};

FwdCase layout_case(nk_dtype x, nk_dtype w, nk_dtype y, int64_t rows, int64_t hidden) {
  FwdCase c;
  c.rows = rows;
  c.hidden = hidden;
  c.x = x;
  c.w = w;
  c.y = y;
  c.bias = c.residual = true;
  return c;
}

// Rows past what 16 registers or pipelined CTAs hold (262144 bf16 or 131072 float32 columns)
// take the streaming plan: one CTA per row, or a cluster per row under
// NK_TUNE_FWD_CLUSTER_STREAMING. More rows than clusters (each cluster then walks several) and
// fewer; whole batches of vectors per thread, ragged ones, and 1-element vectors.
class FwdLargeSplitRows : public ::testing::TestWithParam<nk_backend> {};

TEST_P(FwdLargeSplitRows, RowsPastTheClusters) {
  NK_SKIP_IF_UNAVAILABLE(GetParam());
  if (GetParam() == NK_BACKEND_CPU) GTEST_SKIP() << "GPU launch plans; CPU covered by FwdShapes";
  Rng rng;
  {
    FwdCase c = layout_case(NK_BFLOAT16, NK_BFLOAT16, NK_BFLOAT16, 40, 524288);
    c.bias = c.residual = false;
    test_fwd_case(GetParam(), c, rng);
  }
  {
    FwdCase c = layout_case(NK_FLOAT32, NK_FLOAT32, NK_FLOAT32, 9, 262144);
    c.zero_centered = true;
    test_fwd_case(GetParam(), c, rng);
  }
  test_fwd_case(GetParam(), layout_case(NK_BFLOAT16, NK_FLOAT32, NK_FLOAT16, 21, 300000), rng);
  test_fwd_case(GetParam(), layout_case(NK_BFLOAT16, NK_BFLOAT16, NK_BFLOAT16, 2, 600001), rng);
}

INSTANTIATE_TEST_SUITE_P(AllBackends, FwdLargeSplitRows, ::testing::ValuesIn(all_backends()),
                         [](const auto& info) { return std::string(backend_label(info.param)); });


TEST_P(FwdLayouts, RowStridesLargerThanHiddenForEachTensor) {
  NK_SKIP_IF_UNAVAILABLE(GetParam());
  Rng rng;
  // An odd pad (breaks vector alignment of later rows) and a pad that keeps it.
  for (const int64_t pad : {int64_t{3}, int64_t{64}}) {
    for (int which = 0; which < 5; ++which) {  // x, residual, residual_out, y, all four
      FwdCase c = layout_case(NK_BFLOAT16, NK_FLOAT32, NK_FLOAT16, 7, 1000);
      c.x_pad = (which == 0 || which == 4) ? pad : 0;
      c.residual_pad = (which == 1 || which == 4) ? pad : 0;
      c.residual_out_pad = (which == 2 || which == 4) ? pad : 0;
      c.y_pad = (which == 3 || which == 4) ? pad : 0;
      test_fwd_case(GetParam(), c, rng);
    }
  }
}

TEST_P(FwdLayouts, ExplicitStrideEqualToHiddenSameAsZero) {
  NK_SKIP_IF_UNAVAILABLE(GetParam());
  Rng rng;
  FwdCase c = layout_case(NK_FLOAT32, NK_FLOAT32, NK_FLOAT32, 5, 71);
  c.zero_strides = false;
  test_fwd_case(GetParam(), c, rng);
}

TEST_P(FwdLayouts, PointersOneElementOffSixteenByteAlignment) {
  NK_SKIP_IF_UNAVAILABLE(GetParam());
  Rng rng;
  for (const DtypeTriple& t : {DtypeTriple{NK_FLOAT16, NK_FLOAT16, NK_FLOAT16},
                               DtypeTriple{NK_FLOAT32, NK_BFLOAT16, NK_FLOAT32}}) {
    for (int which = 0; which < 8; ++which) {  // each tensor alone, then all at once
      FwdCase c = layout_case(std::get<0>(t), std::get<1>(t), std::get<2>(t), 3, 4096);
      c.weight = c.bias = c.rstd = true;
      c.x_offset = (which == 0 || which == 7);
      c.residual_offset = (which == 1 || which == 7);
      c.residual_out_offset = (which == 2 || which == 7);
      c.y_offset = (which == 3 || which == 7);
      c.weight_offset = (which == 4 || which == 7);
      c.bias_offset = (which == 5 || which == 7);
      c.rstd_offset = (which == 6 || which == 7);
      test_fwd_case(GetParam(), c, rng);
    }
  }
}

// Rows misaligned for 16-byte vectors whose x and y share the misalignment: 16-bit types take
// the realigned kernel from 1M elements (a head of up to 7 elements, then aligned vectors), with
// the weight and bias shifted into place; smaller launches, rows misaligned differently for x and
// y, or with a residual, take the element-wise kernels. Each shape here has over 1M elements.
TEST_P(FwdLayouts, RowsMisalignedAlikeForXAndY) {
  NK_SKIP_IF_UNAVAILABLE(GetParam());
  Rng rng;
  for (nk_dtype d : {NK_BFLOAT16, NK_FLOAT16}) {
    const nk_dtype other = d == NK_BFLOAT16 ? NK_FLOAT16 : NK_BFLOAT16;
    for (int64_t hidden : {16, 23, 71, 513, 4096, 17389}) {
      for (int64_t offset : {0, 1, 3, 6, 7}) {
        FwdCase c = layout_case(d, other, d, (int64_t(1) << 20) / hidden + 3, hidden);
        c.residual = false;
        c.bias = offset % 2 == 1;
        c.zero_centered = offset == 3;
        c.x_offset = c.y_offset = offset;
        test_fwd_case(GetParam(), c, rng);
      }
    }
    FwdCase in_place = layout_case(d, d, d, 61, 17389);
    in_place.residual = false;
    in_place.y_is_x = true;
    test_fwd_case(GetParam(), in_place, rng);
    FwdCase padded = layout_case(d, d, other, 1050, 1001);  // row strides of 1001 + 3
    padded.residual = false;
    padded.x_pad = padded.y_pad = 3;
    padded.x_offset = padded.y_offset = 5;
    test_fwd_case(GetParam(), padded, rng);
    FwdCase bias_only = layout_case(d, d, d, 61, 17389);  // no weight: bias shifted alone
    bias_only.residual = bias_only.weight = false;
    bias_only.x_offset = bias_only.y_offset = 5;
    test_fwd_case(GetParam(), bias_only, rng);
    FwdCase apart = layout_case(d, d, d, 61, 17389);  // x and y misaligned differently
    apart.residual = false;
    apart.x_offset = 1;
    apart.y_offset = 2;
    test_fwd_case(GetParam(), apart, rng);
  }
}

// Rows misaligned alike for x and y, for each 16-bit dtype and shape: every head offset, with
// a bias (1), a zero-centred weight (5), both (3), in place (6), no weight (2), a bias and no
// weight (7); then `padded_rows` rows of padded strides (+3), a weight alone, and as many of a
// bias alone (no weight).
void test_rows_misaligned_alike(nk_backend backend,
                                const std::vector<std::pair<int64_t, int64_t>>& shapes,
                                int64_t padded_rows, int64_t padded_hidden, Rng& rng) {
  for (nk_dtype d : {NK_BFLOAT16, NK_FLOAT16}) {
    for (const auto& [rows, hidden] : shapes) {
      for (int64_t offset : {0, 1, 2, 3, 5, 6, 7}) {
        FwdCase c = layout_case(d, d, d, rows, hidden);
        c.residual = false;
        c.bias = offset == 1 || offset == 3 || offset == 7;
        c.weight = offset != 2 && offset != 7;
        c.zero_centered = offset == 3 || offset == 5;
        c.y_is_x = offset == 6;
        c.x_offset = offset;
        if (!c.y_is_x) c.y_offset = offset;
        test_fwd_case(backend, c, rng);
      }
    }
    FwdCase padded = layout_case(d, d, d, padded_rows, padded_hidden);
    padded.residual = padded.bias = false;
    padded.x_pad = padded.y_pad = 3;
    padded.x_offset = padded.y_offset = 5;
    test_fwd_case(backend, padded, rng);
    FwdCase bias_only = layout_case(d, d, d, padded_rows, padded_hidden);
    bias_only.residual = bias_only.weight = false;
    bias_only.x_offset = bias_only.y_offset = 3;
    test_fwd_case(backend, bias_only, rng);
  }
}

// Few rows misaligned alike, each longer than one CTA holds (16K+ columns), under 1M elements:
// in every call (a weight alone, with a bias or zero-centring, or no weight) the lean realigned
// kernel on clusters that fill the device (a weight alone on rms_norm_fwd_realigned, the others
// element by element, under NK_TUNE_FWD_REALIGN_LEAN=0, ctest entry fwd_realign_not_lean; the
// others element by element under ctest entry fwd_realign_lean_weight_only), else (under
// NK_TUNE_FWD_REALIGN_CLUSTERS=0, ctest entry fwd_realign_few_rows_element_wise) element by
// element.
TEST_P(FwdLayouts, FewLongRowsMisalignedAlike) {
  NK_SKIP_IF_UNAVAILABLE(GetParam());
  Rng rng;
  test_rows_misaligned_alike(GetParam(),
                             {{1, 17389}, {4, 17389}, {29, 17389}, {2, 65537}, {3, 40001}}, 5,
                             17389, rng);
}

// Rows misaligned alike that one CTA holds, under 1M elements: 64 or more past the thresholds
// of KernelFacts::fwd_realign_long_rows_min_elements and _short_, or 16 or more past 2048
// columns (fwd_realign_lean_rows_min_rows): in every call (a weight alone, with a bias or
// zero-centring, or no weight) the lean realigned kernel of one row per CTA where it covers the
// plan (rms_norm_fwd_realigned under NK_TUNE_FWD_REALIGN_LEAN=0 or 1, for a weight alone, and
// those only by the first rule), else (under ctest entry fwd_realign_rows_element_wise) element
// by element. 1024 x 1001 (1M elements) other than a weight alone takes rms_norm_fwd_realigned,
// two rows per CTA.
TEST_P(FwdLayouts, RowsOneCtaHoldsMisalignedAlike) {
  NK_SKIP_IF_UNAVAILABLE(GetParam());
  Rng rng;
  test_rows_misaligned_alike(GetParam(),
                             {{96, 4095}, {64, 8191}, {200, 3001}, {384, 2047}, {1024, 1001},
                              {32, 4095}, {16, 8191}, {48, 3001}},
                             100, 4095, rng);
}

// Without a weight or a bias, weight_dtype names no operand: a call that leaves it at float32
// (as nk_rms_norm_fwd_args_init does, and the bindings without a weight) gives the same bits as
// one that names x's dtype (the CUDA backend plans both as 16-bit calls), aligned rows and rows
// misaligned alike, each checked against float64 too.
TEST_P(FwdLayouts, WeightDtypeIgnoredWithoutWeightOrBias) {
  NK_SKIP_IF_UNAVAILABLE(GetParam());
  Rng rng;
  for (nk_dtype d : {NK_BFLOAT16, NK_FLOAT16}) {
    for (const auto& [rows, hidden, offset] : std::vector<std::tuple<int64_t, int64_t, int64_t>>{
             {200, 3001, 3}, {29, 17389, 5}, {528, 2048, 0}, {4096, 128, 0}, {7, 71, 1}}) {
      FwdCase named = layout_case(d, d, d, rows, hidden);
      named.residual = named.bias = named.weight = false;
      named.x_offset = named.y_offset = offset;
      FwdCase unnamed = named;
      unnamed.w = NK_FLOAT32;
      SCOPED_TRACE(unnamed.describe());
      const FwdInputs in = make_fwd_inputs(named, rng);
      const FwdRun a = run_fwd(GetParam(), named, in);
      const FwdRun b = run_fwd(GetParam(), unnamed, in);
      check_fwd_against_reference(unnamed, in, b);
      EXPECT_EQ(a.y, b.y);
      EXPECT_EQ(a.rstd, b.rstd);
    }
  }
}

TEST_P(FwdLayouts, InPlaceYIsX) {
  NK_SKIP_IF_UNAVAILABLE(GetParam());
  Rng rng;
  for (nk_dtype d : all_dtypes()) {
    for (bool residual : {false, true}) {
      FwdCase c = layout_case(d, NK_FLOAT32, d, 7, 4096);
      c.residual = residual;
      c.y_is_x = true;
      test_fwd_case(GetParam(), c, rng);
    }
    FwdCase strided = layout_case(d, NK_FLOAT32, d, 5, 71);
    strided.x_pad = 5;  // same strided view for x and y
    strided.y_is_x = true;
    test_fwd_case(GetParam(), strided, rng);
  }
}

TEST_P(FwdLayouts, InPlaceResidualOutIsResidual) {
  NK_SKIP_IF_UNAVAILABLE(GetParam());
  Rng rng;
  for (nk_dtype d : all_dtypes()) {
    FwdCase c = layout_case(d, NK_BFLOAT16, NK_FLOAT32, 7, 1000);
    c.residual_out_is_residual = true;
    test_fwd_case(GetParam(), c, rng);
    // Both in place at once, the usual transformer-block pattern.
    FwdCase both = layout_case(d, NK_BFLOAT16, d, 3, 4096);
    both.residual_out_is_residual = true;
    both.y_is_x = true;
    test_fwd_case(GetParam(), both, rng);
  }
}

TEST_P(FwdLayouts, EpsDominatesTinyInputs) {
  NK_SKIP_IF_UNAVAILABLE(GetParam());
  Rng rng;
  // Mean square ~1e-6: y depends on eps as much as on x, so a wrong eps cannot pass.
  for (nk_dtype d : all_dtypes()) {
    FwdCase c = layout_case(d, NK_FLOAT32, d, 7, 1000);
    c.residual = false;
    c.x_scale = 1e-3;
    c.eps = 1e-6f;
    test_fwd_case(GetParam(), c, rng);
  }
}

INSTANTIATE_TEST_SUITE_P(AllBackends, FwdLayouts, ::testing::ValuesIn(all_backends()),
                         [](const auto& info) { return std::string(backend_label(info.param)); });

}  // namespace
}  // namespace nktest
