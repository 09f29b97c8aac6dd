// What the kernels receive by value: raw pointers, resolved strides (elements) and the launch
// shape. Filled by the launchers from validated C API arguments and a LaunchConfig.
#pragma once

#include <cstdint>

namespace normkit::cuda {

struct RowShape {
  int64_t rows = 0;
  int64_t hidden = 0;
  float inv_hidden = 0;
  int items = 1;             // vectors per thread per row
  int cluster_size = 1;      // CTAs per row
  int64_t cols_per_cta = 0;  // columns per cluster CTA (multiple of the vector width)
};

// Quantized output (nk_quant_mode): the code format, and what each mode reads and writes.
enum class QuantFormat : int { kE4M3 = 0, kE5M2 = 1, kInt8 = 2 };

struct QuantParams {
  QuantFormat format = QuantFormat::kE4M3;
  float qmax = 448.0f;         // largest finite code value
  int mx_emax = 8;             // MXFP8: exponent of the format's largest power of two
  int block = 0;               // BLOCK/MXFP8: elements per scale
  int block_shift = 0;         // log2(block) (a power of two): index shifts, not divisions
  const float* scale = nullptr;  // TENSOR: [1]
  float scale_ub = 0.0f;       // TOKEN/BLOCK: upper bound on a scale (0 = none)
  void* scales = nullptr;      // TOKEN [rows] / BLOCK [rows, hidden/block] float32; MXFP8 bytes
  float* amax = nullptr;       // optional [1], zeroed before the launch
  // The registers kernels: amax per warp (warp_amax_to_global), else per CTA (the default;
  // LaunchConfig::amax_per_warp).
  bool amax_per_warp = false;
  // The registers kernels: amax per CTA without barriers (cta_amax_by_ticket) where the row sum
  // spans warps (LaunchConfig::amax_ticket).
  bool amax_ticket = false;
  // TENSOR's y transposed, [hidden, rows] codes (rms_norm_fwd_quant_transposed only; the
  // two-kernel path passes it to transpose_bytes instead).
  uint8_t* y_t = nullptr;
  int64_t y_t_stride = 0;  // bytes between rows of y_t
};

struct FwdParams {
  RowShape shape;
  const void* x;
  int64_t x_stride;
  const void* residual;  // may be null
  int64_t residual_stride;
  void* residual_out;    // non-null iff residual
  int64_t residual_out_stride;
  const void* weight;  // may be null
  const void* bias;    // may be null
  bool zero_centered;
  float eps;
  void* y;
  int64_t y_stride;
  float* rstd;  // may be null
  QuantParams quant;  // used by the quantizing kernels only
  bool evict_first_reads;  // x and residual through L2 as evict-first (read_policy.cuh)
  bool evict_last_reads;   // ... as evict-last
  // Cluster streaming: the first prefetch_bytes of the CTA's chunk of its next row, per tensor,
  // into L2 early (0: none).
  uint32_t prefetch_bytes;

  // Whether the weight comes with extras: the zero-centered add (1 + w) or a bias. Kernels
  // with an EXTRAS template flag are launched with it false where this is false, and leave both
  // out of their SASS (their predicated-off loads and adds still took issue slots).
  __host__ __device__ bool weight_extras() const { return (weight && zero_centered) || bias; }
};

// What rms_norm_fwd_lean reads of FwdParams, alone: 64 bytes against FwdParams' 230 or so.
// The launch copies a kernel's parameters; 256 bytes measured 0.06-0.23 us slower than 24 at
// one to 1024 rows (bench/results/2026-11-27T0703-h100-launch-probe).
struct LeanFwdParams {
  const void* x;
  const void* weight;
  void* y;
  float* rstd;  // may be null
  int64_t x_stride;
  int64_t y_stride;
  float inv_hidden;
  float eps;
  bool evict_first_reads;
  bool evict_last_reads;
};

inline LeanFwdParams lean_fwd_params(const FwdParams& p) {
  LeanFwdParams lean;
  lean.x = p.x;
  lean.weight = p.weight;
  lean.y = p.y;
  lean.rstd = p.rstd;
  lean.x_stride = p.x_stride;
  lean.y_stride = p.y_stride;
  lean.inv_hidden = p.shape.inv_hidden;
  lean.eps = p.eps;
  lean.evict_first_reads = p.evict_first_reads;
  lean.evict_last_reads = p.evict_last_reads;
  return lean;
}

// 1 / hidden, as each parameter block holds it.
__host__ __device__ inline float inv_hidden_of(const FwdParams& p) { return p.shape.inv_hidden; }
__host__ __device__ inline float inv_hidden_of(const LeanFwdParams& p) { return p.inv_hidden; }

struct BwdParams {
  RowShape shape;
  const void* dy;
  int64_t dy_stride;
  const void* x;
  int64_t x_stride;
  const float* rstd;
  const void* weight;  // may be null
  bool zero_centered;
  const void* dresidual_out;  // may be null
  int64_t dresidual_out_stride;
  void* dx;
  int64_t dx_stride;
  float* partial_dweight;  // [slots, hidden] or null
  float* partial_dbias;    // [slots, hidden] or null
  // With a single slot the kernel writes the sums straight to dweight/dbias (weight dtype) and
  // no reduction kernel follows; then partial_* are null.
  void* dweight;  // [hidden] or null
  void* dbias;    // [hidden] or null
  // Under a cooperative launch (every CTA resident) the kernel itself then sums partial_* over
  // the `slots` rows into these (weight dtype; reduce_slots_in_grid) and no reduction kernel
  // follows; null otherwise.
  void* grid_dweight;  // [hidden] or null
  void* grid_dbias;    // [hidden] or null
  int64_t slots;
  bool early_dependent;  // allow_dependent_launch at the kernel's start
  bool dependent_after_rows;  // ... after the CTA's rows (the pipelined kernel)
  // The pipelined kernel's row groups' sums added by every thread of the CTA (else by group 0).
  bool group_sums_by_cta;
  bool evict_first_reads;  // x, dy and dresidual_out through L2 as evict-first (read_policy.cuh)
  bool evict_last_reads;   // ... as evict-last
  // Cluster streaming: the first prefetch_bytes of the CTA's chunk of its next row, per tensor,
  // into L2 early (0: none).
  uint32_t prefetch_bytes;

  __host__ __device__ bool want_dweight() const { return partial_dweight || dweight; }
  __host__ __device__ bool want_dbias() const { return partial_dbias || dbias; }
  __host__ __device__ bool reduce_in_grid() const { return grid_dweight || grid_dbias; }
};

}  // namespace normkit::cuda
