// Comparison of a backend's output with the float64 reference, and the tolerances used.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>

#include "common/dtype_host.h"
#include "reference/reference.h"

namespace normkit::ref {

std::string Comparison::describe() const {
  char line[320];
  std::snprintf(line, sizeof line,
                "%s: worst error %.3g (tolerance %.3g) at row %lld col %lld: actual %.9g, "
                "expected %.9g",
                passed ? "ok" : "MISMATCH", worst_error, tolerance,
                static_cast<long long>(worst_row), static_cast<long long>(worst_col),
                actual_at_worst, expected_at_worst);
  return line;
}

Comparison compare(const void* actual, nk_dtype dtype, int64_t rows, int64_t cols,
                   int64_t row_stride, const std::vector<double>& expected, double tolerance,
                   const std::vector<double>* allowance) {
  Comparison c;
  c.tolerance = tolerance;
  const int64_t stride = row_stride == 0 ? cols : row_stride;
  if (rows < 1 || cols < 1 || expected.size() != static_cast<size_t>(rows * cols) ||
      host_dtype_size(dtype) == 0 || (allowance && allowance->size() != expected.size())) {
    c.worst_error = std::numeric_limits<double>::infinity();  // a malformed call never passes
    return c;
  }
  double sum_squares = 0;
  for (double e : expected) sum_squares += e * e;
  const double rms = std::sqrt(sum_squares / static_cast<double>(expected.size()));
  const double floor = 1e-2 * std::max(rms, 1e-30);

  c.worst_error = -1;
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t j = 0; j < cols; ++j) {
      const double a = load_as_float(actual, dtype, r * stride + j);
      const double e = expected[r * cols + j];
      double err;
      if (!std::isfinite(a) || !std::isfinite(e)) {
        err = (a == e) ? 0.0 : std::numeric_limits<double>::infinity();  // NaN never equals
      } else if (allowance && std::fabs(a - e) <= (*allowance)[r * cols + j]) {
        err = 0.0;
      } else {
        err = std::fabs(a - e) / (std::fabs(e) + floor);
      }
      if (err > c.worst_error) {
        c.worst_error = err;
        c.worst_row = r;
        c.worst_col = j;
        c.actual_at_worst = a;
        c.expected_at_worst = e;
      }
    }
  }
  c.passed = c.worst_error <= tolerance;
  return c;
}

// tolerance = 1.125 * u(out) + 2^-24 * (1024 + 16 * sqrt(hidden))
//
// u(out) is the unit roundoff of the output dtype (half an ulp, relative): 2^-8 for bfloat16,
// 2^-11 for float16, 2^-24 for float32. One correct round-to-nearest-even store can cost up to
// u; the 1/8 margin absorbs a float32 result that sits next to a rounding tie. A truncating or
// otherwise wrong rounding costs up to 2u and fails, as does any real bug (wrong eps, a
// missing bias, an off-by-one row), which costs far more.
//
// The second term is the float32 arithmetic. Its error is a few ulp of the largest terms that
// feed an element (a reduction over `hidden` terms adds error growing like sqrt(n) in practice,
// whatever the summation order). Where terms cancel (a bias against the normalized value; the
// products summed into dweight), the element is near zero and compare() judges it against 1% of
// the rms, so those few ulp read ~100-1000x larger; over millions of random elements such
// cancellations do occur (measured worst: ~600 ulp for dweight over 3 rows x 2^20 columns).
// Hence 1024 ulp plus 16 sqrt(n): 6.2e-5 for short rows, 6.5e-5 at hidden 4096, 1e-4 at 65537,
// 3.6e-4 at 2^20. Only float32 outputs feel it; a real bug in a float32 path (a wrong eps with
// small inputs, a missing bias, a wrong row) errs by 1e-2 or more.
//
// `in` does not widen the bound: the reference reads the very same (already rounded) inputs and
// rounds residual_out exactly as the backends do, so low-precision inputs add no error.
double tolerance_for(nk_dtype out, nk_dtype in, int64_t hidden) {
  (void)in;
  double u;
  switch (out) {
    case NK_BFLOAT16: u = 0x1p-8; break;
    case NK_FLOAT16: u = 0x1p-11; break;
    default: u = 0x1p-24; break;
  }
  const double n = static_cast<double>(std::max<int64_t>(hidden, 1));
  return 1.125 * u + 0x1p-24 * (1024.0 + 16.0 * std::sqrt(n));
}

}  // namespace normkit::ref
