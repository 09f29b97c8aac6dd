#include "quant_harness.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <sstream>

#include "common/quant_layout.h"

namespace nktest {
namespace {

FwdCase fwd_part(const QuantCase& c) {
  FwdCase f = c.fwd;
  f.y = c.y;
  f.y_is_x = false;  // an 8-bit y is never the same view as a float x
  return f;
}

// TENSOR scale and scale_ub from the float64 v of the inputs, so that they bind as asked.
void choose_scales(const QuantCase& c, QuantInputs& in) {
  if (c.mode != NK_QUANT_TENSOR && c.ub_quantile <= 0.0) return;
  const std::vector<double> v = normkit::ref::rms_norm_fwd(host_fwd_args(fwd_part(c), in.fwd)).y;
  const double qmax = normkit::ref::quantize_value(INFINITY, c.y);
  const int64_t H = c.fwd.hidden;
  if (c.mode == NK_QUANT_TENSOR) {
    double amax = 0;
    for (double e : v) amax = std::max(amax, std::fabs(e));
    in.scale_value = static_cast<float>(c.tensor_scale_factor * qmax / std::max(amax, 1e-30));
    in.scale = Matrix(NK_FLOAT32, 1, 1);
    in.scale.set(0, 0, in.scale_value);
    return;
  }
  const int64_t cols = normkit::quant_block_columns(c.mode, c.block, H);
  std::vector<double> scales;
  for (size_t first = 0; first < v.size(); first += static_cast<size_t>(cols)) {
    double m = 0;
    for (int64_t j = 0; j < cols; ++j) m = std::max(m, std::fabs(v[first + j]));
    scales.push_back(m / qmax);
  }
  std::sort(scales.begin(), scales.end());
  const size_t k = std::min(scales.size() - 1,
                            static_cast<size_t>(c.ub_quantile * static_cast<double>(scales.size())));
  in.scale_ub = static_cast<float>(scales[k]);
}

std::string mode_label(nk_quant_mode m) { return nk_quant_mode_name(m); }

}  // namespace

std::string QuantCase::describe() const {
  std::ostringstream s;
  s << "quant " << mode_label(mode) << " y " << dtype_label(y);
  if (block) s << " block " << block;
  if (mode == NK_QUANT_TENSOR) s << " scale factor " << tensor_scale_factor;
  if (ub_quantile > 0) s << " scale_ub at quantile " << ub_quantile;
  s << (amax ? " +amax" : "") << (y_t ? " +y_t" : "");
  if (y_t_pad) s << " y_t pad " << y_t_pad;
  if (scales_offset) s << " scales offset " << scales_offset;
  if (!zero_rows.empty()) s << " " << zero_rows.size() << " zero row(s)";
  s << "; " << fwd_part(*this).describe();
  return s.str();
}

QuantInputs make_quant_inputs(const QuantCase& c, Rng& rng) {
  QuantInputs in;
  const FwdCase f = fwd_part(c);
  in.fwd = make_fwd_inputs(f, rng);
  for (int64_t r : c.zero_rows) {
    for (int64_t j = 0; j < c.fwd.hidden; ++j) {
      in.fwd.x.set(r, j, 0.0f);
      if (c.fwd.residual) in.fwd.residual.set(r, j, 0.0f);
    }
  }
  const int64_t per_row = normkit::quant_scales_per_row(c.mode, c.block, c.fwd.hidden);
  if (per_row > 0) {
    in.scales = Matrix(normkit::quant_scale_dtype(c.mode), c.fwd.rows, per_row, 0, c.scales_offset);
  }
  if (c.amax) in.amax = Matrix(NK_FLOAT32, 1, 1);
  if (c.y_t) in.y_t = Matrix(c.y, c.fwd.hidden, c.fwd.rows, c.fwd.rows + c.y_t_pad);
  choose_scales(c, in);
  return in;
}

nk_rms_norm_fwd_args host_quant_args(const QuantCase& c, const QuantInputs& in) {
  nk_rms_norm_fwd_args a = host_fwd_args(fwd_part(c), in.fwd);
  a.y_dtype = c.y;
  a.quant = c.mode;
  a.quant_block = c.block;
  a.scale_ub = in.scale_ub;
  if (c.mode == NK_QUANT_TENSOR) a.scale = static_cast<const float*>(in.scale.first());
  return a;
}

nk_rms_norm_fwd_args actual_quant_args(const QuantCase& c, const QuantInputs& in,
                                       const QuantRun& run) {
  nk_rms_norm_fwd_args a = host_quant_args(c, in);
  a.y = const_cast<uint8_t*>(run.y.data()) + in.fwd.y.offset;
  a.y_row_stride = in.fwd.y.stride;
  if (!run.scales.empty()) {
    a.scales = const_cast<uint8_t*>(run.scales.data()) + in.scales.offset * in.scales.element_size();
  }
  if (!run.amax.empty()) a.amax = reinterpret_cast<float*>(const_cast<uint8_t*>(run.amax.data()));
  if (!run.y_t.empty()) {
    a.y_t = const_cast<uint8_t*>(run.y_t.data());
    a.y_t_row_stride = in.y_t.stride;
  }
  return a;
}

QuantRun run_quant(nk_backend backend, const QuantCase& c, const QuantInputs& in) {
  const FwdInputs& f = in.fwd;
  Tensor x(backend, f.x), residual, weight, bias, y(backend, f.y), residual_out, rstd;
  Tensor scale, scales, amax, y_t;
  nk_rms_norm_fwd_args a = host_quant_args(c, in);
  a.x = x.ptr();
  a.y = y.ptr();
  if (c.fwd.residual) {
    residual = Tensor(backend, f.residual);
    a.residual = residual.ptr();
    if (!c.fwd.residual_out_is_residual) residual_out = Tensor(backend, f.residual_out);
    a.residual_out = c.fwd.residual_out_is_residual ? residual.ptr() : residual_out.ptr();
  }
  if (c.fwd.weight) {
    weight = Tensor(backend, f.weight);
    a.weight = weight.ptr();
  }
  if (c.fwd.bias) {
    bias = Tensor(backend, f.bias);
    a.bias = bias.ptr();
  }
  if (c.fwd.rstd) {
    rstd = Tensor(backend, f.rstd);
    a.rstd = static_cast<float*>(rstd.ptr());
  }
  if (c.mode == NK_QUANT_TENSOR) {
    scale = Tensor(backend, in.scale);
    a.scale = static_cast<const float*>(scale.ptr());
  }
  if (in.scales.rows > 0) {
    scales = Tensor(backend, in.scales);
    a.scales = scales.ptr();
  }
  if (c.amax) {
    amax = Tensor(backend, in.amax);
    a.amax = static_cast<float*>(amax.ptr());
  }
  if (c.y_t) {
    y_t = Tensor(backend, in.y_t);
    a.y_t = y_t.ptr();
    a.y_t_row_stride = c.y_t_pad == 0 && c.fwd.zero_strides ? 0 : in.y_t.stride;
  }

  QuantRun run;
  run.status = nk_rms_norm_fwd(&a, backend, nullptr);
  run.message = nk_last_error();
  EXPECT_EQ(run.status, NK_SUCCESS) << nk_status_name(run.status) << ": " << run.message;
  synchronize(backend);
  run.y = y.fetch();
  if (c.fwd.residual) {
    run.residual_out = c.fwd.residual_out_is_residual ? residual.fetch() : residual_out.fetch();
  }
  if (c.fwd.rstd) run.rstd = rstd.fetch();
  if (in.scales.rows > 0) run.scales = scales.fetch();
  if (c.amax) run.amax = amax.fetch();
  if (c.y_t) run.y_t = y_t.fetch();
  return run;
}

double v_tolerance(const QuantCase& c) {
  return normkit::ref::tolerance_for(NK_FLOAT32, lowest_precision(c.fwd.x, c.fwd.w),
                                     c.fwd.hidden);
}

normkit::ref::QuantComparison check_quant_against_reference(
    const QuantCase& c, const QuantInputs& in, const QuantRun& run,
    const normkit::ref::QuantFwdResult& expected) {
  const normkit::ref::QuantComparison q =
      normkit::ref::compare_quant(actual_quant_args(c, in, run), expected, v_tolerance(c));
  static const bool verbose = std::getenv("NK_TEST_VERBOSE") != nullptr;
  if (verbose) std::printf("[quant] %s\n", q.describe().c_str());
  EXPECT_TRUE(q.passed) << q.describe();
  expect_padding_untouched(in.fwd.y, run.y, "y");
  if (in.scales.rows > 0) expect_padding_untouched(in.scales, run.scales, "scales");
  if (c.amax) expect_padding_untouched(in.amax, run.amax, "amax");
  if (c.y_t) expect_padding_untouched(in.y_t, run.y_t, "y_t");
  if (c.fwd.residual) {
    expect_close(compare_matrix(in.fwd.residual_out, run.residual_out,
                                expected.base.residual_out, 0.0),
                 "residual_out (bit-exact)");
    expect_padding_untouched(in.fwd.residual_out, run.residual_out, "residual_out");
  }
  if (c.fwd.rstd) {
    expect_close(compare_matrix(in.fwd.rstd, run.rstd, expected.base.rstd,
                                rstd_tolerance(c.fwd.hidden)),
                 "rstd");
    expect_padding_untouched(in.fwd.rstd, run.rstd, "rstd");
  }
  return q;
}

QuantOutcome test_quant_case(nk_backend backend, const QuantCase& c, Rng& rng) {
  SCOPED_TRACE(c.describe());
  NK_SEED_TRACE(rng);
  QuantOutcome o;
  o.in = make_quant_inputs(c, rng);
  o.expected = normkit::ref::rms_norm_fwd_quant(host_quant_args(c, o.in));
  o.run = run_quant(backend, c, o.in);
  if (o.run.status != NK_SUCCESS) return o;
  o.comparison = check_quant_against_reference(c, o.in, o.run, o.expected);
  return o;
}

}  // namespace nktest
