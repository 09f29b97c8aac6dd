// The backward's dispatch of dy's dtype for each (x, weight) pair. launch_bwd itself is
// instantiated once per (x, weight, dy) triple in the translation units that src/CMakeLists.txt
// generates, so that they compile in parallel; this one holds no kernel.
#include "cuda/launch_common.cuh"
#include "cuda/launchers.h"

namespace normkit::cuda {

template <typename XT, typename WT>
void launch_bwd_for(const nk_rms_norm_bwd_args& a, const LaunchConfig& cfg, cudaStream_t stream) {
  dispatch_dtype(a.dy_dtype, "rms_norm_bwd dy",
                 [&](auto dy) { launch_bwd<XT, WT, decltype(dy)>(a, cfg, stream); });
}

// The (x, weight) pairs of src/CMakeLists.txt's NK_CUDA_TYPES.
#define NK_LAUNCH_BWD_FOR(XT, WT) \
  template void launch_bwd_for<XT, WT>(const nk_rms_norm_bwd_args&, const LaunchConfig&, \
                                       cudaStream_t);
NK_LAUNCH_BWD_FOR(float, float)
NK_LAUNCH_BWD_FOR(float, __half)
NK_LAUNCH_BWD_FOR(float, __nv_bfloat16)
NK_LAUNCH_BWD_FOR(__half, float)
NK_LAUNCH_BWD_FOR(__half, __half)
NK_LAUNCH_BWD_FOR(__half, __nv_bfloat16)
NK_LAUNCH_BWD_FOR(__nv_bfloat16, float)
NK_LAUNCH_BWD_FOR(__nv_bfloat16, __half)
NK_LAUNCH_BWD_FOR(__nv_bfloat16, __nv_bfloat16)
#undef NK_LAUNCH_BWD_FOR

}  // namespace normkit::cuda
