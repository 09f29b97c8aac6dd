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

// One vector's dweight and dbias sums in the cluster's slot of the workspace, for the columns
// whose sums do not fit shared memory: all of them read, as 16-byte loads, before any is
// added and before the vector's dx stores. Read and added element by element after those
// stores, each read waited for the store before it (the compiler cannot move a load above a
// store that may alias it): a chain of 8-16 L2 round trips per vector (twenty-fourth session:
// with dbias 256 x 524288 898 -> 680 us).
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
// thread loads kClusterStreamingBatch full vectors before it uses any.
template <typename XT, typename WT, typename DYT, int VEC, bool SLOT_SUMS>
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
  cluster_row_sums_init(cluster_sums);
  unsigned sum_phases = 0;
  int k_row = 0;
  for (int64_t row = ch.slot; row < shape.rows; row += ch.slots, ++k_row) {
    const float rstd = p.rstd[row];
    const XT* x = static_cast<const XT*>(p.x) + row * p.x_stride;
    const DYT* dy_row = static_cast<const DYT*>(p.dy) + row * p.dy_stride;
    // Pass 1 (from HBM): this CTA's share of sum(g * xhat), g = dy * w, as the streaming
    // kernel forms it.
    float dot = 0.0f;
    for (int64_t i = 0; i < ch.batched; i += B) {
      Lanes<XT, VEC> xs[B];
      Lanes<DYT, VEC> dys[B];
      Lanes<WT, VEC> ws[B];
      load_batch(x, dy_row, i, keep, xs, dys, ws);
#pragma unroll
      for (int b = 0; b < B; ++b) {
        float w[VEC];
        weight_scale<WT, VEC>(p, ws[b], w);
#pragma unroll
        for (int k = 0; k < VEC; ++k) dot += dys[b].get_float(k) * w[k] * xs[b].get_float(k) * rstd;
      }
    }
    for (int64_t i = ch.batched; i < ch.vectors; ++i) {
      const int64_t col = ch.first_col + i * ch.step;
      float xv[VEC], dy[VEC], w[VEC];
      load_streamed<XT, WT, DYT, VEC>(p, x, dy_row, col, ch.col_end - col, xv, dy, w);
#pragma unroll
      for (int k = 0; k < VEC; ++k) dot += dy[k] * w[k] * xv[k] * rstd;
    }
    // The next row's chunk, on its way into L2 through the reduction and pass 2.
    if (kHinted && p.prefetch_bytes && threadIdx.x == 0 && row + ch.slots < shape.rows) {
      prefetch_chunk(x + ch.slots * p.x_stride, ch.col_begin, ch.col_end, p.prefetch_bytes);
      prefetch_chunk(dy_row + ch.slots * p.dy_stride, ch.col_begin, ch.col_end, p.prefetch_bytes);
    }
    // Pushed to every CTA of the cluster and waited for at once (the pipelined kernels' slots
    // and their reuse rule: a CTA pushes row k only after its wait for row k - 1).
    cluster_row_push(block_sum(dot, scratch), cluster_sums, k_row % kClusterRowSlots);
    const float mean =
        cluster_row_wait(cluster_sums, k_row % kClusterRowSlots, sum_phases) * shape.inv_hidden;
    // Pass 2 (the same bytes, read moments ago: from L2): dx and the column sums.
    const auto slot_at = [&](int64_t i) {
      return ch.slot * shape.hidden + ch.first_col + i * ch.step;
    };
    const auto finish = [&](int64_t i, const float* xv, const float* dy, const float* w,
                            int64_t n, SlotVector<VEC>& in_slot) {
      const int64_t col = ch.first_col + i * ch.step;
      float xhat[VEC], g[VEC];
#pragma unroll
      for (int k = 0; k < VEC; ++k) {
        xhat[k] = xv[k] * rstd;
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
      store_dx<XT, VEC>(p, row, col, n, xhat, g, rstd, mean);
    };
    for (int64_t i = 0; i < ch.batched; i += B) {
      Lanes<XT, VEC> xs[B];
      Lanes<DYT, VEC> dys[B];
      Lanes<WT, VEC> ws[B];
      load_batch(x, dy_row, i, done, xs, dys, ws);
#pragma unroll
      for (int b = 0; b < B; ++b) {
        // (Read per vector, not for the whole batch at once: 16 more floats per vector spilled.)
        SlotVector<VEC> in_slot;
        if (SLOT_SUMS && i + b >= kept) in_slot.read(p, slot_at(i + b), VEC, k_row == 0);
        float xv[VEC], dy[VEC], w[VEC];
#pragma unroll
        for (int k = 0; k < VEC; ++k) xv[k] = xs[b].get_float(k), dy[k] = dys[b].get_float(k);
        weight_scale<WT, VEC>(p, ws[b], w);
        finish(i + b, xv, dy, w, VEC, in_slot);
      }
    }
    for (int64_t i = ch.batched; i < ch.vectors; ++i) {
      const int64_t col = ch.first_col + i * ch.step;
      float xv[VEC], dy[VEC], w[VEC];
      load_streamed<XT, WT, DYT, VEC>(p, x, dy_row, col, ch.col_end - col, xv, dy, w);
      SlotVector<VEC> in_slot;
      if (SLOT_SUMS && i >= kept) in_slot.read(p, slot_at(i), ch.col_end - col, k_row == 0);
      finish(i, xv, dy, w, ch.col_end - col, in_slot);
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
