#include "check_compare.h"

#include <cmath>

#include "dtype_names.h"
#include "text_format.h"

namespace nktool {

namespace ref = normkit::ref;

namespace {

// rms(rstd * dy * w_eff) / rms(expected dx): how far dx cancels below its terms' scale.
double dx_conditioning(const CheckCase& c, CaseTensors& t, const std::vector<double>& dx) {
  double terms = 0, result = 0;
  for (int64_t r = 0; r < c.rows; ++r) {
    const double rstd = t.bwd_rstd.get(0, r);
    for (int64_t j = 0; j < c.hidden; ++j) {
      double w = c.has_weight ? t.weight.get(0, j) : 1.0;
      if (c.zero_centered) w += 1.0;
      const double g = rstd * t.dy.get(r, j) * w;
      terms += g * g;
    }
  }
  for (double v : dx) result += v * v;
  if (result == 0) return terms == 0 ? 1.0 : 1e30;
  return std::sqrt(terms / result);
}

}  // namespace

ExpectedResults compute_expected(const CheckCase& c, CaseTensors& t) {
  ExpectedResults e;
  const nk_rms_norm_fwd_args fwd = make_fwd_args(c, t, host_pointer);
  e.fwd = ref::rms_norm_fwd(fwd);
  const nk_rms_norm_bwd_args bwd = make_bwd_args(c, t, host_pointer);
  e.bwd = ref::rms_norm_bwd(bwd);
  e.dx_conditioning = dx_conditioning(c, t, e.bwd.dx);
  return e;
}

bool CaseVerdict::passed() const {
  if (!problems.empty()) return false;
  for (const OutputCheck& o : outputs) {
    if (o.present && !o.comparison.passed) return false;
  }
  return true;
}

namespace {

OutputCheck compare_matrix(const char* name, const HostTensor& actual,
                           const std::vector<double>& expected, nk_dtype input_precision,
                           int64_t accumulated_terms) {
  OutputCheck o;
  o.name = name;
  o.present = true;
  o.comparison = ref::compare(
      actual.data(), actual.dtype(), actual.rows(), actual.cols(), actual.row_stride(), expected,
      ref::tolerance_for(actual.dtype(), input_precision, accumulated_terms));
  return o;
}

// dweight and dbias are sums over rows of terms with random signs. A float32 sum's rounding
// error follows its partial sums, which are as large as the result's rms (~sqrt(rows) terms),
// so the error is about u * sqrt(rows) of that rms; compare() then judges an element near zero
// against 1% of the rms, a further 100x. tolerance_for() counts the sqrt(rows) growth without
// that 100x, which a plain sequential float32 sum over 33 rows already exceeds (~6 ulps of the
// rms seen), so a 3-sigma allowance for it is added here: 2 * 100 * 2^-24 * sqrt(rows).
OutputCheck compare_column_sum(const char* name, const HostTensor& actual,
                               const std::vector<double>& expected, nk_dtype input_precision,
                               int64_t rows) {
  const double tolerance = ref::tolerance_for(actual.dtype(), input_precision, rows) +
                           200.0 * 0x1p-24 * std::sqrt(static_cast<double>(rows));
  OutputCheck o;
  o.name = name;
  o.present = true;
  o.comparison = ref::compare(actual.data(), actual.dtype(), 1, actual.cols(), 0, expected,
                              tolerance);
  return o;
}

OutputCheck absent(const char* name) {
  OutputCheck o;
  o.name = name;
  return o;
}

}  // namespace

void check_integrity(const std::vector<IntegrityItem>& items,
                     std::vector<std::string>& problems) {
  for (const IntegrityItem& item : items) {
    if (item.tensor->empty()) continue;
    const int64_t stray = item.tensor->bytes_written_outside();
    if (stray) {
      problems.push_back(strprintf("%s: %lld bytes written outside its elements (row padding, "
                                   "guard or misalignment offset)",
                                   item.name, static_cast<long long>(stray)));
    }
    if (!item.may_change && !item.tensor->unchanged_since_snapshot()) {
      problems.push_back(std::string(item.name) + ": input was modified");
    }
  }
}

CaseVerdict judge(const CheckCase& c, CaseTensors& t, const ExpectedResults& e) {
  CaseVerdict v;
  // The lowest-precision input that feeds each output sets its tolerance, with the number of
  // float32 terms accumulated: hidden for row reductions, rows for dweight/dbias.
  const nk_dtype w_in = c.has_weight ? c.weight_dtype : NK_FLOAT32;
  const nk_dtype fwd_in = lower_precision(c.x_dtype, w_in);
  const nk_dtype bwd_in = lower_precision(lower_precision(c.y_dtype, c.x_dtype), w_in);

  v.outputs.push_back(compare_matrix("y", *t.y_out(), e.fwd.y, fwd_in, c.hidden));
  v.outputs.push_back(c.residual ? compare_matrix("res", *t.residual_out_out(),
                                                  e.fwd.residual_out, c.x_dtype, c.hidden)
                                 : absent("res"));
  // rstd is a [rows] vector; compare it as a rows x 1 matrix.
  {
    OutputCheck o;
    o.name = "rstd";
    o.present = true;
    o.comparison = ref::compare(t.rstd.data(), NK_FLOAT32, c.rows, 1, 1, e.fwd.rstd,
                                ref::tolerance_for(NK_FLOAT32, c.x_dtype, c.hidden));
    v.outputs.push_back(o);
  }
  {
    OutputCheck dx = compare_matrix("dx", *t.dx_out(), e.bwd.dx, bwd_in, c.hidden);
    // dx = rstd * (g - xhat * mean(g * xhat)) cancels when hidden is tiny (for hidden 1 it is
    // ~eps-sized: xhat = +-1 up to eps), while float32 arithmetic costs a few ulp of rstd*|g|,
    // not of |dx|. Widen the float32 part of the tolerance by how much larger rstd*|g| is than
    // dx overall; with no cancellation the ratio is ~1 and nothing changes. A dx that forgets
    // the projection term is still off by the full ratio and fails.
    const double ratio = e.dx_conditioning;
    if (ratio > 1) {
      dx.comparison = ref::compare(
          t.dx_out()->data(), t.dx_out()->dtype(), c.rows, c.hidden, t.dx_out()->row_stride(), e.bwd.dx,
          dx.comparison.tolerance +
              4 * (ratio - 1) * ref::tolerance_for(NK_FLOAT32, NK_FLOAT32, c.hidden));
    }
    v.outputs.push_back(dx);
  }
  const nk_dtype grad_in = lower_precision(c.y_dtype, c.x_dtype);
  v.outputs.push_back(c.want_dweight ? compare_column_sum("dw", t.dweight, e.bwd.dweight,
                                                          grad_in, c.rows)
                                     : absent("dw"));
  v.outputs.push_back(c.want_dbias
                          ? compare_column_sum("db", t.dbias, e.bwd.dbias, c.y_dtype, c.rows)
                          : absent("db"));

  // Integrity: no stray writes into padding, guards or around vectors; inputs untouched
  // unless an output aliases them.
  const std::vector<IntegrityItem> all = {{"x", &t.x, t.y.empty()},
             {"residual", &t.residual, c.residual && t.residual_out.empty()},
             {"weight", &t.weight, false},
             {"bias", &t.bias, false},
             {"y", &t.y, true},
             {"residual_out", &t.residual_out, true},
             {"rstd", &t.rstd, true},
             {"dy", &t.dy, t.dx.empty()},
             {"x (backward)", &t.bwd_x, false},
             {"rstd (backward)", &t.bwd_rstd, false},
             {"dresidual_out", &t.dresidual_out, false},
             {"dx", &t.dx, true},
             {"dweight", &t.dweight, true},
             {"dbias", &t.dbias, true}};
  check_integrity(all, v.problems);
  return v;
}

}  // namespace nktool
