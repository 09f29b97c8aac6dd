#include "bench_types.h"

namespace nktool {

double fwd_bytes(const Shape& s, const BenchConfig& c) {
  const double e = static_cast<double>(nk_dtype_size(c.dtype));
  const double mn = static_cast<double>(s.rows) * static_cast<double>(s.hidden);
  double bytes = mn * (e + e) + static_cast<double>(s.hidden) * e;
  if (c.residual) bytes += mn * 2 * e;
  return bytes;
}

double bwd_bytes(const Shape& s, const BenchConfig& c) {
  const double e = static_cast<double>(nk_dtype_size(c.dtype));
  const double mn = static_cast<double>(s.rows) * static_cast<double>(s.hidden);
  double bytes = mn * (e + e + e) + 2.0 * static_cast<double>(s.hidden) * e;
  if (c.residual) bytes += mn * e;
  return bytes;
}

std::string fwd_bytes_formula(const BenchConfig& c) {
  return c.residual ? "rows*hidden*(size(x)+size(y)+size(residual)+size(residual_out)) + "
                      "hidden*size(w)"
                    : "rows*hidden*(size(x)+size(y)) + hidden*size(w)";
}

std::string bwd_bytes_formula(const BenchConfig& c) {
  return c.residual ? "rows*hidden*(size(x)+size(dy)+size(dx)+size(dresidual_out)) + "
                      "2*hidden*size(w)"
                    : "rows*hidden*(size(x)+size(dy)+size(dx)) + 2*hidden*size(w)";
}

}  // namespace nktool
