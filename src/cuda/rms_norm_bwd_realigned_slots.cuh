// The backward of many 16-bit rows misaligned for 16-byte vectors (odd hidden sizes): dx, and
// dweight/dbias as per-slot partial sums that reduce_partials adds up, as the registers kernel
// keeps them. Rows are read as rms_norm_bwd_realigned reads them: a head of h < 8 elements, then
// 8-element vectors from column h, 16-byte aligned for x, dy, dx and dresidual_out alike (the
// launcher checks).
//
// Persistent: CTA (or cluster) `slot` walks rows slot, slot + slots, ... Where a slot has more
// than one row, slots is a multiple of 8 (the launcher's rule), so rows r and r + slots lie a
// multiple of 16 bytes apart and every row of a slot has the same head: each thread owns the
// same columns in every row. So the weight is shifted into place once per slot, and each
// thread sums the dweight and dbias of its own columns across the slot's rows. Element by
// element (1-element vectors), 4096 x 4095 took 242 us, 14% of copy; this kernel 82 us
// (twenty-eighth session, H100).
//
// Narrow rows: a CTA of blockDim.y groups holds that many slots (a row each at once), so that
// the few slots the workspace allows (one per CTA) still keep enough threads busy; the CTA adds
// its groups' sums together before it writes them, as one slot.
#pragma once

#include "cuda/element.cuh"
#include "cuda/kernel_params.h"
#include "cuda/launch_config.h"
#include "cuda/reduce.cuh"
#include "cuda/rms_norm_bwd_kernels.cuh"
#include "cuda/rms_norm_fwd_kernels.cuh"
#include "cuda/rms_norm_fwd_realigned.cuh"

namespace normkit::cuda {

// 8 floats from and to shared memory (16-byte aligned), as two 16-byte accesses.
__device__ __forceinline__ void load_shared_floats(const float* from, float (&v)[8]) {
  const float4 a = reinterpret_cast<const float4*>(from)[0];
  const float4 b = reinterpret_cast<const float4*>(from)[1];
  v[0] = a.x, v[1] = a.y, v[2] = a.z, v[3] = a.w, v[4] = b.x, v[5] = b.y, v[6] = b.z, v[7] = b.w;
}
__device__ __forceinline__ void store_shared_floats(float* to, const float (&v)[8]) {
  reinterpret_cast<float4*>(to)[0] = make_float4(v[0], v[1], v[2], v[3]);
  reinterpret_cast<float4*>(to)[1] = make_float4(v[4], v[5], v[6], v[7]);
}

// blockDim.x threads per row, shape.cluster_size CTAs per row, each covering cols_per_cta
// columns of the row's body (the columns from h on); thread 0 of the cluster's first CTA also
// takes the head. blockDim.y groups of blockDim.x threads per CTA (kRealignSlotRowsMax at
// most; more than one only without a cluster), each a slot of its own. The slot's state
// (bwd_realigned_slots_smem_bytes; the group's share of the dynamic shared memory) sits in
// shared memory, each thread's own entries (no barrier): the weight of its columns, shifted
// into place once, and their dweight and dbias sums (kept in registers, with the weight's
// conversions that the compiler hoists out of the row loop, they took 128 registers at 2
// vectors per thread and spilled at 4).
// DRES: dresidual_out given (misaligned as x), added to dx. MIN_CTAS: CTAs of 512 threads per SM
// that the registers must allow (2: 64 registers, LaunchConfig::pinned_registers). WEIGHT_ONLY:
// a weight, dweight wanted, no dbias, not zero-centred (the launcher's test), so that the
// weight is used as loaded and no dbias sums are kept, with no tests per element.
template <typename XT, typename WT, typename DYT, int IMAX, bool DRES, int MIN_CTAS = 1,
          bool WEIGHT_ONLY = false>
__global__ void __launch_bounds__(512, MIN_CTAS) rms_norm_bwd_realigned_slots(BwdParams p) {
  constexpr int VEC = kRealignVec;
  static_assert(sizeof(XT) == 2 && sizeof(WT) == 2 && sizeof(DYT) == 2, "16-bit types only");
  __shared__ float scratch[kMaxWarps];
  __shared__ float cluster_slot;
  // Per group: the head's dweight and dbias sums (head thread only); the head's x, dy,
  // dresidual_out of the current row; the head.
  __shared__ float head_sums[kRealignSlotRowsMax][2][VEC];
  __shared__ float head_vals[kRealignSlotRowsMax][3][VEC];
  __shared__ int group_heads[kRealignSlotRowsMax];
  extern __shared__ __align__(16) unsigned char slot_state[];
  const RowShape& shape = p.shape;
  const int cluster = shape.cluster_size;
  const int rank = cluster == 1 ? 0 : static_cast<int>(blockIdx.x % cluster);
  const int groups = static_cast<int>(blockDim.y), group = static_cast<int>(threadIdx.y);
  // The CTA's (or cluster's) first slot, and this group's.
  const int64_t first_slot =
      cluster == 1 ? static_cast<int64_t>(blockIdx.x) * groups : blockIdx.x / cluster;
  const int64_t slot = first_slot + group;
  const int64_t slots = static_cast<int64_t>(gridDim.x / cluster) * groups;
  const bool want_w = WEIGHT_ONLY || p.want_dweight();
  const bool want_b = !WEIGHT_ONLY && p.want_dbias();
  const WT* weight = static_cast<const WT*>(p.weight);
  const bool has_weight = WEIGHT_ONLY || weight;
  // [cols_per_cta] each: dweight sums, dbias sums (16-byte aligned: cols_per_cta is a multiple
  // of 8), then the weight.
  unsigned smem_bytes;
  asm("mov.u32 %0, %%dynamic_smem_size;" : "=r"(smem_bytes));
  const unsigned group_bytes = smem_bytes / groups;  // (a multiple of 16: see the launcher)
  const int64_t cols = shape.cols_per_cta;
  float* sum_w = reinterpret_cast<float*>(slot_state + group * group_bytes);
  float* sum_b = sum_w + (want_w ? cols : 0);
  WT* slot_weight = reinterpret_cast<WT*>(sum_b + (want_b ? cols : 0));
  // Every row of the slot has the head of its first row (a group past the last row has no rows:
  // its sums stay 0).
  const int head = static_cast<int>(
      min(static_cast<int64_t>(head_elements(static_cast<const XT*>(p.x) +
                                             min(slot, shape.rows - 1) * p.x_stride)),
          shape.hidden));
  const int64_t col_begin = static_cast<int64_t>(rank) * cols;
  const int64_t col_end = min(shape.hidden - head, col_begin + cols);
  const bool head_thread = rank == 0 && threadIdx.x == 0;
  auto local = [&](int i) {
    return (i * static_cast<int>(blockDim.x) + static_cast<int>(threadIdx.x)) * VEC;
  };
  auto active = [&](int i) { return i < shape.items && col_begin + local(i) < col_end; };

  // Every pair loaded before the first is shifted (load_pair), but in the kernel held to 64
  // registers (MIN_CTAS 2), where the pairs would spill: there each is shifted as it lands.
  ShiftedPair<WT> weight_pairs[MIN_CTAS == 1 ? IMAX : 1];
  if constexpr (MIN_CTAS == 1) {
#pragma unroll
    for (int i = 0; i < IMAX; ++i) {
      if (has_weight && active(i)) {
        weight_pairs[i] = load_pair(weight, head + col_begin + local(i), shape.hidden);
      }
    }
  }
#pragma unroll
  for (int i = 0; i < IMAX; ++i) {
    if (!active(i)) continue;
    if (has_weight) {
      const int64_t col = head + col_begin + local(i);
      if constexpr (MIN_CTAS == 1) {
        store_lanes_shared(slot_weight + local(i), shifted(weight_pairs[i], col));
      } else {
        store_lanes_shared(slot_weight + local(i), load_shifted(weight, col, shape.hidden));
      }
    }
#pragma unroll
    for (int k = 0; k < VEC; ++k) {
      if (want_w) sum_w[local(i) + k] = 0.0f;
      if (want_b) sum_b[local(i) + k] = 0.0f;
    }
  }
  if (head_thread) {
    group_heads[group] = head;
#pragma unroll
    for (int k = 0; k < VEC; ++k) head_sums[group][0][k] = head_sums[group][1][k] = 0.0f;
  }
  // The scale of vector i, w from shared memory.
  auto scale_of = [&](int i, float* w) {
    Lanes<WT, VEC> lanes{};
    if (has_weight) lanes.load(slot_weight + local(i));
    realigned_weight_scale<WEIGHT_ONLY, WT>(p, lanes, w);
  };
  // The head's (lanes 0 .. head - 1). Plain loads: the compiler hoisted __ldg (ld.global.nc)
  // out of the weight test, and read address 0 without a weight (memcheck, H100).
  auto head_scale_of = [&](float* w) {
    Lanes<WT, VEC> lanes{};
    if (has_weight) {
#pragma unroll
      for (int k = 0; k < VEC - 1; ++k) {
        if (k < head) lanes.set(k, weight[k]);
      }
    }
    realigned_weight_scale<WEIGHT_ONLY, WT>(p, lanes, w);
  };

  // Trip count uniform over the CTA and the cluster (row_sum's barriers): a group past the last
  // row sits the round out.
  for (int64_t first = first_slot; first < shape.rows; first += slots) {
    const int64_t row = first + group;
    const bool live = row < shape.rows;
    const XT* x = static_cast<const XT*>(p.x) + row * p.x_stride;
    const DYT* dy = static_cast<const DYT*>(p.dy) + row * p.dy_stride;
    XT* dx = static_cast<XT*>(p.dx) + row * p.dx_stride;
    const XT* dres =
        DRES ? static_cast<const XT*>(p.dresidual_out) + row * p.dresidual_out_stride : nullptr;
    // Every load before the first store (a load after a store waits for it: docs/notes.md v22).
    const float rstd = live ? p.rstd[row] : 0.0f;
    Lanes<XT, VEC> xs[IMAX];
    Lanes<DYT, VEC> dys[IMAX];
    Lanes<XT, VEC> ds[DRES ? IMAX : 1];  // dresidual_out, loaded before any store (dx may be it)
#pragma unroll
    for (int i = 0; i < IMAX; ++i) {
      const int64_t col = col_begin + local(i);
      xs[i] = Lanes<XT, VEC>{};
      dys[i] = Lanes<DYT, VEC>{};
      if constexpr (DRES) ds[i] = Lanes<XT, VEC>{};
      if (live && active(i)) {
        xs[i] = load_lanes_upto<XT, VEC>(x + head + col, col_end - col);
        dys[i] = load_lanes_upto<DYT, VEC>(dy + head + col, col_end - col);
        if constexpr (DRES) ds[i] = load_lanes_upto<XT, VEC>(dres + head + col, col_end - col);
      }
    }
    // The head's x, dy and dresidual_out, parked in shared memory until the row's mean is known
    // (registers live across the row sum cost every thread).
    if (live && head_thread) {
#pragma unroll
      for (int k = 0; k < VEC - 1; ++k) {
        head_vals[group][0][k] = k < head ? to_float(x[k]) : 0.0f;
        head_vals[group][1][k] = k < head ? to_float(dy[k]) : 0.0f;
        if constexpr (DRES) head_vals[group][2][k] = k < head ? to_float(dres[k]) : 0.0f;
      }
    }

    // dot = sum of dy * w * xhat over the row; the slot's sums of dy * xhat and dy.
    float dot = 0.0f;
#pragma unroll
    for (int i = 0; i < IMAX; ++i) {
      if (!live || !active(i)) continue;
      float w[VEC], acc_w[VEC] = {}, acc_b[VEC] = {};
      scale_of(i, w);
      if (want_w) load_shared_floats(sum_w + local(i), acc_w);
      if (want_b) load_shared_floats(sum_b + local(i), acc_b);
#pragma unroll
      for (int k = 0; k < VEC; ++k) {
        const float g = to_float(dys[i].get(k));  // zeros past the row's end add 0
        const float xhat = to_float(xs[i].get(k)) * rstd;
        dot += g * w[k] * xhat;
        acc_w[k] += g * xhat;
        acc_b[k] += g;
      }
      if (want_w) store_shared_floats(sum_w + local(i), acc_w);
      if (want_b) store_shared_floats(sum_b + local(i), acc_b);
    }
    if (live && head_thread) {
      float w[VEC];
      head_scale_of(w);
#pragma unroll
      for (int k = 0; k < VEC - 1; ++k) {
        const float g = head_vals[group][1][k];
        const float xhat = head_vals[group][0][k] * rstd;
        dot += g * w[k] * xhat;
        head_sums[group][0][k] += g * xhat;
        head_sums[group][1][k] += g;
      }
    }
    dot = row_sum(dot, shape, scratch, &cluster_slot);
    const float mean = dot * shape.inv_hidden;

#pragma unroll
    for (int i = 0; i < IMAX; ++i) {
      const int64_t col = col_begin + local(i);
      if (!live || !active(i)) continue;
      float w[VEC], out[VEC];
      scale_of(i, w);
#pragma unroll
      for (int k = 0; k < VEC; ++k) {
        const float xhat = to_float(xs[i].get(k)) * rstd;
        out[k] = rstd * (to_float(dys[i].get(k)) * w[k] - xhat * mean);
        if constexpr (DRES) out[k] += to_float(ds[i].get(k));
      }
      store_upto<XT, VEC>(dx + head + col, col_end - col, out);
    }
    if (live && head_thread) {
      float w[VEC];
      head_scale_of(w);
#pragma unroll
      for (int k = 0; k < VEC - 1; ++k) {
        if (k >= head) continue;
        const float xhat = head_vals[group][0][k] * rstd;
        float out = rstd * (head_vals[group][1][k] * w[k] - xhat * mean);
        if constexpr (DRES) out += head_vals[group][2][k];
        dx[k] = from_float<XT>(out);
      }
    }
  }
  if (!want_w && !want_b) return;
  if (groups > 1) {
    // The CTA's one slot of sums: its groups' added column by column, in group order.
    __syncthreads();
    const int64_t hidden = shape.hidden;
    const int threads = static_cast<int>(blockDim.x) * groups;
    for (int64_t c = group * static_cast<int>(blockDim.x) + threadIdx.x; c < hidden;
         c += threads) {
      float total_w = 0.0f, total_b = 0.0f;
      for (int g = 0; g < groups; ++g) {
        const int h = group_heads[g];
        const float* sums = reinterpret_cast<const float*>(slot_state + g * group_bytes);
        if (c < h) {
          total_w += head_sums[g][0][c];
          total_b += head_sums[g][1][c];
        } else {
          if (want_w) total_w += sums[c - h];
          if (want_b) total_b += sums[(want_w ? cols : 0) + c - h];
        }
      }
      write_slot_sums<WT>(p, blockIdx.x, c, total_w, total_b);
    }
    return;
  }

  // The slot's sums of its columns (each column of the row exactly once: the head's by the head
  // thread, the body's by the thread that owns it).
#pragma unroll
  for (int i = 0; i < IMAX; ++i) {
    if (!active(i)) continue;
    const int64_t col = col_begin + local(i);
#pragma unroll
    for (int k = 0; k < VEC; ++k) {
      if (col + k >= col_end) break;
      write_slot_sums<WT>(p, slot, head + col + k, want_w ? sum_w[local(i) + k] : 0.0f,
                          want_b ? sum_b[local(i) + k] : 0.0f);
    }
  }
  if (head_thread) {
    for (int k = 0; k < head; ++k) {
      write_slot_sums<WT>(p, slot, k, head_sums[group][0][k], head_sums[group][1][k]);
    }
  }
}

}  // namespace normkit::cuda
