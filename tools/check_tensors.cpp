#include "check_tensors.h"

#include <cmath>

#include "check_layout.h"
#include "random.h"

namespace nktool {

std::vector<HostTensor*> CaseTensors::inputs() {
  return non_empty({&x, &residual, &weight, &bias, &dy, &bwd_x, &bwd_rstd, &dresidual_out});
}

std::vector<HostTensor*> CaseTensors::outputs() {
  return non_empty({&y, &residual_out, &rstd, &dx, &dweight, &dbias});
}

std::vector<HostTensor*> CaseTensors::all() { return joined(inputs(), outputs()); }

void CaseTensors::reset_for_run() { restore_and_poison(inputs(), outputs()); }

CaseTensors make_case_tensors(const CheckCase& c) {
  Random rng(c.data_seed);
  LayoutChooser layout(c.rows, c.hidden, c.strided, c.misaligned, rng);
  CaseTensors t;
  const bool alias_y = c.in_place && c.x_dtype == c.y_dtype;
  const bool alias_dx = c.in_place && c.x_dtype == c.y_dtype;  // dy has y's dtype

  // Forward inputs. Magnitudes start at 0.05: no zeros, and no value so small that the check
  // would only see rounding noise. Tiny cases scale x so that mean(x^2) ~ eps.
  t.x = layout.matrix(c.x_dtype);
  const float x_scale = c.tiny_inputs ? 1e-3f : 1.0f;
  t.x.fill_random(rng, 0.05f * x_scale, 2.0f * x_scale);
  if (c.residual) {
    t.residual = layout.matrix(c.x_dtype);
    t.residual.fill_random(rng, 0.05f * x_scale, 2.0f * x_scale);
  }
  if (c.has_weight) {
    t.weight = layout.vector(c.weight_dtype, c.hidden);
    if (c.zero_centered) t.weight.fill_random(rng, 0.01f, 0.5f);  // scale 1 + w
    else t.weight.fill_random(rng, 0.25f, 1.5f);
  }
  if (c.has_bias) {
    t.bias = layout.vector(c.weight_dtype, c.hidden);
    t.bias.fill_random(rng, 0.01f, 1.0f);
  }

  // Forward outputs.
  if (!alias_y) t.y = layout.matrix(c.y_dtype);
  if (c.residual && !c.in_place) t.residual_out = layout.matrix(c.x_dtype);
  t.rstd = layout.vector(NK_FLOAT32, c.rows);

  // Backward inputs. In-place dx needs dy's stride, so dy is laid out first.
  t.dy = layout.matrix(c.y_dtype);
  t.dy.fill_random(rng, 0.05f, 2.0f);
  t.bwd_x = layout.matrix(c.x_dtype);
  t.bwd_x.fill_random(rng, 0.05f * x_scale, 2.0f * x_scale);
  // rstd of bwd_x as the forward would have stored it (float32), computed in double here from
  // the case's eps (the backward arguments carry no eps; backends and reference read this).
  t.bwd_rstd = layout.vector(NK_FLOAT32, c.rows);
  for (int64_t r = 0; r < c.rows; ++r) {
    double sum = 0;
    for (int64_t j = 0; j < c.hidden; ++j) {
      const double v = t.bwd_x.get(r, j);
      sum += v * v;
    }
    t.bwd_rstd.set(0, r, static_cast<float>(1.0 / std::sqrt(sum / c.hidden + c.eps)));
  }
  t.bwd_rstd.snapshot();
  if (c.dresidual_out) {
    t.dresidual_out = layout.matrix(c.x_dtype);
    t.dresidual_out.fill_random(rng, 0.05f, 2.0f);
  }

  // Backward outputs.
  if (!alias_dx) t.dx = layout.matrix(c.x_dtype);
  if (c.want_dweight) t.dweight = layout.vector(c.weight_dtype, c.hidden);
  if (c.want_dbias) t.dbias = layout.vector(c.weight_dtype, c.hidden);
  return t;
}

void* host_pointer(HostTensor& t) { return t.data(); }

namespace {
void* maybe(HostTensor& t, const PointerMap& ptr) { return t.empty() ? nullptr : ptr(t); }
}  // namespace

nk_rms_norm_fwd_args make_fwd_args(const CheckCase& c, CaseTensors& t, const PointerMap& ptr) {
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
  HostTensor& y = *t.y_out();
  a.y = ptr(y);
  a.y_dtype = c.y_dtype;
  a.y_row_stride = y.stride_argument();
  a.rstd = static_cast<float*>(ptr(t.rstd));
  return a;
}

nk_rms_norm_bwd_args make_bwd_args(const CheckCase& c, CaseTensors& t, const PointerMap& ptr) {
  nk_rms_norm_bwd_args a;
  nk_rms_norm_bwd_args_init(&a);
  a.rows = c.rows;
  a.hidden = c.hidden;
  a.dy = ptr(t.dy);
  a.dy_dtype = c.y_dtype;
  a.dy_row_stride = t.dy.stride_argument();
  a.x = ptr(t.bwd_x);
  a.x_dtype = c.x_dtype;
  a.x_row_stride = t.bwd_x.stride_argument();
  a.rstd = static_cast<const float*>(ptr(t.bwd_rstd));
  a.weight = maybe(t.weight, ptr);
  a.weight_dtype = c.weight_dtype;
  a.zero_centered = c.zero_centered ? 1 : 0;
  if (c.dresidual_out) {
    a.dresidual_out = ptr(t.dresidual_out);
    a.dresidual_out_row_stride = t.dresidual_out.stride_argument();
  }
  HostTensor& dx = *t.dx_out();
  a.dx = ptr(dx);
  a.dx_row_stride = dx.stride_argument();
  a.dweight = maybe(t.dweight, ptr);
  a.dbias = maybe(t.dbias, ptr);
  return a;
}

}  // namespace nktool
