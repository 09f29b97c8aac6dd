#include "check_quant_compare.h"

#include "check_compare.h"
#include "dtype_names.h"
#include "text_format.h"

namespace nktool {

namespace ref = normkit::ref;

QuantExpected compute_quant_expected(const QuantCheckCase& c, QuantCaseTensors& t) {
  QuantExpected e;
  e.result = ref::rms_norm_fwd_quant(make_quant_fwd_args(c, t, host_pointer));
  // The lowest-precision input feeding v sets its float32 error bound (as for the unquantized
  // y in check_compare.cpp); weight and bias share weight_dtype.
  const nk_dtype w_in = c.has_weight || c.has_bias ? c.weight_dtype : NK_FLOAT32;
  e.v_tolerance = ref::tolerance_for(NK_FLOAT32, lower_precision(c.x_dtype, w_in), c.hidden);
  return e;
}

bool QuantVerdict::passed() const {
  return codes.passed && (!has_residual_out || residual_out.passed) && rstd.passed &&
         problems.empty();
}

QuantVerdict judge_quant(const QuantCheckCase& c, QuantCaseTensors& t,
                         const QuantExpected& e) {
  QuantVerdict v;
  // The arguments of the call with host pointers: after the run they point at what the backend
  // wrote (copied back for CUDA), which is what compare_quant reads.
  const nk_rms_norm_fwd_args actual = make_quant_fwd_args(c, t, host_pointer);
  v.codes = ref::compare_quant(actual, e.result, e.v_tolerance);
  if (c.residual) {
    const HostTensor& out = *t.residual_out_out();
    v.has_residual_out = true;
    v.residual_out = ref::compare(out.data(), out.dtype(), c.rows, c.hidden, out.row_stride(),
                                  e.result.base.residual_out, 0.0);
  }
  v.rstd = ref::compare(t.rstd.data(), NK_FLOAT32, c.rows, 1, 1, e.result.base.rstd,
                        ref::tolerance_for(NK_FLOAT32, c.x_dtype, c.hidden));

  const std::vector<IntegrityItem> all = {{"x", &t.x, false},
             {"residual", &t.residual, c.in_place},
             {"weight", &t.weight, false},
             {"bias", &t.bias, false},
             {"scale", &t.scale, false},
             {"y", &t.y, true},
             {"residual_out", &t.residual_out, true},
             {"rstd", &t.rstd, true},
             {"scales", &t.scales, true},
             {"amax", &t.amax, true},
             {"y_t", &t.y_t, true}};
  check_integrity(all, v.problems);
  return v;
}

}  // namespace nktool
