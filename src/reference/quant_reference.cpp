// Float64 quantized forward: the documented rules of nk_quant_mode applied to the float64 v,
// with Q computed from the formats' definitions (not from src/common/quant_codes.h), so the
// reference is an independent oracle for the bit-level code.
#include "reference/quant_reference.h"

#include <cfloat>
#include <cmath>
#include <limits>
#include <stdexcept>
#include <string>

namespace normkit::ref {
namespace {

struct Format {
  int mantissa_bits;  // 0 for int8
  int emin;           // exponent of the smallest normal
  double qmax;
};

Format format_of(nk_dtype y) {
  switch (y) {
    case NK_FLOAT8_E4M3: return {3, -6, 448.0};
    case NK_FLOAT8_E5M2: return {2, -14, 57344.0};
    case NK_INT8: return {0, 0, 127.0};
    default: break;
  }
  throw std::invalid_argument("normkit::ref: " + std::to_string(static_cast<int>(y)) +
                              " is not a quantized dtype (expected e4m3, e5m2 or int8)");
}

// Spacing of the grid at magnitude a (a > 0, a <= qmax): 2^(max(floor(log2 a), emin) - M).
double quantum(double a, const Format& f) {
  const int e = std::max(std::ilogb(a), f.emin);
  return std::ldexp(1.0, e - f.mantissa_bits);
}

void require(bool ok, const std::string& what) {
  if (!ok) throw std::invalid_argument("normkit::ref::rms_norm_fwd_quant: " + what);
}

int64_t group_columns_of(const nk_rms_norm_fwd_args& a) {
  switch (a.quant) {
    case NK_QUANT_TENSOR:
    case NK_QUANT_TOKEN: return a.hidden;
    case NK_QUANT_BLOCK: {
      const int64_t b = a.quant_block == 0 ? 128 : a.quant_block;
      require(b == 32 || b == 64 || b == 128, "quant_block must be 0, 32, 64 or 128");
      return b;
    }
    case NK_QUANT_MXFP8:
      require(a.quant_block == 0 || a.quant_block == 32, "MXFP8 blocks are 32");
      return 32;
    default: break;
  }
  require(false, "quant must be TENSOR, TOKEN, BLOCK or MXFP8");
  return 0;
}

// MXFP8 exponent in float64: clamp(floor(log2 a) - emax, -127, 127), -127 for a == 0.
int mx_exponent(double a, nk_dtype y) {
  if (!(a > 0.0)) return -127;
  const int emax = y == NK_FLOAT8_E5M2 ? 15 : 8;
  const int e = std::ilogb(a) - emax;
  return std::min(127, std::max(-127, e));
}

}  // namespace

double quantize_value(double t, nk_dtype y) {
  const Format f = format_of(y);
  if (std::isnan(t)) return y == NK_INT8 ? 0.0 : t;
  const double a = std::fabs(t);
  if (a >= f.qmax) return std::copysign(f.qmax, t);  // rounding can only reach qmax or beyond
  if (y == NK_INT8) return std::nearbyint(t);        // default rounding: to nearest even
  if (a == 0.0) return t;
  const double step = quantum(a, f);
  // a / step is exact (a power-of-two division); nearbyint rounds it to nearest even, and a
  // carry into the next binade lands on its first value, which is a multiple of step too.
  return std::copysign(std::nearbyint(a / step) * step, t);
}

QuantFwdResult rms_norm_fwd_quant(const nk_rms_norm_fwd_args& a) {
  const Format f = format_of(a.y_dtype);
  const int64_t cols = group_columns_of(a);
  require(a.hidden >= 1 && a.hidden % cols == 0, "hidden must be a multiple of the block");
  require(a.quant != NK_QUANT_TENSOR || a.scale != nullptr, "TENSOR needs scale (host pointer)");
  require(a.y_dtype != NK_INT8 || a.quant == NK_QUANT_TENSOR || a.quant == NK_QUANT_TOKEN,
          "int8 is an output of TENSOR and TOKEN only");

  QuantFwdResult out;
  out.mode = a.quant;
  out.y_dtype = a.y_dtype;
  out.rows = a.rows;
  out.hidden = a.hidden;
  out.group_columns = cols;
  out.base = rms_norm_fwd(a);
  const std::vector<double>& v = out.base.y;
  const int64_t per_row = a.hidden / cols, groups = a.rows * per_row;
  out.t.resize(v.size());
  out.q.resize(v.size());
  out.group_amax.assign(static_cast<size_t>(groups), 0.0);
  out.multiplier.resize(static_cast<size_t>(groups));
  out.scales.resize(static_cast<size_t>(groups));
  if (a.quant == NK_QUANT_MXFP8) out.exponents.resize(static_cast<size_t>(groups));
  const double ub = a.scale_ub > 0.0f ? static_cast<double>(a.scale_ub)
                                      : std::numeric_limits<double>::infinity();

  for (int64_t g = 0; g < groups; ++g) {
    const int64_t first = (g / per_row) * a.hidden + (g % per_row) * cols;
    double m = 0;
    for (int64_t j = 0; j < cols; ++j) m = std::max(m, std::fabs(v[first + j]));
    out.group_amax[g] = m;
    out.amax = std::max(out.amax, m);
    double multiplier, scale;
    switch (a.quant) {
      case NK_QUANT_TENSOR:
        scale = multiplier = static_cast<double>(*a.scale);
        break;
      case NK_QUANT_MXFP8: {
        const int e = mx_exponent(m, a.y_dtype);
        out.exponents[g] = e;
        scale = std::ldexp(1.0, e);
        multiplier = std::ldexp(1.0, -e);
        break;
      }
      default:  // TOKEN, BLOCK
        scale = std::max(std::min(m / f.qmax, ub), static_cast<double>(FLT_MIN));
        multiplier = 1.0 / scale;
        break;
    }
    out.scales[g] = scale;
    out.multiplier[g] = multiplier;
    for (int64_t j = 0; j < cols; ++j) {
      out.t[first + j] = v[first + j] * multiplier;
      out.q[first + j] = quantize_value(out.t[first + j], a.y_dtype);
    }
  }
  return out;
}

}  // namespace normkit::ref
