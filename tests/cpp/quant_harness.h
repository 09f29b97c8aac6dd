// One quantized-forward test case end to end: the forward's random inputs (fwd_harness), a
// TENSOR scale or scale_ub chosen from the float64 reference so that they matter, a call on a
// backend with every output poisoned, and the checks against the float64 quantized reference.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "fwd_harness.h"
#include "reference/quant_reference.h"

namespace nktest {

struct QuantCase {
  FwdCase fwd;  // shape, input dtypes, options, pads and offsets (fwd.y is ignored)
  nk_quant_mode mode = NK_QUANT_TENSOR;
  nk_dtype y = NK_FLOAT8_E4M3;
  int64_t block = 0;  // quant_block as passed (0 = the mode's default)
  // TENSOR: scale = factor * qmax / amax(v), so factor > 1 saturates the largest values.
  double tensor_scale_factor = 1.0;
  // TOKEN/BLOCK: > 0 sets scale_ub to this quantile of the unbounded scales (so it binds).
  double ub_quantile = 0.0;
  bool amax = true;
  bool y_t = false;
  int64_t y_t_pad = 0;         // extra elements per row of y_t beyond rows
  int64_t scales_offset = 0;   // elements between the allocation and scales[0]
  std::vector<int64_t> zero_rows;  // rows of x (and residual) set to exactly 0
  std::string describe() const;
};

struct QuantInputs {
  FwdInputs fwd;                  // x, residual, weight, bias; y (8-bit), residual_out, rstd
  Matrix scale, scales, amax, y_t;  // scale: TENSOR input [1]; the rest poisoned outputs
  float scale_value = 0.0f, scale_ub = 0.0f;
};

struct QuantRun {
  nk_status status = NK_ERROR_INTERNAL;
  std::string message;
  std::vector<uint8_t> y, residual_out, rstd, scales, amax, y_t;  // whole allocations
};

QuantInputs make_quant_inputs(const QuantCase& c, Rng& rng);

// Uploads, calls nk_rms_norm_fwd (expecting success), downloads every output.
QuantRun run_quant(nk_backend backend, const QuantCase& c, const QuantInputs& in);

// Host args for the reference: inputs and quant fields (scale points at in.scale).
nk_rms_norm_fwd_args host_quant_args(const QuantCase& c, const QuantInputs& in);

// Host args describing what a run wrote (y, scales, amax, y_t into `run`'s buffers), for
// ref::compare_quant.
nk_rms_norm_fwd_args actual_quant_args(const QuantCase& c, const QuantInputs& in,
                                       const QuantRun& run);

// The float32 v tolerance of the case (ref::tolerance_for(NK_FLOAT32, inputs, hidden)).
double v_tolerance(const QuantCase& c);

// Checks every output against `expected` (ref::rms_norm_fwd_quant of host_quant_args): codes,
// scales, amax and y_t by ref::compare_quant, residual_out bit-exact, rstd within tolerance, no
// padding written. Returns the comparison.
normkit::ref::QuantComparison check_quant_against_reference(
    const QuantCase& c, const QuantInputs& in, const QuantRun& run,
    const normkit::ref::QuantFwdResult& expected);

// make + run + check with the case and seed in every message; returns the run and comparison.
struct QuantOutcome {
  QuantInputs in;
  QuantRun run;
  normkit::ref::QuantFwdResult expected;
  normkit::ref::QuantComparison comparison;
};
QuantOutcome test_quant_case(nk_backend backend, const QuantCase& c, Rng& rng);

}  // namespace nktest
