// planned_occupancy (cuda_backend.h): the CTAs per SM that the plans of a few sweep shapes rely
// on, against what the built kernels get on this device.
#include <cuda_bf16.h>

#include "cuda/cuda_backend.h"
#include "cuda/cuda_check.h"
#include "cuda/launch_common.cuh"
#include "cuda/launch_config.h"
#include "cuda/rms_norm_bwd_pipelined.cuh"
#include "cuda/rms_norm_fwd_kernels.cuh"
#include "cuda/rms_norm_fwd_quant_kernels.cuh"
#include "cuda/rms_norm_fwd_quant_ticketed.cuh"
#include "cuda/vector_width.h"

namespace normkit::cuda {
namespace {

using bf16 = __nv_bfloat16;

template <typename Kernel>
KernelOccupancy measure(const char* what, Kernel kernel, const LaunchConfig& plan,
                        int planned_ctas_per_sm) {
  KernelOccupancy o;
  o.kernel = what;
  o.threads = plan.threads_per_row * plan.rows_per_block;
  o.smem_bytes = plan.smem_bytes;
  o.planned_ctas_per_sm = planned_ctas_per_sm;
  cudaFuncAttributes attributes{};
  check_cuda(cudaFuncGetAttributes(&attributes, kernel), "cudaFuncGetAttributes", what);
  o.registers = attributes.numRegs;
  // As the launchers do: 48 KB of dynamic shared memory plus the kernel's static arrays pass
  // the default limit, and the query then answers 0 CTAs.
  allow_dynamic_smem(kernel, static_cast<size_t>(plan.smem_bytes), what);
  check_cuda(cudaOccupancyMaxActiveBlocksPerMultiprocessor(
                 &o.ctas_per_sm, kernel, o.threads, static_cast<size_t>(plan.smem_bytes)),
             "cudaOccupancyMaxActiveBlocksPerMultiprocessor", what);
  return o;
}

// The plan of a contiguous bf16 shape, returned where `expected` holds: the kind the entry
// below names (a planner change should update this list, not pass it silently).
LaunchConfig checked(int64_t rows, int64_t hidden, const LaunchConfig& c, bool expected) {
  if (!expected) {
    throw Error(NK_ERROR_INTERNAL, "planned_occupancy: the plan of " + std::to_string(rows) +
                                       "x" + std::to_string(hidden) + " changed: " +
                                       c.describe());
  }
  return c;
}
LaunchConfig bf16_fwd_plan(int64_t rows, int64_t hidden, int items_at_most, const KernelFacts& f) {
  const LaunchConfig c = plan_fwd(rows, hidden, 8, f, 2);
  return checked(rows, hidden, c,
                 c.plan == RowPlan::kRegisters && c.exact && c.items <= items_at_most &&
                     c.cluster_size == 1);
}
LaunchConfig bf16_bwd_plan(int64_t rows, int64_t hidden, const KernelFacts& f) {
  const LaunchConfig c = plan_bwd(rows, hidden, 8, f, 4);
  return checked(rows, hidden, c,
                 c.plan == RowPlan::kPipelined && c.items <= 2 && c.cluster_size == 1);
}

// The plan of a contiguous bf16 shape of short rows at two rows per row group
// (KernelFacts::fwd_rows_per_group).
LaunchConfig bf16_fwd_rows_plan(int64_t rows, int64_t hidden, const KernelFacts& f) {
  const LaunchConfig c = plan_fwd(rows, hidden, 8, f, 2);
  return checked(rows, hidden, c,
                 c.plan == RowPlan::kRegisters && c.exact && c.rows_per_group == 2 &&
                     c.items <= kSmallItems && c.threads_per_row <= 32);
}

// The quantized forward's pinned plan (pin_quant_registers) of a contiguous bf16 shape.
LaunchConfig bf16_quant_plan(int64_t rows, int64_t hidden, bool dynamic, const KernelFacts& f) {
  LaunchConfig c = plan_fwd_quant(rows, hidden, 8, 0, dynamic, f);
  pin_quant_registers(c, rows, hidden, f);
  return checked(rows, hidden, c,
                 c.plan == RowPlan::kRegisters && c.pinned_registers && c.items == kSmallItems &&
                     c.cluster_size == 1);
}

// The same plan as the ticketed grid with y_t launches it (rms_norm_fwd_quant_ticketed): its
// transpose units' tiles as dynamic shared memory.
LaunchConfig bf16_ticketed_plan(int64_t rows, int64_t hidden, const KernelFacts& facts) {
  const KernelFacts f = facts_with_transposed_output(facts);
  LaunchConfig c = bf16_quant_plan(rows, hidden, false, f);
  c.smem_bytes = f.quant_ticket_slices * band_tile_bytes(c.threads_per_row * c.rows_per_block);
  return c;
}

}  // namespace

std::vector<KernelOccupancy> planned_occupancy() {
  const KernelFacts f = kernel_facts(current_device_facts());
  auto exact_small = rms_norm_fwd_registers_exact_small<bf16, bf16, bf16, 8, kSmallItems, false>;
  auto exact_wide = rms_norm_fwd_registers<bf16, bf16, bf16, 8, fwd_items_max(8), true>;
  auto fwd_rows = rms_norm_fwd_registers_rows<bf16, bf16, bf16, 8, kSmallItems, 2, false>;
  auto bwd = rms_norm_bwd_pipelined<bf16, bf16, bf16, 8, 2, false, false>;
  auto quant_tensor =
      rms_norm_fwd_quant_registers_exact_small<bf16, bf16, NK_QUANT_TENSOR, 8, false, true>;
  // (The e4m3 variant: the bench's y.)
  auto quant_token = rms_norm_fwd_quant_token_folded_exact_small<bf16, bf16, 8, false, true>;
  auto ticketed = f.quant_ticket_slices == 2 ? rms_norm_fwd_quant_ticketed<bf16, bf16, false, 2>
                                             : rms_norm_fwd_quant_ticketed<bf16, bf16, false, 1>;
  // CTAs per SM by registers (65536 per SM) at the block sizes of these plans: 384 x 4 vectors
  // (12288 columns) three, 256 x 4 four, 512 x 4 and 512 x 8 two, and for the quantized
  // forward's pinned 56 registers 384 x 4 three and 224 x 4 (7168 columns) five (with y_t, the
  // ticketed grid's tiles must not cost one); the backward's plans of 256 threads assume
  // KernelFacts::bwd_ctas_per_sm (2), those of 160 threads three; the forward's 2 rows per
  // group of 256 threads at 64 registers four (its grid: rows for 2 CTAs per SM or more).
  return {
      measure("fwd 4096x12288 (EXACT, small budget)", exact_small,
              bf16_fwd_plan(4096, 12288, kSmallItems, f), 3),
      measure("fwd 8192x8192 (EXACT, small budget)", exact_small,
              bf16_fwd_plan(8192, 8192, kSmallItems, f), 4),
      measure("fwd 2048x16384 (EXACT, small budget)", exact_small,
              bf16_fwd_plan(2048, 16384, kSmallItems, f), 2),
      measure("fwd 1024x32768 (EXACT, large budget)", exact_wide,
              bf16_fwd_plan(1024, 32768, fwd_items_max(8), f), 2),
      measure("fwd 131072x128 (2 rows per group, 2 vectors)", fwd_rows,
              bf16_fwd_rows_plan(131072, 128, f), 4),
      measure("fwd 16384x512 (2 rows per group, 4 vectors)", fwd_rows,
              bf16_fwd_rows_plan(16384, 512, f), 4),
      measure("quant tensor 4096x12288 (pinned)", quant_tensor,
              bf16_quant_plan(4096, 12288, false, f), 3),
      measure("quant token 4096x12288 (folded, pinned)", quant_token,
              bf16_quant_plan(4096, 12288, true, f), 3),
      measure("quant tensor 16384x7168 (pinned)", quant_tensor,
              bf16_quant_plan(16384, 7168, false, f), 5),
      measure("quant tensor + y_t 4096x12288 (ticketed)", ticketed,
              bf16_ticketed_plan(4096, 12288, f), 3),
      measure("quant tensor + y_t 8192x8192 (ticketed)", ticketed,
              bf16_ticketed_plan(8192, 8192, f), 4),
      measure("quant tensor + y_t 16384x7168 (ticketed)", ticketed,
              bf16_ticketed_plan(16384, 7168, f), 5),
      measure("bwd 8192x4096 (pipelined)", bwd, bf16_bwd_plan(8192, 4096, f), f.bwd_ctas_per_sm),
      // (KernelFacts::bwd_mid_row_cta_threads: one CTA of 512 threads, 8 row groups of 64.)
      measure("bwd 4096x1024 (pipelined, 8 row groups)", bwd, bf16_bwd_plan(4096, 1024, f), 1),
      // (KernelFacts::bwd_pipelined_ctas_per_sm: three CTAs of 160 threads.)
      measure("bwd 8192x2304 (pipelined, 160 threads)", bwd, bf16_bwd_plan(8192, 2304, f), 3),
  };
}

}  // namespace normkit::cuda
