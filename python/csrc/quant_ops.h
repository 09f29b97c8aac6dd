// normkit._C.rms_norm_fwd_quant: the forward with a quantized y (see nk_quant_mode), over DLPack
// arrays. Like ops.h it checks only what the C API cannot see (shapes, the dtypes of arrays it
// takes as untyped pointers, devices); everything else is the C API's to validate.
#pragma once

#include <cstdint>
#include <string>

#include "array_view.h"

namespace normkit_py {

// Quantized forward into preallocated outputs. `y` (and `y_t`) hold 8-bit codes of `y_dtype`
// ("float8_e4m3", "float8_e5m2" or "int8") in any 1-byte dtype; `mode` is "tensor", "token",
// "block" or "mxfp8". `scales` is float32 (TOKEN/BLOCK) or 1-byte e8m0 (MXFP8) with
// rows * hidden / block elements, contiguous; `scale` and `amax` are float32 [1]; `y_t` is
// [hidden, rows]. Absent arrays are invalid (None); scale_ub 0 and block 0 mean "unset".
void rms_norm_fwd_quant(const InArray& x, const OutArray& y, const std::string& y_dtype,
                        const std::string& mode, const InArray& weight, const InArray& bias,
                        const InArray& residual, const OutArray& residual_out,
                        const OutArray& rstd, const InArray& scale, float scale_ub,
                        const OutArray& scales, const OutArray& amax, const OutArray& y_t,
                        int64_t block, float eps, bool zero_centered, uintptr_t stream);

// The same over raw addresses, for normkit.torch's custom op (see rms_norm_fwd_ptr in ops.h for
// the contract: no checks here, the caller guarantees what DLPack would; 0 = NULL). `mode` is an
// nk_quant_mode value and `y_dtype` the nk_dtype of the codes; y and y_t are contiguous
// ([rows, hidden] and [hidden, rows]), `scales` holds rows * hidden / columns elements of the
// mode's scale dtype, `scale` and `amax` one float32. No rstd (the op returns none).
void rms_norm_fwd_quant_ptr(int backend, uintptr_t stream, int64_t rows, int64_t hidden,
                            uintptr_t x, int x_dtype, int64_t x_row_stride, uintptr_t residual,
                            int64_t residual_row_stride, uintptr_t residual_out,
                            uintptr_t weight, uintptr_t bias, int weight_dtype, uintptr_t y,
                            int y_dtype, int mode, uintptr_t scale, float scale_ub,
                            uintptr_t scales, uintptr_t amax, uintptr_t y_t, int64_t block,
                            float eps, bool zero_centered);

}  // namespace normkit_py
