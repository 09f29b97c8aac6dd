// Float64 reference implementation of RMSNorm forward and backward, and comparison helpers.
// The oracle for the tests and for `normkit check`. Reads host buffers described by the same
// argument structs as the C API (host pointers; row strides may be 0 = contiguous).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "normkit/normkit.h"

namespace normkit::ref {

struct FwdResult {
  std::vector<double> y;             // [rows * hidden], dense
  std::vector<double> residual_out;  // [rows * hidden], dense; empty without residual
  std::vector<double> rstd;          // [rows]
};

// Mirrors the documented semantics exactly, including that residual_out is rounded to x's
// dtype before it is normalized.
FwdResult rms_norm_fwd(const nk_rms_norm_fwd_args& args);

struct BwdResult {
  std::vector<double> dx;       // [rows * hidden], dense
  std::vector<double> dweight;  // [hidden]
  std::vector<double> dbias;    // [hidden]
};

// Analytic gradient in float64 at the rstd the caller passes (args.rstd, widened to double):
// the backward arguments carry no eps, so rstd cannot be recomputed from x.
BwdResult rms_norm_bwd(const nk_rms_norm_bwd_args& args);

// Worst error of `actual` (a strided [rows, cols] host buffer of `dtype`; row_stride 0 =
// dense) against `expected` (dense). The error of one element is
//   |actual - expected| / (|expected| + floor),  floor = 1e-2 * max(rms(expected), 1e-30)
// so values near zero are judged against the row-set's scale rather than themselves.
struct Comparison {
  double worst_error = 0;   // as defined above; NaN/Inf or an unwritten poison value -> inf
  int64_t worst_row = -1, worst_col = -1;
  double actual_at_worst = 0, expected_at_worst = 0;
  bool passed = false;      // worst_error <= tolerance
  double tolerance = 0;
  std::string describe() const;  // one line for logs
};
// `allowance` (optional, dense like `expected`): an element within this absolute distance of
// its expected value counts as exact, whatever its relative error (for sums whose terms cancel:
// their float32 rounding bound, see tests/cpp/bwd_harness.cpp).
Comparison compare(const void* actual, nk_dtype dtype, int64_t rows, int64_t cols,
                   int64_t row_stride, const std::vector<double>& expected, double tolerance,
                   const std::vector<double>* allowance = nullptr);

// Tolerance for a result computed in float32 and stored in `out` dtype, from inputs whose
// lowest precision is `in` (accounts for the output's rounding and float32 accumulation over
// `hidden` terms).
double tolerance_for(nk_dtype out, nk_dtype in, int64_t hidden);

}  // namespace normkit::ref
