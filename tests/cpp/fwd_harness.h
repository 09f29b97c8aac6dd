// One forward test case end to end: random inputs in a described layout, a call on a backend
// with poisoned outputs, and the checks against the float64 reference.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "support.h"

namespace nktest {

struct FwdCase {
  int64_t rows = 1, hidden = 1;
  nk_dtype x = NK_FLOAT32, w = NK_FLOAT32, y = NK_FLOAT32;
  bool weight = true, bias = false, zero_centered = false, residual = false, rstd = true;
  float eps = 1e-6f;
  double x_scale = 1.0;  // x is N(0,1) * (a per-row factor in [1/4, 4]) * x_scale
  // Extra elements per row beyond hidden (0 = dense rows), per matrix.
  int64_t x_pad = 0, residual_pad = 0, residual_out_pad = 0, y_pad = 0;
  // Elements between the 256-byte-aligned allocation and the first element, per tensor
  // (1 = off 16-byte alignment by one element).
  int64_t x_offset = 0, residual_offset = 0, residual_out_offset = 0, y_offset = 0,
          weight_offset = 0, bias_offset = 0, rstd_offset = 0;
  bool y_is_x = false;                     // in place: y is the same view as x (needs y == x dtype)
  bool residual_out_is_residual = false;   // in place: residual_out is the same view as residual
  bool zero_strides = true;                // pass row stride 0 (not hidden) for dense matrices
  std::string describe() const;
};

// Host images of the inputs and of the (poisoned) outputs' layouts.
struct FwdInputs {
  Matrix x, residual, weight, bias;  // residual/weight/bias empty (rows 0) when unused
  Matrix y, residual_out, rstd;      // layouts + poison; y/residual_out alias inputs in place
};

// What a call left in the output allocations (whole allocations, padding included).
struct FwdRun {
  nk_status status = NK_ERROR_INTERNAL;
  std::string message;
  std::vector<uint8_t> y, residual_out, rstd;
};

FwdInputs make_fwd_inputs(const FwdCase& c, Rng& rng);

// Uploads the inputs, calls nk_rms_norm_fwd (expecting success), and downloads the outputs.
FwdRun run_fwd(nk_backend backend, const FwdCase& c, const FwdInputs& in);

// The C API args for host copies of `in` (what the reference reads).
nk_rms_norm_fwd_args host_fwd_args(const FwdCase& c, const FwdInputs& in);

// Checks every output against the float64 reference: y and rstd within tolerance_for,
// residual_out bit-exact, and no padding written.
void check_fwd_against_reference(const FwdCase& c, const FwdInputs& in, const FwdRun& run);

// Tolerance for the float32 rstd output.
double rstd_tolerance(int64_t hidden);

// make + run + check, with the case and the seed in every failure message.
void test_fwd_case(nk_backend backend, const FwdCase& c, Rng& rng);

}  // namespace nktest
