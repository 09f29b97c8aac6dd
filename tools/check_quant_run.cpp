#include "check_quant_run.h"

#include <exception>
#include <map>
#include <string>
#include <utility>

#include "cuda_memory.h"
#include "host_tensor.h"

namespace nktool {
namespace {

std::string api_failure(nk_status status) {
  return std::string("nk_rms_norm_fwd returned ") + nk_status_name(status) + ": " +
         nk_last_error();
}

BackendRunResult run_on_host(const QuantCheckCase& c, QuantCaseTensors& t) {
  const nk_rms_norm_fwd_args fwd = make_quant_fwd_args(c, t, host_pointer);
  const nk_status status = nk_rms_norm_fwd(&fwd, NK_BACKEND_CPU, nullptr);
  if (status != NK_SUCCESS) return {false, api_failure(status)};
  return {true, ""};
}

#ifdef NK_WITH_CUDA
// Device copies of every tensor, whole allocations (padding and guard included) so that the
// poison around the logical elements travels to the device and back. The TENSOR scale is one
// of them: the backend reads it from device memory.
BackendRunResult run_on_device(const QuantCheckCase& c, QuantCaseTensors& t) {
  const std::string context = "quant case " + std::to_string(c.id) + " " + c.mode_name() + " " +
                              std::to_string(c.rows) + "x" + std::to_string(c.hidden);
  std::map<const HostTensor*, DeviceBuffer> device;
  for (HostTensor* h : t.all()) {
    DeviceBuffer d(h->storage_bytes(), "a check tensor", context);
    cuda_check(cudaMemcpy(d.get(), h->storage(), h->storage_bytes(), cudaMemcpyHostToDevice),
               "cudaMemcpy host to device", context);
    device.emplace(h, std::move(d));
  }
  const PointerMap device_pointer = [&](HostTensor& h) -> void* {
    return device.at(&h).bytes() + h.offset_bytes();
  };
  const nk_rms_norm_fwd_args fwd = make_quant_fwd_args(c, t, device_pointer);
  const nk_status status = nk_rms_norm_fwd(&fwd, NK_BACKEND_CUDA, nullptr);
  if (status != NK_SUCCESS) return {false, api_failure(status)};
  cuda_check(cudaDeviceSynchronize(), "quantized forward kernel (cudaDeviceSynchronize)",
             context);
  for (HostTensor* h : t.all()) {
    cuda_check(cudaMemcpy(h->storage(), device.at(h).get(), h->storage_bytes(),
                          cudaMemcpyDeviceToHost),
               "cudaMemcpy device to host", context);
  }
  return {true, ""};
}
#endif

}  // namespace

BackendRunResult run_quant_case_on_backend(const QuantCheckCase& c, QuantCaseTensors& t,
                                           nk_backend backend) {
  t.reset_for_run();
  try {
    if (backend == NK_BACKEND_CPU) return run_on_host(c, t);
#ifdef NK_WITH_CUDA
    return run_on_device(c, t);
#else
    return {false, "this build has no CUDA backend"};
#endif
  } catch (const std::exception& e) {
    return {false, e.what()};
  }
}

}  // namespace nktool
