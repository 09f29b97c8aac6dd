#include "bench_types.h"

#include "dtype_names.h"

namespace nktool {

nk_dtype y_dtype(const BenchConfig& c) {
  return c.quant != NK_QUANT_NONE ? c.quant_dtype : c.out_dtype;
}

double scales_bytes(const Shape& s, const BenchConfig& c) {
  const double rows = static_cast<double>(s.rows);
  switch (c.quant) {
    case NK_QUANT_TOKEN: return rows * 4;
    case NK_QUANT_BLOCK: return rows * static_cast<double>(s.hidden / c.quant_block) * 4;
    case NK_QUANT_MXFP8: return rows * static_cast<double>(s.hidden / 32);
    default: return 0;
  }
}

std::string bench_inputs_text(const BenchConfig& c) {
  std::string t = !c.weight ? std::string("no weight (scale 1)")
                            : std::string("weight ") + short_name(c.weight_dtype) +
                                  (c.zero_centered ? " near 0, zero-centered (scale 1 + weight)"
                                                   : " near 1");
  if (c.bias) t += std::string(", bias ") + short_name(c.weight_dtype) + " random";
  if (c.quant == NK_QUANT_NONE && c.out_dtype != c.dtype) {
    t += std::string(", y written as ") + short_name(c.out_dtype);
  }
  return t;
}

double fwd_bytes(const Shape& s, const BenchConfig& c) {
  const double e = static_cast<double>(nk_dtype_size(c.dtype));
  const double ew = static_cast<double>(nk_dtype_size(c.weight_dtype));
  const double ey = static_cast<double>(nk_dtype_size(y_dtype(c)));
  const double mn = static_cast<double>(s.rows) * static_cast<double>(s.hidden);
  double bytes = mn * (e + ey) + (c.weight ? static_cast<double>(s.hidden) * ew : 0.0);
  if (c.bias) bytes += static_cast<double>(s.hidden) * ew;
  if (c.residual) bytes += mn * 2 * e;
  if (c.transposed) bytes += mn * ey;
  return bytes + scales_bytes(s, c);
}

double bwd_bytes(const Shape& s, const BenchConfig& c) {
  const double e = static_cast<double>(nk_dtype_size(c.dtype));
  const double ew = static_cast<double>(nk_dtype_size(c.weight_dtype));
  const double mn = static_cast<double>(s.rows) * static_cast<double>(s.hidden);
  double bytes = mn * (e + e + e) + (c.weight ? 2.0 * static_cast<double>(s.hidden) * ew : 0.0);
  if (c.bias) bytes += static_cast<double>(s.hidden) * ew;
  if (c.residual) bytes += mn * e;
  return bytes;
}

std::string fwd_bytes_formula(const BenchConfig& c) {
  std::string f = c.residual ? "rows*hidden*(size(x)+size(y)+size(residual)+size(residual_out))"
                             : "rows*hidden*(size(x)+size(y))";
  if (c.weight) f += " + hidden*size(w)";
  if (c.bias) f += " + hidden*size(bias)";
  if (c.transposed) f += " + rows*hidden*size(y_t)";
  if (c.quant == NK_QUANT_TOKEN) f += " + rows*4 (scales)";
  if (c.quant == NK_QUANT_BLOCK) f += " + rows*hidden/block*4 (scales)";
  if (c.quant == NK_QUANT_MXFP8) f += " + rows*hidden/32 (e8m0 scales)";
  return f;
}

std::string bwd_bytes_formula(const BenchConfig& c) {
  std::string f = c.residual ? "rows*hidden*(size(x)+size(dy)+size(dx)+size(dresidual_out))"
                             : "rows*hidden*(size(x)+size(dy)+size(dx))";
  if (c.weight) f += " + 2*hidden*size(w)";
  if (c.bias) f += " + hidden*size(dbias)";
  return f;
}

std::string bench_skip_reason(const Shape& s, const BenchConfig& c) {
  if (c.quant_block > 0 && s.hidden % c.quant_block != 0) {
    return "hidden is not a multiple of the " + std::to_string(c.quant_block) +
           "-element quantization block";
  }
  return "";
}

}  // namespace nktool
