#include "quant_ops.h"

#include "ops.h"
#include "quant_args.h"
#include "status.h"

namespace normkit_py {

namespace {

nk_quant_mode mode_or_throw(const std::string& name) {
  nk_quant_mode m;
  if (!quant_mode_from_name(name, &m) || m == NK_QUANT_NONE) {
    throw nb::value_error(
        ("mode is '" + name + "'; expected 'tensor', 'token', 'block' or 'mxfp8'").c_str());
  }
  return m;
}

nk_dtype y_dtype_or_throw(const std::string& name) {
  nk_dtype d;
  if (!quant_dtype_from_name(name, &d)) {
    throw nb::value_error(
        ("y_dtype is '" + name + "'; expected 'float8_e4m3', 'float8_e5m2' or 'int8'").c_str());
  }
  return d;
}

// A float32 [1] input or output beside x (scale, amax).
float* scalar_like_x(const ArrayFacts& a, const MatrixView& x, const char* name) {
  const VectorView v = vector_like_x(a, x, name, 1);
  require_dtype(v.dtype, NK_FLOAT32, name);
  return static_cast<float*>(v.data);
}

// `scales`: the C API writes rows * hidden / block elements of the mode's scale dtype densely,
// so the array must hold exactly that many, contiguously.
void* scales_pointer(const ArrayFacts& a, const MatrixView& x, nk_quant_mode mode,
                     int64_t block) {
  size_t bytes = 0;
  const VectorView s = bytes_view(a, "scales", &bytes);
  require_same_placement(x.place, s.place, "scales");
  const nk_dtype dtype = quant_scale_dtype(mode);
  if (dtype == NK_FLOAT32) {
    require_dtype(to_nk_dtype(a.dtype, "scales"), NK_FLOAT32, "scales");
  } else if (a.itemsize != 1) {
    throw nb::type_error("scales must have 1-byte elements (e8m0 scale bytes) with mode 'mxfp8'");
  }
  const int64_t columns = quant_scale_columns(mode, block, x.hidden);
  // Where hidden is no multiple of the block (or the mode writes no scales), the C API rejects
  // the call before writing anything, with its own message.
  if (columns > 0 && x.hidden % columns == 0) {
    const int64_t expected = x.rows * (x.hidden / columns);
    if (s.size != expected) {
      throw nb::value_error(("scales has " + std::to_string(s.size) + " elements; expected " +
                             std::to_string(x.rows) + " x " +
                             std::to_string(x.hidden / columns) + " = " +
                             std::to_string(expected))
                                .c_str());
    }
  }
  return s.data;
}

}  // namespace

void rms_norm_fwd_quant(const InArray& x, const OutArray& y, const std::string& y_dtype,
                        const std::string& mode, const InArray& weight, const InArray& bias,
                        const InArray& residual, const OutArray& residual_out,
                        const OutArray& rstd, const InArray& scale, float scale_ub,
                        const OutArray& scales, const OutArray& amax, const OutArray& y_t,
                        int64_t block, float eps, bool zero_centered, uintptr_t stream) {
  const MatrixView xv = matrix_view(facts_of(x), "x");
  const nk_dtype yd = y_dtype_or_throw(y_dtype);
  const nk_quant_mode qm = mode_or_throw(mode);
  const MatrixView yv = code_matrix_view(facts_of(y), "y", yd);
  require_shape(yv, xv.rows, xv.hidden, "y");
  require_same_placement(xv.place, yv.place, "y");

  nk_rms_norm_fwd_args a =
      fwd_args_without_y(xv, weight, bias, residual, residual_out, rstd, eps, zero_centered);
  a.y = yv.data;
  a.y_dtype = yd;
  a.y_row_stride = yv.row_stride;
  a.quant = qm;
  a.quant_block = block;
  a.scale_ub = scale_ub;
  if (scale.is_valid()) a.scale = scalar_like_x(facts_of(scale), xv, "scale");
  if (scales.is_valid()) a.scales = scales_pointer(facts_of(scales), xv, qm, block);
  if (amax.is_valid()) a.amax = scalar_like_x(facts_of(amax), xv, "amax");
  if (y_t.is_valid()) {
    const MatrixView t = code_matrix_view(facts_of(y_t), "y_t", yd);
    require_shape(t, xv.hidden, xv.rows, "y_t");
    require_same_placement(xv.place, t.place, "y_t");
    a.y_t = t.data;
    a.y_t_row_stride = t.row_stride;
  }
  call_fwd(a, xv.place.backend, stream);
}

void rms_norm_fwd_quant_ptr(int backend, uintptr_t stream, int64_t rows, int64_t hidden,
                            uintptr_t x, int x_dtype, int64_t x_row_stride, uintptr_t residual,
                            int64_t residual_row_stride, uintptr_t residual_out,
                            uintptr_t weight, uintptr_t bias, int weight_dtype, uintptr_t y,
                            int y_dtype, int mode, uintptr_t scale, float scale_ub,
                            uintptr_t scales, uintptr_t amax, uintptr_t y_t, int64_t block,
                            float eps, bool zero_centered) {
  nk_rms_norm_fwd_args a =
      fwd_args_from_ptrs(rows, hidden, x, x_dtype, x_row_stride, residual, residual_row_stride,
                         residual_out, weight, bias, weight_dtype, y, y_dtype, /*rstd=*/0, eps,
                         zero_centered);
  a.quant = static_cast<nk_quant_mode>(mode);
  a.quant_block = block;
  a.scale_ub = scale_ub;
  a.scale = reinterpret_cast<const float*>(scale);
  a.scales = reinterpret_cast<void*>(scales);
  a.amax = reinterpret_cast<float*>(amax);
  a.y_t = reinterpret_cast<void*>(y_t);
  call_fwd(a, static_cast<nk_backend>(backend), stream);
}

}  // namespace normkit_py
