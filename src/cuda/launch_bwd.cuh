// Backward launcher template, included by the generated per-(x, weight, dy) translation units
// (src/CMakeLists.txt); bwd_dispatch.cu picks one by dy's dtype.
#pragma once

#include <algorithm>

#include "cuda/grid_reduce.cuh"
#include "cuda/launch_common.cuh"
#include "cuda/launchers.h"
#include "cuda/reduce_partials.cuh"
#include "cuda/rms_norm_bwd_cluster_streaming.cuh"
#include "cuda/rms_norm_bwd_column_sums.cuh"
#include "cuda/rms_norm_bwd_columns.cuh"
#include "cuda/rms_norm_bwd_kernels.cuh"
#include "cuda/rms_norm_bwd_lean.cuh"
#include "cuda/rms_norm_bwd_pipelined.cuh"
#include "cuda/rms_norm_bwd_realigned.cuh"
#include "cuda/rms_norm_bwd_realigned_slots.cuh"

namespace normkit::cuda {

// The rms_norm_bwd_realigned instance of a realigned plan: compiled for 1, 2, 4 and 6 vectors
// per thread (registers for the count the plan has), with and without dresidual_out.
template <typename XT, typename WT, typename DYT, bool WEIGHT_ONLY>
auto bwd_realigned_kernel(const nk_rms_norm_bwd_args& a, const LaunchConfig& cfg) {
  const bool dres = a.dresidual_out != nullptr;
  return cfg.items == 1   ? (dres ? rms_norm_bwd_realigned<XT, WT, DYT, 1, true, WEIGHT_ONLY>
                                  : rms_norm_bwd_realigned<XT, WT, DYT, 1, false, WEIGHT_ONLY>)
         : cfg.items == 2 ? (dres ? rms_norm_bwd_realigned<XT, WT, DYT, 2, true, WEIGHT_ONLY>
                                  : rms_norm_bwd_realigned<XT, WT, DYT, 2, false, WEIGHT_ONLY>)
         : cfg.items <= kSmallItems
             ? (dres ? rms_norm_bwd_realigned<XT, WT, DYT, kSmallItems, true, WEIGHT_ONLY>
                     : rms_norm_bwd_realigned<XT, WT, DYT, kSmallItems, false, WEIGHT_ONLY>)
             : (dres ? rms_norm_bwd_realigned<XT, WT, DYT, kRealignMaxItems, true, WEIGHT_ONLY>
                     : rms_norm_bwd_realigned<XT, WT, DYT, kRealignMaxItems, false, WEIGHT_ONLY>);
}

// The rms_norm_bwd_realigned_slots instance of a realigned slots plan: compiled for up to 2 and
// up to 4 vectors per thread, with and without dresidual_out; up to 2 also held to 64 registers
// (pinned).
template <typename XT, typename WT, typename DYT, bool WEIGHT_ONLY>
auto bwd_realigned_slots_kernel(const nk_rms_norm_bwd_args& a, const LaunchConfig& cfg) {
  const bool dres = a.dresidual_out != nullptr, small = cfg.items <= 2;
  const bool pinned = small && cfg.pinned_registers;
  return pinned  ? (dres ? rms_norm_bwd_realigned_slots<XT, WT, DYT, 2, true, 2, WEIGHT_ONLY>
                         : rms_norm_bwd_realigned_slots<XT, WT, DYT, 2, false, 2, WEIGHT_ONLY>)
         : small ? (dres ? rms_norm_bwd_realigned_slots<XT, WT, DYT, 2, true, 1, WEIGHT_ONLY>
                         : rms_norm_bwd_realigned_slots<XT, WT, DYT, 2, false, 1, WEIGHT_ONLY>)
                 : (dres ? rms_norm_bwd_realigned_slots<XT, WT, DYT, kSmallItems, true, 1,
                                                        WEIGHT_ONLY>
                         : rms_norm_bwd_realigned_slots<XT, WT, DYT, kSmallItems, false, 1,
                                                        WEIGHT_ONLY>);
}

template <typename XT, typename WT, typename DYT>
void launch_bwd(const nk_rms_norm_bwd_args& a, const LaunchConfig& planned, cudaStream_t stream) {
  BwdParams p;
  p.shape = row_shape(a.rows, a.hidden, planned);
  p.dy = a.dy;
  p.dy_stride = a.dy_row_stride;
  p.x = a.x;
  p.x_stride = a.x_row_stride;
  p.rstd = a.rstd;
  p.weight = a.weight;
  p.zero_centered = a.zero_centered != 0;
  p.dresidual_out = a.dresidual_out;
  p.dresidual_out_stride = a.dresidual_out_row_stride;
  p.dx = a.dx;
  p.dx_stride = a.dx_row_stride;
  // dweight/dbias summed down the columns by a kernel beside the main one, which then writes dx
  // only (rms_norm_bwd_column_sums.cuh). Not where dx is written in place of x or dy: that
  // kernel reads them while the main kernel runs.
  const bool column_sums = planned.column_sums_grid > 0 && (a.dweight || a.dbias) &&
                           a.dx != a.x && a.dx != a.dy;
  p.early_dependent = planned.early_dependent || column_sums;
  p.group_sums_by_cta = planned.group_sums_by_cta;
  p.dependent_after_rows = planned.dependent_after_rows;
  p.evict_first_reads = planned.evict_first_reads;
  p.evict_last_reads = planned.evict_last_reads;
  p.prefetch_bytes = static_cast<uint32_t>(planned.prefetch_bytes);
  LaunchConfig cfg = planned;  // a pipelined cluster plan may get fewer slots at launch
  // Whether the main kernel sums the partial sums over the slots itself (a cooperative launch
  // where the plan asks for it: its grid is already capped to the CTAs resident at once by
  // fit_resident_clusters / fit_resident_ctas); else a second kernel does.
  bool in_grid = false;
  auto reduce_in_grid_applies = [&](dim3 block) {
    return cfg.reduce_in_grid && cfg.slots > 1 && (a.dweight || a.dbias) &&
           (block.x * block.y) % 32 == 0;
  };
  // The main kernel's dynamic shared memory: its own `bytes`, or more where the plan asks for
  // the reduction in the grid (its scratch reuses the same memory).
  auto main_smem = [&](int64_t bytes, dim3 block) {
    return cfg.reduce_in_grid
               ? std::max(bytes, grid_reduce_smem_bytes(static_cast<int>(block.x * block.y)))
               : bytes;
  };
  // The partial sums ([slots, hidden] float32 each, dweight then dbias) in the workspace. One
  // slot: the main kernel writes dweight/dbias itself and no reduction follows. (The
  // streaming kernel accumulates in the workspace across rows, so it always needs one.)
  auto set_outputs = [&] {
    if (column_sums) {
      p.partial_dweight = p.partial_dbias = nullptr;
      p.dweight = p.dbias = p.grid_dweight = p.grid_dbias = nullptr;
      p.slots = cfg.slots;
      return;
    }
    const bool direct = cfg.slots == 1 && cfg.plan != RowPlan::kStreaming;
    float* ws = static_cast<float*>(a.workspace);
    p.partial_dweight = !direct && a.dweight ? ws : nullptr;
    p.partial_dbias = !direct && a.dbias ? ws + (a.dweight ? cfg.slots * a.hidden : 0) : nullptr;
    p.dweight = direct ? a.dweight : nullptr;
    p.dbias = direct ? a.dbias : nullptr;
    p.grid_dweight = in_grid ? a.dweight : nullptr;
    p.grid_dbias = in_grid ? a.dbias : nullptr;
    p.slots = cfg.slots;
  };
  // The registers or pipelined kernel (cfg.smem_bytes set): its persistent grid capped to the
  // clusters or CTAs resident at once, then launched, cooperative where the reduction can be in
  // the grid.
  auto launch_main = [&](auto kernel, dim3 block, const char* what) {
    cfg = fit_resident_clusters(cfg, kernel, what);
    cfg = fit_resident_ctas(cfg, kernel, what);
    note_bwd_launch(planned, cfg);
    const size_t smem = static_cast<size_t>(cfg.smem_bytes);
    in_grid = reduce_in_grid_applies(block);
    set_outputs();
    if (in_grid && launch_if_cooperative(kernel, cfg.grid, block, {cfg.cluster_size}, stream,
                                         what, smem, p)) {
      return;
    }
    in_grid = false;  // the reduction kernel follows
    set_outputs();
    launch(kernel, cfg.grid, block, {cfg.cluster_size}, stream, what, smem, p);
  };
  // The column sums, a programmatic dependent of the main kernel, which allowed it at its start.
  auto launch_column_sums = [&] {
    BwdParams sums = p;
    sums.dweight = a.dweight;
    sums.dbias = a.dbias;
    LaunchOptions beside;
    beside.dependent = true;
    dispatch_vec(cfg.column_sums_vec(), "rms_norm_bwd (column sums)", [&](auto vec_constant) {
      constexpr int VEC = decltype(vec_constant)::value;
      launch(rms_norm_bwd_column_sums<XT, WT, DYT, VEC>, cfg.column_sums_grid,
             dim3(kColumnSumsThreads), beside, stream, "rms_norm_bwd (column sums)", 0, sums,
             cfg.column_sums_lanes);
    });
  };
  p.partial_dweight = p.partial_dbias = nullptr;
  p.grid_dweight = p.grid_dbias = nullptr;
  p.slots = 0;
  p.dweight = column_sums ? nullptr : a.dweight;  // for want_dbias()/want_dweight() until
  p.dbias = column_sums ? nullptr : a.dbias;        // set_outputs
  if (cfg.realigned && cfg.realigned_slots) {  // persistent, per-slot sums
    if constexpr (sizeof(XT) == 2 && sizeof(WT) == 2 && sizeof(DYT) == 2) {
      if (cfg.items > kSmallItems) {
        throw Error(NK_ERROR_INTERNAL, "rms_norm_bwd: realigned slots plan with items > 4");
      }
      const bool weight_only = cfg.weight_only_kernels && a.weight && p.want_dweight() &&
                               !p.want_dbias() && !a.zero_centered;
      auto kernel = weight_only ? bwd_realigned_slots_kernel<XT, WT, DYT, true>(a, cfg)
                                : bwd_realigned_slots_kernel<XT, WT, DYT, false>(a, cfg);
      const char* what = "rms_norm_bwd (realigned slots)";
      // (each row group's share a multiple of 16 bytes: cols_per_cta is a multiple of 8)
      cfg.smem_bytes = cfg.rows_per_block *
                       bwd_realigned_slots_smem_bytes(cfg.cols_per_cta, a.weight != nullptr,
                                                      a.dweight != nullptr, a.dbias != nullptr);
      cfg = fit_realigned_slots(cfg, kernel, a.rows, what);
      note_bwd_launch(planned, cfg);
      set_outputs();
      launch(kernel, cfg.grid, dim3(cfg.threads_per_row, cfg.rows_per_block),
             {cfg.cluster_size}, stream, what, static_cast<size_t>(cfg.smem_bytes), p);
    } else {
      throw Error(NK_ERROR_INTERNAL,
                  "rms_norm_bwd: realigned slots plan for types other than 16-bit");
    }
  } else if (cfg.realigned) {  // dx alone; dweight/dbias, where wanted, by the column sums
    if constexpr (sizeof(XT) == 2 && sizeof(WT) == 2 && sizeof(DYT) == 2) {
      if ((a.dweight || a.dbias) && !column_sums) {
        throw Error(NK_ERROR_INTERNAL, "rms_norm_bwd: realigned plan without its column sums");
      }
      if (cfg.items > kRealignMaxItems) {
        throw Error(NK_ERROR_INTERNAL, "rms_norm_bwd: realigned plan with items > 6");
      }
      set_outputs();
      const bool weight_only = cfg.weight_only_kernels && a.weight && !a.zero_centered;
      auto kernel = weight_only ? bwd_realigned_kernel<XT, WT, DYT, true>(a, cfg)
                                : bwd_realigned_kernel<XT, WT, DYT, false>(a, cfg);
      launch(kernel, cfg.grid, dim3(cfg.threads_per_row), {cfg.cluster_size}, stream,
             "rms_norm_bwd (realigned)", 0, p);
      note_bwd_launch(planned, cfg);
      if (column_sums) launch_column_sums();
      return;
    } else {
      throw Error(NK_ERROR_INTERNAL, "rms_norm_bwd: realigned plan for types other than 16-bit");
    }
  }
  if (cfg.plan == RowPlan::kColumns) {  // writes dweight/dbias itself: no workspace, one launch
    dispatch_vec(cfg.vec, "rms_norm_bwd (columns)", [&](auto vec_constant) {
      constexpr int VEC = decltype(vec_constant)::value;
      auto kernel = rms_norm_bwd_columns<XT, WT, DYT, VEC>;
      cfg = fit_resident_clusters(cfg, kernel, "rms_norm_bwd (columns)");
      launch(kernel, cfg.grid, dim3(cfg.threads_per_row), {cfg.cluster_size}, stream,
             "rms_norm_bwd (columns)", static_cast<size_t>(cfg.smem_bytes), p);
      note_bwd_launch(planned, cfg);
    });
    return;
  }
  // (A realigned slots plan launched above; its reduction follows below.)
  if (!cfg.realigned_slots) dispatch_vec(cfg.vec, "rms_norm_bwd", [&](auto vec_constant) {
    constexpr int VEC = decltype(vec_constant)::value;
    if (cfg.plan == RowPlan::kPipelined) {
      // cp.async moves 4 bytes at least: the planner only picks this plan for such vectors.
      if constexpr (sizeof(XT) * VEC >= 4 && sizeof(DYT) * VEC >= 4) {
        // Two register budgets: rows of at most 2 vectors per thread get the smaller one.
        constexpr int kSmall = 2;
        static_assert(kPipelineItems > kSmall, "the large budget must be the larger");
        static_assert(kSmall == kClusterDeferMaxItems, "the planner gives these cluster plans 4 stages");
        const bool dbias = p.want_dbias(), small = cfg.items <= kSmall;
        // The common call on its own kernel (LaunchConfig::lean; the planner checked the call
        // and the plan too, this guards the kernel's assumptions with the same rule).
        if constexpr (sizeof(XT) == 2 && sizeof(WT) == 2 && sizeof(DYT) == 2 && VEC == 8) {
          const KernelFacts& tuned = tuned_defaults();
          if (cfg.lean && a.weight && (!dbias || tuned.bwd_lean_dbias != 0) &&
              !a.dresidual_out && bwd_lean_plan(cfg, a.hidden, tuned)) {
            const dim3 block(cfg.threads_per_row, cfg.rows_per_block);
            cfg.smem_bytes = main_smem(cfg.smem_bytes, block);
            auto lean = cfg.items == 1 ? rms_norm_bwd_lean<XT, WT, DYT, 1>
                                       : rms_norm_bwd_lean<XT, WT, DYT, 2>;
            if (cfg.row_sum_quads) {
              lean = cfg.items == 1 ? rms_norm_bwd_lean<XT, WT, DYT, 1, true>
                                    : rms_norm_bwd_lean<XT, WT, DYT, 2, true>;
            }
            if (dbias) {  // (KernelFacts::bwd_lean_dbias; quads as without dbias)
              lean = cfg.row_sum_quads
                         ? (cfg.items == 1 ? rms_norm_bwd_lean<XT, WT, DYT, 1, true, true>
                                           : rms_norm_bwd_lean<XT, WT, DYT, 2, true, true>)
                         : (cfg.items == 1 ? rms_norm_bwd_lean<XT, WT, DYT, 1, false, true>
                                           : rms_norm_bwd_lean<XT, WT, DYT, 2, false, true>);
            }
            launch_main(lean, block, "rms_norm_bwd (lean)");
            return;
          }
        }
        constexpr int kLarge = kPipelineItems;
        // (apply_split_row_extras sets these only on split rows of more than kSmall vectors,
        // the pending row in registers only without dbias and dresidual_out.)
        auto kernel =
            cfg.pending_in_registers
                ? (cfg.smem_weight
                       ? rms_norm_bwd_pipelined<XT, WT, DYT, VEC, kLarge, false, true, true, true>
                       : rms_norm_bwd_pipelined<XT, WT, DYT, VEC, kLarge, false, true, true>)
            : cfg.smem_weight
                ? (dbias
                       ? rms_norm_bwd_pipelined<XT, WT, DYT, VEC, kLarge, true, true, false, true>
                       : rms_norm_bwd_pipelined<XT, WT, DYT, VEC, kLarge, false, true, false, true>)
            : cfg.cluster_size > 1
                ? (small ? (dbias ? rms_norm_bwd_pipelined<XT, WT, DYT, VEC, kSmall, true, true>
                                  : rms_norm_bwd_pipelined<XT, WT, DYT, VEC, kSmall, false, true>)
                         : (dbias ? rms_norm_bwd_pipelined<XT, WT, DYT, VEC, kLarge, true, true>
                                  : rms_norm_bwd_pipelined<XT, WT, DYT, VEC, kLarge, false, true>))
            : small ? (dbias ? rms_norm_bwd_pipelined<XT, WT, DYT, VEC, kSmall, true, false>
                             : rms_norm_bwd_pipelined<XT, WT, DYT, VEC, kSmall, false, false>)
                    : (dbias ? rms_norm_bwd_pipelined<XT, WT, DYT, VEC, kLarge, true, false>
                             : rms_norm_bwd_pipelined<XT, WT, DYT, VEC, kLarge, false, false>);
        if constexpr (sizeof(XT) == 2 && sizeof(WT) == 2 && sizeof(DYT) == 2 && VEC == 8) {
          // (apply_bwd_row_sum_quads: without dbias, the pending row in registers or the
          // weight in shared memory.)
          if (cfg.row_sum_quads && !dbias && !cfg.pending_in_registers && !cfg.smem_weight) {
            constexpr bool kQuads = true;
            kernel = cfg.cluster_size > 1
                         ? (small ? rms_norm_bwd_pipelined<XT, WT, DYT, VEC, kSmall, false, true,
                                                           false, false, kQuads>
                                  : rms_norm_bwd_pipelined<XT, WT, DYT, VEC, kLarge, false, true,
                                                           false, false, kQuads>)
                     : small ? rms_norm_bwd_pipelined<XT, WT, DYT, VEC, kSmall, false, false, false,
                                                      false, kQuads>
                             : rms_norm_bwd_pipelined<XT, WT, DYT, VEC, kLarge, false, false, false,
                                                      false, kQuads>;
          }
        }
        const dim3 block(cfg.threads_per_row, cfg.rows_per_block);
        cfg.smem_bytes = main_smem(cfg.smem_bytes, block);  // (the stages usually hold more)
        launch_main(kernel, block, "rms_norm_bwd (pipelined)");
      } else {
        throw Error(NK_ERROR_INTERNAL, "rms_norm_bwd: pipelined plan with accesses under 4 bytes");
      }
    } else if (cfg.plan == RowPlan::kStreaming && cfg.cluster_size > 1) {
      // KernelFacts::bwd_cluster_streaming: persistent clusters, capped to those resident.
      launch_main(cfg.slot_sums ? rms_norm_bwd_cluster_streaming<XT, WT, DYT, VEC, true>
                                : rms_norm_bwd_cluster_streaming<XT, WT, DYT, VEC, false>,
                  dim3(cfg.threads_per_row), "rms_norm_bwd (cluster streaming)");
    } else if (cfg.plan == RowPlan::kStreaming) {
      set_outputs();
      launch(rms_norm_bwd_streaming<XT, WT, DYT, VEC>, cfg.grid, dim3(cfg.threads_per_row), {},
             stream, "rms_norm_bwd (streaming)", 0, p);
    } else {
      constexpr int IMAX = bwd_items_max(VEC);
      const dim3 block(cfg.threads_per_row, cfg.rows_per_block);
      cfg.smem_bytes = main_smem(
          static_cast<int64_t>(sizeof(float)) * bwd_group_floats(cfg.rows_per_block,
                                                                 cfg.cols_per_cta,
                                                                 p.want_dweight(), p.want_dbias()),
          block);
      if (cfg.items > IMAX) {
        // One-element vectors may hold more (KernelFacts::bwd_narrow_items), in their own kernel.
        if constexpr (VEC == 1) {
          if (cfg.items <= kBwdNarrowItemsWide) {
            launch_main(rms_norm_bwd_registers<XT, WT, DYT, VEC, kBwdNarrowItemsWide>, block,
                        "rms_norm_bwd (registers)");
            return;
          }
        }
        throw Error(NK_ERROR_INTERNAL, "rms_norm_bwd: more vectors per thread than compiled");
      }
      launch_main(rms_norm_bwd_registers<XT, WT, DYT, VEC, IMAX>, block,
                  "rms_norm_bwd (registers)");
    }
  });
  if (column_sums) {
    launch_column_sums();
    return;
  }
  if (in_grid || (!p.partial_dweight && !p.partial_dbias)) return;
  // One launch reduces both: blockIdx.y = 0 dweight (or dbias alone), 1 dbias. reduce_partials:
  // wide rows take 4 columns per thread where the partial sums allow 16-byte loads, few slots
  // fewer lanes (idle lanes would only add zeros); reduce_slots: a few columns per CTA over
  // every slot, about two CTAs per SM in all.
  LaunchOptions dependent;
  dependent.dependent = true;
  const unsigned outputs = (p.partial_dweight && p.partial_dbias) ? 2 : 1;
  if (cfg.reduce_kernel == 0) {
    const auto aligned16 = [](const float* q) {
      return q == nullptr || reinterpret_cast<uintptr_t>(q) % 16 == 0;
    };
    const bool wide = a.hidden >= kReduceVectorFromColumns && a.hidden % 4 == 0 &&
                      aligned16(p.partial_dweight) && aligned16(p.partial_dbias);
    const int64_t blocks = (a.hidden + (wide ? 127 : 31)) / (wide ? 128 : 32);
    const unsigned lanes = static_cast<unsigned>(std::min<int64_t>(kReduceLanes, cfg.slots));
    launch(wide ? reduce_partials<WT, 4> : reduce_partials<WT, 1>,
           dim3(static_cast<unsigned>(blocks), outputs), dim3(32, lanes), dependent, stream,
           "rms_norm_bwd (dweight/dbias reduction)", 0,
           static_cast<const float*>(p.partial_dweight), static_cast<WT*>(a.dweight),
           static_cast<const float*>(p.partial_dbias), static_cast<WT*>(a.dbias), cfg.slots,
           a.hidden);
    return;
  }
  const int64_t chunk = grid_reduce_columns_per_cta(a.hidden, kReduceSlotsCtas);
  const int64_t col_blocks = (a.hidden + chunk - 1) / chunk;
  if (col_blocks > 0x7fffffff) throw Error(NK_ERROR_UNSUPPORTED, "rms_norm_bwd: hidden too large");
  launch(reduce_slots<WT>, dim3(static_cast<unsigned>(col_blocks), outputs),
         dim3(kReduceSlotsThreads), dependent, stream, "rms_norm_bwd (dweight/dbias reduction)", 0,
         static_cast<const float*>(p.partial_dweight), static_cast<WT*>(a.dweight),
         static_cast<const float*>(p.partial_dbias), static_cast<WT*>(a.dbias), cfg.slots,
         a.hidden, chunk);
}

}  // namespace normkit::cuda
