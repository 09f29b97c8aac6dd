#include "info_command.h"

#include <cstdio>
#include <string>
#include <thread>

#include "cuda_memory.h"
#include "normkit/normkit.h"
#ifdef NK_WITH_CUDA
#include "common/error.h"
#include "cuda/cuda_backend.h"
#endif
#include "text_format.h"

namespace nktool {
namespace {

#ifdef NK_WITH_CUDA
// Attributes rather than cudaDeviceProp fields for the clocks: CUDA 13 dropped the clock
// fields from cudaDeviceProp.
int attribute(cudaDeviceAttr attr, int device) {
  int value = 0;
  if (cudaDeviceGetAttribute(&value, attr, device) != cudaSuccess) {
    cudaGetLastError();  // not fatal: report 0 for an attribute the driver does not know
    return 0;
  }
  return value;
}

void print_devices() {
  int runtime = 0, driver = 0;
  cudaRuntimeGetVersion(&runtime);
  cudaDriverGetVersion(&driver);
  std::printf("CUDA runtime:   %d.%d; driver supports CUDA %d.%d%s\n", runtime / 1000,
              (runtime % 1000) / 10, driver / 1000, (driver % 1000) / 10,
              driver == 0 ? " (no driver found)" : "");
  int count = 0;
  const cudaError_t err = cudaGetDeviceCount(&count);
  if (err != cudaSuccess) {
    std::printf("CUDA devices:   none (%s: %s)\n", cudaGetErrorName(err), cudaGetErrorString(err));
    cudaGetLastError();
    return;
  }
  std::printf("CUDA devices:   %d\n", count);
  for (int d = 0; d < count; ++d) {
    cudaDeviceProp p{};
    cuda_check(cudaGetDeviceProperties(&p, d), "cudaGetDeviceProperties",
               "device " + std::to_string(d));
    const int sm_clock_khz = attribute(cudaDevAttrClockRate, d);
    const int mem_clock_khz = attribute(cudaDevAttrMemoryClockRate, d);
    const int bus_bits = attribute(cudaDevAttrGlobalMemoryBusWidth, d);
    std::printf("  device %d: %s\n", d, p.name);
    std::printf("    compute capability     %d.%d\n", p.major, p.minor);
    std::printf("    SMs                    %d (max %d threads per SM)\n", p.multiProcessorCount,
                p.maxThreadsPerMultiProcessor);
    std::printf("    L2 cache               %s\n",
                format_bytes(static_cast<size_t>(p.l2CacheSize)).c_str());
    std::printf("    shared memory per SM   %s\n", format_bytes(p.sharedMemPerMultiprocessor).c_str());
    std::printf("    shared memory / block  %s (%s with opt-in)\n",
                format_bytes(p.sharedMemPerBlock).c_str(),
                format_bytes(p.sharedMemPerBlockOptin).c_str());
    std::printf("    global memory          %s\n", format_bytes(p.totalGlobalMem).c_str());
    if (sm_clock_khz) std::printf("    SM clock (peak)        %d MHz\n", sm_clock_khz / 1000);
    if (mem_clock_khz && bus_bits) {
      // Double data rate: two transfers per memory clock.
      const double peak_gbps = 2.0 * mem_clock_khz * 1e3 * (bus_bits / 8.0) / 1e9;
      std::printf("    memory                 %d MHz, %d-bit bus: %.0f GB/s theoretical peak\n",
                  mem_clock_khz / 1000, bus_bits, peak_gbps);
    }
  }
}

// The CTAs per SM that the plans of a few sweep shapes rely on, against what the built kernels
// get on the current device (registers decide it; a short fall is a slower plan).
void print_occupancy() {
  if (nk_cuda_device_count() == 0) return;
  try {
    std::printf("kernel occupancy (current device; CTAs per SM the plan assumes / fit):\n");
    for (const auto& k : normkit::cuda::planned_occupancy()) {
      std::printf("  %-42s %4d threads, %3d registers: %d / %d%s\n", k.kernel.c_str(), k.threads,
                  k.registers, k.planned_ctas_per_sm, k.ctas_per_sm,
                  k.ctas_per_sm < k.planned_ctas_per_sm ? "  (FEWER than planned)" : "");
    }
  } catch (const normkit::Error& e) {
    std::printf("  not available: %s\n", e.what());
  }
}
#endif

}  // namespace

int run_info() {
  std::printf("normkit:        %s\n", nk_version());
  std::printf("CUDA backend:   %s\n", nk_has_cuda_build() ? "built" : "not built (CPU only)");
#ifdef NK_WITH_CUDA
  print_devices();
  print_occupancy();
#endif
  const unsigned cores = std::thread::hardware_concurrency();
  std::printf("CPU:            %u logical cores\n", cores);
  std::printf("CPU paths:      %s\n", nk_cpu_paths());
  const int usable = nk_cuda_device_count();
  std::printf("bench backend:  %s\n",
              usable > 0 ? "cuda (the current device; set CUDA_VISIBLE_DEVICES to choose)"
                         : (nk_has_cuda_build() ? "cpu (no usable CUDA device)"
                                                : "cpu (built without CUDA)"));
  return 0;
}

}  // namespace nktool
