// RMSNorm backward of rows that no cluster of pipelined CTAs holds (past 262144 bf16 or 131072
// float32 columns), under KernelFacts::bwd_cluster_streaming: a cluster of CTAs per row, each
// streaming its chunk of the row's columns twice, first for its share of the row's dot product
// (summed over the cluster through distributed shared memory), then, from L2, for dx. dweight
// and dbias accumulate per column in shared memory over the cluster's rows and go to the
// cluster's slot once, at the end; where a chunk's sums do not all fit (bf16 past 917504
// columns, or 458752 with dbias), its last passes accumulate in the slot itself.
//
// Why: rms_norm_bwd_streaming runs one CTA per row, so hundreds of rows of megabytes are in
// flight and its second pass reads HBM again, and it adds every row into its slot of the
// workspace (a read and a write of 4 bytes per column per row): 14-37% of copy bandwidth
// (docs/notes.md, twenty-second session). Here a few clusters' rows (a few MB each) are in
// flight at once, and the workspace is written once per cluster.
#pragma once

#include "cuda/cluster_streaming.cuh"
#include "cuda/element.cuh"
#include "cuda/kernel_params.h"
#include "cuda/read_policy.cuh"
#include "cuda/reduce.cuh"
#include "cuda/rms_norm_bwd_kernels.cuh"
#include "cuda/rms_norm_fwd_kernels.cuh"

namespace normkit::cuda {

// Where column sum `k` of vector `i` of thread `t` lives in the CTA's shared memory: element-major
// across the CTA's threads, so that a warp's 32 accesses fall in 32 banks (by column, a thread's
// VEC floats each 32 * VEC bytes apart were a VEC-way bank conflict).
__device__ __forceinline__ int64_t column_sum_index(int64_t i, int k, int vec) {
  return (i * vec + k) * blockDim.x + threadIdx.x;
}

// This CTA's dynamic shared memory, in bytes, as launched.
__device__ __forceinline__ unsigned dynamic_smem_bytes() {
  unsigned bytes;
  asm("mov.u32 %0, %%dynamic_smem_size;" : "=r"(bytes));
  return bytes;
}

// Reads VEC workspace sums at `at` (n columns left in the row) into `sums`: zeros for the
// slot's first row, or where there is no such output. 16-byte loads where the address allows.
template <int VEC>
__device__ __forceinline__ void read_slot_sums(const float* partial, int64_t at, int64_t n,
                                               bool first, float (&sums)[VEC]) {
  if (first || partial == nullptr) {
#pragma unroll
    for (int k = 0; k < VEC; ++k) sums[k] = 0.0f;
    return;
  }
  if constexpr (VEC % 4 == 0) {
    if (n >= VEC && reinterpret_cast<uintptr_t>(partial + at) % 16 == 0) {
#pragma unroll
      for (int k = 0; k < VEC; k += 4) {
        const float4 v = __ldcg(reinterpret_cast<const float4*>(partial + at + k));
        sums[k] = v.x, sums[k + 1] = v.y, sums[k + 2] = v.z, sums[k + 3] = v.w;
      }
      return;
    }
  }
#pragma unroll
  for (int k = 0; k < VEC; ++k) sums[k] = k < n ? __ldcg(partial + at + k) : 0.0f;
}

// Writes VEC workspace sums back where read_slot_sums read them.
template <int VEC>
__device__ __forceinline__ void write_slot_sums_back(float* partial, int64_t at, int64_t n,
                                                     const float (&sums)[VEC]) {
  if (partial == nullptr) return;
  if constexpr (VEC % 4 == 0) {
    if (n >= VEC && reinterpret_cast<uintptr_t>(partial + at) % 16 == 0) {
#pragma unroll
      for (int k = 0; k < VEC; k += 4) {
        __stcg(reinterpret_cast<float4*>(partial + at + k),
               make_float4(sums[k], sums[k + 1], sums[k + 2], sums[k + 3]));
      }
      return;
    }
  }
#pragma unroll
  for (int k = 0; k < VEC; ++k) {
    if (k < n) __stcg(partial + at + k, sums[k]);
  }
}

// Vectors of each of the two rows that an OVERLAP loop loads before it uses any.
constexpr int kOverlapBatch = 4;

// One vector's dweight and dbias sums in the cluster's slot of the workspace, for the columns
// whose sums do not fit shared memory. Read before the vector's data is used, with the batch's
// loads: added element by element after the dx stores, each read waited for the store before
// it (the compiler cannot move a load above a store that may alias it), a chain of 8-16 L2
// round trips per vector.
template <int VEC>
struct SlotVector {
  float w[VEC], b[VEC];
  __device__ __forceinline__ void read(const BwdParams& p, int64_t at, int64_t n, bool first) {
    read_slot_sums<VEC>(p.partial_dweight, at, n, first, w);
    read_slot_sums<VEC>(p.partial_dbias, at, n, first, b);
  }
  // Adds dy * xhat (and dy) and writes the sums back.
  __device__ __forceinline__ void add_and_write(const BwdParams& p, int64_t at, int64_t n,
                                                const float* xhat, const float* dy) {
#pragma unroll
    for (int k = 0; k < VEC; ++k) {
      w[k] += dy[k] * xhat[k];
      b[k] += dy[k];
    }
    write_slot_sums_back<VEC>(p.partial_dweight, at, n, w);
    write_slot_sums_back<VEC>(p.partial_dbias, at, n, b);
  }
};

// blockDim = (T, 1); cluster_size CTAs per row, CTA `rank` covering columns [rank * cols_per_cta,
// ...) (a multiple of VEC) of the rows slot, slot + slots, ... of its cluster. Dynamic shared
// memory: the dweight sums of as many whole passes of T * VEC columns as fit, up to the chunk's,
// then as many of dbias sums where wanted (apply_cluster_streaming); the chunk's other passes
// keep theirs in the workspace. SLOT_SUMS: whether some do (LaunchConfig::slot_sums); compiled
// out otherwise (its branch cost the kernels that need none 5-13%, twenty-third session). Each
// thread loads kClusterStreamingBatch full vectors before it uses any. OVERLAP: each row's pass
// 2 runs in one loop with the next row's pass 1 (LaunchConfig::overlap_rows), kOverlapBatch
// vectors of each at a time.
template <typename XT, typename WT, typename DYT, int VEC, bool SLOT_SUMS, bool OVERLAP>
__global__ void __launch_bounds__(512) rms_norm_bwd_cluster_streaming(BwdParams p) {
  extern __shared__ __align__(16) unsigned char block_smem[];
  __shared__ float scratch[kMaxWarps];
  __shared__ ClusterRowSums cluster_sums;
  constexpr int B = kClusterStreamingBatch;
  const RowShape& shape = p.shape;
  const StreamingChunk ch = streaming_chunk<VEC>(shape);
  const bool want_b = p.want_dbias();
  // Each thread reads and writes only its own columns' sums: no barrier around them. The first
  // `kept` vectors of every thread keep theirs in shared memory (as many as the launch gave it);
  // the rest (where the chunk's sums do not fit) add into the cluster's slot of the workspace.
  const int64_t kept = SLOT_SUMS
                           ? dynamic_smem_bytes() / (ch.step * sizeof(float) * (want_b ? 2 : 1))
                           : (shape.cols_per_cta + ch.step - 1) / ch.step;
  const int64_t kept_vectors = min(ch.vectors, kept);
  float* sum_w = reinterpret_cast<float*>(block_smem);
  float* sum_b = sum_w + kept * ch.step;
  for (int64_t i = 0; i < kept_vectors; ++i) {
#pragma unroll
    for (int k = 0; k < VEC; ++k) {
      sum_w[column_sum_index(i, k, VEC)] = 0.0f;
      if (want_b) sum_b[column_sum_index(i, k, VEC)] = 0.0f;
    }
  }
  // Pass 1's reads stay in L2 for pass 2 (evict-last); pass 2's are their last use
  // (evict-first). Only 16-byte vectors carry a policy.
  constexpr bool kHinted = sizeof(XT) * VEC == 16 && sizeof(DYT) * VEC == 16;
  const ReadPolicy keep(false, kHinted);
  const ReadPolicy done(kHinted);
  // A batch's x, dy and weight, all loads issued before any is used: with 224 KB of column sums
  // L1 keeps little of the CTA's weight, and a weight load per vector after its x and dy waited
  // for L2 once per vector.
  const auto load_batch = [&](const XT* x, const DYT* dy_row, int64_t i, const ReadPolicy& policy,
                              Lanes<XT, VEC>(&xs)[B], Lanes<DYT, VEC>(&dys)[B],
                              Lanes<WT, VEC>(&ws)[B]) {
#pragma unroll
    for (int b = 0; b < B; ++b) {
      const int64_t col = ch.first_col + (i + b) * ch.step;
      xs[b].load(x + col, policy);
      dys[b].load(dy_row + col, policy);
      if (p.weight) ws[b].load_readonly(static_cast<const WT*>(p.weight) + col);
    }
  };
  // One row of the CTA's: its pointers and rstd, and its index k among the slot's rows (the
  // cluster's sum slot, and whether it is the slot's first for the workspace sums).
  struct RowRef {
    int64_t row;
    int k;
    float rstd;
    const XT* x;
    const DYT* dy;
  };
  const auto row_ref = [&](int64_t row, int k) {
    return RowRef{row, k, p.rstd[row], static_cast<const XT*>(p.x) + row * p.x_stride,
                  static_cast<const DYT*>(p.dy) + row * p.dy_stride};
  };
  // Pass 1's terms of the CTA's share of sum(g * xhat), g = dy * w, as the streaming kernel
  // forms them.
  const auto add_dot = [&](float& dot, const float* xv, const float* dy, const float* w,
                           float rstd) {
#pragma unroll
    for (int k = 0; k < VEC; ++k) dot += dy[k] * w[k] * xv[k] * rstd;
  };
  const auto slot_at = [&](int64_t i) {
    return ch.slot * shape.hidden + ch.first_col + i * ch.step;
  };
  // Pass 2's work on vector i of row r: dx and the column sums.
  const auto finish = [&](const RowRef& r, float mean, int64_t i, const float* xv,
                          const float* dy, const float* w, int64_t n, SlotVector<VEC>& in_slot) {
    const int64_t col = ch.first_col + i * ch.step;
    float xhat[VEC], g[VEC];
#pragma unroll
    for (int k = 0; k < VEC; ++k) {
      xhat[k] = xv[k] * r.rstd;
      g[k] = dy[k] * w[k];
    }
    if (!SLOT_SUMS || i < kept) {
#pragma unroll
      for (int k = 0; k < VEC; ++k) {
        sum_w[column_sum_index(i, k, VEC)] += dy[k] * xhat[k];  // (zeros past the row's end)
        if (want_b) sum_b[column_sum_index(i, k, VEC)] += dy[k];
      }
    } else {
      in_slot.add_and_write(p, slot_at(i), n, xhat, dy);
    }
    store_dx<XT, VEC>(p, r.row, col, n, xhat, g, r.rstd, mean);
  };
  // The row's vector i past the whole batches (a partial vector may end the chunk).
  const auto load_tail = [&](const RowRef& r, int64_t i, float* xv, float* dy, float* w) {
    const int64_t col = ch.first_col + i * ch.step;
    load_streamed<XT, WT, DYT, VEC>(p, r.x, r.dy, col, ch.col_end - col, xv, dy, w);
  };
  const auto read_slot = [&](const RowRef& r, int64_t i, int64_t n, SlotVector<VEC>& in_slot) {
    if (SLOT_SUMS && i >= kept) in_slot.read(p, slot_at(i), n, r.k == 0);
  };
  // Pass 1 (from HBM) of row r alone.
  const auto dot_of = [&](const RowRef& r) {
    float dot = 0.0f;
    for (int64_t i = 0; i < ch.batched; i += B) {
      Lanes<XT, VEC> xs[B];
      Lanes<DYT, VEC> dys[B];
      Lanes<WT, VEC> ws[B];
      load_batch(r.x, r.dy, i, keep, xs, dys, ws);
#pragma unroll
      for (int b = 0; b < B; ++b) {
        float xv[VEC], dy[VEC], w[VEC];
#pragma unroll
        for (int k = 0; k < VEC; ++k) xv[k] = xs[b].get_float(k), dy[k] = dys[b].get_float(k);
        weight_scale<WT, VEC>(p, ws[b], w);
        add_dot(dot, xv, dy, w, r.rstd);
      }
    }
    for (int64_t i = ch.batched; i < ch.vectors; ++i) {
      float xv[VEC], dy[VEC], w[VEC];
      load_tail(r, i, xv, dy, w);
      add_dot(dot, xv, dy, w, r.rstd);
    }
    return dot;
  };
  // Pass 2 (the same bytes, read moments ago: from L2) of row r alone.
  const auto finish_row = [&](const RowRef& r, float mean) {
    for (int64_t i = 0; i < ch.batched; i += B) {
      Lanes<XT, VEC> xs[B];
      Lanes<DYT, VEC> dys[B];
      Lanes<WT, VEC> ws[B];
      load_batch(r.x, r.dy, i, done, xs, dys, ws);
#pragma unroll
      for (int b = 0; b < B; ++b) {
        SlotVector<VEC> in_slot;
        read_slot(r, i + b, VEC, in_slot);
        float xv[VEC], dy[VEC], w[VEC];
#pragma unroll
        for (int k = 0; k < VEC; ++k) xv[k] = xs[b].get_float(k), dy[k] = dys[b].get_float(k);
        weight_scale<WT, VEC>(p, ws[b], w);
        finish(r, mean, i + b, xv, dy, w, VEC, in_slot);
      }
    }
    for (int64_t i = ch.batched; i < ch.vectors; ++i) {
      float xv[VEC], dy[VEC], w[VEC];
      load_tail(r, i, xv, dy, w);
      SlotVector<VEC> in_slot;
      read_slot(r, i, ch.col_end - ch.first_col - i * ch.step, in_slot);
      finish(r, mean, i, xv, dy, w, ch.col_end - ch.first_col - i * ch.step, in_slot);
    }
  };
  // Pass 2 of row a and pass 1 of row b in one loop (OVERLAP): b's reads from HBM in flight
  // with a's from L2 and its dx stores, the weight read once for both. Returns b's dot.
  const auto finish_and_dot = [&](const RowRef& a, float mean, const RowRef& b_row) {
    constexpr int B2 = kOverlapBatch;
    float dot = 0.0f;
    const int64_t batched = ch.full / B2 * B2;
    for (int64_t i = 0; i < batched; i += B2) {
      Lanes<XT, VEC> xa[B2], xb[B2];
      Lanes<DYT, VEC> dya[B2], dyb[B2];
      Lanes<WT, VEC> ws[B2];
#pragma unroll
      for (int b = 0; b < B2; ++b) {
        const int64_t col = ch.first_col + (i + b) * ch.step;
        xb[b].load(b_row.x + col, keep);
        dyb[b].load(b_row.dy + col, keep);
        xa[b].load(a.x + col, done);
        dya[b].load(a.dy + col, done);
        if (p.weight) ws[b].load_readonly(static_cast<const WT*>(p.weight) + col);
      }
#pragma unroll
      for (int b = 0; b < B2; ++b) {
        SlotVector<VEC> in_slot;
        read_slot(a, i + b, VEC, in_slot);
        float xv[VEC], dy[VEC], w[VEC];
        weight_scale<WT, VEC>(p, ws[b], w);
#pragma unroll
        for (int k = 0; k < VEC; ++k) xv[k] = xb[b].get_float(k), dy[k] = dyb[b].get_float(k);
        add_dot(dot, xv, dy, w, b_row.rstd);
#pragma unroll
        for (int k = 0; k < VEC; ++k) xv[k] = xa[b].get_float(k), dy[k] = dya[b].get_float(k);
        finish(a, mean, i + b, xv, dy, w, VEC, in_slot);
      }
    }
    for (int64_t i = batched; i < ch.vectors; ++i) {
      const int64_t n = ch.col_end - ch.first_col - i * ch.step;
      float xv[VEC], dy[VEC], w[VEC];
      load_tail(b_row, i, xv, dy, w);
      add_dot(dot, xv, dy, w, b_row.rstd);
      load_tail(a, i, xv, dy, w);
      SlotVector<VEC> in_slot;
      read_slot(a, i, n, in_slot);
      finish(a, mean, i, xv, dy, w, n, in_slot);
    }
    return dot;
  };
  // Row r's dot pushed to every CTA of the cluster and its mean waited for at once (the
  // pipelined kernels' slots and their reuse rule: a CTA pushes row k only after its wait for
  // row k - 1).
  cluster_row_sums_init(cluster_sums);
  unsigned sum_phases = 0;
  const auto row_mean = [&](const RowRef& r, float dot) {
    cluster_row_push(block_sum(dot, scratch), cluster_sums, r.k % kClusterRowSlots);
    return cluster_row_wait(cluster_sums, r.k % kClusterRowSlots, sum_phases) * shape.inv_hidden;
  };
  if constexpr (OVERLAP) {
    if (ch.slot < shape.rows) {
      RowRef r = row_ref(ch.slot, 0);
      float mean = row_mean(r, dot_of(r));
      for (int64_t next = r.row + ch.slots; next < shape.rows; next += ch.slots) {
        const RowRef n = row_ref(next, r.k + 1);
        const float dot = finish_and_dot(r, mean, n);
        r = n;
        mean = row_mean(r, dot);
      }
      finish_row(r, mean);
    }
  } else {
    int k = 0;
    for (int64_t row = ch.slot; row < shape.rows; row += ch.slots, ++k) {
      const RowRef r = row_ref(row, k);
      const float dot = dot_of(r);
      // The next row's chunk, on its way into L2 through the reduction and pass 2.
      if (kHinted && p.prefetch_bytes && threadIdx.x == 0 && row + ch.slots < shape.rows) {
        prefetch_chunk(r.x + ch.slots * p.x_stride, ch.col_begin, ch.col_end, p.prefetch_bytes);
        prefetch_chunk(r.dy + ch.slots * p.dy_stride, ch.col_begin, ch.col_end,
                       p.prefetch_bytes);
      }
      finish_row(r, row_mean(r, dot));
    }
  }
  cluster_sum_done();
  if (!p.want_dweight() && !want_b) return;
  for (int64_t i = 0; i < kept_vectors; ++i) {
    const int64_t col = ch.first_col + i * ch.step;
#pragma unroll
    for (int k = 0; k < VEC; ++k) {
      if (col + k < ch.col_end) {
        write_slot_sums<WT>(p, ch.slot, col + k, sum_w[column_sum_index(i, k, VEC)],
                            want_b ? sum_b[column_sum_index(i, k, VEC)] : 0.0f);
      }
    }
  }
}

}  // namespace normkit::cuda
