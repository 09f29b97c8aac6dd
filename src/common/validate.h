// Argument validation for the C API: every rule of include/normkit/normkit.h, checked before
// any backend runs, with messages that state the contract and the actual values.
#pragma once

#include <cstddef>
#include <cstdint>

#include "normkit/normkit.h"

namespace normkit {

// rows >= 1 and hidden >= 1.
void validate_sizes(int64_t rows, int64_t hidden);

// Returns a copy of args with every row stride resolved (0 -> hidden). Throws on any violation.
nk_rms_norm_fwd_args validate_fwd(const nk_rms_norm_fwd_args& args);
nk_rms_norm_bwd_args validate_bwd(const nk_rms_norm_bwd_args& args);

// The quantized-output fields and y_dtype of a forward (validate_quant.cpp; called by
// validate_fwd). Resolves quant_block (0 -> 128 for BLOCK, 32 for MXFP8) and y_t_row_stride
// (0 -> rows) in place.
void validate_quant_fields(nk_rms_norm_fwd_args& args);

// The workspace holds `needed` bytes, is non-NULL when needed > 0, and is 16-byte aligned.
void validate_workspace(const void* workspace, size_t bytes, size_t needed);

}  // namespace normkit
