// Quantized forward against the float64 quantized reference on both backends: every mode and
// output dtype over awkward shapes with the forward's options, and the cases that make each rule
// matter: saturation, an all-zero row (scale FLT_MIN), a binding scale_ub, the transposed
// output with padded strides, misaligned scales, and determinism.
#include <cfloat>
#include <cstdlib>
#include <cstring>
#include <tuple>
#include <vector>

#include "quant_harness.h"

namespace nktest {
namespace {

struct ModeDtype {
  nk_quant_mode mode;
  nk_dtype y;
  int64_t block;  // quant_block as passed
};

std::string mode_dtype_name(const ModeDtype& m);
void PrintTo(const ModeDtype& m, std::ostream* os) { *os << mode_dtype_name(m); }

std::string mode_dtype_name(const ModeDtype& m) {
  std::string s = std::string(nk_quant_mode_name(m.mode)) + "_" + dtype_label(m.y);
  if (m.mode == NK_QUANT_BLOCK) s += "_block" + std::to_string(m.block == 0 ? 128 : m.block);
  if (m.block == 0 && m.mode == NK_QUANT_BLOCK) s += "_default";
  return s;
}

std::vector<ModeDtype> all_mode_dtypes() {
  std::vector<ModeDtype> out;
  for (nk_dtype y : {NK_FLOAT8_E4M3, NK_FLOAT8_E5M2, NK_INT8}) {
    out.push_back({NK_QUANT_TENSOR, y, 0});
    out.push_back({NK_QUANT_TOKEN, y, 0});
  }
  for (nk_dtype y : {NK_FLOAT8_E4M3, NK_FLOAT8_E5M2}) {
    for (int64_t b : {0, 32, 64, 128}) out.push_back({NK_QUANT_BLOCK, y, b});
    out.push_back({NK_QUANT_MXFP8, y, 0});
  }
  return out;
}

int64_t block_of(const ModeDtype& m) {
  return m.mode == NK_QUANT_BLOCK ? (m.block == 0 ? 128 : m.block)
                                  : m.mode == NK_QUANT_MXFP8 ? 32 : 1;
}

// ---- every mode x dtype over shapes, the forward's options rotating ----

class QuantEveryMode : public ::testing::TestWithParam<std::tuple<nk_backend, ModeDtype>> {};

TEST_P(QuantEveryMode, MatchesReferenceOverShapesAndOptions) {
  const nk_backend backend = std::get<0>(GetParam());
  NK_SKIP_IF_UNAVAILABLE(backend);
  const ModeDtype m = std::get<1>(GetParam());
  const int64_t block = block_of(m);
  // Block modes: multiples of the block; TENSOR/TOKEN also odd sizes.
  std::vector<int64_t> hiddens;
  if (block == 1) {
    hiddens = {1, 29, 128, 4096 + 128, 7168, 17389};
  } else {
    // 7168: 224 threads x 4 vectors on a GPU (whole warps, not a power of two: launch_config).
    for (int64_t h : {int64_t{32}, int64_t{64}, int64_t{128}, int64_t{384}, int64_t{4096 + 128},
                      int64_t{7168}}) {
      if (h % block == 0) hiddens.push_back(h);
    }
  }
  static const nk_dtype kInputs[][2] = {{NK_BFLOAT16, NK_FLOAT32},
                                        {NK_FLOAT32, NK_FLOAT32},
                                        {NK_FLOAT16, NK_FLOAT16},
                                        {NK_BFLOAT16, NK_BFLOAT16}};
  Rng rng;
  int variant = 0;
  for (int64_t rows : {1, 3, 37}) {
    for (int64_t hidden : hiddens) {
      const int k = variant++;
      QuantCase c;
      c.mode = m.mode;
      c.y = m.y;
      c.block = m.block;
      c.fwd.rows = rows;
      c.fwd.hidden = hidden;
      c.fwd.x = kInputs[k % 4][0];
      c.fwd.w = kInputs[k % 4][1];
      // Options on and off across the cases of one mode.
      c.fwd.residual = k % 2 == 0;
      c.fwd.bias = k % 3 == 1;
      c.fwd.zero_centered = k % 3 == 2;
      c.fwd.weight = k % 5 != 4 || c.fwd.zero_centered;
      c.fwd.rstd = k % 2 == 1;
      c.fwd.eps = k % 4 == 3 ? 0.1f : 1e-6f;
      c.fwd.x_pad = k % 3 == 0 ? 3 : 0;  // strided rows
      c.fwd.y_pad = k % 4 == 1 ? 5 : 0;
      c.fwd.residual_pad = c.fwd.residual_out_pad = k % 4 == 2 ? 2 : 0;
      c.amax = k % 3 != 2;
      c.tensor_scale_factor = k % 2 == 0 ? 1.0 : 0.25;
      c.y_t = m.mode == NK_QUANT_TENSOR && k % 2 == 0;
      c.y_t_pad = k % 4 == 0 ? 7 : 0;
      test_quant_case(backend, c, rng);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(
    AllBackends, QuantEveryMode,
    ::testing::Combine(::testing::ValuesIn(all_backends()), ::testing::ValuesIn(all_mode_dtypes())),
    [](const auto& info) {
      return std::string(backend_label(std::get<0>(info.param))) + "_" +
             mode_dtype_name(std::get<1>(info.param));
    });

// ---- the pinned small register budget (pin_quant_registers) ----

// 16-bit x and weights, rows covered exactly by 16-byte vectors: on a GPU the kernels held to
// 56 registers, 12288 columns reshaped to 384 x 4 and 7168 as 224 x 4, and rows of 3 vectors per
// thread (the CPU runs the same cases against the reference). Every mode, with and without
// residual, bias, zero-centered. The CTA widths cover the row sum's forms: 16 warps (16384
// columns), 12, 8, 7, 5 and 3 (block_sum_by_quads pads the last three to whole quads), 2 warps
// with two rows per CTA (600 rows of 1536 columns), and under a warp.
class QuantPinnedShapes : public ::testing::TestWithParam<nk_backend> {};

TEST_P(QuantPinnedShapes, MatchReferenceInEveryMode) {
  NK_SKIP_IF_UNAVAILABLE(GetParam());
  Rng rng;
  int k = 0;
  for (const ModeDtype& m : all_mode_dtypes()) {
    // (12288 and 7168 columns: 384 x 4 and 224 x 4 vectors; 1536 and 384: 64 x 3 and 16 x 3,
    // an odd count, so BLOCK's e4m3 kernel quantizes its last item without a pair.)
    for (int64_t hidden : {int64_t{16384}, int64_t{12288}, int64_t{8192}, int64_t{7168},
                           int64_t{5120}, int64_t{3072}, int64_t{1536}, int64_t{384}}) {
      for (nk_dtype x : {NK_BFLOAT16, NK_FLOAT16}) {
        QuantCase c;
        c.mode = m.mode;
        c.y = m.y;
        c.block = m.block;
        c.fwd.rows = hidden == 1536 && x == NK_BFLOAT16 ? 600 : 6;
        c.fwd.hidden = hidden;
        c.fwd.x = c.fwd.w = x;
        c.fwd.residual = k % 2 == 0;
        c.fwd.bias = k % 3 == 1;  // TOKEN with a bias: the bounded kernel, same plan
        c.fwd.zero_centered = k % 3 == 2;
        c.fwd.rstd = true;
        c.amax = true;
        c.y_t = m.mode == NK_QUANT_TENSOR && k % 4 == 0;
        ++k;
        SCOPED_TRACE(c.describe());
        test_quant_case(GetParam(), c, rng);
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(AllBackends, QuantPinnedShapes, ::testing::ValuesIn(all_backends()),
                         [](const auto& info) { return backend_label(info.param); });

// ---- the rules that only show with particular data ----

class QuantRules : public ::testing::TestWithParam<nk_backend> {
 protected:
  void SetUp() override { NK_SKIP_IF_UNAVAILABLE(GetParam()); }
  nk_backend backend() const { return GetParam(); }
};

QuantCase base_case(nk_quant_mode mode, nk_dtype y, int64_t rows, int64_t hidden) {
  QuantCase c;
  c.mode = mode;
  c.y = y;
  c.fwd.rows = rows;
  c.fwd.hidden = hidden;
  c.fwd.x = NK_BFLOAT16;
  c.fwd.w = NK_FLOAT32;
  return c;
}

int64_t count_codes(const QuantOutcome& o, uint8_t code_a, uint8_t code_b) {
  int64_t n = 0;
  const Matrix& y = o.in.fwd.y;
  for (int64_t r = 0; r < y.rows; ++r) {
    for (int64_t j = 0; j < y.cols; ++j) {
      const uint8_t b = o.run.y[static_cast<size_t>(y.index(r, j))];
      n += b == code_a || b == code_b;
    }
  }
  return n;
}

TEST_P(QuantRules, TensorSaturatesLargeValues) {
  Rng rng;
  for (nk_dtype y : {NK_FLOAT8_E4M3, NK_FLOAT8_E5M2, NK_INT8}) {
    QuantCase c = base_case(NK_QUANT_TENSOR, y, 37, 4096 + 128);
    c.fwd.x = NK_FLOAT32;
    c.fwd.x_scale = 1e4;  // large inputs (and residual), normalized back to ~1
    c.fwd.residual = c.fwd.bias = true;
    c.tensor_scale_factor = 8.0;  // the largest values land 8x beyond qmax
    c.y_t = true;
    const QuantOutcome o = test_quant_case(backend(), c, rng);
    ASSERT_EQ(o.run.status, NK_SUCCESS);
    const uint8_t max = y == NK_FLOAT8_E4M3 ? 0x7e : y == NK_FLOAT8_E5M2 ? 0x7b : 0x7f;
    const uint8_t min = y == NK_INT8 ? 0x81 : 0x80 | max;  // -127 / -qmax
    const int64_t saturated = count_codes(o, max, min);
    EXPECT_GT(saturated, 10) << dtype_label(y) << ": no value saturated; the test is too weak";
  }
}

TEST_P(QuantRules, TokenZeroRowGetsFltMinScale) {
  Rng rng;
  for (nk_dtype y : {NK_FLOAT8_E4M3, NK_INT8}) {
    QuantCase c = base_case(NK_QUANT_TOKEN, y, 5, 29);
    c.zero_rows = {0, 3};  // no bias: v is exactly 0 on these rows
    c.fwd.residual = true;
    const QuantOutcome o = test_quant_case(backend(), c, rng);
    ASSERT_EQ(o.run.status, NK_SUCCESS);
    for (int64_t r : c.zero_rows) {
      float s;
      std::memcpy(&s, o.run.scales.data() + 4 * o.in.scales.index(r, 0), 4);
      EXPECT_EQ(s, FLT_MIN) << "row " << r;
      for (int64_t j = 0; j < c.fwd.hidden; ++j) {
        const uint8_t b = o.run.y[static_cast<size_t>(o.in.fwd.y.index(r, j))];
        EXPECT_TRUE(b == 0 || b == 0x80) << "row " << r << " col " << j << " code " << int{b};
      }
    }
    EXPECT_EQ(o.expected.scales[0], double{FLT_MIN});
  }
}

TEST_P(QuantRules, ScaleUpperBoundBinds) {
  Rng rng;
  struct Mode {
    nk_quant_mode mode;
    nk_dtype y;
    int64_t block;
  };
  for (const Mode m : {Mode{NK_QUANT_TOKEN, NK_FLOAT8_E4M3, 0}, Mode{NK_QUANT_TOKEN, NK_INT8, 0},
                       Mode{NK_QUANT_BLOCK, NK_FLOAT8_E5M2, 64}}) {
    QuantCase c = base_case(m.mode, m.y, 37, 384);
    c.block = m.block;
    c.ub_quantile = 0.5;  // half of the scales are above the bound
    c.fwd.bias = true;
    const QuantOutcome o = test_quant_case(backend(), c, rng);
    ASSERT_EQ(o.run.status, NK_SUCCESS);
    int64_t at_bound = 0, below = 0;
    for (int64_t i = 0; i < o.in.scales.rows * o.in.scales.cols; ++i) {
      float s;
      std::memcpy(&s, o.run.scales.data() + 4 * (o.in.scales.offset + i), 4);
      if (s == o.in.scale_ub) ++at_bound;
      if (s < o.in.scale_ub) ++below;
      EXPECT_LE(s, o.in.scale_ub);
    }
    EXPECT_GT(at_bound, 2) << "scale_ub " << o.in.scale_ub << " did not bind";
    EXPECT_GT(below, 2) << "scale_ub " << o.in.scale_ub << " bound every scale";
  }
}

TEST_P(QuantRules, TransposedOutputWithPaddedStrides) {
  Rng rng;
  // Shapes that are not multiples of a 64 x 64 tile, padded rows in y and y_t.
  for (const auto& [rows, hidden] : {std::pair<int64_t, int64_t>{67, 29},
                                     std::pair<int64_t, int64_t>{1, 4096 + 128},
                                     std::pair<int64_t, int64_t>{130, 200}}) {
    QuantCase c = base_case(NK_QUANT_TENSOR, NK_FLOAT8_E4M3, rows, hidden);
    c.y_t = true;
    c.y_t_pad = 13;
    c.fwd.y_pad = 3;
    c.fwd.residual = c.fwd.zero_centered = true;
    const QuantOutcome o = test_quant_case(backend(), c, rng);
    EXPECT_EQ(o.comparison.transposed_checked, rows * hidden);
  }
}

TEST_P(QuantRules, TransposedOutputOfWholeRuns) {
  // Shapes whose y_t allows the one-kernel plans' 32-byte runs (NK_TUNE_QUANT_FUSED_TRANSPOSE=1
  // or 2 on a GPU; launch_config's tests check which cluster each takes): clusters of 8 on few
  // rows (a last run short, CTAs with no rows), float32 x (4-element vectors), every option of
  // the forward; on the GPU also clusters of 1, 2 and 4 (enough runs to fill the SMs), where
  // the persistent kernel's clusters take several runs each (4100x4096, 2100x8192).
  // With the default setting (3) the 16-bit shapes take the ticketed grid (16-byte aligned rows
  // of y_t: pads that make the row stride a multiple of 16), over several bands and a last band
  // whose rows end inside a 16-row block (4230, 2100, 1000, 520 rows), transpose units of 224,
  // 256 and 384 columns, and 1, 4 and 8 rows per forward CTA; each of those shapes runs twice,
  // so the second run finds the band counters the first left (they must be back at zero).
  Rng rng;
  struct Shape {
    int64_t rows, hidden, y_t_pad;
    nk_dtype x, w;
  };
  std::vector<Shape> shapes = {Shape{64, 1024, 0, NK_BFLOAT16, NK_BFLOAT16},
                               Shape{80, 2048, 16, NK_BFLOAT16, NK_FLOAT32},
                               Shape{48, 8192, 0, NK_FLOAT16, NK_FLOAT16},
                               Shape{32, 4096, 32, NK_BFLOAT16, NK_BFLOAT16},
                               Shape{64, 992, 0, NK_FLOAT32, NK_FLOAT32}};
  if (backend() == NK_BACKEND_CUDA) {
    shapes.push_back(Shape{4100, 4096, 12, NK_FLOAT16, NK_FLOAT32});
    const std::vector<Shape> ticketed = {Shape{4230, 1024, 10, NK_BFLOAT16, NK_BFLOAT16},
                                         Shape{2100, 8192, 12, NK_BFLOAT16, NK_BFLOAT16},
                                         Shape{1000, 7168, 8, NK_BFLOAT16, NK_BFLOAT16},
                                         Shape{520, 12288, 8, NK_FLOAT16, NK_FLOAT16},
                                         Shape{4096, 2048, 0, NK_BFLOAT16, NK_BFLOAT16}};
    for (int pass = 0; pass < 2; ++pass) {
      shapes.insert(shapes.end(), ticketed.begin(), ticketed.end());
    }
  }
  for (const Shape& s : shapes) {
    SCOPED_TRACE(testing::Message() << s.rows << "x" << s.hidden);
    QuantCase c = base_case(NK_QUANT_TENSOR, NK_FLOAT8_E4M3, s.rows, s.hidden);
    c.fwd.x = s.x;
    c.fwd.w = s.w;
    c.y_t = true;
    c.y_t_pad = s.y_t_pad;
    c.fwd.residual = c.fwd.bias = s.rows % 3 != 0;
    c.fwd.zero_centered = s.hidden % 2048 == 0;
    c.tensor_scale_factor = 0.25;
    const QuantOutcome o = test_quant_case(backend(), c, rng);
    EXPECT_EQ(o.comparison.transposed_checked, s.rows * s.hidden);
  }
}

TEST_P(QuantRules, WideRowsInEveryMode) {
  // Rows that the CUDA planner gives the streaming kernel (262144 columns) and clusters of four
  // 256-thread CTAs (32768 columns; with NK_TUNE_QUANT_WIDE_ROW_THREADS=0, ctest entry
  // quant_wide_rows_one_cta, one CTA per row at the large register budget).
  Rng rng;
  for (const auto& [rows, hidden] : {std::pair<int64_t, int64_t>{2, 262144},
                                     std::pair<int64_t, int64_t>{531, 32768}}) {
    if (backend() == NK_BACKEND_CPU && rows * hidden > (int64_t{1} << 20)) continue;
    for (nk_quant_mode mode : {NK_QUANT_TENSOR, NK_QUANT_TOKEN, NK_QUANT_BLOCK, NK_QUANT_MXFP8}) {
      SCOPED_TRACE(testing::Message() << rows << "x" << hidden << " mode " << int(mode));
      QuantCase c = base_case(mode, NK_FLOAT8_E4M3, rows, hidden);
      test_quant_case(backend(), c, rng);
    }
  }
}

TEST_P(QuantRules, TensorWithoutExtrasOverManyRows) {
  // Per-tensor without residual or bias, 16-bit x and weights, many rows (more than a wave of
  // CTAs), rows held exactly by the CUDA plans (16384 as 512 x 4 vectors, 4096 as 128 x 4) and
  // not (1000 columns: 125 vectors), strided x and y, with and without a (zero-centered) weight.
  // (Written for a persistent pipelined kernel, measured slower and removed: docs/notes.md,
  // twenty-fifth session.)
  Rng rng;
  struct Shape {
    int64_t rows, hidden;
  };
  int k = 0;
  for (const Shape s :
       {Shape{800, 16384}, Shape{2200, 4096}, Shape{1500, 1000}, Shape{61, 12288}}) {
    if (backend() == NK_BACKEND_CPU && s.rows * s.hidden > (int64_t{1} << 22)) continue;
    for (nk_dtype x : {NK_BFLOAT16, NK_FLOAT16}) {
      QuantCase c = base_case(NK_QUANT_TENSOR, k % 2 ? NK_FLOAT8_E5M2 : NK_FLOAT8_E4M3, s.rows,
                              s.hidden);
      c.fwd.x = c.fwd.w = x;
      c.fwd.residual = c.fwd.bias = false;
      c.fwd.zero_centered = k % 3 == 1;
      c.fwd.weight = k % 3 != 2;
      c.fwd.rstd = k % 2 == 0;
      c.fwd.x_pad = k % 2 ? 8 : 0;
      c.fwd.y_pad = k % 2 ? 0 : 24;
      c.amax = k % 4 != 3;
      c.tensor_scale_factor = k % 2 ? 0.25 : 1.0;
      ++k;
      SCOPED_TRACE(c.describe());
      test_quant_case(backend(), c, rng);
    }
  }
}

TEST_P(QuantRules, MisalignedScalesAndOffsets) {
  Rng rng;
  for (nk_quant_mode mode : {NK_QUANT_TOKEN, NK_QUANT_BLOCK, NK_QUANT_MXFP8}) {
    QuantCase c = base_case(mode, NK_FLOAT8_E4M3, 3, 256);
    c.scales_offset = 1;  // one element off the allocation's alignment
    c.fwd.x_offset = c.fwd.y_offset = 1;
    c.fwd.x_pad = 1;
    c.fwd.y_pad = 7;
    c.fwd.zero_strides = false;
    test_quant_case(backend(), c, rng);
  }
}

TEST_P(QuantRules, InPlaceResidualOut) {
  Rng rng;
  QuantCase c = base_case(NK_QUANT_BLOCK, NK_FLOAT8_E4M3, 7, 4096);
  c.fwd.residual = c.fwd.residual_out_is_residual = true;
  test_quant_case(backend(), c, rng);
}

// Same inputs, same bits: twice on the backend, and on the CPU with different thread counts.
TEST_P(QuantRules, Deterministic) {
  Rng rng;
  for (nk_quant_mode mode : {NK_QUANT_TENSOR, NK_QUANT_TOKEN, NK_QUANT_BLOCK, NK_QUANT_MXFP8}) {
    QuantCase c = base_case(mode, NK_FLOAT8_E4M3, 301, 4096);
    c.fwd.residual = c.fwd.bias = true;
    c.y_t = mode == NK_QUANT_TENSOR;
    SCOPED_TRACE(c.describe());
    const QuantInputs in = make_quant_inputs(c, rng);
    const QuantRun first = run_quant(backend(), c, in);
    if (backend() == NK_BACKEND_CPU) setenv("NK_CPU_THREADS", "3", 1);
    const QuantRun second = run_quant(backend(), c, in);
    if (backend() == NK_BACKEND_CPU) unsetenv("NK_CPU_THREADS");
    EXPECT_EQ(first.y, second.y);
    EXPECT_EQ(first.scales, second.scales);
    EXPECT_EQ(first.amax, second.amax);
    EXPECT_EQ(first.y_t, second.y_t);
    EXPECT_EQ(first.residual_out, second.residual_out);
  }
}

INSTANTIATE_TEST_SUITE_P(AllBackends, QuantRules, ::testing::ValuesIn(all_backends()),
                         [](const auto& info) { return backend_label(info.param); });

}  // namespace
}  // namespace nktest
