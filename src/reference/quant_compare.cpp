// Comparison of a backend's quantized outputs with the float64 reference; the rule is stated at
// QuantComparison in quant_reference.h.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>

#include "common/dtype_host.h"
#include "reference/quant_reference.h"

namespace normkit::ref {
namespace {

constexpr double kUlp = 0x1p-24;  // float32 unit roundoff
// A float64 t this close (relative) to a midpoint is a near tie: a few float32 roundings (of
// the products and of rstd) can put any float32 computation on either side.
constexpr double kTieWidth = 8 * kUlp;

int64_t resolve(int64_t stride, int64_t n) { return stride == 0 ? n : stride; }

// The value of a backend's code, or NaN for a code Q never produces (NaN, Inf, int8 -128).
double code_value(uint8_t code, nk_dtype y) {
  if (y == NK_INT8) {
    const int v = static_cast<int8_t>(code);
    return v == -128 ? std::numeric_limits<double>::quiet_NaN() : v;
  }
  const double v = load_as_float(&code, y, 0);
  return std::isfinite(v) ? v : std::numeric_limits<double>::quiet_NaN();
}

struct Context {
  const QuantFwdResult& e;
  double v_tol, floor, qmax;
  QuantComparison& c;

  void note(const std::string& what) {
    if (c.first_problem.empty()) c.first_problem = what;
  }
  int64_t group_of(int64_t r, int64_t j) const {
    return r * (e.hidden / e.group_columns) + j / e.group_columns;
  }
  // Bound on the backend's float32 error in v (compare()'s measure).
  double v_error(double v) const { return v_tol * (std::fabs(v) + floor); }
  // Bound on |backend scale - reference scale| for a dynamic (TOKEN/BLOCK) scale.
  double scale_error(int64_t g) const {
    return v_error(e.group_amax[g]) / qmax + 3.0 * kUlp * e.scales[g];
  }
};

// Relative error bound of the backend's multiplier in group g.
double multiplier_error(const Context& x, int64_t g) {
  if (x.e.mode == NK_QUANT_TOKEN || x.e.mode == NK_QUANT_BLOCK) {
    return x.scale_error(g) / x.e.scales[g] + 2.0 * kUlp;  // reciprocal, product
  }
  return kUlp;  // TENSOR, MXFP8: only the product v * multiplier rounds
}

// Checks the scales; fills `multiplier` with what each group's codes are judged against (the
// reference's, or the backend's exponent where an e8m0 byte is legitimately one off).
void check_scales(Context& x, const nk_rms_norm_fwd_args& actual, std::vector<double>& multiplier) {
  const QuantFwdResult& e = x.e;
  multiplier = e.multiplier;
  if (e.mode == NK_QUANT_TENSOR) return;
  const int64_t groups = static_cast<int64_t>(e.scales.size());
  x.c.scales = groups;
  if (!actual.scales) {
    x.c.scales_wrong = groups;
    x.note("scales is NULL");
    return;
  }
  char text[256];
  for (int64_t g = 0; g < groups; ++g) {
    if (e.mode == NK_QUANT_MXFP8) {
      const int byte = static_cast<const uint8_t*>(actual.scales)[g];
      const int e_ref = e.exponents[g], e_act = byte - 127;
      if (e_act == e_ref) continue;
      // One off is fine where the block amax is within its float32 error of the power of two
      // between the two exponents: either side of it is a correct rounding of the amax.
      const int emax = e.y_dtype == NK_FLOAT8_E5M2 ? 15 : 8;
      const double boundary = std::ldexp(1.0, std::max(e_ref, e_act) + emax);
      const double a = e.group_amax[g];
      if (byte != 255 && std::abs(e_act - e_ref) == 1 &&
          std::fabs(a - boundary) <= x.v_error(a)) {
        ++x.c.scale_boundary;
        multiplier[g] = std::ldexp(1.0, -e_act);
        continue;
      }
      ++x.c.scales_wrong;
      std::snprintf(text, sizeof text,
                    "scale byte %lld is %d (2^%d); expected %d (block amax %.9g)",
                    static_cast<long long>(g), byte, e_act, e_ref + 127, a);
      x.note(text);
      continue;
    }
    float s;
    std::memcpy(&s, static_cast<const char*>(actual.scales) + g * 4, 4);
    const double err = std::fabs(static_cast<double>(s) - e.scales[g]) / x.scale_error(g);
    x.c.worst_scale_error = std::max(x.c.worst_scale_error, std::isnan(err) ? INFINITY : err);
    if (!(err <= 1.0)) {
      ++x.c.scales_wrong;
      std::snprintf(text, sizeof text, "scale %lld is %.9g; expected %.9g (block amax %.9g)",
                    static_cast<long long>(g), static_cast<double>(s), e.scales[g],
                    e.group_amax[g]);
      x.note(text);
    }
  }
}

void check_codes(Context& x, const nk_rms_norm_fwd_args& actual,
                 const std::vector<double>& multiplier) {
  const QuantFwdResult& e = x.e;
  const int64_t stride = resolve(actual.y_row_stride, e.hidden);
  const uint8_t* y = static_cast<const uint8_t*>(actual.y);
  char text[320];
  for (int64_t r = 0; r < e.rows; ++r) {
    for (int64_t j = 0; j < e.hidden; ++j) {
      const int64_t i = r * e.hidden + j, g = x.group_of(r, j);
      const double v = e.base.y[i], t = v * multiplier[g];
      const double expected = quantize_value(t, e.y_dtype);
      const double got = code_value(y[r * stride + j], e.y_dtype);
      ++x.c.elements;
      if (got == expected) {  // +0 == -0
        ++x.c.exact;
        continue;
      }
      // Q is monotonic: the codes a t' in [t - delta, t + delta] can round to lie between these.
      const double delta = std::fabs(multiplier[g]) * x.v_error(v) +
                           std::fabs(t) * multiplier_error(x, g);
      const double low = quantize_value(t - delta, e.y_dtype);
      const double high = quantize_value(t + delta, e.y_dtype);
      if (got >= low && got <= high) {  // false for NaN
        // Near ties are common with low-precision inputs: with bfloat16 x and w, t is a ratio of
        // short integers times a constant (e.g. TENSOR with scale = c / amax), often a midpoint
        // up to the float32 rounding of the scale. Either side is right: counted apart.
        const double near = std::fabs(t) * kTieWidth;
        const bool tie = quantize_value(t - near, e.y_dtype) != quantize_value(t + near, e.y_dtype);
        ++(tie ? x.c.ties : x.c.boundary);
        continue;
      }
      ++x.c.wrong;
      std::snprintf(text, sizeof text,
                    "y[%lld][%lld] = %.9g (code 0x%02x); expected %.9g (v %.9g * %.9g = %.9g)",
                    static_cast<long long>(r), static_cast<long long>(j), got,
                    y[r * stride + j], expected, v, multiplier[g], t);
      x.note(text);
    }
  }
}

void check_amax(Context& x, const nk_rms_norm_fwd_args& actual) {
  if (!actual.amax) return;
  x.c.amax_checked = true;
  x.c.amax_actual = *actual.amax;
  const double err = std::fabs(x.c.amax_actual - x.e.amax) / x.v_error(x.e.amax);
  x.c.amax_error = std::isnan(err) ? INFINITY : err;
  if (!(err <= 1.0)) {
    char text[160];
    std::snprintf(text, sizeof text, "amax is %.9g; expected %.9g", x.c.amax_actual, x.e.amax);
    x.note(text);
  }
}

void check_transposed(Context& x, const nk_rms_norm_fwd_args& actual) {
  if (!actual.y_t) return;
  const QuantFwdResult& e = x.e;
  const int64_t ys = resolve(actual.y_row_stride, e.hidden);
  const int64_t ts = resolve(actual.y_t_row_stride, e.rows);
  const uint8_t* y = static_cast<const uint8_t*>(actual.y);
  const uint8_t* y_t = static_cast<const uint8_t*>(actual.y_t);
  for (int64_t j = 0; j < e.hidden; ++j) {
    for (int64_t r = 0; r < e.rows; ++r) {
      ++x.c.transposed_checked;
      if (y_t[j * ts + r] == y[r * ys + j]) continue;
      ++x.c.transposed_wrong;
      char text[160];
      std::snprintf(text, sizeof text, "y_t[%lld][%lld] is 0x%02x; y[%lld][%lld] is 0x%02x",
                    static_cast<long long>(j), static_cast<long long>(r), y_t[j * ts + r],
                    static_cast<long long>(r), static_cast<long long>(j), y[r * ys + j]);
      x.note(text);
    }
  }
}

}  // namespace

std::string QuantComparison::describe() const {
  char line[640];
  std::snprintf(line, sizeof line,
                "%s: %lld codes: %lld exact, %lld at ties, %lld boundary (limit %lld), %lld wrong; "
                "%lld scales "
                "(%lld wrong, %lld e8m0 boundary, worst error %.3g of allowed); amax %s "
                "(error %.3g of allowed); y_t %lld checked, %lld wrong%s%s",
                passed ? "ok" : "MISMATCH", static_cast<long long>(elements),
                static_cast<long long>(exact), static_cast<long long>(ties),
                static_cast<long long>(boundary),
                static_cast<long long>(boundary_limit), static_cast<long long>(wrong),
                static_cast<long long>(scales), static_cast<long long>(scales_wrong),
                static_cast<long long>(scale_boundary), worst_scale_error,
                amax_checked ? "checked" : "not given", amax_error,
                static_cast<long long>(transposed_checked),
                static_cast<long long>(transposed_wrong), first_problem.empty() ? "" : "; first: ",
                first_problem.c_str());
  return line;
}

QuantComparison compare_quant(const nk_rms_norm_fwd_args& actual, const QuantFwdResult& expected,
                              double v_tolerance) {
  QuantComparison c;
  const bool consistent =
      actual.y && actual.rows == expected.rows && actual.hidden == expected.hidden &&
      actual.quant == expected.mode && actual.y_dtype == expected.y_dtype &&
      expected.base.y.size() == static_cast<size_t>(expected.rows * expected.hidden) &&
      expected.group_columns > 0;
  if (!consistent) {
    c.first_problem = "actual and expected describe different calls (or y is NULL)";
    return c;  // never passes
  }
  double sum_squares = 0;
  for (double v : expected.base.y) sum_squares += v * v;
  const double rms = std::sqrt(sum_squares / static_cast<double>(expected.base.y.size()));
  Context x{expected, v_tolerance, 1e-2 * std::max(rms, 1e-30),
            quantize_value(INFINITY, expected.y_dtype), c};

  std::vector<double> multiplier;
  check_scales(x, actual, multiplier);
  check_codes(x, actual, multiplier);
  check_amax(x, actual);
  check_transposed(x, actual);
  c.boundary_limit = 4 + c.elements / 1000;
  c.passed = c.wrong == 0 && c.boundary <= c.boundary_limit && c.scales_wrong == 0 &&
             (!c.amax_checked || c.amax_error <= 1.0) && c.transposed_wrong == 0;
  if (c.boundary > c.boundary_limit && c.first_problem.empty()) {
    c.first_problem = "too many boundary mismatches";
  }
  return c;
}

}  // namespace normkit::ref
