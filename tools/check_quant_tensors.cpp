#include "check_quant_tensors.h"

#include <algorithm>
#include <cmath>

#include "check_layout.h"
#include "common/quant_layout.h"
#include "random.h"
#include "reference/quant_reference.h"
#include "reference/reference.h"

namespace nktool {
namespace {

void* maybe(HostTensor& t, const PointerMap& ptr) { return t.empty() ? nullptr : ptr(t); }

// qmax of the case's y dtype, from the reference's Q (saturation of +inf).
double qmax_of(nk_dtype y) { return normkit::ref::quantize_value(INFINITY, y); }

// TENSOR: scale from the float64 amax of v. TOKEN/BLOCK with scale_ub: 0.95 x the median of
// the unbounded scales, so the bound binds on at least half of them (on the only one when a
// token case has one row) and not on the smaller ones.
void choose_scales(const QuantCheckCase& c, QuantCaseTensors& t, LayoutChooser& layout) {
  if (c.mode != NK_QUANT_TENSOR && !c.scale_ub) return;
  nk_rms_norm_fwd_args a = make_quant_fwd_args(c, t, host_pointer);
  a.quant = NK_QUANT_NONE;  // only v is needed here
  a.y_dtype = NK_FLOAT32;
  const std::vector<double> v = normkit::ref::rms_norm_fwd(a).y;
  const double qmax = qmax_of(c.y_dtype);
  if (c.mode == NK_QUANT_TENSOR) {
    double amax = 0;
    for (double e : v) amax = std::max(amax, std::fabs(e));
    const double factor = c.saturate ? 8.0 : c.scale_factor;
    t.scale_value = static_cast<float>(factor * qmax / std::max(amax, 1e-30));
    t.scale = layout.vector(NK_FLOAT32, 1);
    t.scale.set(0, 0, t.scale_value);
    t.scale.snapshot();
    return;
  }
  const int64_t cols = normkit::quant_block_columns(c.mode, c.block, c.hidden);
  std::vector<double> scales;
  for (size_t first = 0; first < v.size(); first += static_cast<size_t>(cols)) {
    double m = 0;
    for (size_t j = 0; j < static_cast<size_t>(cols); ++j) m = std::max(m, std::fabs(v[first + j]));
    scales.push_back(m / qmax);
  }
  std::nth_element(scales.begin(), scales.begin() + static_cast<std::ptrdiff_t>(scales.size() / 2),
                   scales.end());
  t.scale_ub = static_cast<float>(0.95 * scales[scales.size() / 2]);
}

}  // namespace

std::vector<HostTensor*> QuantCaseTensors::inputs() {
  return non_empty({&x, &residual, &weight, &bias, &scale});
}

std::vector<HostTensor*> QuantCaseTensors::outputs() {
  return non_empty({&y, &residual_out, &rstd, &scales, &amax, &y_t});
}

std::vector<HostTensor*> QuantCaseTensors::all() { return joined(inputs(), outputs()); }

void QuantCaseTensors::reset_for_run() { restore_and_poison(inputs(), outputs()); }

QuantCaseTensors make_quant_case_tensors(const QuantCheckCase& c) {
  Random rng(c.data_seed);
  LayoutChooser layout(c.rows, c.hidden, c.strided, c.misaligned, rng);
  QuantCaseTensors t;

  // Magnitudes start at 0.05 (times the scale): no zeros. Large cases put x near 1e4 (the mean
  // square near 1e8) and the weights up to 1e4, so v reaches ~1e4 and beyond e4m3's range.
  const float x_scale = c.large ? 1e4f : 1.0f;
  t.x = layout.matrix(c.x_dtype);
  t.x.fill_random(rng, 0.05f * x_scale, 2.0f * x_scale);
  if (c.residual) {
    t.residual = layout.matrix(c.x_dtype);
    t.residual.fill_random(rng, 0.05f * x_scale, 2.0f * x_scale);
  }
  if (c.has_weight) {
    t.weight = layout.vector(c.weight_dtype, c.hidden);
    if (c.large) t.weight.fill_random(rng, 1e2f, 1e4f);
    else if (c.zero_centered) t.weight.fill_random(rng, 0.01f, 0.5f);  // scale 1 + w
    else t.weight.fill_random(rng, 0.25f, 1.5f);
  }
  if (c.has_bias) {
    t.bias = layout.vector(c.weight_dtype, c.hidden);
    t.bias.fill_random(rng, 0.01f, c.large ? 1e3f : 1.0f);
  }

  t.y = layout.matrix(c.y_dtype);
  if (c.residual && !c.in_place) t.residual_out = layout.matrix(c.x_dtype);
  t.rstd = layout.vector(NK_FLOAT32, c.rows);
  const int64_t per_row = normkit::quant_scales_per_row(c.mode, c.block, c.hidden);
  if (per_row > 0) t.scales = layout.dense(normkit::quant_scale_dtype(c.mode), c.rows, per_row);
  if (c.want_amax) t.amax = layout.vector(NK_FLOAT32, 1);
  if (c.want_y_t) t.y_t = layout.matrix(c.y_dtype, c.hidden, c.rows);

  choose_scales(c, t, layout);
  return t;
}

nk_rms_norm_fwd_args make_quant_fwd_args(const QuantCheckCase& c, QuantCaseTensors& t,
                                         const PointerMap& ptr) {
  nk_rms_norm_fwd_args a;
  nk_rms_norm_fwd_args_init(&a);
  a.rows = c.rows;
  a.hidden = c.hidden;
  a.x = ptr(t.x);
  a.x_dtype = c.x_dtype;
  a.x_row_stride = t.x.stride_argument();
  if (c.residual) {
    HostTensor& out = *t.residual_out_out();
    a.residual = ptr(t.residual);
    a.residual_row_stride = t.residual.stride_argument();
    a.residual_out = ptr(out);
    a.residual_out_row_stride = out.stride_argument();
  }
  a.weight = maybe(t.weight, ptr);
  a.bias = maybe(t.bias, ptr);
  a.weight_dtype = c.weight_dtype;
  a.zero_centered = c.zero_centered ? 1 : 0;
  a.eps = c.eps;
  a.y = ptr(t.y);
  a.y_dtype = c.y_dtype;
  a.y_row_stride = t.y.stride_argument();
  a.rstd = static_cast<float*>(ptr(t.rstd));

  a.quant = c.mode;
  a.quant_block = c.block;
  a.scale = static_cast<const float*>(maybe(t.scale, ptr));
  a.scale_ub = t.scale_ub;
  a.scales = maybe(t.scales, ptr);
  a.amax = static_cast<float*>(maybe(t.amax, ptr));
  if (!t.y_t.empty()) {
    a.y_t = ptr(t.y_t);
    a.y_t_row_stride = t.y_t.stride_argument();
  }
  return a;
}

}  // namespace nktool
