// One backward test case end to end, like fwd_harness.h: random inputs in a described layout,
// poisoned outputs and workspace, a call on a backend, checks against the float64 reference.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "support.h"

namespace nktest {

struct BwdCase {
  int64_t rows = 1, hidden = 1;
  nk_dtype x = NK_FLOAT32, w = NK_FLOAT32, dy = NK_FLOAT32;
  bool weight = true, zero_centered = false, dresidual = false, dweight = true, dbias = false;
  float eps = 1e-6f;  // used to make rstd (as the forward would have)
  int64_t dy_pad = 0, x_pad = 0, dresidual_pad = 0, dx_pad = 0;
  int64_t dy_offset = 0, x_offset = 0, dresidual_offset = 0, dx_offset = 0, weight_offset = 0,
          rstd_offset = 0, dweight_offset = 0, dbias_offset = 0;
  bool dx_is_dy = false;         // in place: dx is the same view as dy (needs dy == x dtype)
  bool dx_is_dresidual = false;  // in place: dx is the same view as dresidual_out
  bool dx_is_x = false;          // in place: dx is the same view as x
  bool zero_strides = true;
  std::string describe() const;
};

struct BwdInputs {
  Matrix dy, x, rstd, weight, dresidual;  // rstd: float32, [1, rows]
  Matrix dx, dweight, dbias;              // layouts + poison (dx aliases an input in place)
};

struct BwdRun {
  nk_status status = NK_ERROR_INTERNAL;
  std::string message;
  size_t workspace_bytes = 0;
  std::vector<uint8_t> dx, dweight, dbias;
};

// rstd is computed in float64 from x and eps and rounded to float32 (what a correct forward
// writes), so backward tests do not depend on the library's forward.
BwdInputs make_bwd_inputs(const BwdCase& c, Rng& rng);
BwdRun run_bwd(nk_backend backend, const BwdCase& c, const BwdInputs& in);
nk_rms_norm_bwd_args host_bwd_args(const BwdCase& c, const BwdInputs& in);
void check_bwd_against_reference(const BwdCase& c, const BwdInputs& in, const BwdRun& run);
void test_bwd_case(nk_backend backend, const BwdCase& c, Rng& rng);

}  // namespace nktest
