// Shared launcher machinery: dtype and vector-width dispatch, cluster launches, error checks.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <map>
#include <mutex>
#include <set>
#include <string>
#include <tuple>
#include <utility>

#include "common/error.h"
#include "cuda/cuda_check.h"
#include "cuda/kernel_params.h"
#include "cuda/launch_config.h"
#include "cuda/vector_width.h"

namespace normkit::cuda {

// Calls f(T{}) with the C++ type of `dtype`.
template <typename F>
void dispatch_dtype(nk_dtype dtype, const char* what, F&& f) {
  switch (dtype) {
    case NK_FLOAT32: return f(float{});
    case NK_FLOAT16: return f(__half{});
    case NK_BFLOAT16: return f(__nv_bfloat16{});
  }
  throw Error(NK_ERROR_INTERNAL, std::string(what) + ": unhandled dtype " +
                                     std::to_string(static_cast<int>(dtype)));
}

// Calls f(std::integral_constant<int, VEC>{}) for the configured vector width.
template <typename F>
void dispatch_vec(int vec, const char* what, F&& f) {
  switch (vec) {
    case 1: return f(std::integral_constant<int, 1>{});
    case 2: return f(std::integral_constant<int, 2>{});
    case 4: return f(std::integral_constant<int, 4>{});
    case 8: return f(std::integral_constant<int, 8>{});
  }
  throw Error(NK_ERROR_INTERNAL, std::string(what) + ": unhandled vector width " +
                                     std::to_string(vec));
}

inline RowShape row_shape(int64_t rows, int64_t hidden, const LaunchConfig& cfg) {
  RowShape s;
  s.rows = rows;
  s.hidden = hidden;
  s.inv_hidden = 1.0f / static_cast<float>(hidden);
  s.items = cfg.items;
  s.cluster_size = cfg.cluster_size;
  s.cols_per_cta = cfg.cols_per_cta;
  return s;
}

// Launches kernel<<<grid, block, dynamic_smem>>> with consecutive CTAs grouped in clusters of
// `cluster`.
// Launch options beyond the grid: CTAs per cluster, and programmatic dependent launch (the
// kernel may start while the previous kernel in the stream finishes; it must call
// cudaGridDependencySynchronize() before reading that kernel's results).
// Cooperative: every CTA is resident at once (the launch fails otherwise), so the kernel may
// wait at a grid barrier (cooperative_groups::this_grid().sync()).
struct LaunchOptions {
  int cluster = 1;
  bool dependent = false;
  bool cooperative = false;
};

// Allows `kernel` up to `bytes` of dynamic shared memory on the current device. The attribute
// is needed whenever dynamic plus static shared memory passes 48 KB; it is set once per kernel,
// device and size (each call costs host time on the launch path).
template <typename Kernel>
void allow_dynamic_smem(Kernel kernel, size_t bytes, const char* what) {
  static std::mutex mutex;
  static std::map<std::pair<const void*, int>, size_t> allowed;
  if (bytes == 0) return;
  int device = 0;
  check_cuda(cudaGetDevice(&device), "cudaGetDevice", what);
  std::lock_guard<std::mutex> lock(mutex);
  size_t& current = allowed[{reinterpret_cast<const void*>(kernel), device}];
  if (bytes <= current) return;
  check_cuda(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                  static_cast<int>(bytes)),
             "cudaFuncSetAttribute(MaxDynamicSharedMemorySize)", what);
  current = bytes;
}

// Asks for KernelFacts::smem_carveout (NK_TUNE_SMEM_CARVEOUT) as `kernel`'s preferred shared-
// memory carveout on the current device, once per kernel and device; nothing at -1 (the
// default: the driver's choice).
template <typename Kernel>
void prefer_smem_carveout(Kernel kernel, const char* what) {
  const int carveout = tuned_defaults().smem_carveout;
  if (carveout < 0) return;
  static std::mutex mutex;
  static std::set<std::pair<const void*, int>> done;
  int device = 0;
  check_cuda(cudaGetDevice(&device), "cudaGetDevice", what);
  std::lock_guard<std::mutex> lock(mutex);
  if (!done.insert({reinterpret_cast<const void*>(kernel), device}).second) return;
  check_cuda(
      cudaFuncSetAttribute(kernel, cudaFuncAttributePreferredSharedMemoryCarveout, carveout),
      "cudaFuncSetAttribute(PreferredSharedMemoryCarveout)", what);
}

// A value computed once per kernel, device and launch shape (block, dynamic shared memory,
// cluster size): the occupancy queries below cost host time on the launch path. One cache per
// query (each holds a static one).
class LaunchShapeCache {
 public:
  template <typename Kernel, typename Compute>
  int64_t get(Kernel kernel, dim3 block, size_t dynamic_smem, int cluster, const char* what,
              Compute compute) {
    int device = 0;
    check_cuda(cudaGetDevice(&device), "cudaGetDevice", what);
    const Key key = std::make_tuple(reinterpret_cast<const void*>(kernel), device, block.x,
                                    block.y, dynamic_smem, cluster);
    {
      std::lock_guard<std::mutex> lock(mutex_);
      const auto it = known_.find(key);
      if (it != known_.end()) return it->second;
    }
    const int64_t value = compute(device);
    std::lock_guard<std::mutex> lock(mutex_);
    known_[key] = value;
    return value;
  }

 private:
  using Key = std::tuple<const void*, int, unsigned, unsigned, size_t, int>;
  std::mutex mutex_;
  std::map<Key, int64_t> known_;
};

// How many clusters of `cluster` CTAs of `kernel` (block, dynamic shared memory) the device
// runs at once: a cluster's CTAs must share a GPC, so this can be below the CTAs-per-SM count
// times the SMs over the cluster size. Persistent grids are capped to it (a cluster beyond it
// would wait for a whole other wave).
template <typename Kernel>
int max_active_clusters(Kernel kernel, dim3 block, size_t dynamic_smem, int cluster,
                        const char* what) {
  static LaunchShapeCache cache;
  return static_cast<int>(cache.get(kernel, block, dynamic_smem, cluster, what, [&](int) {
    allow_dynamic_smem(kernel, dynamic_smem, what);
    if (cluster > 8) {
      check_cuda(cudaFuncSetAttribute(kernel, cudaFuncAttributeNonPortableClusterSizeAllowed, 1),
                 "cudaFuncSetAttribute(NonPortableClusterSizeAllowed)", what);
    }
    cudaLaunchConfig_t config = {};
    config.gridDim = dim3(static_cast<unsigned>(cluster));
    config.blockDim = block;
    config.dynamicSmemBytes = dynamic_smem;
    cudaLaunchAttribute attribute;
    attribute.id = cudaLaunchAttributeClusterDimension;
    attribute.val.clusterDim.x = cluster;
    attribute.val.clusterDim.y = 1;
    attribute.val.clusterDim.z = 1;
    config.attrs = &attribute;
    config.numAttrs = 1;
    int clusters = 0;
    check_cuda(cudaOccupancyMaxActiveClusters(&clusters, kernel, &config),
               "cudaOccupancyMaxActiveClusters", what);
    return int64_t(clusters);
  }));
}

// How many CTAs of `kernel` (block, dynamic shared memory) the device runs at once: the
// occupancy calculator's CTAs per SM (registers, shared memory, threads) times the SMs.
template <typename Kernel>
int64_t resident_ctas(Kernel kernel, dim3 block, size_t dynamic_smem, const char* what) {
  static LaunchShapeCache cache;
  return cache.get(kernel, block, dynamic_smem, 1, what, [&](int device) {
    allow_dynamic_smem(kernel, dynamic_smem, what);
    int per_sm = 0, sms = 0;
    check_cuda(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel,
                                                             static_cast<int>(block.x * block.y),
                                                             dynamic_smem),
               "cudaOccupancyMaxActiveBlocksPerMultiprocessor", what);
    check_cuda(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device),
               "cudaDeviceGetAttribute(MultiProcessorCount)", what);
    return int64_t(per_sm) * sms;
  });
}

// A persistent plan of single CTAs (not clusters: fit_resident_clusters) capped to the CTAs the
// device runs at once: the planner counts CTAs per SM by shared memory and threads, not by
// registers, and a CTA beyond them would run in a second wave (measured, ninth session: the
// 512-thread backward CTAs of 8192-column rows fit once per SM; 8192 x 8192 153 -> 146 us
// capped).
template <typename Kernel>
LaunchConfig fit_resident_ctas(LaunchConfig cfg, Kernel kernel, const char* what) {
  if (cfg.cluster_size > 1) return cfg;
  const int64_t resident =
      resident_ctas(kernel, dim3(cfg.threads_per_row, cfg.rows_per_block),
                    static_cast<size_t>(cfg.smem_bytes), what);
  if (resident > 0 && cfg.grid > resident) {
    cfg.grid = resident;
    if (cfg.slots) cfg.slots = resident;
  }
  return cfg;
}

// A persistent realigned plan of cfg.rows_per_block rows per CTA at once
// (plan_bwd_realigned_slots, plan_fwd_realigned_slots) capped to the CTAs resident at once,
// keeping its rule: all the rows, or a multiple of 8 CTAs (every row of a CTA's group then
// starts at the same offset within 16 bytes).
// shared_offset: the forward's groups of one CTA share one offset (realigned_shared_offset_ctas).
template <typename Kernel>
LaunchConfig fit_realigned_slots(LaunchConfig cfg, Kernel kernel, int64_t rows, const char* what,
                                 bool shared_offset = false) {
  cfg = fit_resident_ctas(cfg, kernel, what);
  const int64_t ctas =
      shared_offset && cfg.rows_per_block > 1
          ? realigned_shared_offset_ctas(rows, cfg.rows_per_block, cfg.grid)
          : realigned_slots_fitting((rows + cfg.rows_per_block - 1) / cfg.rows_per_block,
                                    cfg.grid);
  if (ctas == 0) {
    throw Error(NK_ERROR_UNSUPPORTED, std::string(what) + ": fewer than 8 CTAs of " +
                                          std::to_string(cfg.threads_per_row) +
                                          " threads fit this device at once");
  }
  cfg.grid = ctas;
  if (cfg.slots) cfg.slots = ctas;
  return cfg;
}

// The error for clusters of `cluster` CTAs that no GPC of the device can hold.
inline Error cluster_does_not_fit(const char* what, int cluster, int64_t threads,
                                  size_t dynamic_smem) {
  return Error(NK_ERROR_UNSUPPORTED, std::string(what) + ": this device cannot run a cluster of " +
                                         std::to_string(cluster) + " CTAs of " +
                                         std::to_string(threads) + " threads with " +
                                         std::to_string(dynamic_smem) +
                                         " bytes of dynamic shared memory each");
}

// A persistent plan's grid (and slots) capped to the clusters the device runs at once.
template <typename Kernel>
LaunchConfig fit_resident_clusters(LaunchConfig cfg, Kernel kernel, const char* what) {
  if (cfg.cluster_size <= 1) return cfg;
  const int clusters =
      max_active_clusters(kernel, dim3(cfg.threads_per_row, cfg.rows_per_block),
                          static_cast<size_t>(cfg.smem_bytes), cfg.cluster_size, what);
  if (clusters == 0) {  // no GPC can hold one such cluster: a launch would only fail later
    throw cluster_does_not_fit(what, cfg.cluster_size, cfg.threads_per_row * cfg.rows_per_block,
                               static_cast<size_t>(cfg.smem_bytes));
  }
  if (cfg.grid / cfg.cluster_size > clusters) {
    cfg.grid = int64_t(clusters) * cfg.cluster_size;
    if (cfg.slots) cfg.slots = clusters;
  }
  return cfg;
}

// The launch itself; returns cudaLaunchKernelEx's status (launch() below checks it).
template <typename... KernelArgs, typename... Args>
cudaError_t launch_status(void (*kernel)(KernelArgs...), dim3 grid, dim3 block,
                          LaunchOptions options, cudaStream_t stream, const char* what,
                          size_t dynamic_smem, Args... args) {
  const int cluster = options.cluster;
  cudaLaunchConfig_t config = {};
  config.gridDim = grid;
  config.blockDim = block;
  config.stream = stream;
  config.dynamicSmemBytes = dynamic_smem;
  allow_dynamic_smem(kernel, dynamic_smem, what);
  prefer_smem_carveout(kernel, what);
  cudaLaunchAttribute attribute[3];
  if (cluster > 1) {
    if (cluster > 8) {
      check_cuda(cudaFuncSetAttribute(kernel, cudaFuncAttributeNonPortableClusterSizeAllowed, 1),
                 "cudaFuncSetAttribute(NonPortableClusterSizeAllowed)", what);
    }
    attribute[config.numAttrs].id = cudaLaunchAttributeClusterDimension;
    attribute[config.numAttrs].val.clusterDim.x = cluster;
    attribute[config.numAttrs].val.clusterDim.y = 1;
    attribute[config.numAttrs].val.clusterDim.z = 1;
    ++config.numAttrs;
  }
  if (options.dependent) {
    attribute[config.numAttrs].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attribute[config.numAttrs].val.programmaticStreamSerializationAllowed = 1;
    ++config.numAttrs;
  }
  if (options.cooperative) {
    attribute[config.numAttrs].id = cudaLaunchAttributeCooperative;
    attribute[config.numAttrs].val.cooperative = 1;
    ++config.numAttrs;
  }
  config.attrs = attribute;
  return cudaLaunchKernelEx(&config, kernel, args...);
}

// A launch of clusters that no GPC of the device can hold (non-portable sizes past 8 CTAs, or
// CTAs that each need an SM's shared memory on a device with few SMs per GPC) fails with a CUDA
// error that does not say so: the error then names the cluster (the check costs nothing on the
// launches that succeed).
template <typename... KernelArgs>
void explain_cluster_failure(void (*kernel)(KernelArgs...), dim3 block, int cluster,
                             size_t dynamic_smem, const char* what) {
  int clusters = -1;
  try {
    clusters = max_active_clusters(kernel, block, dynamic_smem, cluster, what);
  } catch (const Error&) {
    return;  // (the launch's own error follows)
  }
  if (clusters == 0) throw cluster_does_not_fit(what, cluster, block.x * block.y, dynamic_smem);
}

template <typename... KernelArgs, typename... Args>
void launch(void (*kernel)(KernelArgs...), dim3 grid, dim3 block, LaunchOptions options,
            cudaStream_t stream, const char* what, size_t dynamic_smem, Args... args) {
  const cudaError_t status =
      launch_status(kernel, grid, block, options, stream, what, dynamic_smem, args...);
  if (status != cudaSuccess && options.cluster > 1) {
    cudaGetLastError();  // (a launch-configuration error is not sticky)
    explain_cluster_failure(kernel, block, options.cluster, dynamic_smem, what);
  }
  check_cuda(status, "kernel launch", what);
}

// A cooperative launch (options.cooperative) where the device accepts one of this shape:
// false, with nothing launched and the error cleared, where it refuses it as too large or not
// supported (a cluster launch that is also cooperative, say); other errors throw. A shape once
// refused is not tried again (each try costs a failed launch on the call's path).
template <typename... KernelArgs, typename... Args>
bool launch_if_cooperative(void (*kernel)(KernelArgs...), int64_t grid, dim3 block,
                           LaunchOptions options, cudaStream_t stream, const char* what,
                           size_t dynamic_smem, Args... args) {
  static std::mutex mutex;
  static std::map<std::tuple<const void*, int64_t, unsigned, unsigned, int>, bool> refused;
  const auto key = std::make_tuple(reinterpret_cast<const void*>(kernel), grid, block.x,
                                   block.y, options.cluster);
  {
    std::lock_guard<std::mutex> lock(mutex);
    if (refused.count(key)) return false;
  }
  options.cooperative = true;
  const cudaError_t status = launch_status(kernel, dim3(static_cast<unsigned>(grid)), block,
                                           options, stream, what, dynamic_smem, args...);
  if (status == cudaSuccess) return true;
  if (status != cudaErrorCooperativeLaunchTooLarge && status != cudaErrorNotSupported &&
      status != cudaErrorInvalidConfiguration && status != cudaErrorInvalidValue) {
    check_cuda(status, "kernel launch", what);
  }
  cudaGetLastError();  // (not sticky)
  std::lock_guard<std::mutex> lock(mutex);
  refused[key] = true;
  return false;
}

// A one-dimensional grid of `grid` CTAs.
template <typename... KernelArgs, typename... Args>
void launch(void (*kernel)(KernelArgs...), int64_t grid, dim3 block, LaunchOptions options,
            cudaStream_t stream, const char* what, size_t dynamic_smem, Args... args) {
  if (grid > 0x7fffffff) {
    throw Error(NK_ERROR_UNSUPPORTED, std::string(what) + ": grid of " + std::to_string(grid) +
                                          " CTAs exceeds the CUDA limit");
  }
  launch(kernel, dim3(static_cast<unsigned>(grid)), block, options, stream, what, dynamic_smem,
         args...);
}

}  // namespace normkit::cuda
