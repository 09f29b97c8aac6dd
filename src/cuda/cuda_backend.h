// CUDA backend entry points, as seen from the C API (plain C++: no CUDA headers here, so
// src/api.cpp compiles without nvcc). Arguments arrive validated with every row stride
// resolved (never 0). Failures are reported by throwing normkit::Error.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "normkit/normkit.h"

namespace normkit::cuda {

// Facts about the current device that the launch configuration depends on.
struct DeviceFacts {
  int device = 0;
  int sm_count = 0;
  int major = 0, minor = 0;
  size_t l2_bytes = 0;
  size_t smem_per_block_optin = 0;  // max dynamic + static shared memory per block
  size_t smem_per_sm = 0;
  int max_threads_per_sm = 0;
  bool cluster_launch = false;  // sm_90+: thread-block clusters available
  std::string name;
};

// Number of devices the runtime sees (0 when there is no driver or GPU; never throws).
int device_count();

// Facts about the current device (cached per device). Throws Error(NK_ERROR_NO_DEVICE) if none.
const DeviceFacts& current_device_facts();

void rms_norm_fwd(const nk_rms_norm_fwd_args& args, void* stream);

// The forward with a quantized output (args.quant != NK_QUANT_NONE); rms_norm_fwd forwards to it.
void rms_norm_fwd_quant(const nk_rms_norm_fwd_args& args, void* stream);

size_t rms_norm_bwd_workspace_bytes(int64_t rows, int64_t hidden, bool want_dweight,
                                    bool want_dbias);

void rms_norm_bwd(const nk_rms_norm_bwd_args& args, void* stream);

// Human-readable description of the launch configuration chosen for a shape and dtypes
// (for `normkit bench --explain`); with_residual: a residual fused; weight_extras: a bias or a
// zero-centered weight; weight: whether the call has a weight at all (without one or a bias,
// weight_dtype is x's, as rms_norm_fwd takes it).
std::string explain_fwd(int64_t rows, int64_t hidden, nk_dtype x, nk_dtype weight_dtype,
                        nk_dtype y, bool with_residual, bool weight_extras, bool weight = true);
// The same for the forward with a quantized y in `mode` (block: elements per scale of BLOCK;
// MXFP8 has 32, the other modes none; bias: with a bias, which TOKEN's plan depends on).
std::string explain_fwd_quant(int64_t rows, int64_t hidden, nk_dtype x, nk_dtype w,
                              nk_quant_mode mode, int block, bool bias = false);
// The plan of the per-tensor forward with y_t (one kernel, or the forward then the transpose).
std::string explain_fwd_quant_transposed(int64_t rows, int64_t hidden, nk_dtype x, nk_dtype w);
// The backward's, for contiguous operands and dweight wanted with a weight (`weight`), and dbias
// with `dbias` (with neither, weight_dtype is x's, as rms_norm_bwd takes it).
std::string explain_bwd(int64_t rows, int64_t hidden, nk_dtype x, nk_dtype weight_dtype,
                        nk_dtype dy, bool dbias = false, bool weight = true);
// What this thread's last backward launch ran where it differed from its plan ("launched
// grid=... slots=...": the launcher caps a persistent grid to the CTAs resident at once), or ""
// where it ran as planned; `normkit bench --explain` appends it to explain_bwd's line.
std::string last_bwd_launch_note();

// The occupancy that the launch plans of a few sweep shapes rely on, and what this device and
// build give: a kernel the launcher picks for the shape, at the block and shared memory of its
// plan, with its registers per thread and the CTAs that fit an SM. ptxas may give the same code
// more registers after an unrelated change (eleventh session: 53 -> 64, a CTA per SM lost and
// 3% of speed), which this makes a test failure (test_kernel_occupancy.cpp) instead of a slower
// table. Throws Error(NK_ERROR_NO_DEVICE) without a device.
struct KernelOccupancy {
  std::string kernel;  // which kernel, for which shape
  int threads = 0;     // per CTA, as planned
  int64_t smem_bytes = 0;
  int planned_ctas_per_sm = 0;  // what the plan's speed assumes
  int registers = 0;            // per thread, as built
  int ctas_per_sm = 0;          // what fits (cudaOccupancyMaxActiveBlocksPerMultiprocessor)
};
std::vector<KernelOccupancy> planned_occupancy();

// Gives the L2 lines of [ptr, ptr + bytes) that are cached the normal eviction priority (the
// kernels read inputs evict-last, which a memset flush of the L2 would not evict), enqueued on
// `stream` (a cudaStream_t); data untouched. The body of nk_cuda_demote_l2 (for benchmark
// harnesses: `normkit bench` calls it on every input before each L2 flush).
void demote_l2_lines(const void* ptr, size_t bytes, void* stream);

}  // namespace normkit::cuda
