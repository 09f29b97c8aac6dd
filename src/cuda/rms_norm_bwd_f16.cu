// Backward instantiations for x of type __half.
#include "cuda/launch_bwd.cuh"

namespace normkit::cuda {
template void launch_bwd_for_x<__half>(const nk_rms_norm_bwd_args&, const LaunchConfig&,
                                   cudaStream_t);
}  // namespace normkit::cuda
