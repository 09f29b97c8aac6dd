// Quantized-output forward instantiations for x of type float.
#include "cuda/launch_fwd_quant.cuh"

namespace normkit::cuda {
template void launch_fwd_quant_for_x<float>(const nk_rms_norm_fwd_args&, const LaunchConfig&,
                                         cudaStream_t);
}  // namespace normkit::cuda
