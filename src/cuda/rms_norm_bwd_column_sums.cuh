// dweight and dbias of a backward of few rows, summed down the columns by a kernel of their
// own that runs beside the main kernel (LaunchConfig::column_sums_grid), instead of per-slot
// partial sums that a second kernel reduces after the main one:
//   dweight[j] = sum_r dy[r][j] * (x[r][j] * rstd[r]),   dbias[j] = sum_r dy[r][j].
// Neither needs the row's dot product, only rstd, which the forward saved: so no CTA waits for
// another, and each column is summed whole by one CTA, in a fixed order (bitwise
// deterministic, no atomics, no workspace).
//
// The main kernel then writes dx only; it allows this kernel's launch at its start
// (allow_dependent_launch) and this kernel, launched as its programmatic dependent, takes the
// SMs' room beside it. It reads only inputs (x, dy, rstd), which the main kernel does not
// write (the launcher keeps this path off where dx is written in place of x or dy), and it
// waits for the main kernel's grid before it exits, so that work after the call in the stream
// never runs before either.
#pragma once

#include <cstdint>

#include "cuda/element.cuh"
#include "cuda/kernel_params.h"
#include "cuda/launch_config.h"
#include "cuda/rms_norm_bwd_kernels.cuh"

namespace normkit::cuda {

// CTA (kColumnSumsThreads threads) = `lanes` column vectors x (threads / lanes) row groups.
// Thread (lane, group) loads rows group, group + groups, ... of its VEC columns, a batch of
// column_sums_batch(VEC) rows in flight at once, and keeps running sums. The groups of one warp
// (lanes < 32) are then added by shuffles, the warps' sums in warp order in shared memory: a
// fixed order either way. (Added one group after another in shared memory, the 32 groups of 128
// x 4096 made a chain as long as the kernel's loads: ncu, twenty-sixth session.)
template <typename XT, typename WT, typename DYT, int VEC>
__global__ void __launch_bounds__(kColumnSumsThreads) rms_norm_bwd_column_sums(BwdParams p,
                                                                               int lanes) {
  constexpr int kBatch = column_sums_batch(VEC);
  __shared__ float parked_w[kColumnSumsThreads * VEC];  // [unit][lane * VEC + k]
  __shared__ float parked_b[kColumnSumsThreads * VEC];
  const int groups = kColumnSumsThreads / lanes;
  const int lane = static_cast<int>(threadIdx.x) % lanes;
  const int group = static_cast<int>(threadIdx.x) / lanes;
  const int64_t rows = p.shape.rows, hidden = p.shape.hidden;
  const int64_t cta_col = static_cast<int64_t>(blockIdx.x) * lanes * VEC;
  const int64_t col = cta_col + static_cast<int64_t>(lane) * VEC;
  const int64_t n = hidden - col;  // columns of this thread's vector that exist (if > 0)
  const XT* x = static_cast<const XT*>(p.x) + col;
  const DYT* dy = static_cast<const DYT*>(p.dy) + col;

  float sum_w[VEC], sum_b[VEC];
#pragma unroll
  for (int k = 0; k < VEC; ++k) sum_w[k] = sum_b[k] = 0.0f;
  if (n > 0) {
    for (int64_t base = group; base < rows; base += static_cast<int64_t>(groups) * kBatch) {
      Lanes<XT, VEC> xs[kBatch];
      Lanes<DYT, VEC> dys[kBatch];
      float rstd[kBatch];
#pragma unroll
      for (int b = 0; b < kBatch; ++b) {  // every load of the batch before any use
        const int64_t row = base + static_cast<int64_t>(b) * groups;
        if (row < rows) {
          xs[b] = load_lanes_upto<XT, VEC>(x + row * p.x_stride, n);
          dys[b] = load_lanes_upto<DYT, VEC>(dy + row * p.dy_stride, n);
          rstd[b] = p.rstd[row];
        } else {
          xs[b] = Lanes<XT, VEC>{};
          dys[b] = Lanes<DYT, VEC>{};
          rstd[b] = 0.0f;
        }
      }
#pragma unroll
      for (int b = 0; b < kBatch; ++b) {
        if (base + static_cast<int64_t>(b) * groups >= rows) break;
#pragma unroll
        for (int k = 0; k < VEC; ++k) {
          const float g = to_float(dys[b].get(k));
          sum_w[k] += g * (to_float(xs[b].get(k)) * rstd[b]);  // dy * xhat, as the main kernels
          sum_b[k] += g;
        }
      }
    }
  }

  // The totals go straight to dweight/dbias: write_slot_sums with the launcher's p, whose
  // partial_* are null on this path.
  if (groups == 1) {  // the thread's sums are its columns' totals
#pragma unroll
    for (int k = 0; k < VEC; ++k) {
      if (k >= n) break;
      write_slot_sums<WT>(p, 0, col + k, sum_w[k], sum_b[k]);
    }
  } else {
    const int width = lanes * VEC;  // columns of the CTA
    // Groups per warp, summed by a butterfly over the lanes that hold them (every lane ends
    // with the same bits: a + b is b + a).
    const int warp_groups = lanes < 32 ? 32 / lanes : 1;
    for (int offset = lanes; offset < 32; offset *= 2) {
#pragma unroll
      for (int k = 0; k < VEC; ++k) {
        sum_w[k] += __shfl_xor_sync(0xffffffffu, sum_w[k], offset);
        sum_b[k] += __shfl_xor_sync(0xffffffffu, sum_b[k], offset);
      }
    }
    const int units = groups / warp_groups;  // warps, or groups where a group spans warps
    if (group % warp_groups == 0) {
      const int unit = group / warp_groups;
#pragma unroll
      for (int k = 0; k < VEC; ++k) {
        parked_w[unit * width + lane * VEC + k] = sum_w[k];
        parked_b[unit * width + lane * VEC + k] = sum_b[k];
      }
    }
    __syncthreads();
    for (int e = static_cast<int>(threadIdx.x); e < width; e += kColumnSumsThreads) {
      if (cta_col + e >= hidden) break;
      float total_w = 0.0f, total_b = 0.0f;
      for (int u = 0; u < units; ++u) {
        total_w += parked_w[u * width + e];
        total_b += parked_b[u * width + e];
      }
      write_slot_sums<WT>(p, 0, cta_col + e, total_w, total_b);
    }
  }
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  cudaGridDependencySynchronize();  // complete no earlier than the main kernel (see above)
#endif
}

}  // namespace normkit::cuda
