// Forward instantiations for x of type __nv_bfloat16.
#include "cuda/launch_fwd.cuh"

namespace normkit::cuda {
template void launch_fwd_for_x<__nv_bfloat16>(const nk_rms_norm_fwd_args&, const LaunchConfig&,
                                   cudaStream_t);
}  // namespace normkit::cuda
