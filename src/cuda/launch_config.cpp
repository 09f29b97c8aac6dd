#include "cuda/launch_config.h"

#include <algorithm>
#include <string>
#include <utility>

#include "common/quant_rules.h"
#include "cuda/columns_layout.h"

namespace normkit::cuda {
namespace {

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

int next_pow2(int64_t v) {
  int p = 1;
  while (p < v) p *= 2;
  return p;
}

// Threads per row for `nvec` vectors: enough that each thread holds about `items_target`
// vectors (4: several 16-byte loads in flight per thread), a power of two so sub-warp shuffles
// line up.
int threads_for(int64_t nvec, int max_threads, int items_target = 4) {
  return static_cast<int>(
      std::min<int64_t>(next_pow2(ceil_div(nvec, items_target)), max_threads));
}

// The quantized forward's CTA shape with facts.fwd_exact >= 2: where `threads` (a power of two) x
// `items` leaves some threads' last vectors empty, whole warps that cover the chunk's
// `nvec_cta` vectors exactly with the same items, or more up to kSmallItems (never leaving the
// smaller register budget), so that the EXACT kernels apply: 7168 columns (896 vectors) as 224
// x 4 rather than 256 x 4, 5120 (640) as 160 x 4 rather than 256 x 3. `multiple`: a number of
// vectors the thread count must be a multiple of (block scales), else 1.
void exact_shape(LaunchConfig& c, int64_t nvec_cta, int64_t multiple, const KernelFacts& f) {
  if (f.fwd_exact < 2) return;
  for (int items = c.items; items <= std::max(c.items, kSmallItems); ++items) {
    if (nvec_cta % items != 0) continue;
    const int64_t t = nvec_cta / items;
    if (t % 32 == 0 && t % multiple == 0 && t <= c.threads_per_row) {
      c.threads_per_row = static_cast<int>(t);
      c.items = items;
      return;
    }
  }
}

// Fills the in-CTA shape for a CTA that covers `nvec_cta` vectors of one row.
void shape_cta(LaunchConfig& c, int64_t nvec_cta, int max_threads, int items_target = 4) {
  c.threads_per_row = threads_for(nvec_cta, max_threads, items_target);
  c.items = static_cast<int>(ceil_div(nvec_cta, c.threads_per_row));
}

// Several rows per block up to cta_threads threads (more warps per SM when the grid is
// persistent, and fewer, larger blocks for short rows), but never so many that the grid leaves
// SMs idle.
int rows_per_block_for(int threads_per_row, int64_t rows, int sm_count, int cta_threads = 256) {
  int r = std::max(1, cta_threads / threads_per_row);
  const int64_t want_blocks = 2LL * sm_count;
  while (r > 1 && ceil_div(rows, r) < want_blocks) r /= 2;
  return r;
}

// Reshapes c's CTA, whose chunk of a row holds `nvec` vectors, to fewer threads: the fewest whole
// warps that cover those vectors exactly at up to max_items vectors per thread (rows per block,
// up to cta_threads threads, and grid again where a CTA holds whole rows). Returns whether it did.
bool fewer_whole_warps(LaunchConfig& c, int64_t nvec, int max_items, int64_t rows,
                       const KernelFacts& f, int cta_threads) {
  for (int items = max_items; items >= c.items; --items) {
    if (nvec % items != 0) continue;
    const int64_t t = nvec / items;
    if (t % 32 != 0 || t >= c.threads_per_row) continue;
    c.threads_per_row = static_cast<int>(t);
    c.items = items;
    if (c.cluster_size == 1) {
      c.rows_per_block = rows_per_block_for(c.threads_per_row, rows, f.sm_count, cta_threads);
      c.grid = ceil_div(rows, c.rows_per_block);
    }
    return true;
  }
  return false;
}

// The plain forward with facts.fwd_exact >= 3: a one-CTA-per-row registers plan of 512
// threads reshaped to the fewest whole warps that cover the row exactly at up to kSmallItems
// vectors per thread (12288 columns, 1536 vectors: 384 x 4 rather than 512 x 3, so three CTAs
// fit an SM by registers instead of two). Measured (tenth session, H100): 4096 x 12288 75.8 ->
// 73.5 us; at 256 threads no gain (16384 x 7168 as 224 x 4: level) or a loss (seventh
// session: 4096 x 5120 as 160 x 4, 1.21x slower), so those keep their powers of two.
void fewest_whole_warps(LaunchConfig& c, int64_t rows, int64_t hidden, const KernelFacts& f) {
  if (f.fwd_exact < 3 || c.plan != RowPlan::kRegisters || c.cluster_size != 1 ||
      c.threads_per_row != kFwdMaxThreadsPerRow || c.realigned || c.vec <= 0 ||
      hidden % c.vec != 0 || c.items > kSmallItems) {
    return;
  }
  // (Never past the vectors per thread that NK_TUNE_FWD_ITEMS aims for.)
  if (fewer_whole_warps(c, hidden / c.vec, std::min(kSmallItems, f.fwd_items_target), rows, f,
                        f.fwd_cta_threads)) {
    c.cols_per_cta = hidden;
  }
}

// KernelFacts::fwd_whole_warps: a one-CTA-per-row plain registers plan of under 512 threads
// that leaves some of the row's vectors empty, reshaped to the whole warps (at most 512 threads)
// that cover the row exactly: at the most vectors per thread from kSmallItems down to 3
// (setting 1), or at the fewest from 2 up (setting 2); rows per block and grid again. Plans
// that no such shape covers, or whose rows the new blocks of several rows would not cover
// exactly (the EXACT kernels would not apply), are left as they are, as is every plan where
// the EXACT kernels are off (fwd_exact 0).
void whole_warps_for_row(LaunchConfig& c, int64_t rows, int64_t hidden, const KernelFacts& f) {
  if (f.fwd_whole_warps == 0 || f.fwd_exact == 0 || c.plan != RowPlan::kRegisters ||
      c.cluster_size != 1 || c.realigned || c.vec <= 0 || hidden % c.vec != 0 ||
      c.items > kSmallItems || c.threads_per_row >= kFwdMaxThreadsPerRow ||
      int64_t(c.threads_per_row) * c.items == hidden / c.vec) {
    return;
  }
  const int64_t nvec = hidden / c.vec;
  const bool fewest = f.fwd_whole_warps == 2;
  for (int i = 0; i <= kSmallItems - (fewest ? 2 : 3); ++i) {
    const int items = fewest ? 2 + i : kSmallItems - i;
    if (nvec % items != 0) continue;
    const int64_t t = nvec / items;
    if (t % 32 != 0 || t > kFwdMaxThreadsPerRow) continue;
    LaunchConfig reshaped = c;
    reshaped.threads_per_row = static_cast<int>(t);
    reshaped.items = items;
    reshaped.cols_per_cta = hidden;
    reshaped.rows_per_block = rows_per_block_for(reshaped.threads_per_row, rows, f.sm_count,
                                                 f.fwd_cta_threads);
    reshaped.grid = ceil_div(rows, reshaped.rows_per_block);
    if (chunks_exact(reshaped, rows, hidden)) c = reshaped;
    return;
  }
}

// KernelFacts::fwd_rows_per_group: an EXACT one-CTA plan of 16-byte vectors whose rows have at
// most fwd_rows_per_group_max_threads threads (256 by default; up to a warp the sums stay in
// shuffles, past one the rows must be whole warps) at up to kSmallItems vectors per thread,
// with rows that divide into CTAs of that many rows per group and that still fill 2 CTAs per
// SM, takes that many rows per group on a grid that many times smaller: 2, or 4 where a thread
// holds at most 2 vectors of a row (the kernels' instantiations; 2 rows at more).
void rows_per_group_for_short_rows(LaunchConfig& c, int64_t rows, const KernelFacts& f) {
  const int per_group = f.fwd_rows_per_group > 2 && c.items > 2 ? 2 : f.fwd_rows_per_group;
  if (per_group <= 1 || !c.exact || c.plan != RowPlan::kRegisters || c.cluster_size != 1 ||
      c.realigned || c.vec != 8 || c.items > kSmallItems ||
      c.threads_per_row > f.fwd_rows_per_group_max_threads ||
      (c.threads_per_row > 32 && c.threads_per_row % 32 != 0)) {
    return;
  }
  const int64_t rows_per_cta = int64_t(c.rows_per_block) * per_group;
  if (rows % rows_per_cta != 0 || rows / rows_per_cta < 2 * int64_t(f.sm_count)) return;
  c.rows_per_group = per_group;
  c.grid = rows / rows_per_cta;
}

// CTAs per row: enough to hold the row on chip, preferably within the small register budget
// (kSmallItems vectors per thread: more CTAs per SM); and, when there are too few rows to fill
// the device, more (each still covering at least `min_vec_per_cta` vectors).
// cluster_threads: the CTA size that the small budget aims for when a row is split.
int cluster_size_for(int64_t rows, int64_t nvec, int64_t elements, int cluster_threads,
                     int64_t capacity_vec, int64_t min_vec_per_cta, const KernelFacts& f) {
  if (!f.cluster_launch) return nvec <= capacity_vec ? 1 : 0;
  int64_t c = ceil_div(nvec, capacity_vec);
  if (c > f.max_cluster) return 0;
  const int64_t small = ceil_div(nvec, static_cast<int64_t>(cluster_threads) * kSmallItems);
  if (small <= f.max_cluster) c = std::max(c, small);
  if (rows < f.sm_count && elements >= f.split_for_fill_elements) {
    const int64_t for_fill = ceil_div(f.sm_count, rows);
    const int64_t by_size = std::max<int64_t>(1, nvec / min_vec_per_cta);
    c = std::max(c, std::min({for_fill, by_size, static_cast<int64_t>(f.max_cluster)}));
  }
  return static_cast<int>(c);
}

LaunchConfig plan(int64_t rows, int64_t hidden, int vec, const KernelFacts& f, int items_max,
                  int max_threads, bool persistent) {
  LaunchConfig c;
  c.vec = vec;
  const int64_t nvec = ceil_div(hidden, vec);
  const int64_t capacity_vec = static_cast<int64_t>(max_threads) * items_max;
  const int cluster_threads =
      persistent ? max_threads : std::min(max_threads, f.fwd_cluster_threads);
  const int cluster =
      cluster_size_for(rows, nvec, rows * hidden, cluster_threads, capacity_vec, 128, f);
  const int64_t max_slots = bwd_max_slots(rows, f);

  if (cluster == 0) {
    c.plan = RowPlan::kStreaming;
    c.threads_per_row = kStreamingThreads;
    c.items = 1;
    c.cols_per_cta = hidden;
    c.grid = persistent ? max_slots : rows;
    c.slots = persistent ? c.grid : 0;
    return c;
  }
  c.cluster_size = cluster;
  c.plan = cluster > 1 ? RowPlan::kCluster : RowPlan::kRegisters;
  const int64_t nvec_cta = ceil_div(nvec, cluster);
  c.cols_per_cta = nvec_cta * vec;
  shape_cta(c, nvec_cta, max_threads, persistent ? 4 : f.fwd_items_target);
  c.rows_per_block = cluster > 1 ? 1
                     : rows_per_block_for(c.threads_per_row, rows, f.sm_count,
                                          persistent ? 256 : f.fwd_cta_threads);
  const int64_t row_groups = ceil_div(rows, c.rows_per_block);
  if (persistent) {
    // About bwd_ctas_per_sm CTAs per SM in all; never more slots than the workspace holds
    // (max_slots, itself at most the rows).
    const int64_t resident = std::max(2, f.bwd_ctas_per_sm) * int64_t(f.sm_count);
    c.slots = std::min<int64_t>({row_groups, max_slots, std::max<int64_t>(1, resident / cluster)});
    c.grid = c.slots * cluster;
  } else {
    c.grid = row_groups * cluster;
  }
  return c;
}

// A pipelined plan (forward or backward), or grid 0 when it does not apply: hidden a multiple
// of vec, accesses of 4 bytes or more (staged_bytes_per_col > 0), at most kPipelineItems vectors
// per thread and kPipelineStages rows of a group in shared memory (kClusterPipelineStages for
// split rows of up to kClusterDeferMaxItems, which complete one row late). About `items_target`
// vectors per thread, T a multiple of 32 up to 512 (the row sum is per warp, then over warps, so
// rows such as 7168 columns, 896 vectors, get 448 threads x 2 and leave no thread idle); row
// groups up to max(256, cta_threads) threads per CTA while the stages of two CTAs fit one SM; up to
// `ctas_per_sm` CTAs per SM and `max_grid` CTAs or clusters (persistent: rows are assigned
// statically).
LaunchConfig plan_pipelined(int64_t rows, int64_t hidden, int vec, const KernelFacts& f,
                            int64_t staged_bytes_per_col, int items_target, int ctas_per_sm,
                            int64_t max_grid, bool allow_cluster, int64_t split_above,
                            int cluster_threads, int cta_threads = 256,
                            int sub_warp_rows = 0) {
  LaunchConfig none;
  none.grid = 0;
  if (staged_bytes_per_col <= 0 || hidden % vec != 0) return none;
  const int64_t nvec = hidden / vec;
  // Rows of more than `split_above` vectors are split over a cluster (the row sum then goes
  // through distributed shared memory), with allow_cluster, at items_target vectors per
  // thread; rows of more than 512 threads x kPipelineItems vectors must be. The forward splits
  // only those (one CTA per row measured faster, docs/notes.md v11); the backward from 1024
  // vectors (v16). Clusters may have up to f.max_cluster_pipelined CTAs (16 is a non-portable
  // size sm_90 allows); rows too long for that at items_target (over 512 x 2 x 16 vectors) take
  // kPipelineItems vectors per thread. cluster_threads below 512 makes clusters of smaller CTAs
  // (more of them per SM, so that one CTA's barriers overlap another's work).
  int cluster = 1;
  const bool may_split = allow_cluster && f.cluster_launch && items_target <= 2;
  if (nvec > int64_t(kPipelineMaxThreads) * kPipelineItems && !may_split) return none;
  if (may_split && nvec > split_above) {
    const int64_t cta_threads = std::clamp(cluster_threads, 32, kPipelineMaxThreads);
    int64_t c = ceil_div(nvec, cta_threads * items_target);
    if (c > std::max(f.max_cluster, f.max_cluster_pipelined)) {
      items_target = kPipelineItems;
      c = ceil_div(nvec, cta_threads * items_target);
      if (c > f.max_cluster_pipelined) {
        c = ceil_div(nvec, int64_t(kPipelineMaxThreads) * items_target);
        if (c > f.max_cluster_pipelined) return none;
      }
    }
    cluster = static_cast<int>(c);
  }
  const int64_t nvec_cta = ceil_div(nvec, cluster);
  // sub_warp_rows (KernelFacts::bwd_sub_warp_rows): rows of fewer than 32 x items_target
  // vectors get a power of two threads under a warp (several rows per warp); at 1 rows that
  // leave lanes of a warp idle (under 32 vectors) where they give a third of the SMs or more a
  // CTA of 256 threads, and longer ones where they give each row group of 2 such CTAs per SM
  // 3 rows or more; at 2 every such row where the rows fill one 256-thread CTA.
  const int64_t per_row = ceil_div(nvec_cta, items_target);
  const int64_t rows_per_cta = 256 / next_pow2(per_row);
  const int64_t setting_1_min_rows = nvec_cta < 32 ? ceil_div(f.sm_count, 3) * rows_per_cta
                                                   : 3 * 2 * f.sm_count * rows_per_cta;
  const bool sub_warp = sub_warp_rows > 0 && cluster == 1 && per_row < 32 &&
                        rows >= (sub_warp_rows == 1 ? setting_1_min_rows : rows_per_cta);
  const int threads =
      sub_warp ? next_pow2(per_row)
               : static_cast<int>(std::min<int64_t>(32 * ceil_div(per_row, 32), kPipelineMaxThreads));
  const int items = static_cast<int>(ceil_div(nvec_cta, threads));
  if (items > kPipelineItems) return none;
  LaunchConfig c;
  c.plan = RowPlan::kPipelined;
  c.vec = vec;
  c.threads_per_row = threads;
  c.items = items;
  c.cluster_size = cluster;
  c.cols_per_cta = static_cast<int64_t>(threads) * items * vec;
  const int stages = cluster > 1 && items <= kClusterDeferMaxItems
                         ? kClusterPipelineStages
                         : kPipelineStages;
  const int64_t group_bytes = stages * c.cols_per_cta * staged_bytes_per_col;
  if (group_bytes > f.smem_per_block) return none;
  int groups = cluster > 1 ? 1 : std::max(1, std::max(cta_threads, 256) / threads);
  // CTAs larger than 256 threads keep at least one CTA per SM where there are rows for it.
  while (groups > std::max(1, 256 / threads) && ceil_div(rows, groups) < f.sm_count) groups /= 2;
  while (groups > 1 && (2 * groups * group_bytes > f.smem_per_sm || groups > rows)) groups /= 2;
  // (Several rows per warp only in CTAs of whole warps, as every other plan has them.)
  if (sub_warp && threads * groups < 32) {
    return plan_pipelined(rows, hidden, vec, f, staged_bytes_per_col, items_target, ctas_per_sm,
                          max_grid, allow_cluster, split_above, cluster_threads, cta_threads);
  }
  c.rows_per_block = groups;
  c.smem_bytes = groups * group_bytes;
  // CTAs resident per SM: shared memory (plus ~1 KB reserved per CTA) and 2048 threads.
  const int64_t by_smem = f.smem_per_sm / (c.smem_bytes + 1024);
  const int64_t by_threads = 2048 / (static_cast<int64_t>(threads) * groups);
  const int64_t resident =
      std::max<int64_t>(1, std::min<int64_t>({by_smem, by_threads, ctas_per_sm}));
  // max_grid bounds the clusters (the backward's slots), each of `cluster` CTAs.
  c.grid = std::min({ceil_div(rows, groups), std::max<int64_t>(1, resident * f.sm_count / cluster),
                     max_grid}) *
           cluster;
  return c;
}

}  // namespace

std::string LaunchConfig::describe() const {
  const char* name = plan == RowPlan::kRegisters ? "registers"
                     : plan == RowPlan::kCluster ? "cluster"
                     : plan == RowPlan::kPipelined ? "pipelined"
                     : plan == RowPlan::kColumns   ? "columns"
                                                 : "streaming";
  std::string s = std::string(name) + " vec=" + std::to_string(vec) +
                  " threads/row=" + std::to_string(threads_per_row) +
                  " rows/block=" + std::to_string(rows_per_block) +
                  " items=" + std::to_string(items) + " cluster=" + std::to_string(cluster_size) +
                  " cols/cta=" + std::to_string(cols_per_cta) + " grid=" + std::to_string(grid);
  if (realigned) {
    s += realigned_slots ? " realigned-slots" : realigned_lean ? " realigned-lean" : " realigned";
  }
  if (rows_per_group > 1) s += " rows/group=" + std::to_string(rows_per_group);
  if (register_bound) s += " registers<=" + std::to_string(register_bound);
  if (weight_first) s += lean ? " weight-with-x lean" : " weight-with-x";
  if (lean && !weight_first) s += " lean";
  if (exact) s += " exact";
  if (pinned_registers) s += " pinned";
  if (full_items) s += " full-items";
  if (fixed_format) s += " e4m3-variant";
  if (mx_pairs) s += " items-in-pairs";
  if (row_sum_quads) s += " row-sum-quads";
  if (tile_rows) s += " tile_rows=" + std::to_string(tile_rows);
  if (tile_buffers == 2) s += " persistent, 2 tiles";
  if (quant_weight_first != 0) s += " weight-first=" + std::to_string(quant_weight_first);
  if (amax_per_warp) s += " amax-per-warp";
  if (amax_ticket) s += " amax-ticket";
  if (slots) s += " slots=" + std::to_string(slots);
  if (reduce_in_grid) s += " reduce-in-grid";
  if (column_sums_grid) {
    s += " column-sums grid=" + std::to_string(column_sums_grid) +
         " lanes=" + std::to_string(column_sums_lanes);
  }
  if (pending_in_registers) s += " pending-in-registers";
  if (smem_weight) s += " smem-weight";
  if (prefetch_bytes) s += " prefetch-next-row=" + std::to_string(prefetch_bytes >> 10) + "KB";
  if (slot_sums) s += " slot-sums";
  if (evict_first_reads) s += " evict-first";
  if (evict_last_reads) s += " evict-last";
  if (smem_bytes) s += " smem=" + std::to_string(smem_bytes);
  return s;
}

LaunchConfig plan_fwd_registers(int64_t rows, int64_t hidden, int vec, const KernelFacts& facts) {
  KernelFacts f = facts;
  f.max_cluster = facts.fwd_max_cluster;
  // Measured on wide rows of 8- and 16-byte vectors (docs/notes.md v14): with many rows, one
  // CTA per row at the large register budget beat a cluster of two at the small one (1024 x
  // 32768: 59 vs 67 us); and rows that would need the large budget on the largest cluster ran
  // faster on the two-pass streaming kernel, its second pass from L2 (512 x 262144: 284 vs 326).
  const int64_t nvec = ceil_div(hidden, vec);
  if (vec >= 4 && f.cluster_launch) {
    const int64_t one_cta = int64_t(kFwdMaxThreadsPerRow) * fwd_items_max(vec);
    const int64_t small_ctas = ceil_div(nvec, int64_t(kFwdMaxThreadsPerRow) * kSmallItems);
    if (nvec <= one_cta && rows >= 4 * int64_t(f.sm_count) && f.fwd_split_wide_rows != 1) {
      f.cluster_launch = false;  // one CTA per row
    } else if (small_ctas > f.max_cluster) {
      f.max_cluster = small_ctas <= f.fwd_wide_row_cluster ? f.fwd_wide_row_cluster : 1;
    }
  }
  return plan(rows, hidden, vec, f, fwd_items_max(vec), kFwdMaxThreadsPerRow, false);
}

KernelFacts plain_fwd_facts(const KernelFacts& facts, size_t x_bytes) {
  KernelFacts f = facts;
  if (f.fwd_split_wide_rows == 2 && x_bytes == 4) f.fwd_split_wide_rows = 1;
  return f;
}

LaunchConfig plan_fwd_realigned(int64_t rows, int64_t hidden, const KernelFacts& facts,
                                bool weight_only_call, bool lean_general_call) {
  constexpr int kVec = 8;
  // Rows longer than this the element-by-element forward (16-bit elements one at a time: 512
  // threads of 4) splits over a cluster.
  constexpr int64_t kElementWiseCtaColumns = 2048;
  LaunchConfig c = plan_fwd_registers(rows, hidden, kVec, facts);
  const int64_t elements = rows * hidden;
  // A weight with extras on the lean kernel: the rules below the threshold, measured for calls
  // of a weight alone, hold where that kernel serves them.
  const bool lean_general = lean_general_call && !weight_only_call &&
                            facts.fwd_realign_lean != 0 && facts.fwd_realign_lean_general != 0;
  bool taken = elements >= facts.fwd_realign_min_elements;
  const bool below_min = !taken;
  bool only_if_lean = below_min && lean_general;  // taken below, kept where the plan is lean
  if (below_min && ((weight_only_call && facts.realign_weight_only != 0) || lean_general)) {
    if (c.cluster_size > 1) {
      if (facts.fwd_realign_clusters != 0) {
        KernelFacts fill = facts;  // few long rows: as many CTAs as fill the device
        fill.split_for_fill_elements = 0;
        c = plan_fwd_registers(rows, hidden, kVec, fill);
        taken = true;
      }
    } else if (rows >= facts.fwd_realign_rows_min_rows &&
               elements >= (hidden > kElementWiseCtaColumns
                                ? facts.fwd_realign_long_rows_min_elements
                                : facts.fwd_realign_short_rows_min_elements)) {
      taken = true;
    } else if (hidden > kElementWiseCtaColumns && rows >= facts.fwd_realign_lean_rows_min_rows) {
      taken = only_if_lean = true;  // fewer rows or elements: on the lean kernel only
    }
  }
  if (hidden < 2 * kVec || !taken || c.plan == RowPlan::kStreaming || c.items > kSmallItems) {
    c.grid = 0;
    return c;
  }
  c.realigned = true;
  c.weight_only_kernels = facts.realign_weight_only != 0;
  const bool lean_wanted = facts.fwd_realign_lean != 0 &&
                           ((weight_only_call && c.weight_only_kernels) || lean_general) &&
                           (c.cluster_size > 1 || facts.fwd_realign_lean == 2);
  if (lean_wanted && realigned_lean_covers(c, hidden)) {
    c.realigned_lean = true;
  } else if (lean_wanted && c.cluster_size == 1) {
    // A row one CTA holds whose plan has exactly its ceil(hidden / 8) vectors, one short of the
    // window where the row starts late in its 16-byte block (4095: 128 x 4 against 513): the
    // plan of a row 7 columns longer, where that is still one CTA per row.
    LaunchConfig wider = plan_fwd_registers(rows, hidden + kVec - 1, kVec, facts);
    if (wider.plan == c.plan && wider.cluster_size == 1 && wider.items <= kSmallItems &&
        realigned_lean_covers(wider, hidden)) {
      wider.realigned = wider.realigned_lean = true;
      wider.weight_only_kernels = c.weight_only_kernels;
      c = wider;
    }
  }
  if (only_if_lean && !c.realigned_lean) c.grid = 0;
  return c;
}

bool fwd_lean_general_call(bool weight, bool weight_only_call, const KernelFacts& facts) {
  return !weight_only_call && facts.fwd_realign_lean_general >= (weight ? 1 : 2);
}

bool realigned_lean_covers(const LaunchConfig& c, int64_t hidden) {
  constexpr int64_t kVec = 8;
  return c.rows_per_block == 1 &&
         int64_t(c.threads_per_row) * c.items * c.cluster_size >= ceil_div(hidden, kVec) + 1;
}

bool bwd_lean_plan(const LaunchConfig& c, int64_t hidden, const KernelFacts& facts) {
  return facts.bwd_lean != 0 && c.plan == RowPlan::kPipelined && !c.realigned &&
         c.cluster_size == 1 && c.vec == 8 && c.items >= 1 && c.items <= 2 &&
         !c.pending_in_registers && !c.smem_weight && c.cols_per_cta == hidden &&
         int64_t(c.threads_per_row) * c.items * c.vec == hidden;
}

bool bwd_lean_one_item(const LaunchConfig& c, int64_t hidden, const KernelFacts& facts) {
  return c.lean && c.items > 1 && facts.bwd_items_target == 0 &&
         facts.bwd_lean_one_item_threads > 0 &&
         hidden == int64_t(facts.bwd_lean_one_item_threads) * c.vec;
}

bool chunks_exact(const LaunchConfig& c, int64_t rows, int64_t hidden) {
  return (c.plan == RowPlan::kRegisters || c.plan == RowPlan::kCluster) && !c.realigned &&
         c.vec > 0 && c.cols_per_cta == int64_t(c.threads_per_row) * c.items * c.vec &&
         c.cols_per_cta * c.cluster_size == hidden &&
         rows % (int64_t(c.rows_per_block) * c.rows_per_group) == 0 &&
         c.grid == rows / (int64_t(c.rows_per_block) * c.rows_per_group) * c.cluster_size;
}

namespace {

// Rows of 16-byte vectors (8 elements) that one CTA cannot hold: past 32768 bf16 columns.
bool wider_than_one_cta(int64_t hidden, int vec) {
  return vec == 8 && ceil_div(hidden, vec) > int64_t(kFwdMaxThreadsPerRow) * fwd_items_max(vec);
}

// The plain forward's facts for rows of 16-byte vectors (8 elements) that one CTA cannot hold
// (past 32768 bf16 columns) but a cluster of up to max(fwd_max_cluster,
// fwd_wide_row_max_cluster) CTAs of facts.fwd_wide_row_threads threads holds at kSmallItems
// vectors each: those CTAs for the split, as many as the row needs
// (KernelFacts::fwd_wide_row_threads, fwd_wide_row_max_cluster).
KernelFacts wide_row_facts(int64_t hidden, int vec, const KernelFacts& facts) {
  KernelFacts f = facts;
  const int threads = facts.fwd_wide_row_threads;
  if (threads <= 0 || !wider_than_one_cta(hidden, vec)) return f;
  const int64_t ctas = ceil_div(ceil_div(hidden, vec), int64_t(threads) * kSmallItems);
  if (ctas <= std::max(facts.fwd_max_cluster, facts.fwd_wide_row_max_cluster)) {
    f.fwd_cluster_threads = threads;
    f.fwd_max_cluster = std::max<int>(facts.fwd_max_cluster, static_cast<int>(ctas));
  }
  return f;
}

// KernelFacts::fwd_wide_row_large_items: c's cluster CTAs (rows wider than one CTA) at half the
// threads and twice the vectors per thread, the columns per CTA unchanged; setting 1 only where
// the cluster is past `wide_max_cluster` CTAs (wide_row_facts' fwd_max_cluster), 2 also where
// the launch has more than 3.5 CTAs for every SM, 3 everywhere.
void halve_wide_cluster_ctas(LaunchConfig& c, int64_t hidden, int vec, int wide_max_cluster,
                             const KernelFacts& facts) {
  const int setting = facts.fwd_wide_row_large_items;
  if (c.plan != RowPlan::kCluster || !wider_than_one_cta(hidden, vec) ||
      c.threads_per_row % 64 != 0 || 2 * c.items > fwd_items_max(vec)) {
    return;
  }
  const bool past_wide_rule = c.cluster_size > wide_max_cluster;
  const bool filled = 2 * c.grid > 7 * int64_t(facts.sm_count);  // > 3.5 CTAs per SM
  if (setting >= 3 || (setting == 2 && (past_wide_rule || filled)) ||
      (setting == 1 && past_wide_rule)) {
    c.threads_per_row /= 2;
    c.items *= 2;
  }
}

// KernelFacts::fwd_lean_waves: a lean call's EXACT registers plan of whole warps per row (up
// to kFwdWeightFirstMaxThreads, no cluster, at most kSmallItems vectors per thread) becomes one
// row per CTA (and per group), the weight loaded with x on rms_norm_fwd_lean, where its rows
// fill at most that many waves of those CTAs (kFwdLeanThreadsPerSm threads, at most
// kMaxCtasPerSm CTAs, per SM).
void lean_rows_per_cta(LaunchConfig& c, int64_t rows, int64_t hidden, const KernelFacts& f) {
  if (f.fwd_lean_waves == 0 || f.fwd_weight_first == 0 || !c.exact ||
      c.plan != RowPlan::kRegisters || c.cluster_size != 1 || c.threads_per_row % 32 != 0 ||
      c.threads_per_row > kFwdWeightFirstMaxThreads || c.items > kSmallItems ||
      c.register_bound != 0) {
    return;
  }
  const int64_t ctas_per_sm =
      std::min<int64_t>(kMaxCtasPerSm, kFwdLeanThreadsPerSm / c.threads_per_row);
  if (rows > int64_t(f.fwd_lean_waves) * f.sm_count * ctas_per_sm) return;
  LaunchConfig one_row = c;
  one_row.rows_per_block = 1;
  one_row.rows_per_group = 1;
  one_row.grid = rows;
  if (!chunks_exact(one_row, rows, hidden)) return;
  one_row.weight_first = true;
  one_row.lean = true;
  c = one_row;
}

}  // namespace

LaunchConfig plan_fwd(int64_t rows, int64_t hidden, int vec, const KernelFacts& facts,
                      int64_t staged_bytes_per_col, bool lean_call) {
  // The lean kernel beats the pipelined one on few rows
  // (KernelFacts::fwd_lean_pipeline_max_rows): its plan there where it is lean.
  if (lean_call && facts.fwd_lean != 0 && rows > facts.fwd_lean_pipeline_max_rows &&
      rows <= facts.fwd_pipeline_max_rows) {
    KernelFacts lean_facts = facts;
    lean_facts.fwd_pipeline_max_rows = facts.fwd_lean_pipeline_max_rows;
    const LaunchConfig lean = plan_fwd(rows, hidden, vec, lean_facts, staged_bytes_per_col, true);
    if (lean.lean) return lean;
  }
  // Measured (docs/notes.md, v10): the pipelined forward wins on few rows (its weight load
  // overlaps x's) and loses 3-5% to the registers kernel on many rows that fit one CTA. Rows
  // the registers kernel splits over a cluster stay there unless fwd_pipeline_clusters (v12).
  // Rows it gives one CTA of more than kFwdHeavyItems vectors per thread (float32 rows of 16K-32K
  // columns: 64 registers of x) go to the pipelined clusters (v23: 1024 x 32768 float32 127 ->
  // 107 us; bf16 rows, at most 8 vectors per thread, measured slower there: v19).
  KernelFacts wide = wide_row_facts(hidden, vec, facts);
  if (facts.fwd_short_row_items > 0 && ceil_div(hidden, vec) <= kFwdShortRowVectors) {
    wide.fwd_items_target = facts.fwd_short_row_items;
  }
  const LaunchConfig registers = plan_fwd_registers(rows, hidden, vec, wide);
  const bool split = registers.cluster_size > 1 ||
                     ceil_div(hidden, vec) > int64_t(kPipelineMaxThreads) * kPipelineItems;
  const bool heavy = registers.cluster_size == 1 && registers.items > kFwdHeavyItems;
  if (split ? (facts.fwd_pipeline_clusters || heavy) : rows <= facts.fwd_pipeline_max_rows) {
    const LaunchConfig pipelined = plan_pipelined(rows, hidden, vec, facts, staged_bytes_per_col,
                                                  2, facts.fwd_ctas_per_sm, rows, true,
                                                  int64_t(kPipelineMaxThreads) * kPipelineItems,
                                                  kPipelineMaxThreads);
    // (Its cluster instantiation holds 2 vectors per thread.)
    if (pipelined.grid > 0 && (pipelined.cluster_size == 1 || pipelined.items <= 2)) {
      return pipelined;
    }
  }
  LaunchConfig c = registers;
  fewest_whole_warps(c, rows, hidden, facts);
  whole_warps_for_row(c, rows, hidden, facts);
  halve_wide_cluster_ctas(c, hidden, vec, wide.fwd_max_cluster, facts);
  c.exact = facts.fwd_exact && chunks_exact(c, rows, hidden);
  rows_per_group_for_short_rows(c, rows, facts);
  if (facts.fwd_tiny_registers != 0 && c.exact && c.vec == 8 && c.items <= 2 &&
      c.rows_per_group == 1 && c.plan == RowPlan::kRegisters) {
    c.register_bound = facts.fwd_tiny_registers == 1 ? 40 : 32;
  }
  c.weight_first = facts.fwd_weight_first > 0 && c.exact && c.plan == RowPlan::kRegisters &&
                   c.cluster_size == 1 && c.rows_per_block == 1 && c.rows_per_group == 1 &&
                   c.threads_per_row <= kFwdWeightFirstMaxThreads && c.register_bound == 0 &&
                   c.items <= kSmallItems &&
                   c.grid <= int64_t(facts.fwd_weight_first) * facts.sm_count;
  c.lean = c.weight_first && facts.fwd_lean != 0 && lean_call;
  if (lean_call && facts.fwd_lean != 0 && !c.lean) lean_rows_per_cta(c, rows, hidden, facts);
  return c;
}

LaunchConfig plan_fwd_quant(int64_t rows, int64_t hidden, int vec, int block, bool dynamic_scales,
                            const KernelFacts& facts) {
  KernelFacts split = facts;  // (plan_fwd_registers splits wide rows at setting 1 only)
  if (facts.fwd_split_wide_rows == 2) split.fwd_split_wide_rows = dynamic_scales ? 1 : 0;
  if (facts.quant_wide_row_threads > 0 && facts.fwd_split_wide_rows != 0 && vec == 8 &&
      ceil_div(hidden, vec) > int64_t(kFwdMaxThreadsPerRow) * kSmallItems) {
    split.fwd_split_wide_rows = 1;  // (KernelFacts::quant_wide_row_threads)
    split.fwd_cluster_threads = facts.quant_wide_row_threads;
  }
  LaunchConfig c = plan_fwd_registers(rows, hidden, vec, split);
  c.quant_weight_first = facts.quant_weight_first;
  c.amax_per_warp = facts.quant_amax_per_warp != 0;
  if (block > 0 && block / vec > 32) {  // one CTA of 256 threads per row, element by element
    c.vec = 0;
    c.plan = RowPlan::kStreaming;
    c.threads_per_row = 256;
    c.rows_per_block = 1;
    c.items = 1;
    c.cluster_size = 1;
    c.cols_per_cta = hidden;
    c.grid = rows;
    return c;
  }
  if (c.plan == RowPlan::kStreaming) return c;  // steps of 512 * vec columns: whole blocks
  int64_t nvec_cta = c.cols_per_cta / vec;
  int64_t block_vecs = 1;
  if (block > 0) {
    block_vecs = block / vec;
    const int64_t nvec = ceil_div(hidden, vec);
    // Each cluster CTA covers whole blocks; trailing CTAs may cover nothing. The rounding keeps
    // nvec_cta within the register capacity (512 * items_max), itself a multiple of block_vecs.
    nvec_cta = ceil_div(ceil_div(nvec, c.cluster_size), block_vecs) * block_vecs;
    c.cols_per_cta = nvec_cta * vec;
    c.threads_per_row = std::max<int>(threads_for(nvec_cta, kFwdMaxThreadsPerRow,
                                                  facts.fwd_items_target),
                                      static_cast<int>(block_vecs));
    c.items = static_cast<int>(ceil_div(nvec_cta, c.threads_per_row));
  }
  exact_shape(c, nvec_cta, block_vecs, facts);
  c.rows_per_block =
      c.cluster_size > 1
          ? 1
          : rows_per_block_for(c.threads_per_row, rows, facts.sm_count, facts.quant_cta_threads);
  c.grid = ceil_div(rows, c.rows_per_block) * c.cluster_size;
  c.exact = facts.fwd_exact && chunks_exact(c, rows, hidden);
  return c;
}

void pin_quant_registers(LaunchConfig& c, int64_t rows, int64_t hidden, const KernelFacts& f,
                         bool full_items_kernels, bool e4m3_kernels) {
  const bool plan_pinnable =
      c.plan == RowPlan::kRegisters || (c.plan == RowPlan::kCluster && f.quant_pin_clusters != 0);
  if (f.fwd_exact < 4 || !plan_pinnable || !c.exact || c.vec != 8 || c.items > kSmallItems) {
    return;
  }
  c.pinned_registers = true;
  fewer_whole_warps(c, int64_t(c.threads_per_row) * c.items, kSmallItems, rows, f,
                    f.quant_cta_threads);  // EXACT
  c.exact = chunks_exact(c, rows, hidden);
  // (Only EXACT plans launch the pinned kernels: a reshape that left rows per CTA not dividing
  // the rows keeps the general kernel, and --explain must not claim the full-items one.)
  c.full_items = full_items_kernels && f.quant_full_items != 0 && c.exact && c.items == kSmallItems;
  c.fixed_format = e4m3_kernels && f.quant_fixed_format != 0 && c.exact;
}

bool quant_e4m3_kernels(nk_quant_mode mode, int scale_block, bool with_residual, int64_t hidden,
                        const KernelFacts& facts) {
  if (mode == NK_QUANT_TOKEN) return true;
  if (mode == NK_QUANT_MXFP8) return scale_block == kMxfp8Block && facts.quant_mxfp8_e4m3 != 0;
  if (mode != NK_QUANT_BLOCK) return false;  // TENSOR
  if (scale_block != kDefaultQuantBlock || facts.quant_block_e4m3 == 0) return false;
  // (With the residual the kernel's spills cost narrow rows more than its instructions save.)
  return !with_residual || facts.quant_block_e4m3 == 2 ||
         hidden >= facts.quant_block_e4m3_residual_min_columns;
}

void apply_amax_ticket(LaunchConfig& c, const KernelFacts& facts) {
  c.amax_ticket = !c.amax_per_warp && facts.quant_amax_ticket != 0 && c.threads_per_row > 32;
}

void apply_mxfp8_pairs(LaunchConfig& c, nk_quant_mode mode, const KernelFacts& facts) {
  const int wanted = c.cluster_size == 1 ? 1 : 2;
  c.mx_pairs = mode == NK_QUANT_MXFP8 && c.fixed_format && facts.quant_mxfp8_pairs >= wanted;
}

void apply_row_sum_quads(LaunchConfig& c, nk_quant_mode mode, const KernelFacts& facts) {
  // (TOKEN's folded kernel has no full-items variant: its plans of kSmallItems vectors.)
  const bool full = mode == NK_QUANT_TOKEN ? c.items == kSmallItems : c.full_items;
  c.row_sum_quads = facts.quant_row_sum_quads != 0 && c.pinned_registers && full &&
                    c.threads_per_row > 32;
}

void apply_bwd_row_sum_quads(LaunchConfig& c, bool sixteen_bit, bool dbias,
                             const KernelFacts& facts) {
  // (The launcher's pipelined quads kernels: 16-byte vectors of 16-bit types, neither the
  // pending row in registers nor the weight in shared memory.)
  const bool pipelined = facts.bwd_pipelined_row_sum_quads != 0 && !c.lean &&
                         c.plan == RowPlan::kPipelined && !c.realigned &&
                         !c.pending_in_registers && !c.smem_weight && c.vec == 8 &&
                         sixteen_bit && !dbias;
  c.row_sum_quads =
      c.threads_per_row > 32 && ((facts.bwd_row_sum_quads != 0 && c.lean) || pipelined);
}

void apply_fwd_row_sum_quads(LaunchConfig& c, bool all_16_bit, bool common_call,
                             const KernelFacts& facts) {
  const bool registers = c.plan == RowPlan::kRegisters || c.plan == RowPlan::kCluster;
  const bool kernels = all_16_bit && registers && c.exact && c.vec == 8 &&
                       c.threads_per_row > 32 && c.register_bound == 0 && !c.weight_first &&
                       !c.lean;
  // (The launcher's quads kernels of two rows per group: calls without extras, 2-4 vectors.)
  const bool grouped = c.rows_per_group == 2 && c.items > 1 && common_call;
  // (Its lean quads kernels: the 64-byte parameter block and the default stores only.)
  const bool lean = facts.fwd_lean_row_sum_quads != 0 && c.lean && c.threads_per_row > 32 &&
                    facts.fwd_lean_params != 0 && facts.fwd_weak_stores == 0;
  const bool one_row = facts.fwd_row_sum_quads != 0 && c.rows_per_group == 1;
  c.row_sum_quads =
      lean || (kernels && (one_row || (facts.fwd_rows_row_sum_quads != 0 && grouped)));
}

KernelFacts facts_with_transposed_output(const KernelFacts& facts) {
  KernelFacts f = facts;
  f.quant_cta_threads = facts.quant_ticket_cta_threads;
  return f;
}

LaunchConfig keep_y_for_transpose(LaunchConfig c, const KernelFacts& facts) {
  // (A plan with either policy is one whose kernel honors them: apply_read_policy.)
  if (facts.quant_transpose_evict_first != 0 && (c.evict_first_reads || c.evict_last_reads)) {
    c.evict_first_reads = true;
    c.evict_last_reads = false;
  }
  return c;
}

LaunchConfig plan_fwd_quant_transposed(int64_t rows, int64_t hidden, int vec, int x_bytes,
                                       const KernelFacts& facts) {
  LaunchConfig c;
  c.grid = 0;
  const bool one_kernel = facts.quant_fused_transpose == 1 || facts.quant_fused_transpose == 2;
  if (!one_kernel || vec * x_bytes != 16 || hidden % kTransposedRun != 0 ||
      rows <= 0) {
    return c;
  }
  // By default as many threads as vectors, up to 512 (facts.quant_fused_items_target).
  shape_cta(c, hidden / vec, kFwdMaxThreadsPerRow, facts.quant_fused_items_target);
  if (c.items > kSmallItems) return c;
  // The fewest CTAs per 32-row run whose rows' codes (two tiles of them for the persistent
  // kernel) fit the budget; one run per cluster: then more CTAs (fewer rows each) while the
  // runs alone leave SMs without a CTA. The persistent kernel needs a cluster (its barriers).
  const bool persistent = facts.quant_fused_transpose == 2;
  const int buffers = persistent ? 2 : 1;
  const int64_t runs = ceil_div(rows, kTransposedRun);
  const int max_cluster = facts.cluster_launch ? std::min(facts.max_cluster, 8) : 1;
  int cluster = persistent ? 2 : 1;
  if (cluster > max_cluster) return c;
  auto tile_bytes = [&](int n) { return buffers * (kTransposedRun / n) * hidden; };
  while (cluster < max_cluster && (tile_bytes(cluster) > kTransposedTileBytes ||
                                   (!persistent && runs * cluster < facts.sm_count))) {
    cluster *= 2;
  }
  if (tile_bytes(cluster) > kTransposedTileBytes) return c;
  c.plan = RowPlan::kRegisters;
  c.vec = vec;
  c.cluster_size = cluster;
  c.cols_per_cta = hidden;
  c.tile_rows = kTransposedRun / cluster;
  c.tile_buffers = buffers;
  c.smem_bytes = tile_bytes(cluster);
  c.grid = runs * cluster;  // the persistent kernel's launcher caps it to resident clusters
  return c;
}

void apply_split_row_extras(LaunchConfig& c, int64_t weight_bytes, bool dbias, bool dresidual,
                            const KernelFacts& facts) {
  if (c.plan != RowPlan::kPipelined || c.cluster_size <= 1 || c.items <= kClusterDeferMaxItems) {
    return;
  }
  c.pending_in_registers = facts.bwd_pending_in_registers != 0 && !dbias && !dresidual;
  const int64_t weight_chunk = c.cols_per_cta * weight_bytes;
  constexpr int64_t kStaticSmemMargin = 1024;
  if (facts.bwd_smem_weight && weight_bytes > 0 &&
      c.smem_bytes + weight_chunk + kStaticSmemMargin <= facts.smem_per_block) {
    c.smem_weight = true;
    c.smem_bytes += weight_chunk;
  }
}

namespace {
// The CTAs per row of a cluster-streaming plan (at most the largest cluster the device runs)
// and their columns each (whole vectors); cluster < 2 where one CTA would do.
struct StreamingCluster {
  int cluster;
  int64_t cols;
};
StreamingCluster streaming_cluster(int64_t hidden, int vec, const KernelFacts& facts) {
  const int64_t nvec = ceil_div(hidden, vec);
  const int cluster = static_cast<int>(std::clamp<int64_t>(
      ceil_div(nvec, kStreamingThreads), 1,
      std::max(facts.max_cluster, facts.max_cluster_pipelined)));
  return {cluster, ceil_div(nvec, cluster) * vec};
}

// c as `clusters` persistent clusters of `geometry`, one slot each.
void set_streaming_clusters(LaunchConfig& c, StreamingCluster geometry, int64_t clusters) {
  c.cluster_size = geometry.cluster;
  c.cols_per_cta = geometry.cols;
  c.threads_per_row = kStreamingThreads;
  c.rows_per_block = 1;
  c.slots = clusters;
  c.grid = clusters * geometry.cluster;
}
}  // namespace

void apply_cluster_streaming(LaunchConfig& c, int64_t rows, int64_t hidden, bool dbias,
                             const KernelFacts& facts) {
  if (!facts.bwd_cluster_streaming || !facts.cluster_launch || c.plan != RowPlan::kStreaming ||
      c.vec <= 0 || rows <= 0) {
    return;
  }
  const StreamingCluster geometry = streaming_cluster(hidden, c.vec, facts);
  // The kernel's sums in shared memory cover whole passes of its threads' vectors
  // (column_sum_index): the chunk's passes, or as many as fit (the rest in the workspace).
  const int64_t pass_bytes =
      int64_t(kStreamingThreads) * c.vec * int64_t(sizeof(float)) * (dbias ? 2 : 1);
  constexpr int64_t kStaticSmemMargin = 1024;  // (the kernel's own ~0.5 KB)
  const int64_t room = facts.bwd_streaming_sums_max_kb > 0
                           ? std::min<int64_t>(int64_t(facts.bwd_streaming_sums_max_kb) << 10,
                                               facts.smem_per_block - kStaticSmemMargin)
                           : facts.smem_per_block - kStaticSmemMargin;
  const int64_t needed = ceil_div(geometry.cols, int64_t(kStreamingThreads) * c.vec);
  const int64_t passes = std::min(needed, room / pass_bytes);
  if (geometry.cluster < 2 || passes < 1) return;
  c.slot_sums = passes < needed;
  const int64_t smem = passes * pass_bytes;
  int64_t clusters = std::clamp<int64_t>(facts.sm_count / geometry.cluster, 1, rows);
  if (facts.bwd_streaming_max_clusters > 0) {
    clusters = std::min<int64_t>(clusters, facts.bwd_streaming_max_clusters);
  }
  set_streaming_clusters(c, geometry, clusters);
  c.smem_bytes = smem;
}

void apply_fwd_cluster_streaming(LaunchConfig& c, int64_t rows, int64_t hidden,
                                 const KernelFacts& facts) {
  if (!facts.fwd_cluster_streaming || !facts.cluster_launch || c.plan != RowPlan::kStreaming ||
      c.vec <= 0 || rows <= 0) {
    return;
  }
  const StreamingCluster geometry = streaming_cluster(hidden, c.vec, facts);
  if (geometry.cluster < 2) return;
  set_streaming_clusters(
      c, geometry,
      std::clamp<int64_t>(facts.sm_count * facts.fwd_ctas_per_sm / geometry.cluster, 1, rows));
  c.smem_bytes = 0;
}

void apply_streaming_prefetch(LaunchConfig& c, int64_t x_bytes, int64_t other_bytes,
                              bool backward, const KernelFacts& facts) {
  c.prefetch_bytes = 0;
  const int mode = facts.cluster_streaming_prefetch;
  if (c.plan != RowPlan::kStreaming || c.cluster_size < 2 || mode == 0 ||
      (mode == 2 && !backward) || x_bytes * c.vec != 16 || other_bytes * c.vec != 16) {
    return;
  }
  const int64_t chunk = c.cols_per_cta * x_bytes;
  if (facts.cluster_streaming_prefetch_kb > 0) {
    c.prefetch_bytes = std::min<int64_t>(chunk, int64_t(facts.cluster_streaming_prefetch_kb) << 10);
    return;
  }
  // Two tensors' chunks per CTA in flight, and as much of the next row's as fits beside them.
  const int64_t budget = facts.l2_bytes * facts.cluster_streaming_l2_percent / 100;
  const int64_t room = (budget - c.grid * chunk * 2) / (c.grid * 2) / 16 * 16;
  constexpr int64_t kLeastPrefetch = 4096;  // (smaller requests would not pay for themselves)
  if (room >= kLeastPrefetch) c.prefetch_bytes = std::min(chunk, room);
}

void apply_read_policy(LaunchConfig& c, int64_t read_bytes, bool backward,
                       const KernelFacts& facts) {
  const bool honored =
      c.vec > 0 &&
      (c.plan == RowPlan::kPipelined ||
       (!backward && (c.plan == RowPlan::kRegisters || c.plan == RowPlan::kCluster) &&
        !c.realigned));
  c.evict_first_reads = honored && read_bytes > 0 &&
                        read_bytes <= (int64_t(facts.evict_first_max_mib) << 20);
  c.evict_last_reads = honored && !c.evict_first_reads && facts.evict_last_min_mib > 0 &&
                       read_bytes >= (int64_t(facts.evict_last_min_mib) << 20);
}

int bwd_narrow_items(int64_t hidden, const KernelFacts& facts) {
  const int items = bwd_items_max(1);
  return hidden > int64_t(kBwdMaxThreadsPerRow) * items * facts.max_cluster
             ? std::max(items, facts.bwd_narrow_items)
             : items;
}

namespace {
// facts with the pipelined backward's CTAs per SM (KernelFacts::bwd_pipelined_ctas_per_sm) as
// bwd_ctas_per_sm.
KernelFacts with_pipelined_ctas_per_sm(const KernelFacts& facts) {
  KernelFacts f = facts;
  if (facts.bwd_pipelined_ctas_per_sm > 0) f.bwd_ctas_per_sm = facts.bwd_pipelined_ctas_per_sm;
  return f;
}
}  // namespace

LaunchConfig plan_bwd(int64_t rows, int64_t hidden, int vec, const KernelFacts& facts,
                      int64_t staged_bytes_per_col) {
  // Measured (docs/notes.md, v9): 2 vectors per thread beat 4 at every row length (rows over
  // 1024 vectors get up to 4, since a row group has at most 512 threads).
  const int items_target = facts.bwd_items_target > 0 ? facts.bwd_items_target : 2;
  if (rows <= facts.bwd_registers_max_rows) staged_bytes_per_col = 0;  // not pipelined
  const KernelFacts pipelined = with_pipelined_ctas_per_sm(facts);
  const int cluster_threads = ceil_div(hidden, vec) > facts.bwd_cluster_threads_max_vectors
                                  ? kPipelineMaxThreads
                                  : facts.bwd_cluster_threads;
  auto pipelined_plan = [&](int cta_threads) {
    return plan_pipelined(rows, hidden, vec, facts, staged_bytes_per_col, items_target,
                          pipelined.bwd_ctas_per_sm, bwd_max_slots(rows, pipelined), true,
                          facts.bwd_split_vectors, cluster_threads, cta_threads,
                          facts.bwd_sub_warp_rows);
  };
  LaunchConfig c = pipelined_plan(facts.bwd_cta_threads);
  // Rows of 33-127 threads: CTAs of bwd_mid_row_cta_threads.
  if (c.grid > 0 && c.cluster_size == 1 && c.threads_per_row > 32 && c.threads_per_row < 128 &&
      facts.bwd_mid_row_cta_threads > facts.bwd_cta_threads) {
    c = pipelined_plan(facts.bwd_mid_row_cta_threads);
  }
  if (c.grid > 0) {
    c.slots = c.grid / c.cluster_size;
  } else {
    // Rows the pipelined kernel cannot take (accesses under 4 bytes: misaligned rows) may use
    // clusters of up to 16 CTAs (where the device allows them) before falling to the two-pass
    // streaming kernel: a 2-byte vector holds only 256 x 8 columns per CTA.
    KernelFacts wide = facts;
    wide.max_cluster = std::max(facts.max_cluster, facts.max_cluster_pipelined);
    const int items_max = vec == 1 ? bwd_narrow_items(hidden, facts) : bwd_items_max(vec);
    c = plan(rows, hidden, vec, wide, items_max, kBwdMaxThreadsPerRow, true);
  }
  // (The streaming kernel accumulates its slots in the workspace: the reduction kernel follows.)
  c.reduce_in_grid = facts.bwd_reduce_in_grid && c.slots > 1 && c.plan != RowPlan::kStreaming;
  c.reduce_kernel = facts.bwd_reduce_kernel;
  c.early_dependent = facts.bwd_early_dependent == 1;
  c.dependent_after_rows = facts.bwd_early_dependent == 2;
  c.group_sums_by_cta = facts.bwd_group_sums_by_cta != 0;
  return c;
}

LaunchConfig plan_bwd_columns(int64_t rows, int64_t hidden, int vec, const KernelFacts& f,
                              const int64_t (&element_bytes)[3], int outputs) {
  LaunchConfig none;
  none.grid = 0;
  if (!f.cluster_launch || rows <= 0 || hidden <= 0) return none;
  if (rows * hidden > f.bwd_columns_max_elements) return none;
  // As many CTAs as the largest cluster allows (each SM adds load bandwidth to a latency-bound
  // launch), each owning at least kMinCols columns.
  constexpr int64_t kMinCols = 64;
  const int64_t max_cluster = std::max(f.max_cluster, f.max_cluster_pipelined);
  const int64_t cluster = std::clamp<int64_t>(ceil_div(hidden, kMinCols), 1, max_cluster);
  const int64_t cols = ceil_div(ceil_div(hidden, cluster), 8) * 8;
  const int ranks = static_cast<int>(ceil_div(hidden, cols));
  const int64_t nvec = ceil_div(cols, vec);
  // Row groups of the dx pass: the fewest rounds (rows per group x vectors per thread) among
  // the group counts whose partial sums still fit.
  int groups = 0;
  int64_t best_rounds = 0, smem = 0;
  for (int g = 1; g <= kColumnsThreads / 32 && g <= rows; g *= 2) {
    const ColumnsLayout layout(rows, cols, ranks, g, outputs, element_bytes);
    if (layout.total > f.smem_per_block) break;
    const int64_t rounds = ceil_div(rows, g) * ceil_div(nvec, kColumnsThreads / g);
    if (groups == 0 || rounds < best_rounds) {
      groups = g;
      best_rounds = rounds;
      smem = layout.total;
    }
  }
  if (groups == 0) return none;
  LaunchConfig c;
  c.plan = RowPlan::kColumns;
  c.vec = vec;
  c.threads_per_row = kColumnsThreads;
  c.items = groups;
  c.cluster_size = ranks;
  c.cols_per_cta = cols;
  c.grid = c.cluster_size;
  c.smem_bytes = smem;
  return c;
}

namespace {
// (beside a realigned kernel, bounds of their own: KernelFacts::bwd_realign_sums_max_rows)
bool within_column_sums_bounds(int64_t rows, int64_t hidden, bool dbias, bool realigned,
                               const KernelFacts& f) {
  if (realigned) {
    return rows <= f.bwd_realign_sums_max_rows &&
           rows * hidden <= f.bwd_realign_sums_max_elements;
  }
  const int64_t max_rows = dbias ? f.bwd_column_sums_max_rows_dbias : f.bwd_column_sums_max_rows;
  return rows <= max_rows && rows * hidden <= f.bwd_column_sums_max_elements;
}

// A realigned CTA over nvec_cta 8-element vectors of a row: up to `threads` threads (whole
// warps, fewer where the row is short) at about `items` vectors each; one row per CTA, no
// cluster (the callers set cluster, grid and slots).
LaunchConfig realigned_cta_config(int64_t nvec_cta, int64_t threads, int items) {
  LaunchConfig c;
  c.plan = RowPlan::kRegisters;
  c.vec = 8;
  c.threads_per_row =
      static_cast<int>(std::min<int64_t>(threads, 32 * ceil_div(ceil_div(nvec_cta, items), 32)));
  c.items = static_cast<int>(ceil_div(nvec_cta, c.threads_per_row));
  c.cols_per_cta = nvec_cta * 8;
  c.rows_per_block = 1;
  c.realigned = true;
  return c;
}
}  // namespace

void apply_column_sums(LaunchConfig& c, int64_t rows, int64_t hidden, bool dbias,
                       const KernelFacts& f) {
  c.column_sums_grid = 0;
  c.column_sums_lanes = 0;
  const int vec = c.column_sums_vec();
  const bool summed_after = c.plan == RowPlan::kRegisters || c.plan == RowPlan::kCluster ||
                            c.plan == RowPlan::kPipelined;
  // (A realigned plan writes dx only, whatever its slots.)
  if (!f.cluster_launch || !summed_after || (c.slots <= 1 && !c.realigned) || c.reduce_in_grid) {
    return;
  }
  if (!within_column_sums_bounds(rows, hidden, dbias, c.realigned, f)) return;
  const int batch = column_sums_batch(vec);
  const int max_groups = vec >= 4 ? kColumnSumsThreads / 2 : kColumnSumsThreads;
  int groups = 1;
  while (groups < max_groups && int64_t(groups) * batch < rows) groups *= 2;
  c.column_sums_lanes = kColumnSumsThreads / groups;
  c.column_sums_grid = ceil_div(ceil_div(hidden, vec), c.column_sums_lanes);
}

LaunchConfig plan_bwd_realigned(int64_t rows, int64_t hidden, bool sums, bool dbias,
                                const KernelFacts& f) {
  constexpr int kVec = 8;
  LaunchConfig none;
  none.grid = 0;
  if (!f.bwd_realign || !f.cluster_launch || rows <= 0 || hidden < 2 * kVec) return none;
  if (!within_column_sums_bounds(rows, hidden, dbias, true, f)) return none;
  const int64_t nvec = ceil_div(hidden, kVec);  // the body's vectors, at most
  const int64_t max_cluster = std::max(f.max_cluster, f.max_cluster_pipelined);
  const int64_t threads = std::clamp(f.bwd_realign_threads, 32, 512);
  // The fewest vectors per thread from `items` on whose cluster the device allows.
  int items = 0;
  int64_t cluster = 0;
  auto fit = [&](int from) {
    items = from;
    cluster = ceil_div(nvec, threads * items);
    while (cluster > max_cluster && items < kSmallItems) {
      cluster = ceil_div(nvec, threads * ++items);
    }
  };
  if (f.bwd_realign_items > 0) {
    fit(std::min(f.bwd_realign_items, kRealignMaxItems));
  } else {
    // Two vectors per thread (fewer CTAs per row) while the grid still has a CTA for every SM,
    // else one (measured, twenty-seventh session: 29 x 17389 9.9 against 10.6 us, 256 x 4095
    // 12.0 against 13.2; 32 x 8191 9.3 against 8.7, 64 x 1001 8.3 against 7.7).
    fit(2);
    if (rows * cluster < f.sm_count) fit(1);
  }
  if (cluster > max_cluster) return none;
  LaunchConfig c = realigned_cta_config(ceil_div(nvec, cluster), threads, items);
  c.plan = cluster > 1 ? RowPlan::kCluster : RowPlan::kRegisters;
  c.cluster_size = static_cast<int>(cluster);
  c.grid = rows * cluster;
  c.slots = rows;  // one row per cluster
  c.weight_only_kernels = f.realign_weight_only != 0;
  if (sums) {
    apply_column_sums(c, rows, hidden, dbias, f);  // (of 1-element vectors: realigned)
    if (c.column_sums_grid == 0) return none;
  }
  return c;
}

int64_t realigned_shared_offset_ctas(int64_t rows, int64_t groups, int64_t resident) {
  const int64_t every_row = ceil_div(ceil_div(rows, groups), int64_t(8)) * 8;
  return std::min(every_row, resident / 8 * 8);
}

int64_t realigned_slots_fitting(int64_t rows, int64_t resident) {
  if (resident >= rows) return rows;  // one row per slot: any heads
  return resident / 8 * 8;
}

namespace {
// 4 vectors per thread where they leave a realigned row of nvec vectors more than a warp, else
// 2 (the persistent realigned plans' rule: one warp per 1001-column row measured slower).
int four_items_past_a_warp(int64_t nvec) {
  return nvec > int64_t(32) * kSmallItems ? kSmallItems : 2;
}

// The threads and vectors per thread of one CTA per realigned row of nvec vectors: 256 (or
// `small_threads`) at 2 (or `small_items`), else 512 at 2, else 512 at kSmallItems; {0, 0} past
// that.
std::pair<int64_t, int> realigned_cta(int64_t nvec, int64_t small_threads, int small_items = 2) {
  for (auto [cap, it] : {std::pair<int64_t, int>{small_threads, small_items}, {512, 2},
                         {512, kSmallItems}}) {
    if (nvec <= cap * it) return {cap, it};
  }
  return {0, 0};
}
}  // namespace

LaunchConfig plan_fwd_realigned_slots(int64_t rows, int64_t hidden, const KernelFacts& f) {
  LaunchConfig none;
  none.grid = 0;
  if (!f.fwd_realign || !f.fwd_realign_slots || rows <= 0 || hidden < 16 ||
      rows * hidden < f.fwd_realign_min_elements) {
    return none;
  }
  const int64_t nvec = ceil_div(hidden, int64_t(8));
  const int small_items = f.fwd_realign_slot_items == 0 ? four_items_past_a_warp(nvec)
                          : f.fwd_realign_slot_items > 2 ? kSmallItems
                                                         : 2;
  const auto [threads, items] = realigned_cta(nvec, 256, small_items);
  if (threads == 0) return none;
  LaunchConfig c = realigned_cta_config(nvec, threads, items);
  c.realigned_slots = true;
  c.weight_only_kernels = f.realign_weight_only != 0;
  c.rows_per_block = static_cast<int>(std::clamp<int64_t>(
      f.fwd_realign_slot_cta_threads / c.threads_per_row, 1, kRealignSlotRowsMax));
  const int64_t resident =
      int64_t(f.sm_count) * std::max<int64_t>(1, 2048 / (c.threads_per_row * c.rows_per_block));
  c.grid = c.rows_per_block > 1 ? realigned_shared_offset_ctas(rows, c.rows_per_block, resident)
                                : realigned_slots_fitting(rows, resident);
  if (c.grid == 0) return none;
  // (with a weight and a bias; the launcher counts those given)
  c.smem_bytes = fwd_realigned_slots_smem_bytes(c.cols_per_cta, true, true);
  return c;
}

namespace {
// The persistent realigned backward's plan at `small_items` vectors per thread where 256 threads
// (or NK_TUNE_BWD_REALIGN_THREADS) at that many hold the row; none past 512 at 4.
LaunchConfig bwd_realigned_slots_at(int64_t rows, int64_t nvec, bool dbias, int small_items,
                                    const KernelFacts& f) {
  LaunchConfig none;
  none.grid = 0;
  // One CTA per row at 2 vectors per thread, then at 4 (the kernel of 4 spills registers: at
  // ~100 registers the one of 2 does not). Not split over clusters: at 512 x 17389, clusters of
  // 3 CTAs (one per SM by registers, 32 clusters resident) took 94.5 us against 82.2 element
  // by element (twenty-eighth session).
  const auto [threads, items] =
      realigned_cta(nvec, std::clamp(f.bwd_realign_threads, 32, 512), small_items);
  if (threads == 0) return none;
  LaunchConfig c = realigned_cta_config(nvec, threads, items);
  c.realigned_slots = true;
  c.weight_only_kernels = f.realign_weight_only != 0;
  // Narrow rows: several per CTA, in groups of threads_per_row threads (each group a slot; the
  // CTA writes their sums as one slot of partial sums).
  c.rows_per_block = static_cast<int>(
      std::clamp<int64_t>(f.bwd_realign_slot_cta_threads / c.threads_per_row, 1,
                          std::clamp(f.bwd_realign_slot_cta_rows, 1, kRealignSlotRowsMax)));
  c.rows_per_block = static_cast<int>(std::min<int64_t>(c.rows_per_block, rows));
  c.pinned_registers =
      c.items <= 2 && (f.bwd_realign_slot_pinned >= 2 ||
                       (f.bwd_realign_slot_pinned == 1 && rows >= 2048 && c.threads_per_row >= 128));
  // (the launcher caps them again to the CTAs resident at once)
  c.slots = realigned_slots_fitting(ceil_div(rows, c.rows_per_block), bwd_max_slots(rows, f));
  if (c.slots == 0) return none;
  c.grid = c.slots;
  // (with a weight and dweight; the launcher counts those it is given)
  c.smem_bytes =
      c.rows_per_block * bwd_realigned_slots_smem_bytes(c.cols_per_cta, true, true, dbias);
  return c;
}
}  // namespace

bool bwd_realign_four_items_by_rule(int64_t rows, const LaunchConfig& two) {
  if (!two.pinned_registers) return true;
  return two.rows_per_block == 1 && rows < kBwdRealignPinnedOneRowMinRows;
}

LaunchConfig plan_bwd_realigned_slots(int64_t rows, int64_t hidden, bool dbias,
                                      const KernelFacts& f) {
  constexpr int kVec = 8;
  LaunchConfig none;
  none.grid = 0;
  if (!f.bwd_realign || !f.bwd_realign_slots || rows <= 0 || hidden < 2 * kVec) return none;
  const int64_t nvec = ceil_div(hidden, kVec);  // the body's vectors, at most
  const int four = four_items_past_a_warp(nvec);
  if (f.bwd_realign_slot_items != 0) {
    return bwd_realigned_slots_at(rows, nvec, dbias, f.bwd_realign_slot_items > 2 ? four : 2, f);
  }
  const LaunchConfig two = bwd_realigned_slots_at(rows, nvec, dbias, 2, f);
  if (two.grid == 0 || four == 2 || !bwd_realign_four_items_by_rule(rows, two)) return two;
  return bwd_realigned_slots_at(rows, nvec, dbias, four, f);
}

bool bwd_realign_whole_vectors(int64_t rows, int64_t hidden, const KernelFacts& f) {
  if (f.bwd_realign >= 2) return true;
  return f.bwd_realign == 1 && f.bwd_realign_whole_min_columns > 0 &&
         hidden >= f.bwd_realign_whole_min_columns &&
         rows * hidden <= f.bwd_realign_whole_max_elements;
}

int64_t bwd_max_slots(int64_t rows, const KernelFacts& facts) {
  return std::min<int64_t>(rows, std::max(2, facts.bwd_ctas_per_sm) * int64_t(facts.sm_count));
}

int64_t bwd_pipelined_max_slots(int64_t rows, const KernelFacts& facts) {
  return bwd_max_slots(rows, with_pipelined_ctas_per_sm(facts));
}

int64_t bwd_workspace_slots(int64_t rows, const KernelFacts& facts) {
  return std::max(bwd_max_slots(rows, facts), bwd_pipelined_max_slots(rows, facts));
}

int64_t bwd_workspace_bytes(int64_t rows, int64_t hidden, const KernelFacts& facts,
                            bool want_dweight, bool want_dbias) {
  const int64_t outputs = (want_dweight ? 1 : 0) + (want_dbias ? 1 : 0);
  return outputs * bwd_workspace_slots(rows, facts) * hidden * static_cast<int64_t>(sizeof(float));
}

}  // namespace normkit::cuda
