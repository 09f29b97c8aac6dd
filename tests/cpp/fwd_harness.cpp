#include "fwd_harness.h"

#include <cmath>
#include <sstream>

namespace nktest {

// rstd is a positive float32 with no cancellation (compare()'s floor never matters): a few
// roundings plus the mean-square reduction over `hidden` terms, 32 + 2 sqrt(hidden) ulp.
double rstd_tolerance(int64_t hidden) {
  return 0x1p-24 * (32.0 + 2.0 * std::sqrt(static_cast<double>(hidden)));
}

std::string FwdCase::describe() const {
  std::ostringstream s;
  s << "fwd rows " << rows << " hidden " << hidden << " x " << dtype_label(x) << " w "
    << dtype_label(w) << " y " << dtype_label(y) << (weight ? " +weight" : "")
    << (bias ? " +bias" : "") << (zero_centered ? " +zero_centered" : "")
    << (residual ? " +residual" : "") << (rstd ? " +rstd" : "") << " eps " << eps;
  if (x_scale != 1.0) s << " x_scale " << x_scale;
  if (x_pad || residual_pad || residual_out_pad || y_pad) {
    s << " pads(x " << x_pad << ", res " << residual_pad << ", res_out " << residual_out_pad
      << ", y " << y_pad << ")";
  }
  if (x_offset || residual_offset || residual_out_offset || y_offset || weight_offset ||
      bias_offset || rstd_offset) {
    s << " offsets(x " << x_offset << ", res " << residual_offset << ", res_out "
      << residual_out_offset << ", y " << y_offset << ", w " << weight_offset << ", b "
      << bias_offset << ", rstd " << rstd_offset << ")";
  }
  if (y_is_x) s << " in-place y=x";
  if (residual_out_is_residual) s << " in-place residual_out=residual";
  if (!zero_strides) s << " explicit strides";
  return s.str();
}

FwdInputs make_fwd_inputs(const FwdCase& c, Rng& rng) {
  FwdInputs in;
  const int64_t H = c.hidden;
  in.x = Matrix(c.x, c.rows, H, H + c.x_pad, c.x_offset);
  fill_rows_of_varied_scale(in.x, rng, c.x_scale);
  if (c.residual) {
    in.residual = Matrix(c.x, c.rows, H, H + c.residual_pad, c.residual_offset);
    fill_normal(in.residual, rng, 0.0, c.x_scale);
  }
  if (c.weight) {
    in.weight = Matrix(c.w, 1, H, 0, c.weight_offset);
    fill_normal(in.weight, rng, c.zero_centered ? 0.0 : 1.0, 0.1);  // w_eff near 1
  }
  if (c.bias) {
    in.bias = Matrix(c.w, 1, H, 0, c.bias_offset);
    fill_normal(in.bias, rng, 0.0, 0.2);
  }
  if (c.y_is_x) {
    EXPECT_EQ(c.y, c.x) << "in-place y=x needs y dtype == x dtype";
    in.y = in.x;
  } else {
    in.y = Matrix(c.y, c.rows, H, H + c.y_pad, c.y_offset);
  }
  if (c.residual) {
    in.residual_out = c.residual_out_is_residual
                          ? in.residual
                          : Matrix(c.x, c.rows, H, H + c.residual_out_pad, c.residual_out_offset);
  }
  if (c.rstd) in.rstd = Matrix(NK_FLOAT32, 1, c.rows, 0, c.rstd_offset);
  return in;
}

namespace {

nk_rms_norm_fwd_args base_args(const FwdCase& c) {
  nk_rms_norm_fwd_args a;
  nk_rms_norm_fwd_args_init(&a);
  a.rows = c.rows;
  a.hidden = c.hidden;
  a.x_dtype = c.x;
  a.weight_dtype = c.w;
  a.y_dtype = c.y;
  a.zero_centered = c.zero_centered ? 1 : 0;
  a.eps = c.eps;
  return a;
}

void set_strides(nk_rms_norm_fwd_args& a, const FwdCase& c, const FwdInputs& in) {
  a.x_row_stride = stride_arg(in.x, c.zero_strides);
  a.y_row_stride = stride_arg(in.y, c.zero_strides);
  if (c.residual) {
    a.residual_row_stride = stride_arg(in.residual, c.zero_strides);
    a.residual_out_row_stride = stride_arg(in.residual_out, c.zero_strides);
  }
}

}  // namespace

nk_rms_norm_fwd_args host_fwd_args(const FwdCase& c, const FwdInputs& in) {
  nk_rms_norm_fwd_args a = base_args(c);
  set_strides(a, c, in);
  a.x = in.x.first();
  if (c.residual) a.residual = in.residual.first();
  if (c.weight) a.weight = in.weight.first();
  if (c.bias) a.bias = in.bias.first();
  return a;  // outputs are not needed by the reference
}

FwdRun run_fwd(nk_backend backend, const FwdCase& c, const FwdInputs& in) {
  Tensor x(backend, in.x), residual, weight, bias, y, residual_out, rstd;
  nk_rms_norm_fwd_args a = base_args(c);
  set_strides(a, c, in);
  a.x = x.ptr();
  if (c.residual) {
    residual = Tensor(backend, in.residual);
    a.residual = residual.ptr();
    if (!c.residual_out_is_residual) residual_out = Tensor(backend, in.residual_out);
    a.residual_out = c.residual_out_is_residual ? residual.ptr() : residual_out.ptr();
  }
  if (c.weight) {
    weight = Tensor(backend, in.weight);
    a.weight = weight.ptr();
  }
  if (c.bias) {
    bias = Tensor(backend, in.bias);
    a.bias = bias.ptr();
  }
  if (!c.y_is_x) y = Tensor(backend, in.y);
  a.y = c.y_is_x ? x.ptr() : y.ptr();
  if (c.rstd) {
    rstd = Tensor(backend, in.rstd);
    a.rstd = static_cast<float*>(rstd.ptr());
  }

  FwdRun run;
  run.status = nk_rms_norm_fwd(&a, backend, nullptr);
  run.message = nk_last_error();
  EXPECT_EQ(run.status, NK_SUCCESS) << nk_status_name(run.status) << ": " << run.message;
  synchronize(backend);
  run.y = c.y_is_x ? x.fetch() : y.fetch();
  if (c.residual) run.residual_out = c.residual_out_is_residual ? residual.fetch() : residual_out.fetch();
  if (c.rstd) run.rstd = rstd.fetch();
  return run;
}

void check_fwd_against_reference(const FwdCase& c, const FwdInputs& in, const FwdRun& run) {
  const normkit::ref::FwdResult ref = normkit::ref::rms_norm_fwd(host_fwd_args(c, in));
  const nk_dtype in_prec = lowest_precision(c.x, c.w);
  expect_close(compare_matrix(in.y, run.y, ref.y,
                              normkit::ref::tolerance_for(c.y, in_prec, c.hidden)),
               "y");
  expect_padding_untouched(in.y, run.y, "y");
  if (c.residual) {
    // residual_out = x + residual in float32, rounded once to x's dtype: exact.
    expect_close(compare_matrix(in.residual_out, run.residual_out, ref.residual_out, 0.0),
                 "residual_out (bit-exact)");
    expect_padding_untouched(in.residual_out, run.residual_out, "residual_out");
  }
  if (c.rstd) {
    expect_close(compare_matrix(in.rstd, run.rstd, ref.rstd, rstd_tolerance(c.hidden)), "rstd");
    expect_padding_untouched(in.rstd, run.rstd, "rstd");
  }
}

void test_fwd_case(nk_backend backend, const FwdCase& c, Rng& rng) {
  SCOPED_TRACE(c.describe());
  NK_SEED_TRACE(rng);
  const FwdInputs in = make_fwd_inputs(c, rng);
  const FwdRun run = run_fwd(backend, c, in);
  if (run.status != NK_SUCCESS) return;
  check_fwd_against_reference(c, in, run);
}

}  // namespace nktest
