// Deterministic reductions across the threads that share one row: a sub-warp or warp
// (shuffles), a block (shuffles + shared memory, fixed order), or a thread-block cluster
// (distributed shared memory, fixed order). Every thread of the row receives the same result.
// Sums serve the mean square and the backward's dot product; maxima the quantization scales.
#pragma once

#include <cooperative_groups.h>

#include "cuda/async_copy.cuh"
#include "cuda/bulk_copy.cuh"

namespace normkit::cuda {

struct SumOp {
  static constexpr float kIdentity = 0.0f;
  __device__ __forceinline__ float operator()(float a, float b) const { return a + b; }
};

// Maximum of non-negative values (|v|): 0 is the identity, and NaN operands are ignored.
struct MaxOp {
  static constexpr float kIdentity = 0.0f;
  __device__ __forceinline__ float operator()(float a, float b) const { return fmaxf(a, b); }
};

// Reduction over aligned groups of `width` lanes (a power of two <= 32) within a warp.
template <typename Op>
__device__ __forceinline__ float group_reduce(float v, int width, Op op) {
  for (int offset = width / 2; offset > 0; offset /= 2) {
    v = op(v, __shfl_xor_sync(0xffffffffu, v, offset));
  }
  return v;
}

__device__ __forceinline__ float group_sum(float v, int width) {
  return group_reduce(v, width, SumOp{});
}

// group_sum over this thread's aligned group of `width` lanes (a power of two under 32), whose
// shuffles name only those lanes: the warp's other groups may be elsewhere in their code (row
// groups of a persistent kernel whose trip counts differ).
__device__ __forceinline__ float lanes_sum(float v, int width) {
  const unsigned lane = threadIdx.x + threadIdx.y * blockDim.x;  // (blockDim.x == width)
  const unsigned mask = ((1u << width) - 1u) << (lane % 32 & ~(width - 1u));
  for (int offset = width / 2; offset > 0; offset /= 2) {
    v += __shfl_xor_sync(mask, v, offset);
  }
  return v;
}

constexpr int kMaxWarps = 32;

// Reduction over the blockDim.x threads (a multiple of 32) of each row group threadIdx.y.
// `scratch` holds kMaxWarps floats (blockDim.x * blockDim.y <= 1024). Every thread of the block
// must call it; it starts with a barrier so scratch can be reused across calls.
template <typename Op>
__device__ __forceinline__ float block_reduce(float v, float* scratch, Op op) {
  const int warps = blockDim.x / 32;
  v = group_reduce(v, 32, op);
  __syncthreads();
  if (threadIdx.x % 32 == 0) scratch[threadIdx.y * warps + threadIdx.x / 32] = v;
  __syncthreads();
  float total = Op::kIdentity;
  for (int w = 0; w < warps; ++w) total = op(total, scratch[threadIdx.y * warps + w]);
  return total;
}

__device__ __forceinline__ float block_sum(float v, float* scratch) {
  return block_reduce(v, scratch, SumOp{});
}

// Floats of block_sum_by_quads's scratch: each row group's slots padded to a multiple of 4
// (64 at most: 16 groups of 2 warps).
constexpr int kQuadSumFloats = 2 * kMaxWarps;

// Floats of one sum's scratch for the reductions below, by quads (QUADS) or warp by warp.
template <bool QUADS>
constexpr int kRowSumFloats = QUADS ? kQuadSumFloats : kMaxWarps;

// Writes this warp's `v` to its row group's slot of `slots` (kQuadSumFloats floats, groups padded
// to whole quads) and pads the group's last quad with +0 (lanes 1-3 of its last warp). Returns
// the row group's first slot.
__device__ __forceinline__ float* write_quad_slots(float v, float* slots) {
  const int warps = blockDim.x / 32;
  const int padded = (warps + 3) & ~3;
  float* group = slots + threadIdx.y * padded;
  const int lane = threadIdx.x % 32, w = threadIdx.x / 32;
  if (lane == 0 || (w == warps - 1 && w + lane < padded)) group[w + lane] = lane == 0 ? v : 0.0f;
  return group;
}

// op over a row group's slots from write_quad_slots, in slot order, four at a time.
template <typename Op>
__device__ __forceinline__ float reduce_quad_slots(const float* group, Op op) {
  const int warps = blockDim.x / 32;
  const float4* quads = reinterpret_cast<const float4*>(group);
  float total = Op::kIdentity;
#pragma unroll
  for (int q = 0; q < kMaxWarps / 4; ++q) {
    if (4 * q >= warps) break;
    const float4 s = quads[q];
    total = op(total, s.x);
    total = op(total, s.y);
    total = op(total, s.z);
    total = op(total, s.w);
  }
  return total;
}

// block_sum bit for bit, the warps' sums read four at a time: each row group's slots padded to a
// multiple of 4 with +0 (a sum that starts at +0 is never -0, and adding +0 to anything else
// changes no bit), added in the same order. For 8 warps, 2 shared loads and 8 additions in
// place of a loop over a runtime count (44 instructions per warp in MXFP8's kernel at
// 8192 x 8192, ncu, forty-seventh session). `scratch`: kQuadSumFloats floats, 16-byte aligned.
__device__ __forceinline__ float block_sum_by_quads(float v, float* scratch) {
  v = group_sum(v, 32);
  __syncthreads();
  const float* group = write_quad_slots(v, scratch);
  __syncthreads();
  return reduce_quad_slots(group, SumOp{});
}

// block_sum of each of the N values, behind the same two barriers (each bit for bit as
// block_sum's). `scratch` holds N * kRowSumFloats<QUADS> floats. QUADS: each sum's warp slots
// read four at a time as block_sum_by_quads (scratch 16-byte aligned).
template <int N, bool QUADS = false>
__device__ __forceinline__ void block_sums(float (&v)[N], float* scratch) {
  if constexpr (QUADS) {
#pragma unroll
    for (int n = 0; n < N; ++n) v[n] = group_reduce(v[n], 32, SumOp{});
    __syncthreads();
    const float* groups[N];
#pragma unroll
    for (int n = 0; n < N; ++n) groups[n] = write_quad_slots(v[n], scratch + n * kQuadSumFloats);
    __syncthreads();
#pragma unroll
    for (int n = 0; n < N; ++n) v[n] = reduce_quad_slots(groups[n], SumOp{});
    return;
  }
  const int warps = blockDim.x / 32;
#pragma unroll
  for (int n = 0; n < N; ++n) v[n] = group_reduce(v[n], 32, SumOp{});
  __syncthreads();
  const int slot = threadIdx.y * warps + threadIdx.x / 32;
  if (threadIdx.x % 32 == 0) {
#pragma unroll
    for (int n = 0; n < N; ++n) scratch[n * kMaxWarps + slot] = v[n];
  }
  __syncthreads();
#pragma unroll
  for (int n = 0; n < N; ++n) {
    float total = SumOp::kIdentity;
    for (int w = 0; w < warps; ++w) total += scratch[n * kMaxWarps + threadIdx.y * warps + w];
    v[n] = total;
  }
}

// block_sum of `sum` and the maximum of `max` (non-negative) together, behind the same two
// barriers; `sum` comes out bit for bit as block_sum's. `scratch` holds 2 * kMaxWarps floats.
__device__ __forceinline__ void block_sum_and_max(float& sum, float& max, float* scratch) {
  const int warps = blockDim.x / 32;
  sum = group_reduce(sum, 32, SumOp{});
  max = group_reduce(max, 32, MaxOp{});
  __syncthreads();
  if (threadIdx.x % 32 == 0) {
    scratch[threadIdx.y * warps + threadIdx.x / 32] = sum;
    scratch[kMaxWarps + threadIdx.y * warps + threadIdx.x / 32] = max;
  }
  __syncthreads();
  float total = SumOp::kIdentity, largest = MaxOp::kIdentity;
  for (int w = 0; w < warps; ++w) {
    total += scratch[threadIdx.y * warps + w];
    largest = fmaxf(largest, scratch[kMaxWarps + threadIdx.y * warps + w]);
  }
  sum = total;
  max = largest;
}

// block_sum_and_max bit for bit, each read four at a time as block_sum_by_quads (the maxima are
// of non-negative values, so the +0 pads change none). `scratch`: 2 * kQuadSumFloats floats,
// 16-byte aligned.
__device__ __forceinline__ void block_sum_and_max_by_quads(float& sum, float& max,
                                                           float* scratch) {
  sum = group_reduce(sum, 32, SumOp{});
  max = group_reduce(max, 32, MaxOp{});
  __syncthreads();
  const float* sums = write_quad_slots(sum, scratch);
  const float* maxima = write_quad_slots(max, scratch + kQuadSumFloats);
  __syncthreads();
  sum = reduce_quad_slots(sums, SumOp{});
  max = reduce_quad_slots(maxima, MaxOp{});
}

// Sum over the blockDim.x threads (a multiple of 32) of row group threadIdx.y only: the other
// groups of the block go on independently (named barrier 1 + threadIdx.y; at most 15 groups).
// `scratch` holds 2 * kMaxWarps floats; callers alternate `parity` between calls, so that one
// barrier per call suffices (a group cannot overwrite a half that it may still be reading).
// For kernels whose row groups are whole warps (the pipelined forward: its planner never gives
// it fewer than 32 threads per row). Through row_group_sum's sub-warp test, ptxas gave the
// float32 pipelined cluster forward 84 registers instead of 64, one 512-thread CTA per SM
// instead of two: 1024 x 32768 105 -> 116 us (forty-second session, found by bisecting the
// compile of rms_norm_fwd_f32.cu).
__device__ __forceinline__ float row_group_sum_whole_warps(float v, float* scratch, int parity) {
  v = group_sum(v, 32);
  if (blockDim.x == 32) return v;
  const int warps = blockDim.x / 32;
  float* sums = scratch + parity * kMaxWarps + threadIdx.y * warps;
  if (threadIdx.x % 32 == 0) sums[threadIdx.x / 32] = v;
  named_barrier(1 + threadIdx.y, blockDim.x);
  float total = 0.0f;
  for (int w = 0; w < warps; ++w) total += sums[w];
  return total;
}

// row_group_sum_whole_warps bit for bit, the warps' sums read four at a time as
// block_sum_by_quads. `scratch` holds 2 * kQuadSumFloats floats, 16-byte aligned; callers
// alternate `parity` as for row_group_sum_whole_warps.
__device__ __forceinline__ float row_group_sum_whole_warps_by_quads(float v, float* scratch,
                                                                    int parity) {
  v = group_sum(v, 32);
  if (blockDim.x == 32) return v;
  const float* group = write_quad_slots(v, scratch + parity * kQuadSumFloats);
  named_barrier(1 + threadIdx.y, blockDim.x);
  return reduce_quad_slots(group, SumOp{});
}

// row_group_sum_whole_warps, and also row groups of a power of two threads under 32: several
// per warp, each shuffling among its own lanes (lanes_sum; the pipelined backward's sub-warp
// rows). QUADS: the whole warps' sums by row_group_sum_whole_warps_by_quads (bit for bit;
// `scratch` then 2 * kQuadSumFloats floats, 16-byte aligned).
template <bool QUADS = false>
__device__ __forceinline__ float row_group_sum(float v, float* scratch, int parity) {
  if (blockDim.x < 32) return lanes_sum(v, blockDim.x);
  if constexpr (QUADS) return row_group_sum_whole_warps_by_quads(v, scratch, parity);
  return row_group_sum_whole_warps(v, scratch, parity);
}

// Reduction of `v` (already equal on every thread of this CTA) over the CTAs of the cluster,
// in rank order. `slot` is one float of this CTA's shared memory.
template <typename Op>
__device__ __forceinline__ float cluster_reduce(float v, float* slot, Op op) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  namespace cg = cooperative_groups;
  cg::cluster_group cluster = cg::this_cluster();
  if (threadIdx.x == 0 && threadIdx.y == 0) *slot = v;
  cluster.sync();
  float total = Op::kIdentity;
  const unsigned ranks = cluster.num_blocks();
  for (unsigned r = 0; r < ranks; ++r) total = op(total, *cluster.map_shared_rank(slot, r));
  cluster.sync();  // no CTA may overwrite or leave its slot while others still read it
  return total;
#else
  (void)slot;
  (void)op;
  __trap();  // the launcher never picks clusters below sm_90
  return v;
#endif
}

__device__ __forceinline__ float cluster_sum(float v, float* slot) {
  return cluster_reduce(v, slot, SumOp{});
}

// Per-row sums over the CTAs of a cluster without a cluster barrier per row. A cluster
// barrier's arrive has release semantics at cluster scope: it waits until this thread's earlier
// global stores (the previous row's dx) are visible there. Instead, each CTA's thread 0 writes
// its value into its own slot of every CTA's `slots[i]` with st.async, whose bytes the
// receiving CTA's mbarrier `bars[i]` counts; the CTA's threads wait on that mbarrier alone.
// Row r uses i = r % kClusterRowSlots, and each CTA waits for row r's sum only after pushing
// row r + 1 (the pipelined kernels complete split rows one row late). A CTA pushes row r only
// after its block barrier of row r (its row_group_sum); before that it received row r - 2
// from every CTA, each sent after that CTA's block barrier of row r - 2, which follows its
// wait for and reads of row r - 4 (the same slot). A value may land before its receiver's own
// arrive.expect_tx of that row: the phase cannot complete without that arrive.
constexpr int kMaxClusterRanks = 16;
constexpr int kClusterRowSlots = 4;
struct ClusterRowSums {
  float slots[kClusterRowSlots][kMaxClusterRanks];
  unsigned long long bars[kClusterRowSlots];
};

// The address of `local` (this CTA's shared memory) in CTA `rank` of the cluster.
__device__ __forceinline__ unsigned cluster_address(const void* local, unsigned rank) {
  unsigned remote;
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;\n"
               : "=r"(remote)
               : "r"(shared_address(local)), "r"(rank));
  return remote;
}

// Stores v into `slot` (a float of this CTA's shared memory) as seen in CTA `rank` of the
// cluster, counting its 4 bytes on that CTA's mbarrier `bar` (also given by its local address).
__device__ __forceinline__ void push_float(float v, const float* slot, const void* bar,
                                           unsigned rank) {
  asm volatile(
      "st.async.shared::cluster.mbarrier::complete_tx::bytes.b32 [%0], %1, [%2];\n" ::"r"(
          cluster_address(slot, rank)),
      "r"(__float_as_uint(v)), "r"(cluster_address(bar, rank))
      : "memory");
}

// Every thread of every CTA of the cluster calls this once, before its first push.
__device__ __forceinline__ void cluster_row_sums_init(ClusterRowSums& s) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  if (threadIdx.x == 0 && threadIdx.y == 0) {
    for (int i = 0; i < kClusterRowSlots; ++i) {
      asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;\n" ::"r"(shared_address(&s.bars[i]))
                   : "memory");
    }
    asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
  }
  cooperative_groups::this_cluster().sync();  // every CTA's mbarriers exist before any st.async
#else
  (void)s;
  __trap();  // the launcher never picks clusters below sm_90
#endif
}

// Sends `v` (this CTA's part of the row of slot index i; equal on every thread, thread 0 sends
// it) to every CTA of the cluster, itself included.
__device__ __forceinline__ void cluster_row_push(float v, ClusterRowSums& s, int i) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  if (threadIdx.x != 0 || threadIdx.y != 0) return;
  namespace cg = cooperative_groups;
  cg::cluster_group cluster = cg::this_cluster();
  const unsigned ranks = cluster.num_blocks(), rank = cluster.block_rank();
  s.slots[i][rank] = v;  // the arrive below (release, CTA scope) publishes it locally
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(
                   shared_address(&s.bars[i])),
               "r"((ranks - 1) * 4)
               : "memory");
  for (unsigned r = 0; r < ranks; ++r) {
    if (r == rank) continue;
    push_float(v, &s.slots[i][rank], &s.bars[i], r);
  }
#else
  (void)v;
  (void)s;
  (void)i;
  __trap();  // the launcher never picks clusters below sm_90
#endif
}

// The cluster sum of the row of slot index i, in rank order, once every CTA's part is in.
// `phases` (each thread's own, starting at 0): bit i is the phase of bars[i] to wait for next.
__device__ __forceinline__ float cluster_row_wait(ClusterRowSums& s, int i, unsigned& phases) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  const unsigned ranks = cooperative_groups::this_cluster().num_blocks();
  const unsigned phase = (phases >> i) & 1u;
  // (mbarrier_wait's loop with a runtime parity: mbarrier_wait takes it as an immediate, which
  // keeps the SASS of its callers as measured.)
  asm volatile(
      "{\n"
      ".reg .pred done;\n"
      "WAIT:\n"
      "mbarrier.try_wait.parity.shared::cta.b64 done, [%0], %1;\n"
      "@!done bra WAIT;\n"
      "}\n" ::"r"(shared_address(&s.bars[i])),
      "r"(phase)
      : "memory");
  phases ^= 1u << i;
  float total = 0.0f;
  for (unsigned r = 0; r < ranks; ++r) total += s.slots[i][r];  // rank order
  return total;
#else
  (void)s;
  (void)i;
  (void)phases;
  __trap();  // the launcher never picks clusters below sm_90
  return 0.0f;
#endif
}

// One sum over the CTAs of a cluster, for a kernel that makes a single one (a row chunk per
// CTA): cluster_push_init at the start, before the row's loads; cluster_push_sum when the
// value is ready. As cluster_row_push, values are pushed with st.async and counted by the
// receiving CTA's mbarrier, so no cluster barrier follows the sum (a CTA leaves only after it
// has received every value, and no value is sent to it after that). The one barrier left (every
// CTA's mbarrier must exist before the first st.async) is split: arrive at init, wait at the
// sum, so it overlaps the loads. cluster_sum's two full barriers release this CTA's earlier
// global stores (residual_out) at cluster scope; these do not.
struct ClusterPush {
  float slots[kMaxClusterRanks];
  unsigned long long bar;
};

// cluster_push_sum_and_max's storage: a (sum, max) pair per rank.
struct ClusterPushPair {
  float2 slots[kMaxClusterRanks];
  unsigned long long bar;
};

// Push: ClusterPush or ClusterPushPair.
template <typename Push>
__device__ __forceinline__ void cluster_push_init(Push& s) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  if (threadIdx.x == 0 && threadIdx.y == 0) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;\n" ::"r"(shared_address(&s.bar))
                 : "memory");
    asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
  }
  asm volatile("barrier.cluster.arrive.relaxed.aligned;\n" ::: "memory");
#else
  (void)s;
  __trap();  // the launcher never picks clusters below sm_90
#endif
}

__device__ __forceinline__ float cluster_push_sum(float v, ClusterPush& s) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  namespace cg = cooperative_groups;
  cg::cluster_group cluster = cg::this_cluster();
  const unsigned ranks = cluster.num_blocks(), rank = cluster.block_rank();
  asm volatile("barrier.cluster.wait.aligned;\n" ::: "memory");  // every CTA's mbarrier exists
  const unsigned bar = shared_address(&s.bar);
  if (threadIdx.x == 0 && threadIdx.y == 0) {
    s.slots[rank] = v;
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(bar),
                 "r"((ranks - 1) * 4)
                 : "memory");
    for (unsigned r = 0; r < ranks; ++r) {
      if (r == rank) continue;
      push_float(v, &s.slots[rank], &s.bar, r);
    }
  }
  mbarrier_wait<0>(bar);
  float total = 0.0f;
  for (unsigned r = 0; r < ranks; ++r) total += s.slots[r];  // rank order, as cluster_sum
  return total;
#else
  (void)s;
  __trap();  // the launcher never picks clusters below sm_90
  return v;
#endif
}

// The cluster sum of `sum` (bit for bit as cluster_push_sum's: rank order) and the cluster
// maximum of `max`, through one push each way (ClusterPushPair, after cluster_push_init).
__device__ __forceinline__ void cluster_push_sum_and_max(float& sum, float& max,
                                                         ClusterPushPair& s) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  namespace cg = cooperative_groups;
  cg::cluster_group cluster = cg::this_cluster();
  const unsigned ranks = cluster.num_blocks(), rank = cluster.block_rank();
  asm volatile("barrier.cluster.wait.aligned;\n" ::: "memory");  // every CTA's mbarrier exists
  const unsigned bar = shared_address(&s.bar);
  if (threadIdx.x == 0 && threadIdx.y == 0) {
    s.slots[rank] = make_float2(sum, max);
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(bar),
                 "r"((ranks - 1) * 8)
                 : "memory");
    for (unsigned r = 0; r < ranks; ++r) {
      if (r == rank) continue;
      asm volatile(
          "st.async.shared::cluster.mbarrier::complete_tx::bytes.v2.b32 [%0], {%1, %2}, [%3];\n"
          ::"r"(cluster_address(&s.slots[rank], r)),
          "r"(__float_as_uint(sum)), "r"(__float_as_uint(max)), "r"(cluster_address(&s.bar, r))
          : "memory");
    }
  }
  mbarrier_wait<0>(bar);
  float total = SumOp::kIdentity, largest = MaxOp::kIdentity;
  for (unsigned r = 0; r < ranks; ++r) {
    const float2 v = s.slots[r];
    total += v.x;
    largest = fmaxf(largest, v.y);
  }
  sum = total;
  max = largest;
#else
  (void)sum;
  (void)max;
  (void)s;
  __trap();  // the launcher never picks clusters below sm_90
#endif
}

// Called once by every thread of every CTA of a cluster after its last cluster_row_wait: no CTA
// may exit (its shared memory would go) while another may still write into it.
__device__ __forceinline__ void cluster_sum_done() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  cooperative_groups::this_cluster().sync();
#endif
}

}  // namespace normkit::cuda
