// The operations normkit._C exposes: thin translations of DLPack arrays into C API calls.
// Every array is checked for rank, shape, dtype and device against x (the C API cannot see
// shapes or the dtypes of residual/dx, so those checks live here); the C API checks the rest.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "array_view.h"

namespace normkit_py {

// Shared by the plain and the quantized forward (quant_ops.cpp).
// A matrix argument that must match x in shape, place and (when `same_dtype`) dtype.
MatrixView matrix_like_x(const ArrayFacts& a, const MatrixView& x, const char* name,
                         bool same_dtype);
// A [size] vector argument on x's device.
VectorView vector_like_x(const ArrayFacts& a, const MatrixView& x, const char* name, int64_t size);
// The forward's arguments from x and its optional inputs/outputs; y and the quant fields unset.
nk_rms_norm_fwd_args fwd_args_without_y(const MatrixView& xv, const InArray& weight,
                                        const InArray& bias, const InArray& residual,
                                        const OutArray& residual_out, const OutArray& rstd,
                                        float eps, bool zero_centered);
// nk_rms_norm_fwd without the GIL; NormkitError on failure.
void call_fwd(const nk_rms_norm_fwd_args& args, nk_backend backend, uintptr_t stream);

// y = rms_norm(x [+ residual]) * w_eff + bias; see nk_rms_norm_fwd. Optional arrays are
// invalid (None on the Python side) when absent. `stream` is a cudaStream_t as an integer.
void rms_norm_fwd(const InArray& x, const OutArray& y, const InArray& weight, const InArray& bias,
                  const InArray& residual, const OutArray& residual_out, const OutArray& rstd,
                  float eps, bool zero_centered, uintptr_t stream);

// dx, dweight, dbias from dy; see nk_rms_norm_bwd. `x` is the normalized input s.
void rms_norm_bwd(const InArray& dy, const InArray& x, const InArray& rstd, const OutArray& dx,
                  const InArray& weight, const InArray& dresidual_out, const OutArray& dweight,
                  const OutArray& dbias, const OutArray& workspace, bool zero_centered,
                  uintptr_t stream);

// Bytes of workspace rms_norm_bwd needs; backend is "cpu" or "cuda".
size_t rms_norm_bwd_workspace_size(int64_t rows, int64_t hidden, bool dweight, bool dbias,
                                   const std::string& backend);

// Pointer entry points, for normkit.torch's eager fast path. DLPack import costs several
// microseconds per array (the framework's __dlpack__ runs Python code); these take what the
// C API takes as plain integers instead and do no checks of their own, so the caller must
// guarantee what DLPack would have: each address is a live allocation of the given shape,
// dtype (an nk_dtype value) and row stride (elements, 0 = contiguous) on `backend` (an
// nk_backend value). The C API still validates every argument it can see; a failure raises
// NormkitError. Pointers that are 0 are NULL (optional arguments absent).
// The forward's arguments from raw addresses (0 = NULL) and nk_dtype values, as
// rms_norm_fwd_ptr takes them; the quant fields unset (shared with rms_norm_fwd_quant_ptr).
nk_rms_norm_fwd_args fwd_args_from_ptrs(int64_t rows, int64_t hidden, uintptr_t x, int x_dtype,
                                        int64_t x_row_stride, uintptr_t residual,
                                        int64_t residual_row_stride, uintptr_t residual_out,
                                        uintptr_t weight, uintptr_t bias, int weight_dtype,
                                        uintptr_t y, int y_dtype, uintptr_t rstd, float eps,
                                        bool zero_centered);

void rms_norm_fwd_ptr(int backend, uintptr_t stream, int64_t rows, int64_t hidden, uintptr_t x,
                      int x_dtype, int64_t x_row_stride, uintptr_t residual,
                      int64_t residual_row_stride, uintptr_t residual_out, uintptr_t weight,
                      uintptr_t bias, int weight_dtype, uintptr_t y, int y_dtype, uintptr_t rstd,
                      float eps, bool zero_centered);

void rms_norm_bwd_ptr(int backend, uintptr_t stream, int64_t rows, int64_t hidden, uintptr_t dy,
                      int dy_dtype, int64_t dy_row_stride, uintptr_t x, int x_dtype,
                      int64_t x_row_stride, uintptr_t rstd, uintptr_t weight, int weight_dtype,
                      bool zero_centered, uintptr_t dresidual_out,
                      int64_t dresidual_out_row_stride, uintptr_t dx, uintptr_t dweight,
                      uintptr_t dbias, uintptr_t workspace, size_t workspace_bytes);

// rms_norm_bwd_workspace_size with the backend as an nk_backend value.
size_t rms_norm_bwd_workspace_size_ptr(int backend, int64_t rows, int64_t hidden, bool dweight,
                                       bool dbias);

}  // namespace normkit_py
