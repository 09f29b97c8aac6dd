// Backward pass against the float64 analytic gradient on both backends: every (x, weight, dy)
// dtype combination with options, awkward and large shapes, layouts, in place, determinism.
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <tuple>

#include <gtest/gtest-spi.h>

#include "bwd_harness.h"

namespace nktest {
namespace {

using DtypeTriple = std::tuple<nk_dtype, nk_dtype, nk_dtype>;  // x, weight, dy

std::vector<DtypeTriple> all_dtype_triples() {
  std::vector<DtypeTriple> out;
  for (nk_dtype a : all_dtypes())
    for (nk_dtype b : all_dtypes())
      for (nk_dtype c : all_dtypes()) out.emplace_back(a, b, c);
  return out;
}

// dx = rstd * (1 - xhat^2) * g for hidden 1: ill-conditioned unless eps is comparable to x^2.
float eps_for(int64_t hidden) { return hidden < 8 ? 1.0f : 1e-6f; }

// ---- every dtype combination ----

class BwdEveryDtypeCombination
    : public ::testing::TestWithParam<std::tuple<nk_backend, DtypeTriple>> {};

TEST_P(BwdEveryDtypeCombination, MatchesAnalyticGradientWithEachOption) {
  const nk_backend backend = std::get<0>(GetParam());
  NK_SKIP_IF_UNAVAILABLE(backend);
  const auto [x, w, dy] = std::get<1>(GetParam());
  struct Options {
    int64_t rows, hidden;
    bool weight, zero_centered, dresidual, dweight, dbias;
  };
  const Options options[] = {
      {3, 29, true, false, false, true, false},
      {7, 71, false, false, true, false, true},     // no weight; dbias alone
      {64, 128, true, true, true, true, true},      // zero-centered, everything
      {1, 1000, true, false, false, true, true},
      {3, 4096, true, true, true, true, true},
      {5, 1, true, false, true, true, true},
      {2, 17389, true, false, false, false, false},  // dx only: no workspace
      {100, 71, true, false, false, true, true},     // rows > 64: several rows per chunk
  };
  Rng rng;
  for (const Options& o : options) {
    BwdCase c;
    c.rows = o.rows;
    c.hidden = o.hidden;
    c.x = x;
    c.w = w;
    c.dy = dy;
    c.weight = o.weight;
    c.zero_centered = o.zero_centered;
    c.dresidual = o.dresidual;
    c.dweight = o.dweight;
    c.dbias = o.dbias;
    c.eps = eps_for(o.hidden);
    test_bwd_case(backend, c, rng);
  }
}

INSTANTIATE_TEST_SUITE_P(
    AllBackends, BwdEveryDtypeCombination,
    ::testing::Combine(::testing::ValuesIn(all_backends()),
                       ::testing::ValuesIn(all_dtype_triples())),
    [](const auto& info) {
      const DtypeTriple t = std::get<1>(info.param);
      return std::string(backend_label(std::get<0>(info.param))) + "_x_" +
             dtype_label(std::get<0>(t)) + "_w_" + dtype_label(std::get<1>(t)) + "_dy_" +
             dtype_label(std::get<2>(t));
    });

// ---- shapes ----

class BwdShapes
    : public ::testing::TestWithParam<std::tuple<nk_backend, int64_t /*rows*/, int64_t /*hidden*/>> {};

TEST_P(BwdShapes, MatchesAnalyticGradient) {
  const auto [backend, rows, hidden] = GetParam();
  NK_SKIP_IF_UNAVAILABLE(backend);
  static const DtypeTriple kSets[] = {{NK_BFLOAT16, NK_FLOAT32, NK_BFLOAT16},
                                      {NK_FLOAT16, NK_FLOAT16, NK_FLOAT16},
                                      {NK_FLOAT32, NK_FLOAT32, NK_FLOAT32},
                                      {NK_BFLOAT16, NK_BFLOAT16, NK_FLOAT32}};
  Rng rng;
  BwdCase c;
  c.rows = rows;
  c.hidden = hidden;
  std::tie(c.x, c.w, c.dy) = kSets[(rows + hidden) % 4];
  c.dbias = c.dresidual = true;
  c.zero_centered = hidden % 2 == 1;
  c.eps = eps_for(hidden);
  test_bwd_case(backend, c, rng);
}

INSTANTIATE_TEST_SUITE_P(
    AllBackends, BwdShapes,
    ::testing::Combine(::testing::ValuesIn(all_backends()), ::testing::Values(1, 3, 7, 64),
                       ::testing::Values(1, 29, 71, 128, 1000, 4096, 17389, 65537)),
    ShapeTestName());

// ---- large shapes; many rows stress the dweight/dbias reduction ----

class BwdLargeShapes : public ::testing::TestWithParam<std::tuple<nk_backend, RowsHidden>> {};

TEST_P(BwdLargeShapes, MatchesAnalyticGradient) {
  const nk_backend backend = std::get<0>(GetParam());
  const auto [rows, hidden] = std::get<1>(GetParam());
  NK_SKIP_IF_UNAVAILABLE(backend);
  NK_SKIP_IF_SLOW_ON_CPU(backend, rows, hidden, "BwdShapes");
  Rng rng;
  BwdCase c;
  c.rows = rows;
  c.hidden = hidden;
  c.x = c.dy = NK_BFLOAT16;
  c.w = NK_FLOAT32;
  c.dbias = rows % 2 == 0;  // both kernel variants: with and without dbias partial sums
  test_bwd_case(backend, c, rng);
}

INSTANTIATE_TEST_SUITE_P(
    AllBackends, BwdLargeShapes,
    ::testing::Combine(::testing::ValuesIn(all_backends()),
                       ::testing::Values(RowsHidden{4096, 4096}, RowsHidden{2, 262144},
                                         RowsHidden{3, 1048576}, RowsHidden{16384, 128},
                                         RowsHidden{1000, 1000}, RowsHidden{65536, 64},
                                         RowsHidden{300, 32768}, RowsHidden{37, 65536},
                                         // odd hidden (2-byte accesses): clusters of 9 CTAs
                                         // (or the column-owning cluster, where enabled), then
                                         // of 15 with more rows than slots
                                         RowsHidden{29, 17389}, RowsHidden{601, 30001},
                                         // model widths: 160-thread CTAs, three per SM, more
                                         // rows than slots; 320 threads (capped to one CTA)
                                         RowsHidden{1000, 2304}, RowsHidden{999, 2560},
                                         RowsHidden{600, 5120},
                                         // rows under a warp's 64 vectors (per-head norms;
                                         // several rows per warp under
                                         // NK_TUNE_BWD_SUB_WARP_ROWS): whole and partial items;
                                         // 16384 x 256 on 16-thread rows by default (3 rows or
                                         // more per row group)
                                         RowsHidden{2048, 256}, RowsHidden{1000, 200},
                                         RowsHidden{999, 72}, RowsHidden{16384, 256})),
    ShapeTestName());

// ---- the common call: 16-bit x, weight and dy, a weight, no dbias, no dresidual_out ----
// Rows that the threads cover exactly at 1-2 vectors per thread (rms_norm_bwd_lean by default;
// the pipelined kernel under NK_TUNE_BWD_LEAN=0, ctest entry bwd_pipelined_common_calls), in
// each form the lean kernel takes: rows left over past the slots, sub-warp rows, the
// zero-centered weight, no dweight, dx in place of x or of dy, mixed 16-bit types; rows of 3, 6,
// 10 and 12 warps too (row_group_sum<true> pads the first three to whole quads). Then rows split
// over clusters (the pipelined kernel's common calls, NK_TUNE_BWD_PIPELINED_ROW_SUM_QUADS): CTAs
// of 7 and 6 warps (padded), 8 warps on persistent slots, a last CTA of part of its columns.
// Every seventh form asks for dbias too: the pipelined kernel by default, the lean one under
// NK_TUNE_BWD_LEAN_DBIAS=1 (ctest entry bwd_lean_dbias). (The shapes above give the weight as
// float32 or ask for dbias, which these kernels skip by default.)
class BwdCommonCalls : public ::testing::TestWithParam<nk_backend> {};

TEST_P(BwdCommonCalls, ExactRowsInEveryForm) {
  NK_SKIP_IF_UNAVAILABLE(GetParam());
  Rng rng;
  const RowsHidden shapes[] = {{4096, 1024}, {1001, 1024}, {16385, 128}, {2049, 256},
                               {333, 2048},  {300, 4096},  {500, 1536},  {64, 5120},
                               {130, 3072},  {30, 10240},  {100, 9216},  {400, 12288},
                               {7, 20480},   {100, 11264}};
  int form = 0;
  for (const RowsHidden& shape : shapes) {
    for (const DtypeTriple& t : {DtypeTriple{NK_BFLOAT16, NK_BFLOAT16, NK_BFLOAT16},
                                 DtypeTriple{NK_FLOAT16, NK_FLOAT16, NK_FLOAT16},
                                 DtypeTriple{NK_BFLOAT16, NK_FLOAT16, NK_BFLOAT16}}) {
      BwdCase c;
      c.rows = shape.first;
      c.hidden = shape.second;
      std::tie(c.x, c.w, c.dy) = t;
      c.zero_centered = form % 3 == 1;
      c.dweight = form % 5 != 2;
      c.dx_is_x = form % 4 == 3;
      c.dx_is_dy = form % 4 == 1;  // (x and dy share their dtype in every set)
      c.dbias = form % 7 == 4;
      ++form;
      test_bwd_case(GetParam(), c, rng);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(AllBackends, BwdCommonCalls, ::testing::ValuesIn(all_backends()),
                         [](const auto& info) { return std::string(backend_label(info.param)); });

class BwdLargeSplitRows : public ::testing::TestWithParam<nk_backend> {};

// Rows split over a cluster (16384 and 32768 columns on the GPU) complete one row late; every
// row count (1 row, fewer rows than clusters, and a remainder), dresidual_out added in place of
// dx, the zero-centered weight and dbias.
TEST_P(BwdLargeSplitRows, DeferredRowsWithResidualInPlace) {
  NK_SKIP_IF_UNAVAILABLE(GetParam());
  if (GetParam() == NK_BACKEND_CPU) GTEST_SKIP() << "GPU launch plans; CPU covered by BwdShapes";
  Rng rng;
  for (const int64_t hidden : {int64_t{16384}, int64_t{32768}}) {
    for (const int64_t rows : {int64_t{1}, int64_t{7}, int64_t{261}}) {
      BwdCase c;
      c.rows = rows;
      c.hidden = hidden;
      c.x = c.dy = NK_BFLOAT16;
      c.w = NK_BFLOAT16;
      c.dresidual = c.dweight = c.dbias = true;
      c.dx_is_dresidual = rows == 7;
      c.zero_centered = rows != 1;
      test_bwd_case(GetParam(), c, rng);
    }
  }
  // Rows of 262144 columns (16 CTAs of 4 vectors per thread, one row in flight, the bf16 weight
  // in shared memory; two in flight with the pending row in registers,
  // NK_TUNE_BWD_PENDING_IN_REGISTERS, which takes the cases without dbias): one row, several
  // rows per cluster, and more rows than clusters with a remainder.
  for (const int64_t rows : {int64_t{1}, int64_t{5}, int64_t{40}, int64_t{61}}) {
    BwdCase c;
    c.rows = rows;
    c.hidden = 262144;
    c.x = c.dy = NK_BFLOAT16;
    c.w = NK_BFLOAT16;
    c.dweight = rows != 1;
    c.dbias = rows == 40;
    c.zero_centered = rows == 5;
    test_bwd_case(GetParam(), c, rng);
  }
  // float32 rows of 131072 columns: 16 CTAs of 4 vectors of 4 elements, the float32 weight's
  // 32 KB per CTA in shared memory.
  {
    BwdCase c;
    c.rows = 11;
    c.hidden = 131072;
    c.x = c.dy = c.w = NK_FLOAT32;
    c.dweight = true;
    test_bwd_case(GetParam(), c, rng);
  }
  // 200000 columns: 13 CTAs of 4 vectors per thread, the last one's columns partly past the row,
  // the float32 weight re-read (its 64 KB per CTA do not fit beside the stages); with dbias, and
  // without (the pending row in registers where its knob is on).
  for (const bool dbias : {true, false}) {
    BwdCase c;
    c.rows = 23;
    c.hidden = 200000;
    c.x = c.dy = NK_BFLOAT16;
    c.w = NK_FLOAT32;
    c.dweight = c.zero_centered = true;
    c.dbias = dbias;
    test_bwd_case(GetParam(), c, rng);
  }
}

// Rows past what 16 pipelined CTAs hold take the streaming plan: a cluster per row
// (NK_TUNE_BWD_CLUSTER_STREAMING, the default; the ctest entry bwd_streaming_one_cta_per_row
// runs these cases on one CTA per row). Column sums all in shared memory (bf16 524288 columns
// with dweight alone; float32 262144 with dbias too; float16 300000 with dbias, ragged; odd
// 600001 columns in 1-element vectors), or their last passes in the workspace (bf16 524288
// with dbias, 1048576). Fewer rows than clusters, and more.
TEST_P(BwdLargeSplitRows, RowsPastThePipelinedClusters) {
  NK_SKIP_IF_UNAVAILABLE(GetParam());
  if (GetParam() == NK_BACKEND_CPU) GTEST_SKIP() << "GPU launch plans; CPU covered by BwdShapes";
  Rng rng;
  for (const bool dbias : {false, true}) {
    BwdCase c;
    c.rows = dbias ? 9 : 11;  // (9: slots of two rows, their dbias sums partly in the workspace)
    c.hidden = 524288;
    c.x = c.dy = c.w = NK_BFLOAT16;
    c.dbias = dbias;
    c.zero_centered = dbias;
    test_bwd_case(GetParam(), c, rng);
  }
  {
    BwdCase c;
    c.rows = 9;
    c.hidden = 262144;
    c.x = c.dy = c.w = NK_FLOAT32;
    c.dbias = true;
    test_bwd_case(GetParam(), c, rng);
  }
  {
    BwdCase c;
    c.rows = 9;
    c.hidden = 1048576;
    c.x = c.dy = c.w = NK_BFLOAT16;
    test_bwd_case(GetParam(), c, rng);
  }
  {
    // Ragged: 18752 columns per CTA, 4 or 5 vectors per thread; several rows per cluster.
    BwdCase c;
    c.rows = 20;
    c.hidden = 300000;
    c.x = c.dy = NK_FLOAT16;
    c.w = NK_BFLOAT16;
    c.dbias = true;
    test_bwd_case(GetParam(), c, rng);
  }
  {
    BwdCase c;
    c.rows = 2;
    c.hidden = 600001;
    c.x = c.dy = NK_BFLOAT16;
    c.w = NK_FLOAT32;
    c.dresidual = true;
    test_bwd_case(GetParam(), c, rng);
  }
}

INSTANTIATE_TEST_SUITE_P(AllBackends, BwdLargeSplitRows, ::testing::ValuesIn(all_backends()),
                         [](const auto& info) { return std::string(backend_label(info.param)); });

// ---- layouts ----

class BwdLayouts : public ::testing::TestWithParam<nk_backend> {};

BwdCase layout_case(nk_dtype x, nk_dtype w, nk_dtype dy, int64_t rows, int64_t hidden) {
  BwdCase c;
  c.rows = rows;
  c.hidden = hidden;
  c.x = x;
  c.w = w;
  c.dy = dy;
  c.dresidual = c.dweight = c.dbias = true;
  return c;
}

TEST_P(BwdLayouts, RowStridesLargerThanHiddenForEachTensor) {
  NK_SKIP_IF_UNAVAILABLE(GetParam());
  Rng rng;
  for (const int64_t pad : {int64_t{3}, int64_t{64}}) {
    for (int which = 0; which < 5; ++which) {  // dy, x, dresidual_out, dx, all four
      BwdCase c = layout_case(NK_BFLOAT16, NK_FLOAT32, NK_FLOAT16, 7, 1000);
      c.dy_pad = (which == 0 || which == 4) ? pad : 0;
      c.x_pad = (which == 1 || which == 4) ? pad : 0;
      c.dresidual_pad = (which == 2 || which == 4) ? pad : 0;
      c.dx_pad = (which == 3 || which == 4) ? pad : 0;
      test_bwd_case(GetParam(), c, rng);
    }
  }
}

TEST_P(BwdLayouts, ExplicitStrideEqualToHiddenSameAsZero) {
  NK_SKIP_IF_UNAVAILABLE(GetParam());
  Rng rng;
  BwdCase c = layout_case(NK_FLOAT32, NK_FLOAT32, NK_FLOAT32, 5, 71);
  c.zero_strides = false;
  test_bwd_case(GetParam(), c, rng);
}

TEST_P(BwdLayouts, PointersOneElementOffSixteenByteAlignment) {
  NK_SKIP_IF_UNAVAILABLE(GetParam());
  Rng rng;
  for (const DtypeTriple& t : {DtypeTriple{NK_FLOAT16, NK_FLOAT16, NK_FLOAT16},
                               DtypeTriple{NK_FLOAT32, NK_BFLOAT16, NK_FLOAT32}}) {
    for (int which = 0; which < 9; ++which) {  // each tensor alone, then all at once
      BwdCase c = layout_case(std::get<0>(t), std::get<1>(t), std::get<2>(t), 3, 4096);
      c.dy_offset = (which == 0 || which == 8);
      c.x_offset = (which == 1 || which == 8);
      c.dresidual_offset = (which == 2 || which == 8);
      c.dx_offset = (which == 3 || which == 8);
      c.weight_offset = (which == 4 || which == 8);
      c.rstd_offset = (which == 5 || which == 8);
      c.dweight_offset = (which == 6 || which == 8);
      c.dbias_offset = (which == 7 || which == 8);
      test_bwd_case(GetParam(), c, rng);
    }
  }
}

TEST_P(BwdLayouts, InPlaceDxIsDy) {
  NK_SKIP_IF_UNAVAILABLE(GetParam());
  Rng rng;
  for (nk_dtype d : all_dtypes()) {
    BwdCase c = layout_case(d, NK_FLOAT32, d, 7, 4096);
    c.dx_is_dy = true;
    test_bwd_case(GetParam(), c, rng);
    BwdCase strided = layout_case(d, NK_FLOAT32, d, 5, 71);
    strided.dy_pad = 9;
    strided.dx_is_dy = true;
    test_bwd_case(GetParam(), strided, rng);
  }
}

// Few rows, where dweight would otherwise be summed down the columns while dx is written:
// in place, x must be read before it is overwritten, by every kernel that reads it.
TEST_P(BwdLayouts, InPlaceDxIsX) {
  NK_SKIP_IF_UNAVAILABLE(GetParam());
  Rng rng;
  for (nk_dtype d : all_dtypes()) {
    for (const RowsHidden& shape : {RowsHidden{7, 4096}, RowsHidden{29, 17389}}) {
      BwdCase c = layout_case(d, NK_FLOAT32, NK_FLOAT32, shape.first, shape.second);
      c.dx_is_x = true;
      test_bwd_case(GetParam(), c, rng);
    }
  }
}

TEST_P(BwdLayouts, InPlaceDxIsDresidualOut) {
  NK_SKIP_IF_UNAVAILABLE(GetParam());
  Rng rng;
  for (nk_dtype d : all_dtypes()) {
    BwdCase c = layout_case(d, NK_BFLOAT16, NK_FLOAT32, 7, 1000);
    c.dx_is_dresidual = true;
    test_bwd_case(GetParam(), c, rng);
  }
}

INSTANTIATE_TEST_SUITE_P(AllBackends, BwdLayouts, ::testing::ValuesIn(all_backends()),
                         [](const auto& info) { return std::string(backend_label(info.param)); });

// ---- few rows: on the GPU, one cluster whose CTAs own columns of every row (where
// NK_TUNE_BWD_COLUMNS_MAX_ELEMENTS enables it: ctest's bwd_columns_kernel entry) ----

// Shapes at the edges of that plan: one row, a CTA per 64 columns, rows whose segments start
// at every offset modulo 16, the most row groups, and 31 x 32768, past its shared memory (the
// other kernels); with every optional operand, misaligned or strided, and in place.
class BwdFewRows : public ::testing::TestWithParam<std::tuple<nk_backend, RowsHidden>> {};

TEST_P(BwdFewRows, EveryOperandAndLayout) {
  const nk_backend backend = std::get<0>(GetParam());
  const auto [rows, hidden] = std::get<1>(GetParam());
  NK_SKIP_IF_UNAVAILABLE(backend);
  Rng rng;
  for (int variant = 0; variant < 4; ++variant) {
    BwdCase c = layout_case(NK_BFLOAT16, NK_BFLOAT16, NK_BFLOAT16, rows, hidden);
    c.eps = eps_for(hidden);
    c.zero_centered = variant == 1;
    c.dresidual = variant != 2;
    c.dbias = variant != 3;
    if (variant == 2) {  // float32 x and dy (4-byte elements), dy strided and misaligned
      c.x = c.dy = NK_FLOAT32;
      c.dy_pad = 5;
      c.dy_offset = 1;
      c.weight = false;
      c.dweight = false;
    }
    if (variant == 3) {  // every operand one element off 16-byte alignment, dx in place of dy
      c.x_offset = c.dy_offset = c.dresidual_offset = c.weight_offset = 1;
      c.dx_is_dy = true;
    }
    test_bwd_case(backend, c, rng);
  }
}

INSTANTIATE_TEST_SUITE_P(
    AllBackends, BwdFewRows,
    ::testing::Combine(::testing::ValuesIn(all_backends()),
                       ::testing::Values(RowsHidden{1, 4096}, RowsHidden{1, 1}, RowsHidden{2, 65},
                                         RowsHidden{128, 4096}, RowsHidden{29, 17389},
                                         RowsHidden{9, 1003}, RowsHidden{150, 3000},
                                         RowsHidden{31, 32768})),
    ShapeTestName());

// ---- rows misaligned for 16-byte vectors: on the GPU, dx from a head and aligned vectors
// (rms_norm_bwd_realigned) where x, dy, dx (and dresidual_out) rows are misaligned alike,
// dweight/dbias by the column sums beside it ----

class BwdMisalignedRows : public ::testing::TestWithParam<nk_backend> {};

// 16-bit x, dy and weight: every option of that kernel, at shapes from one short row to a
// million elements, each row starting at every offset modulo 8 elements; then aligned rows of a
// hidden size that is not a multiple of 8. (Wide rows of whole vectors, which take it too, are
// among BwdFewRows' shapes: 31 x 32768.)
TEST_P(BwdMisalignedRows, EveryOptionOfTheRealignedDx) {
  NK_SKIP_IF_UNAVAILABLE(GetParam());
  Rng rng;
  const DtypeTriple triples[] = {{NK_BFLOAT16, NK_BFLOAT16, NK_BFLOAT16},
                                 {NK_FLOAT16, NK_BFLOAT16, NK_FLOAT16},
                                 {NK_BFLOAT16, NK_FLOAT16, NK_FLOAT16}};
  const RowsHidden shapes[] = {{29, 17389}, {1, 17389}, {3, 29}, {5, 17},   {64, 1001},
                               {2, 65537},  {256, 4095}, {8, 16}, {130, 999}};
  int index = 0;
  for (const RowsHidden& shape : shapes) {
    for (int variant = 0; variant < 6; ++variant, ++index) {
      BwdCase c;
      c.rows = shape.first;
      c.hidden = shape.second;
      std::tie(c.x, c.w, c.dy) = triples[index % 3];
      c.eps = eps_for(c.hidden);
      c.zero_centered = variant == 1;
      c.weight = variant != 2;  // no weight: dbias alone
      c.dweight = variant != 2 && variant != 4;
      c.dbias = variant == 1 || variant == 2;
      // Rows starting elsewhere each time: the buffers' offsets, padded strides alike.
      c.x_offset = c.dy_offset = c.dx_offset = c.dresidual_offset = index % 8;
      c.dresidual = variant == 0 || variant == 3 || variant == 5;
      if (variant == 3) c.x_pad = c.dy_pad = c.dx_pad = c.dresidual_pad = 3;
      if (variant == 4) c.dx_is_x = true;  // dx alone, in place of x
      if (variant == 5) c.dx_is_dresidual = true;
      test_bwd_case(GetParam(), c, rng);
    }
  }
  // Aligned rows that 16-byte vectors do not cover: one row, or strides padded to a multiple of
  // 8 elements, of a hidden size that is not (the same kernel, with no head).
  for (const auto& [rows, hidden, pad] : {std::tuple<int64_t, int64_t, int64_t>{1, 17389, 0},
                                          {6, 1001, 7},
                                          {3, 29, 3}}) {
    for (bool dbias : {false, true}) {
      BwdCase c;
      c.rows = rows;
      c.hidden = hidden;
      c.x = c.w = c.dy = NK_BFLOAT16;
      c.dbias = dbias;
      c.zero_centered = dbias;
      c.x_pad = c.dy_pad = c.dx_pad = pad;
      test_bwd_case(GetParam(), c, rng);
    }
  }
}

// Past the realigned column sums' bounds (2048 rows, 9M elements), or dx in place while dweight
// is wanted: the persistent realigned kernel, each slot's rows sharing their head and its sums
// kept per slot (a row per group of threads at 2 or 4 vectors per thread, up to 256 threads of
// narrow rows per CTA).
TEST_P(BwdMisalignedRows, ManyRowsKeepTheirSumsPerSlot) {
  NK_SKIP_IF_UNAVAILABLE(GetParam());
  Rng rng;
  // (Narrow rows share a CTA in groups: 33 columns 8 rows per CTA, 513 and 1001 4, 1025 4 at
  // 4 vectors per thread; 4097 columns 3 rows at 4 vectors, where 2 would pin one row per CTA.)
  const RowsHidden shapes[] = {{2100, 1025}, {2100, 33},  {4100, 33},  {2050, 1001},
                               {2049, 513},  {600, 16383}, {2100, 4097}};
  int index = 0;
  for (const RowsHidden& shape : shapes) {
    const bool large = shape.first * shape.second > (int64_t(8) << 20);
    for (int variant = large ? 3 : 0; variant < 5; ++variant, ++index) {  // (CPU time in CI)
      BwdCase c;
      c.rows = shape.first;
      c.hidden = shape.second;
      c.x = c.w = c.dy = index % 2 ? NK_FLOAT16 : NK_BFLOAT16;
      c.eps = eps_for(c.hidden);
      c.zero_centered = variant == 1;
      c.dbias = variant == 1 || variant == 2;
      c.weight = variant != 2;  // no weight: dbias alone
      c.dweight = variant != 2;
      c.x_offset = c.dy_offset = c.dx_offset = c.dresidual_offset = index % 8;
      c.dresidual = variant == 3;
      if (variant == 3) c.x_pad = c.dy_pad = c.dx_pad = c.dresidual_pad = 3;
      if (variant == 4) c.dx_is_x = true;  // in place of x, dweight wanted
      test_bwd_case(GetParam(), c, rng);
    }
  }
}

// The cases the realigned kernels must leave to the others: operands misaligned differently;
// and dx in place of x or dy with dbias at few rows, which the column sums cannot take (the
// persistent realigned kernel does).
TEST_P(BwdMisalignedRows, LayoutsTheRealignedDxLeavesToTheOthers) {
  NK_SKIP_IF_UNAVAILABLE(GetParam());
  Rng rng;
  for (int variant = 0; variant < 5; ++variant) {
    BwdCase c;
    c.rows = 29;
    c.hidden = 17389;
    c.x = c.w = c.dy = NK_BFLOAT16;
    c.dbias = true;
    c.dx_is_x = variant == 0;
    c.dx_is_dy = variant == 1;
    if (variant == 2) c.dy_offset = 1;  // dy one element further on than x and dx
    if (variant == 3) c.dx_pad = 1;     // dx rows drift against x and dy
    if (variant == 4) {                 // dresidual_out one element further on
      c.dresidual = true;
      c.dresidual_offset = 1;
    }
    test_bwd_case(GetParam(), c, rng);
  }
}

// Without a weight, dweight or dbias, weight_dtype names no operand: a call that leaves it at
// float32 (as nk_rms_norm_bwd_args_init does, and JAX's FFI without a weight) gives the same
// bits as one that names x's dtype (the CUDA backend plans both as 16-bit calls: misaligned rows
// realigned), each checked against float64 too; aligned rows and misaligned ones.
TEST_P(BwdMisalignedRows, WeightDtypeIgnoredWithoutWeightOrSums) {
  NK_SKIP_IF_UNAVAILABLE(GetParam());
  Rng rng;
  for (nk_dtype d : {NK_BFLOAT16, NK_FLOAT16}) {
    for (const auto& [rows, hidden, offset] : std::vector<std::tuple<int64_t, int64_t, int64_t>>{
             {29, 17389, 3}, {256, 4095, 5}, {300, 4096, 0}, {7, 71, 1}}) {
      BwdCase named;
      named.rows = rows;
      named.hidden = hidden;
      named.x = named.w = named.dy = d;
      named.weight = named.dweight = named.dbias = false;
      named.x_offset = named.dy_offset = named.dx_offset = offset;
      BwdCase unnamed = named;
      unnamed.w = NK_FLOAT32;
      SCOPED_TRACE(unnamed.describe());
      const BwdInputs in = make_bwd_inputs(named, rng);
      const BwdRun a = run_bwd(GetParam(), named, in);
      const BwdRun b = run_bwd(GetParam(), unnamed, in);
      check_bwd_against_reference(unnamed, in, b);
      EXPECT_EQ(a.dx, b.dx);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(AllBackends, BwdMisalignedRows, ::testing::ValuesIn(all_backends()),
                         [](const auto& info) { return std::string(backend_label(info.param)); });

// ---- semantics and determinism ----

class BwdProperties : public ::testing::TestWithParam<nk_backend> {};

TEST_P(BwdProperties, DresidualOutIsAddedToDx) {
  const nk_backend backend = GetParam();
  NK_SKIP_IF_UNAVAILABLE(backend);
  Rng rng;
  NK_SEED_TRACE(rng);
  BwdCase with = layout_case(NK_FLOAT32, NK_FLOAT32, NK_FLOAT32, 7, 1000);
  const BwdInputs in = make_bwd_inputs(with, rng);
  BwdCase without = with;
  without.dresidual = false;
  const BwdRun a = run_bwd(backend, with, in);
  const BwdRun b = run_bwd(backend, without, in);
  ASSERT_EQ(a.status, NK_SUCCESS);
  ASSERT_EQ(b.status, NK_SUCCESS);
  // dx(with) - dx(without) must be dresidual_out itself, up to the float32 rounding of each dx
  // (half an ulp each, or one ulp if the addition is fused): |diff - dres| <= 2^-23 (|a|+|b|+|dres|).
  int64_t wrong = 0;
  std::string first_wrong;
  for (int64_t r = 0; r < with.rows; ++r) {
    for (int64_t j = 0; j < with.hidden; ++j) {
      const double da = normkit::load_as_float(a.dx.data(), NK_FLOAT32, in.dx.index(r, j));
      const double db = normkit::load_as_float(b.dx.data(), NK_FLOAT32, in.dx.index(r, j));
      const double dres = in.dresidual.get(r, j);
      const double bound = 0x1p-23 * (std::fabs(da) + std::fabs(db) + std::fabs(dres));
      if (!(std::fabs((da - db) - dres) <= bound) && wrong++ == 0) {
        first_wrong = "row " + std::to_string(r) + " col " + std::to_string(j) + ": dx with " +
                      std::to_string(da) + ", without " + std::to_string(db) +
                      ", dresidual_out " + std::to_string(dres);
      }
    }
  }
  EXPECT_EQ(wrong, 0) << "dx(with dresidual_out) - dx(without) != dresidual_out; first at "
                      << first_wrong;
}

TEST_P(BwdProperties, TwoRunsGiveBitwiseIdenticalResults) {
  const nk_backend backend = GetParam();
  NK_SKIP_IF_UNAVAILABLE(backend);
  Rng rng;
  NK_SEED_TRACE(rng);
  for (const RowsHidden& shape : {RowsHidden{3000, 1000}, RowsHidden{64, 17389},
                                  RowsHidden{29, 17389}, RowsHidden{128, 4096}}) {
    BwdCase c = layout_case(NK_BFLOAT16, NK_FLOAT32, NK_BFLOAT16, shape.first, shape.second);
    SCOPED_TRACE(c.describe());
    const BwdInputs in = make_bwd_inputs(c, rng);
    const BwdRun first = run_bwd(backend, c, in);
    const BwdRun second = run_bwd(backend, c, in);
    ASSERT_EQ(first.status, NK_SUCCESS);
    ASSERT_EQ(second.status, NK_SUCCESS);
    EXPECT_TRUE(first.dx == second.dx) << "dx differs between two identical runs";
    EXPECT_TRUE(first.dweight == second.dweight) << "dweight differs between two identical runs";
    EXPECT_TRUE(first.dbias == second.dbias) << "dbias differs between two identical runs";
    check_bwd_against_reference(c, in, first);
  }
}

INSTANTIATE_TEST_SUITE_P(AllBackends, BwdProperties, ::testing::ValuesIn(all_backends()),
                         [](const auto& info) { return std::string(backend_label(info.param)); });

// The allowance for column sums that cancel over few rows (bwd_harness.cpp) must not hide a
// row left out of dweight or dbias.
TEST(BwdTolerance, ARowLeftOutOfTheColumnSumsFailsOverFewRows) {
  Rng rng;
  for (const int64_t rows : {int64_t{2}, int64_t{5}, int64_t{64}}) {
    BwdCase c;
    c.rows = rows;
    c.hidden = 33;
    c.dbias = true;
    SCOPED_TRACE(c.describe());
    const BwdInputs in = make_bwd_inputs(c, rng);
    const BwdRun run = run_bwd(NK_BACKEND_CPU, c, in);
    ASSERT_EQ(run.status, NK_SUCCESS) << run.message;
    // Row 0 taken out of dbias, then of dweight (float32: stored exactly enough).
    BwdRun without_row = run;
    Matrix dbias = in.dbias;
    dbias.bytes = run.dbias;
    for (int64_t j = 0; j < c.hidden; ++j) dbias.set(0, j, dbias.get(0, j) - in.dy.get(0, j));
    without_row.dbias = dbias.bytes;
    EXPECT_NONFATAL_FAILURE(check_bwd_against_reference(c, in, without_row), "dbias: MISMATCH");
    without_row = run;
    Matrix dweight = in.dweight;
    dweight.bytes = run.dweight;
    for (int64_t j = 0; j < c.hidden; ++j) {
      dweight.set(0, j, dweight.get(0, j) - in.dy.get(0, j) * in.x.get(0, j) * in.rstd.get(0, 0));
    }
    without_row.dweight = dweight.bytes;
    EXPECT_NONFATAL_FAILURE(check_bwd_against_reference(c, in, without_row),
                            "dweight: MISMATCH");
  }
}

// The CPU's partial sums are chunked by rows alone, so the number of threads (NK_CPU_THREADS)
// must not change a bit.
TEST(CpuBackend, BackwardBitsDoNotDependOnThreadCount) {
  Rng rng;
  NK_SEED_TRACE(rng);
  BwdCase c = layout_case(NK_FLOAT32, NK_FLOAT32, NK_FLOAT32, 2000, 1000);
  const BwdInputs in = make_bwd_inputs(c, rng);
  const char* saved = std::getenv("NK_CPU_THREADS");
  const std::string saved_value = saved ? saved : "";
  std::vector<BwdRun> runs;
  for (const char* threads : {"1", "2", "3", "8"}) {
    setenv("NK_CPU_THREADS", threads, 1);
    runs.push_back(run_bwd(NK_BACKEND_CPU, c, in));
  }
  if (saved) {
    setenv("NK_CPU_THREADS", saved_value.c_str(), 1);
  } else {
    unsetenv("NK_CPU_THREADS");
  }
  for (size_t i = 1; i < runs.size(); ++i) {
    ASSERT_EQ(runs[i].status, NK_SUCCESS);
    EXPECT_TRUE(runs[i].dx == runs[0].dx) << "dx differs with thread setting #" << i;
    EXPECT_TRUE(runs[i].dweight == runs[0].dweight) << "dweight differs with thread setting #" << i;
    EXPECT_TRUE(runs[i].dbias == runs[0].dbias) << "dbias differs with thread setting #" << i;
  }
  check_bwd_against_reference(c, in, runs[0]);
}

}  // namespace
}  // namespace nktest
