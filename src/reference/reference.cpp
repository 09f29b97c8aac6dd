// Float64 RMSNorm forward and backward, written for clarity rather than speed: the oracle the
// tests and `normkit check` compare the backends against.
#include "reference/reference.h"

#include <cmath>
#include <stdexcept>
#include <string>

#include "common/dtype_host.h"

namespace normkit::ref {
namespace {

int64_t resolve(int64_t stride, int64_t hidden) { return stride == 0 ? hidden : stride; }

double load(const void* base, nk_dtype dtype, int64_t index) {
  return static_cast<double>(load_as_float(base, dtype, index));
}

void require(bool ok, const std::string& what) {
  if (!ok) throw std::invalid_argument("normkit::ref: " + what);
}

// w_eff of the documented semantics, in float64.
std::vector<double> effective_weight(const void* weight, nk_dtype dtype, int64_t hidden,
                                     bool zero_centered) {
  std::vector<double> w(static_cast<size_t>(hidden), 1.0);
  if (!weight) return w;
  for (int64_t j = 0; j < hidden; ++j) {
    w[j] = load(weight, dtype, j) + (zero_centered ? 1.0 : 0.0);
  }
  return w;
}

}  // namespace

FwdResult rms_norm_fwd(const nk_rms_norm_fwd_args& a) {
  require(a.rows >= 1 && a.hidden >= 1, "rows and hidden must be >= 1");
  require(a.x != nullptr, "x is NULL");
  const int64_t R = a.rows, H = a.hidden;
  const int64_t xs = resolve(a.x_row_stride, H), rs = resolve(a.residual_row_stride, H);
  const std::vector<double> w = effective_weight(a.weight, a.weight_dtype, H, a.zero_centered);

  FwdResult out;
  out.y.resize(static_cast<size_t>(R * H));
  out.rstd.resize(static_cast<size_t>(R));
  if (a.residual) out.residual_out.resize(static_cast<size_t>(R * H));
  std::vector<double> s(static_cast<size_t>(H));
  for (int64_t r = 0; r < R; ++r) {
    for (int64_t j = 0; j < H; ++j) {
      s[j] = load(a.x, a.x_dtype, r * xs + j);
      if (a.residual) {
        // The backends add in float32 and store in x's dtype; the sum of two stored values is
        // exact in double, so round_to_dtype reproduces their residual_out bit for bit.
        s[j] = round_to_dtype(s[j] + load(a.residual, a.x_dtype, r * rs + j), a.x_dtype);
        out.residual_out[r * H + j] = s[j];
      }
    }
    double sum_squares = 0;
    for (int64_t j = 0; j < H; ++j) sum_squares += s[j] * s[j];
    const double rstd = 1.0 / std::sqrt(sum_squares / static_cast<double>(H) +
                                        static_cast<double>(a.eps));
    out.rstd[r] = rstd;
    for (int64_t j = 0; j < H; ++j) {
      double v = s[j] * rstd * w[j];
      if (a.bias) v += load(a.bias, a.weight_dtype, j);
      out.y[r * H + j] = v;
    }
  }
  return out;
}

// Deviation from the comment in reference.h, on purpose: rstd is taken from args.rstd (widened
// to double) instead of being recomputed, because the backward arguments carry no eps, so it
// cannot be recomputed exactly. The documented dx formula is the exact gradient at the given
// rstd, so this stays exact; a float32 rstd adds at most ~6e-8 relative error.
BwdResult rms_norm_bwd(const nk_rms_norm_bwd_args& a) {
  require(a.rows >= 1 && a.hidden >= 1, "rows and hidden must be >= 1");
  require(a.x != nullptr && a.dy != nullptr, "x and dy are required");
  require(a.rstd != nullptr, "rstd is required (the reference uses the forward's rstd)");
  const int64_t R = a.rows, H = a.hidden;
  const int64_t xs = resolve(a.x_row_stride, H), dys = resolve(a.dy_row_stride, H);
  const int64_t drs = resolve(a.dresidual_out_row_stride, H);
  const std::vector<double> w = effective_weight(a.weight, a.weight_dtype, H, a.zero_centered);

  BwdResult out;
  out.dx.resize(static_cast<size_t>(R * H));
  out.dweight.assign(static_cast<size_t>(H), 0.0);
  out.dbias.assign(static_cast<size_t>(H), 0.0);
  std::vector<double> xhat(static_cast<size_t>(H)), g(static_cast<size_t>(H));
  for (int64_t r = 0; r < R; ++r) {
    const double rstd = static_cast<double>(a.rstd[r]);
    double sum_gx = 0;
    for (int64_t j = 0; j < H; ++j) {
      const double dy = load(a.dy, a.dy_dtype, r * dys + j);
      xhat[j] = load(a.x, a.x_dtype, r * xs + j) * rstd;
      g[j] = dy * w[j];
      sum_gx += g[j] * xhat[j];
      out.dweight[j] += dy * xhat[j];
      out.dbias[j] += dy;
    }
    const double mean_gx = sum_gx / static_cast<double>(H);
    for (int64_t j = 0; j < H; ++j) {
      double v = rstd * (g[j] - xhat[j] * mean_gx);
      if (a.dresidual_out) v += load(a.dresidual_out, a.x_dtype, r * drs + j);
      out.dx[r * H + j] = v;
    }
  }
  return out;
}

}  // namespace normkit::ref
