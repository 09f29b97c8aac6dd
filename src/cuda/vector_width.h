// Launch facts shared by the backend entry points: the device facts the launch configuration
// needs, and the widest vector access every operand's alignment allows.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <vector>

#include "cuda/cuda_backend.h"
#include "cuda/launch_config.h"

namespace normkit::cuda {

// A launch-configuration knob from the environment, for tuning sweeps on a device
// (out-of-range or unparsable values leave the default).
inline int tuning_knob(const char* name, int fallback, int lo, int hi) {
  const char* text = std::getenv(name);
  if (!text || !*text) return fallback;
  char* end = nullptr;
  const long v = std::strtol(text, &end, 10);
  return (*end == '\0' && v >= lo && v <= hi) ? static_cast<int>(v) : fallback;
}

// A knob of rows, columns or elements (0 to 2^30) over an int64_t default.
inline int64_t count_knob(const char* name, int64_t fallback) {
  return tuning_knob(name, static_cast<int>(fallback), 0, 1 << 30);
}

// KernelFacts' defaults with the NK_TUNE_* knobs applied, read once per process rather than on
// every call's launch path (a sweep runs one process per setting: bench/tune.sh).
inline const KernelFacts& tuned_defaults() {
  static const KernelFacts tuned = [] {
    KernelFacts k;
    k.bwd_ctas_per_sm = tuning_knob("NK_TUNE_BWD_CTAS_PER_SM", k.bwd_ctas_per_sm, 1, 8);
    k.bwd_items_target = tuning_knob("NK_TUNE_BWD_ITEMS", k.bwd_items_target, 0, kPipelineItems);
    k.bwd_pipelined_ctas_per_sm =
        tuning_knob("NK_TUNE_BWD_PIPELINED_CTAS_PER_SM", k.bwd_pipelined_ctas_per_sm, 0, 8);
    k.bwd_sub_warp_rows = tuning_knob("NK_TUNE_BWD_SUB_WARP_ROWS", k.bwd_sub_warp_rows, 0, 2);
    k.bwd_cta_threads = tuning_knob("NK_TUNE_BWD_CTA_THREADS", k.bwd_cta_threads, 256, 512);
    k.bwd_mid_row_cta_threads =
        tuning_knob("NK_TUNE_BWD_MID_ROW_CTA_THREADS", k.bwd_mid_row_cta_threads, 256, 512);
    k.bwd_narrow_items = tuning_knob("NK_TUNE_BWD_NARROW_ITEMS", k.bwd_narrow_items,
                                     bwd_items_max(1), kBwdNarrowItemsWide);
    k.bwd_reduce_in_grid = tuning_knob("NK_TUNE_BWD_REDUCE_IN_GRID", k.bwd_reduce_in_grid, 0, 1);
    k.bwd_registers_max_rows =
        count_knob("NK_TUNE_BWD_REGISTERS_MAX_ROWS", k.bwd_registers_max_rows);
    k.bwd_column_sums_max_elements =
        count_knob("NK_TUNE_BWD_COLUMN_SUMS_MAX_ELEMENTS", k.bwd_column_sums_max_elements);
    k.bwd_column_sums_max_rows =
        count_knob("NK_TUNE_BWD_COLUMN_SUMS_MAX_ROWS", k.bwd_column_sums_max_rows);
    k.bwd_column_sums_max_rows_dbias =
        count_knob("NK_TUNE_BWD_COLUMN_SUMS_MAX_ROWS_DBIAS", k.bwd_column_sums_max_rows_dbias);
    k.bwd_realign = tuning_knob("NK_TUNE_BWD_REALIGN", k.bwd_realign, 0, 2);
    k.bwd_realign_threads =
        tuning_knob("NK_TUNE_BWD_REALIGN_THREADS", k.bwd_realign_threads, 32, 512);
    k.bwd_realign_items = tuning_knob("NK_TUNE_BWD_REALIGN_ITEMS", k.bwd_realign_items, 0,
                                      kRealignMaxItems);
    k.bwd_realign_slots = tuning_knob("NK_TUNE_BWD_REALIGN_SLOTS", k.bwd_realign_slots, 0, 2);
    k.bwd_realign_slot_cta_threads = tuning_knob("NK_TUNE_BWD_REALIGN_SLOT_CTA_THREADS",
                                                 k.bwd_realign_slot_cta_threads, 0, 512);
    k.bwd_realign_slot_pinned =
        tuning_knob("NK_TUNE_BWD_REALIGN_SLOT_PINNED", k.bwd_realign_slot_pinned, 0, 2);
    k.bwd_realign_slot_cta_rows = tuning_knob("NK_TUNE_BWD_REALIGN_SLOT_CTA_ROWS",
                                              k.bwd_realign_slot_cta_rows, 1, kRealignSlotRowsMax);
    k.bwd_realign_sums_max_rows =
        count_knob("NK_TUNE_BWD_REALIGN_SUMS_MAX_ROWS", k.bwd_realign_sums_max_rows);
    k.bwd_realign_sums_max_elements =
        count_knob("NK_TUNE_BWD_REALIGN_SUMS_MAX_ELEMENTS", k.bwd_realign_sums_max_elements);
    k.bwd_realign_slots_first_rows =
        count_knob("NK_TUNE_BWD_REALIGN_SLOTS_FIRST_ROWS", k.bwd_realign_slots_first_rows);
    k.bwd_realign_slots_first_elements =
        count_knob("NK_TUNE_BWD_REALIGN_SLOTS_FIRST_ELEMENTS", k.bwd_realign_slots_first_elements);
    k.bwd_realign_whole_min_columns =
        count_knob("NK_TUNE_BWD_REALIGN_WHOLE_MIN_COLUMNS", k.bwd_realign_whole_min_columns);
    k.bwd_reduce_kernel = tuning_knob("NK_TUNE_BWD_REDUCE_KERNEL", k.bwd_reduce_kernel, 0, 1);
    k.bwd_early_dependent =
        tuning_knob("NK_TUNE_BWD_EARLY_DEPENDENT", k.bwd_early_dependent, 0, 2);
    k.smem_carveout = tuning_knob("NK_TUNE_SMEM_CARVEOUT", k.smem_carveout, -1, 100);
    k.bwd_group_sums_by_cta =
        tuning_knob("NK_TUNE_BWD_GROUP_SUMS_BY_CTA", k.bwd_group_sums_by_cta, 0, 1);
    k.bwd_pending_in_registers =
        tuning_knob("NK_TUNE_BWD_PENDING_IN_REGISTERS", k.bwd_pending_in_registers, 0, 1);
    k.bwd_smem_weight = tuning_knob("NK_TUNE_BWD_SMEM_WEIGHT", k.bwd_smem_weight, 0, 1);
    k.bwd_cluster_streaming =
        tuning_knob("NK_TUNE_BWD_CLUSTER_STREAMING", k.bwd_cluster_streaming, 0, 1);
    k.bwd_streaming_sums_max_kb =
        tuning_knob("NK_TUNE_BWD_STREAMING_SUMS_MAX_KB", k.bwd_streaming_sums_max_kb, 0, 1024);
    k.bwd_streaming_max_clusters = tuning_knob("NK_TUNE_BWD_STREAMING_MAX_CLUSTERS",
                                               k.bwd_streaming_max_clusters, 0, 1024);
    k.fwd_cluster_streaming =
        tuning_knob("NK_TUNE_FWD_CLUSTER_STREAMING", k.fwd_cluster_streaming, 0, 1);
    k.cluster_streaming_prefetch =
        tuning_knob("NK_TUNE_CLUSTER_STREAMING_PREFETCH", k.cluster_streaming_prefetch, 0, 2);
    k.cluster_streaming_prefetch_kb = tuning_knob("NK_TUNE_CLUSTER_STREAMING_PREFETCH_KB",
                                                  k.cluster_streaming_prefetch_kb, 0, 1 << 20);
    k.cluster_streaming_l2_percent = tuning_knob("NK_TUNE_CLUSTER_STREAMING_L2_PERCENT",
                                                 k.cluster_streaming_l2_percent, 0, 100);
    k.fwd_ctas_per_sm = tuning_knob("NK_TUNE_FWD_CTAS_PER_SM", k.fwd_ctas_per_sm, 1, 16);
    k.fwd_pipeline_max_rows =
        tuning_knob("NK_TUNE_FWD_PIPELINE_MAX_ROWS", k.fwd_pipeline_max_rows, 0, 1 << 30);
    k.fwd_pipeline_clusters =
        tuning_knob("NK_TUNE_FWD_PIPELINE_CLUSTERS", k.fwd_pipeline_clusters, 0, 1);
    k.max_cluster_pipelined =
        tuning_knob("NK_TUNE_BWD_HUGE_ROW_CLUSTER", k.max_cluster_pipelined, 0, 16);
    k.split_for_fill_elements =
        count_knob("NK_TUNE_SPLIT_FOR_FILL_ELEMENTS", k.split_for_fill_elements);
    k.fwd_cluster_threads =
        tuning_knob("NK_TUNE_FWD_CLUSTER_THREADS", k.fwd_cluster_threads, 32, 512);
    k.fwd_cta_threads = tuning_knob("NK_TUNE_FWD_CTA_THREADS", k.fwd_cta_threads, 32, 1024);
    k.quant_cta_threads =
        tuning_knob("NK_TUNE_QUANT_CTA_THREADS", k.quant_cta_threads, 32, 1024);
    k.fwd_max_cluster = tuning_knob("NK_TUNE_FWD_MAX_CLUSTER", k.fwd_max_cluster, 1, 16);
    k.fwd_wide_row_cluster =
        tuning_knob("NK_TUNE_FWD_WIDE_ROW_CLUSTER", k.fwd_wide_row_cluster, 0, 16);
    k.fwd_wide_row_large_items =
        tuning_knob("NK_TUNE_FWD_WIDE_ROW_LARGE_ITEMS", k.fwd_wide_row_large_items, 0, 3);
    k.fwd_split_wide_rows = tuning_knob("NK_TUNE_FWD_SPLIT_WIDE_ROWS", k.fwd_split_wide_rows, 0, 1);
    k.bwd_cluster_threads =
        tuning_knob("NK_TUNE_BWD_CLUSTER_THREADS", k.bwd_cluster_threads, 32, 512);
    k.bwd_cluster_threads_max_vectors =
        count_knob("NK_TUNE_BWD_CLUSTER_THREADS_MAX_VECTORS", k.bwd_cluster_threads_max_vectors);
    k.bwd_split_vectors =
        tuning_knob("NK_TUNE_BWD_SPLIT_VECTORS", k.bwd_split_vectors, 32, 1 << 20);
    k.fwd_realign = tuning_knob("NK_TUNE_FWD_REALIGN", k.fwd_realign, 0, 1);
    k.fwd_realign_slots = tuning_knob("NK_TUNE_FWD_REALIGN_SLOTS", k.fwd_realign_slots, 0, 1);
    k.fwd_realign_slot_cta_threads = tuning_knob("NK_TUNE_FWD_REALIGN_SLOT_CTA_THREADS",
                                                 k.fwd_realign_slot_cta_threads, 0, 512);
    k.realign_weight_only =
        tuning_knob("NK_TUNE_REALIGN_WEIGHT_ONLY", k.realign_weight_only, 0, 1);
    k.fwd_realign_slot_items =
        tuning_knob("NK_TUNE_FWD_REALIGN_SLOT_ITEMS", k.fwd_realign_slot_items, 0, 4);
    k.bwd_realign_slot_items =
        tuning_knob("NK_TUNE_BWD_REALIGN_SLOT_ITEMS", k.bwd_realign_slot_items, 0, 4);
    k.fwd_realign_min_elements =
        count_knob("NK_TUNE_FWD_REALIGN_MIN_ELEMENTS", k.fwd_realign_min_elements);
    k.fwd_realign_clusters =
        tuning_knob("NK_TUNE_FWD_REALIGN_CLUSTERS", k.fwd_realign_clusters, 0, 1);
    k.fwd_realign_long_rows_min_elements = count_knob(
        "NK_TUNE_FWD_REALIGN_LONG_ROWS_MIN_ELEMENTS", k.fwd_realign_long_rows_min_elements);
    k.fwd_realign_short_rows_min_elements = count_knob(
        "NK_TUNE_FWD_REALIGN_SHORT_ROWS_MIN_ELEMENTS", k.fwd_realign_short_rows_min_elements);
    k.fwd_realign_rows_min_rows =
        count_knob("NK_TUNE_FWD_REALIGN_ROWS_MIN_ROWS", k.fwd_realign_rows_min_rows);
    k.fwd_realign_lean_rows_min_rows =
        count_knob("NK_TUNE_FWD_REALIGN_LEAN_ROWS_MIN_ROWS", k.fwd_realign_lean_rows_min_rows);
    k.fwd_realign_lean = tuning_knob("NK_TUNE_FWD_REALIGN_LEAN", k.fwd_realign_lean, 0, 2);
    k.fwd_realign_lean_general = tuning_knob("NK_TUNE_FWD_REALIGN_LEAN_GENERAL",
                                             k.fwd_realign_lean_general, 0, 2);
    k.bwd_columns_max_elements =
        count_knob("NK_TUNE_BWD_COLUMNS_MAX_ELEMENTS", k.bwd_columns_max_elements);
    k.quant_weight_first =
        tuning_knob("NK_TUNE_QUANT_WEIGHT_FIRST", k.quant_weight_first, 0, 2);
    k.fwd_exact = tuning_knob("NK_TUNE_FWD_EXACT", k.fwd_exact, 0, 4);
    k.fwd_whole_warps = tuning_knob("NK_TUNE_FWD_WHOLE_WARPS", k.fwd_whole_warps, 0, 2);
    k.fwd_rows_per_group =
        tuning_knob("NK_TUNE_FWD_ROWS_PER_GROUP", k.fwd_rows_per_group, 1, 4);
    if (k.fwd_rows_per_group == 3) k.fwd_rows_per_group = 2;  // (kernels for 2 and 4)
    k.fwd_rows_per_group_max_threads = tuning_knob("NK_TUNE_FWD_ROWS_PER_GROUP_MAX_THREADS",
                                                   k.fwd_rows_per_group_max_threads, 1, 512);
    k.fwd_short_row_items =
        tuning_knob("NK_TUNE_FWD_SHORT_ROW_ITEMS", k.fwd_short_row_items, 0, 4);
    k.fwd_tiny_registers =
        tuning_knob("NK_TUNE_FWD_TINY_REGISTERS", k.fwd_tiny_registers, 0, 2);
    k.fwd_weight_first = tuning_knob("NK_TUNE_FWD_WEIGHT_FIRST", k.fwd_weight_first, 0, 1 << 20);
    k.fwd_lean = tuning_knob("NK_TUNE_FWD_LEAN", k.fwd_lean, 0, 1);
    k.fwd_lean_pipeline_max_rows = tuning_knob("NK_TUNE_FWD_LEAN_PIPELINE_MAX_ROWS",
                                               k.fwd_lean_pipeline_max_rows, 0, 1 << 30);
    k.fwd_lean_waves = tuning_knob("NK_TUNE_FWD_LEAN_WAVES", k.fwd_lean_waves, 0, 64);
    k.fwd_lean_params = tuning_knob("NK_TUNE_FWD_LEAN_PARAMS", k.fwd_lean_params, 0, 1);
    k.fwd_weak_stores = tuning_knob("NK_TUNE_FWD_WEAK_STORES", k.fwd_weak_stores, 0, 1);
    k.bwd_lean = tuning_knob("NK_TUNE_BWD_LEAN", k.bwd_lean, 0, 1);
    k.bwd_lean_dbias = tuning_knob("NK_TUNE_BWD_LEAN_DBIAS", k.bwd_lean_dbias, 0, 1);
    k.bwd_lean_one_item_threads = tuning_knob("NK_TUNE_BWD_LEAN_ONE_ITEM_THREADS",
                                              k.bwd_lean_one_item_threads, 0, 512);
    k.quant_amax_per_warp =
        tuning_knob("NK_TUNE_QUANT_AMAX_PER_WARP", k.quant_amax_per_warp, 0, 1);
    k.quant_amax_ticket = tuning_knob("NK_TUNE_QUANT_AMAX_TICKET", k.quant_amax_ticket, 0, 1);
    k.quant_mxfp8_pairs = tuning_knob("NK_TUNE_QUANT_MXFP8_PAIRS", k.quant_mxfp8_pairs, 0, 2);
    k.quant_row_sum_quads =
        tuning_knob("NK_TUNE_QUANT_ROW_SUM_QUADS", k.quant_row_sum_quads, 0, 1);
    k.bwd_row_sum_quads = tuning_knob("NK_TUNE_BWD_ROW_SUM_QUADS", k.bwd_row_sum_quads, 0, 1);
    k.bwd_pipelined_row_sum_quads = tuning_knob("NK_TUNE_BWD_PIPELINED_ROW_SUM_QUADS",
                                                k.bwd_pipelined_row_sum_quads, 0, 1);
    k.fwd_row_sum_quads = tuning_knob("NK_TUNE_FWD_ROW_SUM_QUADS", k.fwd_row_sum_quads, 0, 1);
    k.fwd_rows_row_sum_quads =
        tuning_knob("NK_TUNE_FWD_ROWS_ROW_SUM_QUADS", k.fwd_rows_row_sum_quads, 0, 1);
    k.fwd_lean_row_sum_quads =
        tuning_knob("NK_TUNE_FWD_LEAN_ROW_SUM_QUADS", k.fwd_lean_row_sum_quads, 0, 1);
    k.quant_full_items = tuning_knob("NK_TUNE_QUANT_FULL_ITEMS", k.quant_full_items, 0, 1);
    k.fwd_wide_row_threads =
        tuning_knob("NK_TUNE_FWD_WIDE_ROW_THREADS", k.fwd_wide_row_threads, 0, 512);
    k.fwd_wide_row_max_cluster =
        tuning_knob("NK_TUNE_FWD_WIDE_ROW_MAX_CLUSTER", k.fwd_wide_row_max_cluster, 1, 16);
    k.quant_fixed_format =
        tuning_knob("NK_TUNE_QUANT_FIXED_FORMAT", k.quant_fixed_format, 0, 1);
    k.quant_block_e4m3 = tuning_knob("NK_TUNE_QUANT_BLOCK_E4M3", k.quant_block_e4m3, 0, 2);
    k.quant_block_e4m3_residual_min_columns =
        tuning_knob("NK_TUNE_QUANT_BLOCK_E4M3_RESIDUAL_MIN_COLUMNS",
                    k.quant_block_e4m3_residual_min_columns, 0, 1 << 30);
    k.quant_mxfp8_e4m3 = tuning_knob("NK_TUNE_QUANT_MXFP8_E4M3", k.quant_mxfp8_e4m3, 0, 1);
    k.quant_pin_clusters =
        tuning_knob("NK_TUNE_QUANT_PIN_CLUSTERS", k.quant_pin_clusters, 0, 1);
    k.quant_wide_row_threads =
        tuning_knob("NK_TUNE_QUANT_WIDE_ROW_THREADS", k.quant_wide_row_threads, 0, 512);
    k.fwd_items_target = tuning_knob("NK_TUNE_FWD_ITEMS", k.fwd_items_target, 1, 4);
    k.quant_fused_transpose =
        tuning_knob("NK_TUNE_QUANT_FUSED_TRANSPOSE", k.quant_fused_transpose, 0, 3);
    k.quant_ticket_lag_percent =
        tuning_knob("NK_TUNE_QUANT_TICKET_LAG", k.quant_ticket_lag_percent, 0, 1000);
    k.quant_ticket_slices = tuning_knob("NK_TUNE_QUANT_TICKET_SLICES", k.quant_ticket_slices, 1, 2);
    k.quant_ticket_cta_threads =
        tuning_knob("NK_TUNE_QUANT_TICKET_CTA_THREADS", k.quant_ticket_cta_threads, 32, 1024);
    k.quant_transpose_evict_first = tuning_knob("NK_TUNE_QUANT_TRANSPOSE_EVICT_FIRST",
                                                k.quant_transpose_evict_first, 0, 1);
    k.quant_fused_items_target =
        tuning_knob("NK_TUNE_QUANT_FUSED_ITEMS", k.quant_fused_items_target, 1, 4);
    k.evict_first_max_mib =
        tuning_knob("NK_TUNE_EVICT_FIRST_MAX_MIB", k.evict_first_max_mib, 0, 1 << 24);
    k.evict_last_min_mib =
        tuning_knob("NK_TUNE_EVICT_LAST_MIN_MIB", k.evict_last_min_mib, 0, 1 << 24);
    return k;
  }();
  return tuned;
}

inline KernelFacts kernel_facts(const DeviceFacts& d) {
  KernelFacts k = tuned_defaults();
  k.sm_count = d.sm_count;
  k.cluster_launch = d.cluster_launch;
  k.max_cluster = 8;
  // Less 1 KB for the kernels' static shared memory (reduction scratch).
  if (d.smem_per_block_optin > 1024) k.smem_per_block = static_cast<int64_t>(d.smem_per_block_optin) - 1024;
  if (d.smem_per_sm > 0) k.smem_per_sm = static_cast<int64_t>(d.smem_per_sm);
  if (d.l2_bytes > 0) k.l2_bytes = static_cast<int64_t>(d.l2_bytes);
  return k;
}

// One matrix or vector operand, for choosing the vector width.
struct Operand {
  const void* ptr;
  size_t element_bytes;
  int64_t row_stride;  // elements; ignored for vectors and single rows
};

// The widest vector (in elements) such that every row start of every operand is aligned to
// the access size min(16 bytes, vec * element size), and at most max_vec.
inline int vector_width(int64_t rows, const std::vector<Operand>& operands, int max_vec = 16) {
  size_t smallest = 16;
  for (const Operand& o : operands) {
    if (o.ptr) smallest = std::min(smallest, o.element_bytes);
  }
  int vec = std::min(static_cast<int>(16 / smallest), max_vec);
  while (vec > 1) {
    bool aligned = true;
    for (const Operand& o : operands) {
      if (!o.ptr) continue;
      const size_t access = std::min<size_t>(16, vec * o.element_bytes);
      const bool ptr_ok = reinterpret_cast<uintptr_t>(o.ptr) % access == 0;
      const bool stride_ok =
          rows == 1 || (static_cast<size_t>(o.row_stride) * o.element_bytes) % access == 0;
      aligned = aligned && ptr_ok && stride_ok;
    }
    if (aligned) break;
    vec /= 2;
  }
  return vec;
}

}  // namespace normkit::cuda
