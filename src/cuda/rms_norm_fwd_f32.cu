// Forward instantiations for x of type float.
#include "cuda/launch_fwd.cuh"

namespace normkit::cuda {
template void launch_fwd_for_x<float>(const nk_rms_norm_fwd_args&, const LaunchConfig&,
                                   cudaStream_t);
}  // namespace normkit::cuda
