// CPU backend: the same semantics as the C API (see include/normkit/normkit.h), on host memory.
// Arguments arrive validated by src/api.cpp, with every row stride resolved (never 0).
// Failures are reported by throwing normkit::Error.
#pragma once

#include <cstddef>
#include <cstdint>

#include "normkit/normkit.h"

namespace normkit::cpu {

void rms_norm_fwd(const nk_rms_norm_fwd_args& args);

// Bytes of workspace rms_norm_bwd needs for dweight/dbias partial sums (0 if neither wanted).
size_t rms_norm_bwd_workspace_bytes(int64_t rows, int64_t hidden, bool want_dweight,
                                    bool want_dbias);

void rms_norm_bwd(const nk_rms_norm_bwd_args& args);

}  // namespace normkit::cpu
