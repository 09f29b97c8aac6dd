#include "check_backend_run.h"

#include <cstring>
#include <map>
#include <stdexcept>

#include "cuda_memory.h"
#include "host_tensor.h"
#include "text_format.h"

namespace nktool {
namespace {

std::string api_failure(const char* call, nk_status status) {
  return std::string(call) + " returned " + nk_status_name(status) + ": " + nk_last_error();
}

BackendRunResult run_on_host(const CheckCase& c, CaseTensors& t) {
  BackendRunResult result;
  const nk_rms_norm_fwd_args fwd = make_fwd_args(c, t, host_pointer);
  nk_status status = nk_rms_norm_fwd(&fwd, NK_BACKEND_CPU, nullptr);
  if (status != NK_SUCCESS) {
    result.error = api_failure("nk_rms_norm_fwd", status);
    return result;
  }
  nk_rms_norm_bwd_args bwd = make_bwd_args(c, t, host_pointer);
  size_t workspace_bytes = 0;
  status = nk_rms_norm_bwd_workspace_size(&bwd, NK_BACKEND_CPU, &workspace_bytes);
  if (status != NK_SUCCESS) {
    result.error = api_failure("nk_rms_norm_bwd_workspace_size", status);
    return result;
  }
  AlignedBytes workspace(workspace_bytes);  // poisoned: the backend may not assume zeros
  bwd.workspace = workspace_bytes ? workspace.data() : nullptr;
  bwd.workspace_bytes = workspace_bytes;
  status = nk_rms_norm_bwd(&bwd, NK_BACKEND_CPU, nullptr);
  if (status != NK_SUCCESS) {
    result.error = api_failure("nk_rms_norm_bwd", status);
    return result;
  }
  result.ok = true;
  return result;
}

#ifdef NK_WITH_CUDA
// Device copies of every tensor of the case, whole allocations (padding and guard included) so
// that the poison around the logical elements travels to the device and back.
BackendRunResult run_on_device(const CheckCase& c, CaseTensors& t) {
  BackendRunResult result;
  const std::string context = "case " + std::to_string(c.id) + " " + std::to_string(c.rows) +
                              "x" + std::to_string(c.hidden) + " " + c.dtypes();
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

  const nk_rms_norm_fwd_args fwd = make_fwd_args(c, t, device_pointer);
  nk_status status = nk_rms_norm_fwd(&fwd, NK_BACKEND_CUDA, nullptr);
  if (status != NK_SUCCESS) {
    result.error = api_failure("nk_rms_norm_fwd", status);
    return result;
  }
  cuda_check(cudaDeviceSynchronize(), "forward kernel (cudaDeviceSynchronize)", context);

  nk_rms_norm_bwd_args bwd = make_bwd_args(c, t, device_pointer);
  size_t workspace_bytes = 0;
  status = nk_rms_norm_bwd_workspace_size(&bwd, NK_BACKEND_CUDA, &workspace_bytes);
  if (status != NK_SUCCESS) {
    result.error = api_failure("nk_rms_norm_bwd_workspace_size", status);
    return result;
  }
  DeviceBuffer workspace(workspace_bytes, "the backward workspace", context);
  if (workspace_bytes) {
    cuda_check(cudaMemset(workspace.get(), HostTensor::kPoisonByte, workspace_bytes),
               "cudaMemset of the workspace", context);
  }
  bwd.workspace = workspace.get();
  bwd.workspace_bytes = workspace_bytes;
  status = nk_rms_norm_bwd(&bwd, NK_BACKEND_CUDA, nullptr);
  if (status != NK_SUCCESS) {
    result.error = api_failure("nk_rms_norm_bwd", status);
    return result;
  }
  cuda_check(cudaDeviceSynchronize(), "backward kernel (cudaDeviceSynchronize)", context);

  for (HostTensor* h : t.all()) {
    cuda_check(cudaMemcpy(h->storage(), device.at(h).get(), h->storage_bytes(),
                          cudaMemcpyDeviceToHost),
               "cudaMemcpy device to host", context);
  }
  result.ok = true;
  return result;
}
#endif

}  // namespace

BackendRunResult run_case_on_backend(const CheckCase& c, CaseTensors& t, nk_backend backend) {
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
