// The operations normkit._C exposes: thin translations of DLPack arrays into C API calls.
// Every array is checked for rank, shape, dtype and device against x (the C API cannot see
// shapes or the dtypes of residual/dx, so those checks live here); the C API checks the rest.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "array_view.h"

namespace normkit_py {

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

}  // namespace normkit_py
