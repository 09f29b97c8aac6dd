#include "ops.h"

#include "status.h"

namespace normkit_py {

MatrixView matrix_like_x(const ArrayFacts& a, const MatrixView& x, const char* name,
                         bool same_dtype) {
  MatrixView m = matrix_view(a, name);
  require_shape(m, x.rows, x.hidden, name);
  require_same_placement(x.place, m.place, name);
  if (same_dtype) require_dtype(m.dtype, x.dtype, name);
  return m;
}

VectorView vector_like_x(const ArrayFacts& a, const MatrixView& x, const char* name, int64_t size) {
  VectorView v = vector_view(a, name, size);
  require_same_placement(x.place, v.place, name);
  return v;
}

namespace {

nk_backend backend_from_name(const std::string& name) {
  if (name == "cpu") return NK_BACKEND_CPU;
  if (name == "cuda") return NK_BACKEND_CUDA;
  throw nb::value_error(("backend is '" + name + "'; expected 'cpu' or 'cuda'").c_str());
}

}  // namespace

nk_rms_norm_fwd_args fwd_args_without_y(const MatrixView& xv, const InArray& weight,
                                        const InArray& bias, const InArray& residual,
                                        const OutArray& residual_out, const OutArray& rstd,
                                        float eps, bool zero_centered) {
  nk_rms_norm_fwd_args a;
  nk_rms_norm_fwd_args_init(&a);
  a.rows = xv.rows;
  a.hidden = xv.hidden;
  a.x = xv.data;
  a.x_dtype = xv.dtype;
  a.x_row_stride = xv.row_stride;
  a.eps = eps;
  a.zero_centered = zero_centered ? 1 : 0;

  if (weight.is_valid()) {
    const VectorView w = vector_like_x(facts_of(weight), xv, "weight", xv.hidden);
    a.weight = w.data;
    a.weight_dtype = w.dtype;
  }
  if (bias.is_valid()) {
    const VectorView b = vector_like_x(facts_of(bias), xv, "bias", xv.hidden);
    if (weight.is_valid()) require_dtype(b.dtype, a.weight_dtype, "bias (weight's dtype)");
    a.bias = b.data;
    a.weight_dtype = b.dtype;
  }
  if (residual.is_valid() != residual_out.is_valid()) {
    throw nb::value_error("residual and residual_out must be given together");
  }
  if (residual.is_valid()) {
    const MatrixView r = matrix_like_x(facts_of(residual), xv, "residual", true);
    const MatrixView ro = matrix_like_x(facts_of(residual_out), xv, "residual_out", true);
    a.residual = r.data;
    a.residual_row_stride = r.row_stride;
    a.residual_out = ro.data;
    a.residual_out_row_stride = ro.row_stride;
  }
  if (rstd.is_valid()) {
    const VectorView r = vector_like_x(facts_of(rstd), xv, "rstd", xv.rows);
    require_dtype(r.dtype, NK_FLOAT32, "rstd");
    a.rstd = static_cast<float*>(r.data);
  }
  return a;
}

void call_fwd(const nk_rms_norm_fwd_args& args, nk_backend backend, uintptr_t stream) {
  nk_status status;
  {
    nb::gil_scoped_release release;
    status = nk_rms_norm_fwd(&args, backend, reinterpret_cast<void*>(stream));
  }
  check_status(status, "nk_rms_norm_fwd");
}

void rms_norm_fwd(const InArray& x, const OutArray& y, const InArray& weight, const InArray& bias,
                  const InArray& residual, const OutArray& residual_out, const OutArray& rstd,
                  float eps, bool zero_centered, uintptr_t stream) {
  const MatrixView xv = matrix_view(facts_of(x), "x");
  const MatrixView yv = matrix_like_x(facts_of(y), xv, "y", /*same_dtype=*/false);
  nk_rms_norm_fwd_args a =
      fwd_args_without_y(xv, weight, bias, residual, residual_out, rstd, eps, zero_centered);
  a.y = yv.data;
  a.y_dtype = yv.dtype;
  a.y_row_stride = yv.row_stride;
  call_fwd(a, xv.place.backend, stream);
}

void rms_norm_bwd(const InArray& dy, const InArray& x, const InArray& rstd, const OutArray& dx,
                  const InArray& weight, const InArray& dresidual_out, const OutArray& dweight,
                  const OutArray& dbias, const OutArray& workspace, bool zero_centered,
                  uintptr_t stream) {
  const MatrixView xv = matrix_view(facts_of(x), "x");
  const MatrixView dyv = matrix_like_x(facts_of(dy), xv, "dy", /*same_dtype=*/false);
  const MatrixView dxv = matrix_like_x(facts_of(dx), xv, "dx", true);
  const VectorView rv = vector_like_x(facts_of(rstd), xv, "rstd", xv.rows);
  require_dtype(rv.dtype, NK_FLOAT32, "rstd");

  nk_rms_norm_bwd_args a;
  nk_rms_norm_bwd_args_init(&a);
  a.rows = xv.rows;
  a.hidden = xv.hidden;
  a.dy = dyv.data;
  a.dy_dtype = dyv.dtype;
  a.dy_row_stride = dyv.row_stride;
  a.x = xv.data;
  a.x_dtype = xv.dtype;
  a.x_row_stride = xv.row_stride;
  a.rstd = static_cast<const float*>(rv.data);
  a.dx = dxv.data;
  a.dx_row_stride = dxv.row_stride;
  a.zero_centered = zero_centered ? 1 : 0;

  // weight, dweight and dbias share one dtype (weight_dtype in the C API).
  bool have_weight_dtype = false;
  auto take_weight_dtype = [&](nk_dtype dtype, const char* name) {
    if (have_weight_dtype) require_dtype(dtype, a.weight_dtype, name);
    a.weight_dtype = dtype;
    have_weight_dtype = true;
  };
  if (weight.is_valid()) {
    const VectorView w = vector_like_x(facts_of(weight), xv, "weight", xv.hidden);
    take_weight_dtype(w.dtype, "weight");
    a.weight = w.data;
  }
  if (dweight.is_valid()) {
    const VectorView w = vector_like_x(facts_of(dweight), xv, "dweight", xv.hidden);
    take_weight_dtype(w.dtype, "dweight (weight's dtype)");
    a.dweight = w.data;
  }
  if (dbias.is_valid()) {
    const VectorView b = vector_like_x(facts_of(dbias), xv, "dbias", xv.hidden);
    take_weight_dtype(b.dtype, "dbias (weight's dtype)");
    a.dbias = b.data;
  }
  if (dresidual_out.is_valid()) {
    const MatrixView d = matrix_like_x(facts_of(dresidual_out), xv, "dresidual_out", true);
    a.dresidual_out = d.data;
    a.dresidual_out_row_stride = d.row_stride;
  }
  if (workspace.is_valid()) {
    size_t bytes = 0;
    const VectorView w = bytes_view(facts_of(workspace), "workspace", &bytes);
    require_same_placement(xv.place, w.place, "workspace");
    a.workspace = w.data;
    a.workspace_bytes = bytes;
  }

  nk_status status;
  {
    nb::gil_scoped_release release;
    status = nk_rms_norm_bwd(&a, xv.place.backend, reinterpret_cast<void*>(stream));
  }
  check_status(status, "nk_rms_norm_bwd");
}

size_t rms_norm_bwd_workspace_size(int64_t rows, int64_t hidden, bool dweight, bool dbias,
                                   const std::string& backend) {
  return rms_norm_bwd_workspace_size_ptr(backend_from_name(backend), rows, hidden, dweight, dbias);
}

size_t rms_norm_bwd_workspace_size_ptr(int backend, int64_t rows, int64_t hidden, bool dweight,
                                       bool dbias) {
  // The query looks only at whether dweight/dbias are non-NULL, never through them.
  static char requested;
  nk_rms_norm_bwd_args a;
  nk_rms_norm_bwd_args_init(&a);
  a.rows = rows;
  a.hidden = hidden;
  a.dweight = dweight ? &requested : nullptr;
  a.dbias = dbias ? &requested : nullptr;
  size_t bytes = 0;
  check_status(
      nk_rms_norm_bwd_workspace_size(&a, static_cast<nk_backend>(backend), &bytes),
      "nk_rms_norm_bwd_workspace_size");
  return bytes;
}

nk_rms_norm_fwd_args fwd_args_from_ptrs(int64_t rows, int64_t hidden, uintptr_t x, int x_dtype,
                                        int64_t x_row_stride, uintptr_t residual,
                                        int64_t residual_row_stride, uintptr_t residual_out,
                                        uintptr_t weight, uintptr_t bias, int weight_dtype,
                                        uintptr_t y, int y_dtype, uintptr_t rstd, float eps,
                                        bool zero_centered) {
  nk_rms_norm_fwd_args a;
  nk_rms_norm_fwd_args_init(&a);
  a.rows = rows;
  a.hidden = hidden;
  a.x = reinterpret_cast<const void*>(x);
  a.x_dtype = static_cast<nk_dtype>(x_dtype);
  a.x_row_stride = x_row_stride;
  a.residual = reinterpret_cast<const void*>(residual);
  a.residual_row_stride = residual_row_stride;
  a.residual_out = reinterpret_cast<void*>(residual_out);
  a.weight = reinterpret_cast<const void*>(weight);
  a.bias = reinterpret_cast<const void*>(bias);
  a.weight_dtype = static_cast<nk_dtype>(weight_dtype);
  a.zero_centered = zero_centered ? 1 : 0;
  a.eps = eps;
  a.y = reinterpret_cast<void*>(y);
  a.y_dtype = static_cast<nk_dtype>(y_dtype);
  a.rstd = reinterpret_cast<float*>(rstd);
  return a;
}

void rms_norm_fwd_ptr(int backend, uintptr_t stream, int64_t rows, int64_t hidden, uintptr_t x,
                      int x_dtype, int64_t x_row_stride, uintptr_t residual,
                      int64_t residual_row_stride, uintptr_t residual_out, uintptr_t weight,
                      uintptr_t bias, int weight_dtype, uintptr_t y, int y_dtype, uintptr_t rstd,
                      float eps, bool zero_centered) {
  call_fwd(fwd_args_from_ptrs(rows, hidden, x, x_dtype, x_row_stride, residual,
                              residual_row_stride, residual_out, weight, bias, weight_dtype, y,
                              y_dtype, rstd, eps, zero_centered),
           static_cast<nk_backend>(backend), stream);
}

void rms_norm_bwd_ptr(int backend, uintptr_t stream, int64_t rows, int64_t hidden, uintptr_t dy,
                      int dy_dtype, int64_t dy_row_stride, uintptr_t x, int x_dtype,
                      int64_t x_row_stride, uintptr_t rstd, uintptr_t weight, int weight_dtype,
                      bool zero_centered, uintptr_t dresidual_out,
                      int64_t dresidual_out_row_stride, uintptr_t dx, uintptr_t dweight,
                      uintptr_t dbias, uintptr_t workspace, size_t workspace_bytes) {
  nk_rms_norm_bwd_args a;
  nk_rms_norm_bwd_args_init(&a);
  a.rows = rows;
  a.hidden = hidden;
  a.dy = reinterpret_cast<const void*>(dy);
  a.dy_dtype = static_cast<nk_dtype>(dy_dtype);
  a.dy_row_stride = dy_row_stride;
  a.x = reinterpret_cast<const void*>(x);
  a.x_dtype = static_cast<nk_dtype>(x_dtype);
  a.x_row_stride = x_row_stride;
  a.rstd = reinterpret_cast<const float*>(rstd);
  a.weight = reinterpret_cast<const void*>(weight);
  a.weight_dtype = static_cast<nk_dtype>(weight_dtype);
  a.zero_centered = zero_centered ? 1 : 0;
  a.dresidual_out = reinterpret_cast<const void*>(dresidual_out);
  a.dresidual_out_row_stride = dresidual_out_row_stride;
  a.dx = reinterpret_cast<void*>(dx);
  a.dweight = reinterpret_cast<void*>(dweight);
  a.dbias = reinterpret_cast<void*>(dbias);
  a.workspace = reinterpret_cast<void*>(workspace);
  a.workspace_bytes = workspace_bytes;
  nk_status status;
  {
    nb::gil_scoped_release release;
    status = nk_rms_norm_bwd(&a, static_cast<nk_backend>(backend), reinterpret_cast<void*>(stream));
  }
  check_status(status, "nk_rms_norm_bwd");
}

}  // namespace normkit_py
