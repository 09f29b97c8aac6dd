// Typed launchers, one translation unit per x dtype (rms_norm_*_<dtype>.cu) so the
// instantiations compile in parallel. Each dispatches the remaining dtypes and the vector width.
#pragma once

#include <cuda_runtime.h>

#include "cuda/launch_config.h"
#include "normkit/normkit.h"

namespace normkit::cuda {

template <typename XT>
void launch_fwd_for_x(const nk_rms_norm_fwd_args& args, const LaunchConfig& cfg,
                      cudaStream_t stream);

// The forward with a quantized output (args.quant != NK_QUANT_NONE), without y_t.
template <typename XT>
void launch_fwd_quant_for_x(const nk_rms_norm_fwd_args& args, const LaunchConfig& cfg,
                            cudaStream_t stream);

// Elements per scale of the block modes, else 0 (validation resolved the C API's 0 already).
inline int64_t quant_block_size(const nk_rms_norm_fwd_args& a) {
  return a.quant == NK_QUANT_BLOCK || a.quant == NK_QUANT_MXFP8 ? a.quant_block : 0;
}

// dweight/dbias partial sums go to args.workspace: [slots, hidden] float32 each (slots at
// most cfg.slots).
template <typename XT>
void launch_bwd_for_x(const nk_rms_norm_bwd_args& args, const LaunchConfig& cfg,
                      cudaStream_t stream);

}  // namespace normkit::cuda
