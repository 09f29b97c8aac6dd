// Quantized-output forward instantiations for x of type __nv_bfloat16.
#include "cuda/launch_fwd_quant.cuh"

namespace normkit::cuda {
template void launch_fwd_quant_for_x<__nv_bfloat16>(const nk_rms_norm_fwd_args&, const LaunchConfig&,
                                         cudaStream_t);
}  // namespace normkit::cuda
