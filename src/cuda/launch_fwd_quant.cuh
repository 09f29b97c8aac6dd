// Launcher template of the forward with a quantized output, included by the generated
// per-(x, weight) translation units (src/CMakeLists.txt).
#pragma once

#include <type_traits>

#include "cuda/launch_fwd.cuh"
#include "cuda/rms_norm_fwd_quant_kernels.cuh"
#include "cuda/rms_norm_fwd_quant_ticketed.cuh"
#include "cuda/rms_norm_fwd_quant_transposed.cuh"

namespace normkit::cuda {

inline QuantParams quant_params(const nk_rms_norm_fwd_args& a) {
  QuantParams q;
  switch (a.y_dtype) {
    case NK_FLOAT8_E4M3: q.format = QuantFormat::kE4M3; break;
    case NK_FLOAT8_E5M2: q.format = QuantFormat::kE5M2; break;
    case NK_INT8: q.format = QuantFormat::kInt8; break;
    default:
      throw Error(NK_ERROR_INTERNAL, std::string("quantized forward: unhandled y dtype ") +
                                         nk_dtype_name(a.y_dtype));
  }
  q.qmax = quant_qmax(a.y_dtype);
  q.mx_emax = mx_emax(a.y_dtype);
  q.block = static_cast<int>(quant_block_size(a));
  while ((1 << q.block_shift) < q.block) ++q.block_shift;
  q.scale = a.scale;
  q.scale_ub = a.scale_ub;
  q.scales = a.scales;
  q.amax = a.amax;
  return q;
}

// The kernels' parameters with the quantized output and y_t (the one-grid and one-kernel
// transposed forwards).
inline FwdParams fwd_params_with_y_t(const nk_rms_norm_fwd_args& a, const LaunchConfig& cfg) {
  FwdParams p = fwd_params(a, cfg);
  p.quant = quant_params(a);
  p.quant.y_t = static_cast<uint8_t*>(a.y_t);
  p.quant.y_t_stride = a.y_t_row_stride;
  p.quant.amax_ticket = cfg.amax_ticket;
  return p;
}

// The 56-register kernel of a pinned plan (LaunchConfig::pinned_registers; TOKEN's folded one):
// EXTRAS as the launch's FwdParams::weight_extras; compiled for exactly kSmallItems vectors per
// thread where the plan says so (LaunchConfig::full_items; never for TOKEN, which measured
// slower so: KernelFacts::quant_full_items); TOKEN's compiled for e4m3 codes where y is e4m3 and
// the plan says so (LaunchConfig::fixed_format), BLOCK's likewise where the blocks are also 128
// columns (KernelFacts::quant_block_e4m3), MXFP8's (KernelFacts::quant_mxfp8_e4m3; e5m2 keeps
// the runtime format), with its items in pairs where the plan says so (LaunchConfig::mx_pairs).
// QUADS: the row sum (TOKEN: with the row maximum) read four warps at a time
// (LaunchConfig::row_sum_quads: plans of exactly kSmallItems vectors per thread).
template <typename XT, typename WT, int MODE, int VEC, bool EXTRAS, bool QUADS>
auto pinned_quant_kernel_for(const FwdParams& p, const LaunchConfig& cfg) {
  if constexpr (MODE == NK_QUANT_TOKEN) {
    if (cfg.full_items) {
      throw Error(NK_ERROR_INTERNAL, "rms_norm_fwd quantized: a full-items plan for TOKEN");
    }
    return cfg.fixed_format && p.quant.format == QuantFormat::kE4M3
               ? rms_norm_fwd_quant_token_folded_exact_small<XT, WT, VEC, EXTRAS, true, QUADS>
               : rms_norm_fwd_quant_token_folded_exact_small<XT, WT, VEC, EXTRAS, false, QUADS>;
  } else {
    if (cfg.fixed_format) {
      if constexpr (MODE == NK_QUANT_BLOCK || MODE == NK_QUANT_MXFP8) {
        constexpr int kBlock = MODE == NK_QUANT_MXFP8 ? kMxfp8Block : kDefaultQuantBlock;
        if (p.quant.format == QuantFormat::kE4M3 && p.quant.block == kBlock) {
          auto e4m3_kernel = [&](auto pairs) {
            constexpr bool kPairs = decltype(pairs)::value;
            return cfg.full_items ? rms_norm_fwd_quant_registers_exact_small<XT, WT, MODE, VEC,
                                                                             EXTRAS, true, true,
                                                                             kPairs, QUADS>
                                  : rms_norm_fwd_quant_registers_exact_small<XT, WT, MODE, VEC,
                                                                             EXTRAS, false, true,
                                                                             kPairs>;
          };
          if constexpr (MODE == NK_QUANT_MXFP8) {
            if (cfg.mx_pairs) return e4m3_kernel(std::true_type{});
          }
          return e4m3_kernel(std::false_type{});
        }
      } else {
        throw Error(NK_ERROR_INTERNAL,
                    "rms_norm_fwd quantized: an e4m3 kernel plan but for TOKEN, BLOCK or MXFP8");
      }
    }
    return cfg.full_items ? rms_norm_fwd_quant_registers_exact_small<XT, WT, MODE, VEC, EXTRAS,
                                                                     true, false, false, QUADS>
                          : rms_norm_fwd_quant_registers_exact_small<XT, WT, MODE, VEC, EXTRAS,
                                                                     false>;
  }
}

template <typename XT, typename WT, int MODE, int VEC, bool EXTRAS>
auto pinned_quant_kernel_summed(const FwdParams& p, const LaunchConfig& cfg) {
  return cfg.row_sum_quads ? pinned_quant_kernel_for<XT, WT, MODE, VEC, EXTRAS, true>(p, cfg)
                           : pinned_quant_kernel_for<XT, WT, MODE, VEC, EXTRAS, false>(p, cfg);
}

template <typename XT, typename WT, int MODE, int VEC>
auto pinned_quant_kernel(const FwdParams& p, const LaunchConfig& cfg) {
  return p.weight_extras() ? pinned_quant_kernel_summed<XT, WT, MODE, VEC, true>(p, cfg)
                           : pinned_quant_kernel_summed<XT, WT, MODE, VEC, false>(p, cfg);
}

template <typename XT, typename WT, int MODE>
void launch_fwd_quant_mode(const FwdParams& p, const LaunchConfig& cfg, cudaStream_t stream) {
  if constexpr (MODE == NK_QUANT_BLOCK || MODE == NK_QUANT_MXFP8) {
    if (cfg.vec == 0) {  // rows too misaligned for the shuffle layout (plan_fwd_quant)
      const size_t smem = static_cast<size_t>(p.shape.hidden / p.quant.block) * sizeof(unsigned);
      launch(rms_norm_fwd_quant_blocks_unaligned<XT, WT, MODE>, cfg.grid,
             dim3(cfg.threads_per_row), {}, stream, "rms_norm_fwd quantized (unaligned blocks)",
             smem, p);
      return;
    }
  }
  dispatch_vec(cfg.vec, "rms_norm_fwd quantized", [&](auto vec_constant) {
    constexpr int VEC = decltype(vec_constant)::value;
    if (cfg.plan == RowPlan::kStreaming) {
      launch(rms_norm_fwd_quant_streaming<XT, WT, MODE, VEC>, cfg.grid,
             dim3(cfg.threads_per_row), {}, stream, "rms_norm_fwd quantized (streaming)", 0, p);
    } else {
      // Two register budgets, as the unquantized forward: rows of at most kSmallItems vectors
      // per thread get the smaller one, and so more CTAs per SM.
      constexpr int IMAX = fwd_items_max(VEC);
      constexpr int IMAX_SMALL = kSmallItems < IMAX ? kSmallItems : IMAX;
      const bool small = cfg.items <= IMAX_SMALL;
      // WEIGHT_FIRST (rms_norm_fwd_quant_registers) for 16-bit x and weights, but for TOKEN at the
      // small budget; for 16-byte vectors of x, cfg.quant_weight_first
      // (NK_TUNE_QUANT_WEIGHT_FIRST) may choose for an A/B run: 0 the per-item loads of TOKEN and
      // BLOCK before the fifth session, 2 WEIGHT_FIRST for TOKEN's small budget too (other
      // widths keep the default: fewer instantiations).
      constexpr bool kNarrowWeight = sizeof(WT) <= 2 && sizeof(XT) <= 2;
      constexpr bool kSmallFirst = kNarrowWeight && MODE != NK_QUANT_TOKEN;
      auto kernel = small ? rms_norm_fwd_quant_registers<XT, WT, MODE, VEC, IMAX_SMALL, kSmallFirst>
                          : rms_norm_fwd_quant_registers<XT, WT, MODE, VEC, IMAX, kNarrowWeight>;
      if constexpr ((MODE == NK_QUANT_TOKEN || MODE == NK_QUANT_BLOCK) && kNarrowWeight &&
                    sizeof(XT) * VEC == 16) {
        const int q = cfg.quant_weight_first;
        const bool first = q == 2 || (q == 1 && (!small || MODE != NK_QUANT_TOKEN));
        if (first != (small ? kSmallFirst : true)) {
          kernel = small ? rms_norm_fwd_quant_registers<XT, WT, MODE, VEC, IMAX_SMALL, !kSmallFirst>
                         : rms_norm_fwd_quant_registers<XT, WT, MODE, VEC, IMAX, false>;
        }
      }
      // TOKEN without a bias: one row reduction (FOLD), where the thread's x and weight, held
      // in registers through it, take at most 64 bytes each (more spilled, ptxas; so did
      // 1-element vectors, which only misaligned rows use).
      constexpr bool kFoldFits = sizeof(WT) * VEC * IMAX_SMALL <= 64 &&
                                 sizeof(XT) * VEC * IMAX_SMALL <= 64 && VEC >= 2;
      // EXACT (no per-item range checks; RowChunk) for full 16-byte vectors of x with the
      // default weight loads (the A/B settings of quant_weight_first keep the general kernels).
      constexpr bool kExactWidth = sizeof(XT) * VEC == 16;
      const bool exact = kExactWidth && cfg.exact && cfg.quant_weight_first == 1;
      if constexpr (kExactWidth) {
        if (exact) {
          kernel =
              small ? rms_norm_fwd_quant_registers<XT, WT, MODE, VEC, IMAX_SMALL, kSmallFirst, true>
                    : rms_norm_fwd_quant_registers<XT, WT, MODE, VEC, IMAX, kNarrowWeight, true>;
        }
      }
      if constexpr (MODE == NK_QUANT_TOKEN && kFoldFits) {
        if (!p.bias && small) {
          kernel = rms_norm_fwd_quant_token_folded<XT, WT, VEC, IMAX_SMALL>;
          if constexpr (kExactWidth) {
            if (exact) kernel = rms_norm_fwd_quant_token_folded<XT, WT, VEC, IMAX_SMALL, true>;
          }
        }
      }
      // The 56-register entries (cfg.pinned_registers) of the EXACT small budget: 16-bit x and
      // weights; TOKEN only where it folds (with a bias it keeps the bounded kernel).
      if constexpr (kExactWidth && sizeof(XT) == 2 && sizeof(WT) == 2) {
        if (exact && small && cfg.pinned_registers && (MODE != NK_QUANT_TOKEN || !p.bias)) {
          kernel = pinned_quant_kernel<XT, WT, MODE, VEC>(p, cfg);
        }
      }
      launch(kernel, cfg.grid, dim3(cfg.threads_per_row, cfg.rows_per_block), {cfg.cluster_size},
             stream, "rms_norm_fwd quantized (registers)", 0, p);
    }
  });
}

template <typename XT, typename WT>
void launch_fwd_quant_for(const nk_rms_norm_fwd_args& a, const LaunchConfig& cfg,
                          cudaStream_t stream) {
  FwdParams p = fwd_params(a, cfg);
  p.quant = quant_params(a);
  p.quant.amax_per_warp = cfg.amax_per_warp;
  p.quant.amax_ticket = cfg.amax_ticket;
  switch (a.quant) {
    case NK_QUANT_TENSOR: return launch_fwd_quant_mode<XT, WT, NK_QUANT_TENSOR>(p, cfg, stream);
    case NK_QUANT_TOKEN: return launch_fwd_quant_mode<XT, WT, NK_QUANT_TOKEN>(p, cfg, stream);
    case NK_QUANT_BLOCK: return launch_fwd_quant_mode<XT, WT, NK_QUANT_BLOCK>(p, cfg, stream);
    case NK_QUANT_MXFP8: return launch_fwd_quant_mode<XT, WT, NK_QUANT_MXFP8>(p, cfg, stream);
    default:
      throw Error(NK_ERROR_INTERNAL, "quantized forward: unhandled mode " +
                                         std::to_string(static_cast<int>(a.quant)));
  }
}

// rms_norm_fwd_quant_ticketed for a zero-centered weight (`add`) and `slices` per piece.
template <typename XT, typename WT, bool ROW_SUM_QUADS>
auto ticketed_kernel(bool add, int slices) {
  return add ? (slices == 2 ? rms_norm_fwd_quant_ticketed<XT, WT, true, 2, ROW_SUM_QUADS>
                            : rms_norm_fwd_quant_ticketed<XT, WT, true, 1, ROW_SUM_QUADS>)
             : (slices == 2 ? rms_norm_fwd_quant_ticketed<XT, WT, false, 2, ROW_SUM_QUADS>
                            : rms_norm_fwd_quant_ticketed<XT, WT, false, 1, ROW_SUM_QUADS>);
}

template <typename XT, typename WT>
bool launch_fwd_quant_ticketed_for(const nk_rms_norm_fwd_args& a, const LaunchConfig& cfg,
                                   int lag_percent, int slices_per_piece, cudaStream_t stream) {
  if constexpr (sizeof(XT) == 2 && sizeof(WT) == 2) {
    if (!cfg.pinned_registers || cfg.cluster_size != 1 || cfg.vec != 8) {
      throw Error(NK_ERROR_INTERNAL, "rms_norm_fwd quantized + transposed (one grid): unexpected "
                                     "plan " + cfg.describe());
    }
    const FwdParams p = fwd_params_with_y_t(a, cfg);
    const bool add = p.weight && p.zero_centered;  // weight_add(p) is not -0.0
    const int slices = slices_per_piece == 2 ? 2 : 1;
    auto kernel = cfg.row_sum_quads ? ticketed_kernel<XT, WT, true>(add, slices)
                                    : ticketed_kernel<XT, WT, false>(add, slices);
    const char* what = "rms_norm_fwd quantized + transposed (one grid)";
    const dim3 block(cfg.threads_per_row, cfg.rows_per_block);
    const int threads = cfg.threads_per_row * cfg.rows_per_block;
    const size_t smem = static_cast<size_t>(slices * band_tile_bytes(threads));
    TicketParams tp;
    tp.tickets =
        plan_transpose_tickets(a.rows, a.hidden, threads, slices, cfg.rows_per_block, cfg.grid,
                               resident_ctas(kernel, block, smem, what), lag_percent);
    if (tp.tickets.grid == 0) return false;
    tp.band_done = band_counters(tp.tickets.bands, stream);
    if (!tp.band_done) return false;
    launch(kernel, static_cast<int64_t>(tp.tickets.grid), block, {}, stream, what, smem, p, tp);
    return true;
  } else {
    return false;
  }
}

template <typename XT, typename WT>
void launch_fwd_quant_transposed_for(const nk_rms_norm_fwd_args& a, const LaunchConfig& cfg,
                                     cudaStream_t stream) {
  constexpr int VEC = static_cast<int>(16 / sizeof(XT));
  if (cfg.vec != VEC || cfg.items > kSmallItems || a.quant != NK_QUANT_TENSOR) {
    throw Error(NK_ERROR_INTERNAL, "rms_norm_fwd quantized + transposed: unexpected plan " +
                                       cfg.describe());
  }
  const FwdParams p = fwd_params_with_y_t(a, cfg);
  // 2 vectors per thread or fewer: a smaller register budget (90 against 121 at 16 bits).
  // Setting 2 (tile_buffers 2): the persistent kernel, on the clusters the device holds at once.
  const bool persistent = cfg.tile_buffers == 2;
  auto pick = [&](auto imax) {
    constexpr int IMAX = decltype(imax)::value;
    if (persistent) {
      switch (cfg.cluster_size) {
        case 2: return rms_norm_fwd_quant_transposed_persistent<XT, WT, VEC, IMAX, 2>;
        case 4: return rms_norm_fwd_quant_transposed_persistent<XT, WT, VEC, IMAX, 4>;
        case 8: return rms_norm_fwd_quant_transposed_persistent<XT, WT, VEC, IMAX, 8>;
        default: break;
      }
    } else {
      switch (cfg.cluster_size) {
        case 1: return rms_norm_fwd_quant_transposed<XT, WT, VEC, IMAX, 1>;
        case 2: return rms_norm_fwd_quant_transposed<XT, WT, VEC, IMAX, 2>;
        case 4: return rms_norm_fwd_quant_transposed<XT, WT, VEC, IMAX, 4>;
        case 8: return rms_norm_fwd_quant_transposed<XT, WT, VEC, IMAX, 8>;
        default: break;
      }
    }
    throw Error(NK_ERROR_INTERNAL, "rms_norm_fwd quantized + transposed: unexpected plan " +
                                       cfg.describe());
  };
  auto kernel = cfg.items <= 2 ? pick(std::integral_constant<int, 2>{})
                               : pick(std::integral_constant<int, kSmallItems>{});
  const char* what = "rms_norm_fwd quantized + transposed";
  const LaunchConfig fit = persistent ? fit_resident_clusters(cfg, kernel, what) : cfg;
  launch(kernel, fit.grid, dim3(fit.threads_per_row), {fit.cluster_size}, stream, what,
         static_cast<size_t>(fit.smem_bytes), p);
}

}  // namespace normkit::cuda
