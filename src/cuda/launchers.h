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

// partial_dweight / partial_dbias: [cfg.slots, hidden] float32 inside the caller's workspace.
template <typename XT>
void launch_bwd_for_x(const nk_rms_norm_bwd_args& args, const LaunchConfig& cfg,
                      float* partial_dweight, float* partial_dbias, cudaStream_t stream);

}  // namespace normkit::cuda
