// The backward of few rows in one kernel (RowPlan::kColumns): one thread-block cluster, each
// CTA owning a range of columns of every row.
//
// The other backward kernels give each CTA whole rows (or row chunks) and sum dweight/dbias in
// a second kernel over per-CTA partial sums. For a few rows both kernels are latency-bound and
// the second launch costs as much as the work (29 x 17389: 18 us against a 1 us copy floor).
// Here a CTA sees every row of its columns, so it sums dweight/dbias itself and writes them
// directly; only the rows' dot products cross CTAs, all of them in one exchange over
// distributed shared memory.
//
// 1. Stage: every warp puts its share of the row segments of x, dy (and dresidual_out) in
//    flight with bulk copies (their 16-byte aligned bodies; threads load the few head and tail
//    elements), whatever the rows' alignment; meanwhile the threads load the weight and rstd.
// 2. Each warp reduces whole rows of the tile: the CTA's part of each row's dot product.
// 3. Each CTA copies its parts, all rows at once, into every other CTA (one bulk copy per CTA,
//    counted on the receiver's mbarrier); each adds them in rank order (bitwise deterministic).
// 4. Row groups of threads write dx and sum dy * xhat and dy down the columns; the groups' sums
//    are added in group order.
//
// Per-row costs kept out (v2, measured 2026-11-23: 0.06-0.09 us per row, 128 x 4096 24.9 us):
// each mbarrier takes a few updates, not one per segment or per row (v2 counted every bulk
// copy's bytes on the staging barrier, and every row's 4-byte part from every rank on the
// exchange barrier: 15 x rows updates of one shared word).
#pragma once

#include "cuda/bulk_copy.cuh"
#include "cuda/columns_layout.h"
#include "cuda/element.cuh"
#include "cuda/kernel_params.h"
#include "cuda/launch_config.h"
#include "cuda/reduce.cuh"

namespace normkit::cuda {

template <typename XT, typename WT, typename DYT, int VEC>
__global__ void __launch_bounds__(kColumnsThreads, 1) rms_norm_bwd_columns(BwdParams p) {
  extern __shared__ __align__(16) unsigned char smem[];
#if NK_HAS_BULK_COPY
  const RowShape& shape = p.shape;
  const int64_t rows = shape.rows;
  const int rank = static_cast<int>(blockIdx.x);  // the grid is one cluster
  const int64_t c0 = rank * shape.cols_per_cta;
  const int64_t ncols = max(int64_t(0), min(shape.cols_per_cta, shape.hidden - c0));
  const bool want_w = p.want_dweight(), want_b = p.want_dbias();
  const int groups = shape.items;
  const int64_t element_bytes[3] = {int64_t(sizeof(XT)), int64_t(sizeof(DYT)),
                                    p.dresidual_out ? int64_t(sizeof(XT)) : 0};
  const ColumnsLayout L(rows, shape.cols_per_cta, shape.cluster_size, groups,
                        int(want_w) + int(want_b), element_bytes);
  uint64_t* bar = reinterpret_cast<uint64_t*>(smem + L.barrier);  // the staged bytes
  uint64_t* dots_bar = bar + 1;  // the other CTAs' parts of the dot products
  float* weight = reinterpret_cast<float*>(smem + L.weight);
  float* rstd = reinterpret_cast<float*>(smem + L.rstd);
  float* dots = reinterpret_cast<float*>(smem + L.dots);
  float* mean = reinterpret_cast<float*>(smem + L.mean);
  float* partials = reinterpret_cast<float*>(smem + L.partials);
  const int tid = threadIdx.x, threads = blockDim.x;
  const int warp = tid / 32, lane = tid % 32, warps = threads / 32;

  // Segment (operand j, row r): its global start and its place in the operand's slot. (Chosen
  // by conditionals, not arrays indexed by j: those would live in local memory.)
  const int operands = p.dresidual_out ? 3 : 2;
  auto pick = [](int j, auto a, auto b, auto c) { return j == 0 ? a : j == 1 ? b : c; };
  auto size_of = [&](int j) {
    return pick(j, int64_t(sizeof(XT)), int64_t(sizeof(DYT)), int64_t(sizeof(XT)));
  };
  auto source = [&](int j, int64_t r) {
    const void* base = pick(j, p.x, p.dy, p.dresidual_out);
    const int64_t stride = pick(j, p.x_stride, p.dy_stride, p.dresidual_out_stride);
    return static_cast<const unsigned char*>(base) + (r * stride + c0) * size_of(j);
  };
  // Element 0 of the segment sits at the source address modulo 16 into the slot.
  auto staged = [&](int j, int64_t r) {
    return smem + pick(j, L.stage[0], L.stage[1], L.stage[2]) +
           r * pick(j, L.slot_bytes[0], L.slot_bytes[1], L.slot_bytes[2]) +
           (reinterpret_cast<uintptr_t>(source(j, r)) % 16);
  };
  // Bytes of the segment before its first 16-byte boundary.
  auto head_bytes = [&](int j, int64_t r, int64_t bytes) {
    return min(bytes, int64_t((16 - reinterpret_cast<uintptr_t>(source(j, r)) % 16) % 16));
  };

  namespace cg = cooperative_groups;
  cg::cluster_group cluster = cg::this_cluster();
  const int ranks = static_cast<int>(cluster.num_blocks());
  const int nrows = static_cast<int>(rows);  // the planner takes at most 2^30 elements
  const int dot_stride = static_cast<int>(ColumnsLayout::dot_stride(rows));
  if (tid == 0) {
    mbarrier_init(bar, warps);  // one arrival per warp, with the bytes of its copies
    mbarrier_init(dots_bar, 1);
    // Its one arrival, and the bytes that the other CTAs' copies will bring (step 3).
    mbarrier_arrive_expecting(dots_bar, static_cast<unsigned>((ranks - 1) * dot_stride * 4));
  }
  __syncthreads();
  // Every CTA's mbarriers must exist before the first push into it: arrive now, wait at the
  // first push (the barrier overlaps the loads).
  cluster_arrive_relaxed();
  // (Index arithmetic in 32 bits and without division by a variable: the first version's SASS
  // spent ~100 instructions per segment on 64-bit divisions, with one warp issuing; the
  // suspected cause of its slowness, docs/notes.md fifth session.)
  // Segment s = j * nrows + r goes to lane s % 32 of warp (s / 32) % warps. Each warp first
  // arrives once with the bytes of all its copies (a warp sum), then issues them: the copies may
  // land before or after, the phase completes only when every warp has arrived and every byte
  // has landed.
  {
    const int segments = ncols > 0 ? operands * nrows : 0;
    // Segment (j, r), its head bytes (loaded by threads below) and its 16-byte aligned body.
    auto body_of = [&](int segment, int& j, int& r, int64_t& head) {
      j = segment < nrows ? 0 : segment < 2 * nrows ? 1 : 2;
      r = segment - j * nrows;
      const int64_t bytes = ncols * size_of(j);
      head = head_bytes(j, r, bytes);
      return static_cast<unsigned>((bytes - head) & ~int64_t(15));
    };
    unsigned mine = 0;
    for (int segment = warp * 32 + lane; segment < segments; segment += threads) {
      int j, r;
      int64_t head;
      mine += body_of(segment, j, r, head);
    }
    mine = __reduce_add_sync(0xffffffffu, mine);
    if (lane == 0) mbarrier_arrive_expecting(bar, mine);
    __syncwarp();
    for (int segment = warp * 32 + lane; segment < segments; segment += threads) {
      int j, r;
      int64_t head;
      const unsigned body = body_of(segment, j, r, head);
      if (body > 0) {
        bulk_copy_to_shared(staged(j, r) + head, source(j, r) + head, body, bar);
      }
    }
  }
  constexpr int kBatch = 4;
  // Heads and tails: 16 places per segment (up to 8 head elements, then up to 8 tail elements),
  // each thread loading kBatch places before storing any: a loop of load-then-store has one
  // load in flight per thread, each store waiting for its load's round trip.
  if (ncols > 0) {
    const int places = operands * nrows * 16;
    for (int first = tid; first < places; first += kBatch * threads) {
      uint32_t value[kBatch];
      unsigned char* dst[kBatch];
      bool two_bytes[kBatch];
#pragma unroll
      for (int b = 0; b < kBatch; ++b) {
        const int place = first + b * threads;
        dst[b] = nullptr;
        if (place >= places) continue;
        const int segment = place / 16, k = place % 16;  // (division by a constant)
        const int j = segment < nrows ? 0 : segment < 2 * nrows ? 1 : 2;
        const int r = segment - j * nrows;
        const int size = static_cast<int>(size_of(j));
        const int64_t bytes = ncols * size;
        const int head = static_cast<int>(head_bytes(j, r, bytes)) / size;
        const int64_t tail = (head * size + ((bytes - head * size) & ~int64_t(15))) / size;
        const int64_t element = k < 8 ? k : tail + (k - 8);
        if (k < 8 ? k >= head : element >= ncols) continue;
        const unsigned char* src = source(j, r) + element * size;
        dst[b] = staged(j, r) + element * size;
        two_bytes[b] = size == 2;
        value[b] = size == 2 ? uint32_t(*reinterpret_cast<const uint16_t*>(src))
                             : *reinterpret_cast<const uint32_t*>(src);
      }
#pragma unroll
      for (int b = 0; b < kBatch; ++b) {
        if (!dst[b]) continue;
        if (two_bytes[b]) {
          *reinterpret_cast<uint16_t*>(dst[b]) = static_cast<uint16_t>(value[b]);
        } else {
          *reinterpret_cast<uint32_t*>(dst[b]) = value[b];
        }
      }
    }
  }
  // The column scales and the rows' rstd, kBatch loads in flight per thread (as above).
  for (int first = tid; first < ncols; first += kBatch * threads) {
    float w[kBatch];
#pragma unroll
    for (int b = 0; b < kBatch; ++b) {
      const int c = first + b * threads;
      w[b] = c < ncols && p.weight ? to_float(__ldg(static_cast<const WT*>(p.weight) + c0 + c))
                                   : 0.0f;
    }
#pragma unroll
    for (int b = 0; b < kBatch; ++b) {
      const int c = first + b * threads;
      if (c < ncols) weight[c] = p.weight ? w[b] + (p.zero_centered ? 1.0f : 0.0f) : 1.0f;
    }
  }
  for (int first = tid; first < nrows; first += kBatch * threads) {
    float v[kBatch];
#pragma unroll
    for (int b = 0; b < kBatch; ++b) {
      const int r = first + b * threads;
      v[b] = r < nrows ? __ldg(p.rstd + r) : 0.0f;
    }
#pragma unroll
    for (int b = 0; b < kBatch; ++b) {
      if (first + b * threads < nrows) rstd[first + b * threads] = v[b];
    }
  }
  __syncthreads();
  mbarrier_wait(bar);

  auto x_at = [&](int64_t r) { return reinterpret_cast<const XT*>(staged(0, r)); };
  auto dy_at = [&](int64_t r) { return reinterpret_cast<const DYT*>(staged(1, r)); };

  // 2. This CTA's part of each row's dot product sum(dy * w * xhat), one warp per row, into
  // its own row of the table.
  cluster_wait();  // (every CTA's dots_bar exists: step 3 copies into them)
  for (int r = warp; r < nrows; r += warps) {
    const XT* xs = x_at(r);
    const DYT* dys = dy_at(r);
    const float rs = rstd[r];
    float dot = 0.0f;
#pragma unroll 4
    for (int64_t c = lane; c < ncols; c += 32) {
      dot += to_float(dys[c]) * weight[c] * (to_float(xs[c]) * rs);
    }
    dot = group_sum(dot, 32);  // on every lane
    if (lane == 0) dots[rank * dot_stride + r] = dot;
  }

  // 3. This CTA's row of the table to every other CTA, one bulk copy each (thread q copies to
  // rank q; the copy engine reads what the threads wrote: fence, then barrier). Then the rows'
  // dot products: the parts added in rank order, bitwise deterministic, once dots_bar has
  // counted the bytes of the other CTAs' copies.
  fence_proxy_async_shared();
  __syncthreads();
  if (tid < ranks && tid != rank) {
    const float* mine = dots + rank * dot_stride;
    bulk_copy_to_cluster(cluster_address(mine, tid), mine, static_cast<unsigned>(dot_stride * 4),
                         cluster_address(dots_bar, tid));
  }
  mbarrier_wait(dots_bar);
  for (int r = tid; r < nrows; r += threads) {
    float total = 0.0f;
    for (int q = 0; q < ranks; ++q) total += dots[q * dot_stride + r];
    mean[r] = total * shape.inv_hidden;
  }
  __syncthreads();

  // 4. dx, and the columns' sums. Thread (g, j): row group g = tid / (threads / groups) takes
  // rows g, g + groups, ...; j = its vector of columns.
  const int group_threads = threads / groups;
  const int g = tid / group_threads;
  const int64_t nvec = (ncols + VEC - 1) / VEC;
  for (int64_t v = tid % group_threads; v < nvec; v += group_threads) {
    const int64_t col = v * VEC;
    const int64_t n = ncols - col;
    float sum_w[VEC], sum_b[VEC];
#pragma unroll
    for (int k = 0; k < VEC; ++k) sum_w[k] = sum_b[k] = 0.0f;
    for (int r = g; r < nrows; r += groups) {
      const XT* xs = x_at(r) + col;
      const DYT* dys = dy_at(r) + col;
      const float rs = rstd[r], m = mean[r];
      float dx[VEC];
#pragma unroll
      for (int k = 0; k < VEC; ++k) {
        // Past the segment's end the slot holds stale bytes: read, never stored.
        const float dy = to_float(dys[k]);
        const float xhat = to_float(xs[k]) * rs;
        sum_w[k] += dy * xhat;
        sum_b[k] += dy;
        dx[k] = rs * (dy * weight[col + k] - xhat * m);  // (re-read: registers are short)
      }
      if (p.dresidual_out) {
        const XT* ds = reinterpret_cast<const XT*>(staged(2, r)) + col;
#pragma unroll
        for (int k = 0; k < VEC; ++k) dx[k] += to_float(ds[k]);
      }
      store_upto<XT, VEC>(static_cast<XT*>(p.dx) + r * p.dx_stride + c0 + col, n, dx);
    }
    if (groups == 1) {
#pragma unroll
      for (int k = 0; k < VEC; ++k) {
        if (k >= n) break;
        if (want_w) static_cast<WT*>(p.dweight)[c0 + col + k] = from_float<WT>(sum_w[k]);
        if (want_b) static_cast<WT*>(p.dbias)[c0 + col + k] = from_float<WT>(sum_b[k]);
      }
    } else if (g < groups) {
      const int64_t cols = shape.cols_per_cta;
#pragma unroll
      for (int k = 0; k < VEC; ++k) {
        if (k >= n) break;
        if (want_w) partials[g * cols + col + k] = sum_w[k];
        if (want_b) partials[(want_w ? groups : 0) * cols + g * cols + col + k] = sum_b[k];
      }
    }
  }
  if (groups > 1 && (want_w || want_b)) {
    __syncthreads();
    const int64_t cols = shape.cols_per_cta;
    for (int64_t c = tid; c < ncols; c += threads) {
      if (want_w) {
        float total = 0.0f;
        for (int q = 0; q < groups; ++q) total += partials[q * cols + c];
        static_cast<WT*>(p.dweight)[c0 + c] = from_float<WT>(total);
      }
      if (want_b) {
        const float* sums = partials + (want_w ? groups : 0) * cols;
        float total = 0.0f;
        for (int q = 0; q < groups; ++q) total += sums[q * cols + c];
        static_cast<WT*>(p.dbias)[c0 + c] = from_float<WT>(total);
      }
    }
  }
  // No CTA may leave while a copy out of its shared memory (step 3) is in flight: each CTA
  // arrives once its dots_bar has counted every copy into it, so when all have arrived, every
  // copy has landed.
  cluster_arrive_relaxed();
  cluster_wait();
#else
  (void)smem;
  (void)p;
  __trap();  // the planner takes this kernel only where clusters exist (sm_90+)
#endif
}

}  // namespace normkit::cuda
