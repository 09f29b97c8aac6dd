// Backward instantiations for x of type __nv_bfloat16.
#include "cuda/launch_bwd.cuh"

namespace normkit::cuda {
template void launch_bwd_for_x<__nv_bfloat16>(const nk_rms_norm_bwd_args&, const LaunchConfig&,
                                   cudaStream_t);
}  // namespace normkit::cuda
