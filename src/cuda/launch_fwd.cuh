// Forward launcher template, included by the per-x-dtype translation units.
#pragma once

#include "cuda/launch_common.cuh"
#include "cuda/launchers.h"
#include "cuda/rms_norm_fwd_cluster_streaming.cuh"
#include "cuda/rms_norm_fwd_kernels.cuh"
#include "cuda/rms_norm_fwd_lean.cuh"
#include "cuda/rms_norm_fwd_pipelined.cuh"
#include "cuda/rms_norm_fwd_realigned.cuh"
#include "cuda/rms_norm_fwd_realigned_lean.cuh"
#include "cuda/rms_norm_fwd_realigned_slots.cuh"

namespace normkit::cuda {

inline FwdParams fwd_params(const nk_rms_norm_fwd_args& a, const LaunchConfig& cfg) {
  FwdParams p;
  p.shape = row_shape(a.rows, a.hidden, cfg);
  p.x = a.x;
  p.x_stride = a.x_row_stride;
  p.residual = a.residual;
  p.residual_stride = a.residual_row_stride;
  p.residual_out = a.residual_out;
  p.residual_out_stride = a.residual_out_row_stride;
  p.weight = a.weight;
  p.bias = a.bias;
  p.zero_centered = a.zero_centered != 0;
  p.eps = a.eps;
  p.y = a.y;
  p.y_stride = a.y_row_stride;
  p.rstd = a.rstd;
  p.evict_first_reads = cfg.evict_first_reads;
  p.evict_last_reads = cfg.evict_last_reads;
  p.prefetch_bytes = static_cast<uint32_t>(cfg.prefetch_bytes);
  return p;
}

// Whether a realigned plan's call takes the kernels compiled for a weight only: a weight, no
// bias, no zero-centring (LaunchConfig::weight_only_kernels).
inline bool realigned_weight_only(const nk_rms_norm_fwd_args& a, const LaunchConfig& cfg) {
  return cfg.weight_only_kernels && a.weight && !a.bias && !a.zero_centered;
}

// The rms_norm_fwd_realigned_slots instance of a plan's vectors per thread (up to 2, up to 4).
template <typename XT, typename WT, typename YT, bool WEIGHT_ONLY>
auto fwd_realigned_slots_kernel(int items) {
  return items <= 2 ? rms_norm_fwd_realigned_slots<XT, WT, YT, 2, WEIGHT_ONLY>
                    : rms_norm_fwd_realigned_slots<XT, WT, YT, kSmallItems, WEIGHT_ONLY>;
}

// The rms_norm_fwd_registers_rows instance of a plan's rows per group and vectors per thread,
// of EXTRAS and of the store form (WEAK).
template <typename XT, typename WT, typename YT, int VEC, int IMAX_SMALL, bool EXTRAS, bool WEAK>
auto fwd_rows_instance(const LaunchConfig& cfg) {
  if (cfg.rows_per_group == 4) {
    return cfg.items == 2 ? rms_norm_fwd_registers_rows<XT, WT, YT, VEC, 2, 4, EXTRAS, WEAK>
                          : rms_norm_fwd_registers_rows<XT, WT, YT, VEC, 1, 4, EXTRAS, WEAK>;
  }
  return cfg.items == 1 ? rms_norm_fwd_registers_rows<XT, WT, YT, VEC, 1, 2, EXTRAS, WEAK>
                        : rms_norm_fwd_registers_rows<XT, WT, YT, VEC, IMAX_SMALL, 2, EXTRAS, WEAK>;
}

// fwd_rows_instance for a plan (weak stores for calls without extras where
// KernelFacts::fwd_weak_stores asks).
template <typename XT, typename WT, typename YT, int VEC, int IMAX_SMALL>
auto fwd_rows_kernel(const LaunchConfig& cfg, bool extras) {
  if ((cfg.threads_per_row > 32 && cfg.threads_per_row % 32 != 0) || cfg.items > IMAX_SMALL ||
      (cfg.rows_per_group != 2 && !(cfg.rows_per_group == 4 && cfg.items <= 2))) {
    throw Error(NK_ERROR_INTERNAL, "rms_norm_fwd: rows per group outside its kernels");
  }
  if (extras) return fwd_rows_instance<XT, WT, YT, VEC, IMAX_SMALL, true, false>(cfg);
  // The row sums by quads (apply_fwd_row_sum_quads): two rows per group at the small budget, of
  // calls without extras only (fewer instantiations).
  if (cfg.row_sum_quads && cfg.rows_per_group == 2 && cfg.items > 1) {
    constexpr bool kQuads = true;
    return tuned_defaults().fwd_weak_stores != 0
               ? rms_norm_fwd_registers_rows<XT, WT, YT, VEC, IMAX_SMALL, 2, false, true, kQuads>
               : rms_norm_fwd_registers_rows<XT, WT, YT, VEC, IMAX_SMALL, 2, false, false, kQuads>;
  }
  if (tuned_defaults().fwd_weak_stores != 0) {
    return fwd_rows_instance<XT, WT, YT, VEC, IMAX_SMALL, false, true>(cfg);
  }
  return fwd_rows_instance<XT, WT, YT, VEC, IMAX_SMALL, false, false>(cfg);
}

// The rms_norm_fwd_lean instance of a plan's vectors per thread (1-4: kSmallItems), of the
// parameter block P, of the store form (WEAK: KernelFacts::fwd_weak_stores) and of the row sum
// (QUADS: LaunchConfig::row_sum_quads).
template <typename XT, typename WT, typename YT, typename P, bool WEAK = false,
          bool QUADS = false>
auto fwd_lean_kernel(int items) {
  static_assert(kSmallItems == 4, "an instance per item count up to kSmallItems");
  switch (items) {
    case 1: return rms_norm_fwd_lean<XT, WT, YT, 1, P, WEAK, QUADS>;
    case 2: return rms_norm_fwd_lean<XT, WT, YT, 2, P, WEAK, QUADS>;
    case 3: return rms_norm_fwd_lean<XT, WT, YT, 3, P, WEAK, QUADS>;
    case 4: return rms_norm_fwd_lean<XT, WT, YT, 4, P, WEAK, QUADS>;
  }
  throw Error(NK_ERROR_INTERNAL, "rms_norm_fwd: lean plan outside 1-4 vectors per thread");
}

template <typename XT, typename WT, typename YT>
void launch_fwd(const nk_rms_norm_fwd_args& a, const LaunchConfig& cfg, cudaStream_t stream) {
  const FwdParams p = fwd_params(a, cfg);
  if (cfg.realigned && cfg.realigned_slots) {  // persistent, rows of one head per CTA
    if constexpr (sizeof(XT) == 2 && sizeof(WT) == 2 && sizeof(YT) == 2) {
      if (cfg.items > kSmallItems) {
        throw Error(NK_ERROR_INTERNAL, "rms_norm_fwd: realigned slots plan with items > 4");
      }
      auto kernel = realigned_weight_only(a, cfg)
                        ? fwd_realigned_slots_kernel<XT, WT, YT, true>(cfg.items)
                        : fwd_realigned_slots_kernel<XT, WT, YT, false>(cfg.items);
      const char* what = "rms_norm_fwd (realigned slots)";
      LaunchConfig run = cfg;
      run.smem_bytes =
          fwd_realigned_slots_smem_bytes(run.cols_per_cta, a.weight != nullptr, a.bias != nullptr);
      run = fit_realigned_slots(run, kernel, a.rows, what, true);
      launch(kernel, run.grid, dim3(run.threads_per_row, run.rows_per_block), {}, stream, what,
             static_cast<size_t>(run.smem_bytes), p);
      return;
    } else {
      throw Error(NK_ERROR_INTERNAL,
                  "rms_norm_fwd: realigned slots plan for types other than 16-bit");
    }
  }
  if (cfg.realigned) {
    if constexpr (sizeof(XT) == 2 && sizeof(WT) == 2 && sizeof(YT) == 2) {
      if (cfg.items > kSmallItems) {
        throw Error(NK_ERROR_INTERNAL, "rms_norm_fwd: realigned plan with items > 4");
      }
      if (cfg.realigned_lean && realigned_weight_only(a, cfg)) {
        launch(rms_norm_fwd_realigned_lean<XT, WT, YT, kSmallItems, RealignedLeanParams>,
               cfg.grid, dim3(cfg.threads_per_row), {cfg.cluster_size}, stream,
               "rms_norm_fwd (realigned, lean)", 0, realigned_lean_params(p));
        return;
      }
      if (cfg.realigned_lean) {  // a bias or zero-centring besides, or no weight
        launch(rms_norm_fwd_realigned_lean<XT, WT, YT, kSmallItems, RealignedLeanGeneralParams>,
               cfg.grid, dim3(cfg.threads_per_row), {cfg.cluster_size}, stream,
               "rms_norm_fwd (realigned, lean, general)", 0, realigned_lean_general_params(p));
        return;
      }
      launch(realigned_weight_only(a, cfg) ? rms_norm_fwd_realigned<XT, WT, YT, kSmallItems, true>
                                           : rms_norm_fwd_realigned<XT, WT, YT, kSmallItems, false>,
             cfg.grid, dim3(cfg.threads_per_row, cfg.rows_per_block), {cfg.cluster_size}, stream,
             "rms_norm_fwd (realigned)", 0, p);
      return;
    } else {
      throw Error(NK_ERROR_INTERNAL, "rms_norm_fwd: realigned plan for types other than 16-bit");
    }
  }
  dispatch_vec(cfg.vec, "rms_norm_fwd", [&](auto vec_constant) {
    constexpr int VEC = decltype(vec_constant)::value;
    if (cfg.plan == RowPlan::kPipelined) {
      // cp.async moves 4 bytes at least: the planner only picks this plan for such vectors.
      if constexpr (sizeof(XT) * VEC >= 4) {
        // Two register budgets, as in the backward: up to 2 vectors per thread, or up to 4.
        // Rows split over a cluster have at most 2 vectors per thread (the planner's rule).
        if (cfg.cluster_size > 1 && cfg.items > 2) {
          throw Error(NK_ERROR_INTERNAL, "rms_norm_fwd: pipelined cluster plan with items > 2");
        }
        auto kernel = cfg.cluster_size > 1 ? rms_norm_fwd_pipelined<XT, WT, YT, VEC, 2, true>
                      : cfg.items <= 2     ? rms_norm_fwd_pipelined<XT, WT, YT, VEC, 2, false>
                                           : rms_norm_fwd_pipelined<XT, WT, YT, VEC, kPipelineItems, false>;
        const LaunchConfig run = fit_resident_clusters(cfg, kernel, "rms_norm_fwd (pipelined)");
        launch(kernel, run.grid, dim3(run.threads_per_row, run.rows_per_block),
               {run.cluster_size}, stream, "rms_norm_fwd (pipelined)",
               static_cast<size_t>(run.smem_bytes), p);
      } else {
        throw Error(NK_ERROR_INTERNAL, "rms_norm_fwd: pipelined plan with accesses under 4 bytes");
      }
    } else if (cfg.plan == RowPlan::kStreaming && cfg.cluster_size > 1) {
      // KernelFacts::fwd_cluster_streaming: persistent clusters, capped to those resident.
      auto kernel = rms_norm_fwd_cluster_streaming<XT, WT, YT, VEC>;
      const LaunchConfig run =
          fit_resident_clusters(cfg, kernel, "rms_norm_fwd (cluster streaming)");
      launch(kernel, run.grid, dim3(run.threads_per_row), {run.cluster_size}, stream,
             "rms_norm_fwd (cluster streaming)", 0, p);
    } else if (cfg.plan == RowPlan::kStreaming) {
      launch(rms_norm_fwd_streaming<XT, WT, YT, VEC>, cfg.grid, dim3(cfg.threads_per_row), {},
             stream, "rms_norm_fwd (streaming)", 0, p);
    } else {
      // Two register budgets: rows of at most kSmallItems vectors per thread (the common
      // case) get the smaller one, and so more CTAs per SM.
      constexpr int IMAX = fwd_items_max(VEC);
      constexpr int IMAX_SMALL = kSmallItems < IMAX ? kSmallItems : IMAX;
      auto kernel = cfg.items <= IMAX_SMALL ? rms_norm_fwd_registers<XT, WT, YT, VEC, IMAX_SMALL>
                                            : rms_norm_fwd_registers<XT, WT, YT, VEC, IMAX>;
      // EXACT (no per-item range checks) at the widest vectors only (16 bytes of the narrowest
      // type): the other widths serve misaligned rows, which are rarely exact (fewer
      // instantiations).
      constexpr size_t kNarrowest = min_int(min_int(sizeof(XT), sizeof(WT)), sizeof(YT));
      if constexpr (kNarrowest * VEC == 16) {
        if (cfg.exact) {
          // The small budget's 56-register entry for 16-bit x only (float32 x spilled there);
          // chosen at compile time, so that the other is not built. Its variant without the
          // weight's extras where the launch has none (FwdParams::weight_extras).
          auto small_kernel = [extras = p.weight_extras()] {
            if constexpr (sizeof(XT) == 2) {
              return extras ? rms_norm_fwd_registers_exact_small<XT, WT, YT, VEC, IMAX_SMALL, true>
                            : rms_norm_fwd_registers_exact_small<XT, WT, YT, VEC, IMAX_SMALL, false>;
            } else {
              return rms_norm_fwd_registers<XT, WT, YT, VEC, IMAX_SMALL, true>;
            }
          }();
          kernel = cfg.items <= IMAX_SMALL ? small_kernel
                                           : rms_norm_fwd_registers<XT, WT, YT, VEC, IMAX, true>;
          // The same kernels with the row sum by quads (KernelFacts::fwd_row_sum_quads; 16-bit
          // x, weight and y only: fewer instantiations).
          if constexpr (sizeof(XT) == 2 && sizeof(WT) == 2 && sizeof(YT) == 2) {
            if (cfg.row_sum_quads) {
              constexpr int S = IMAX_SMALL;
              if (cfg.items > S) {
                kernel = rms_norm_fwd_registers<XT, WT, YT, VEC, IMAX, true, true>;
              } else {
                kernel = p.weight_extras()
                             ? rms_norm_fwd_registers_exact_small<XT, WT, YT, VEC, S, true, true>
                             : rms_norm_fwd_registers_exact_small<XT, WT, YT, VEC, S, false, true>;
              }
            }
          }
          // The kernels of KernelFacts::fwd_tiny_registers, fwd_rows_per_group,
          // fwd_weight_first and fwd_lean (16-bit types only: plan_fwd_with_reads).
          if constexpr (sizeof(XT) == 2 && sizeof(WT) == 2 && sizeof(YT) == 2) {
            const bool extras = p.weight_extras();
            if (cfg.register_bound != 0 && cfg.items <= 2) {
              if (cfg.register_bound == 40) {
                kernel = extras ? rms_norm_fwd_registers_exact_40<XT, WT, YT, VEC, true>
                                : rms_norm_fwd_registers_exact_40<XT, WT, YT, VEC, false>;
              } else {
                kernel = extras ? rms_norm_fwd_registers_exact_32<XT, WT, YT, VEC, true>
                                : rms_norm_fwd_registers_exact_32<XT, WT, YT, VEC, false>;
              }
            }
            if (cfg.rows_per_group > 1) {
              kernel = fwd_rows_kernel<XT, WT, YT, VEC, IMAX_SMALL>(cfg, extras);
            }
            if (cfg.weight_first) {
              if (cfg.items > IMAX_SMALL ||
                  cfg.threads_per_row * cfg.rows_per_block > kFwdWeightFirstMaxThreads) {
                throw Error(NK_ERROR_INTERNAL,
                            "rms_norm_fwd: weight-with-x plan outside its kernel");
              }
              kernel = rms_norm_fwd_registers_weight_first<XT, WT, YT, VEC, IMAX_SMALL>;
              // The common call (a plain weight, no bias, no residual) on its own kernel,
              // with its own parameter block where KernelFacts::fwd_lean_params asks.
              if (cfg.lean && p.weight && !extras && !p.residual) {
                if (tuned_defaults().fwd_lean_params != 0) {
                  // (The row sum by quads with the default store form only: fewer instances.)
                  const bool weak = tuned_defaults().fwd_weak_stores != 0;
                  launch(weak ? fwd_lean_kernel<XT, WT, YT, LeanFwdParams, true>(cfg.items)
                         : cfg.row_sum_quads
                             ? fwd_lean_kernel<XT, WT, YT, LeanFwdParams, false, true>(cfg.items)
                             : fwd_lean_kernel<XT, WT, YT, LeanFwdParams>(cfg.items),
                         cfg.grid,
                         dim3(cfg.threads_per_row, cfg.rows_per_block), {cfg.cluster_size},
                         stream, "rms_norm_fwd (lean)", 0, lean_fwd_params(p));
                  return;
                }
                kernel = fwd_lean_kernel<XT, WT, YT, FwdParams>(cfg.items);
              }
            }
          }
        }
      }
      if ((cfg.rows_per_group > 1 || cfg.register_bound != 0 || cfg.weight_first) &&
          !(sizeof(XT) == 2 && sizeof(WT) == 2 && sizeof(YT) == 2 && cfg.exact)) {
        throw Error(NK_ERROR_INTERNAL,
                    "rms_norm_fwd: rows per group, a register bound or the weight with x "
                    "without their kernels (16-bit x, weight and y, EXACT plans)");
      }
      launch(kernel, cfg.grid, dim3(cfg.threads_per_row, cfg.rows_per_block), {cfg.cluster_size},
             stream, "rms_norm_fwd (registers)", 0, p);
    }
  });
}

template <typename XT>
void launch_fwd_for_x(const nk_rms_norm_fwd_args& a, const LaunchConfig& cfg,
                      cudaStream_t stream) {
  dispatch_dtype(a.weight_dtype, "rms_norm_fwd weight", [&](auto w) {
    dispatch_dtype(a.y_dtype, "rms_norm_fwd y", [&](auto y) {
      launch_fwd<XT, decltype(w), decltype(y)>(a, cfg, stream);
    });
  });
}

}  // namespace normkit::cuda
