// Asynchronous global -> shared copies (cp.async, sm_80+) and named barriers: the pieces of the
// pipelined kernels, which keep the next rows' loads in flight while the current row is
// reduced and stored.
#pragma once

#include <cstdint>

#include "cuda/read_policy.cuh"

namespace normkit::cuda {

// The shared-state-space address of a pointer into this CTA's shared memory.
__device__ __forceinline__ unsigned shared_address(const void* p) {
  return static_cast<unsigned>(__cvta_generic_to_shared(p));
}

// Starts copying BYTES (4, 8 or 16; both addresses aligned to it) from global to shared memory.
// 16-byte copies bypass L1 (.cg): the data is read once.
template <int BYTES>
__device__ __forceinline__ void cp_async(void* smem, const void* gmem) {
  static_assert(BYTES == 4 || BYTES == 8 || BYTES == 16, "cp.async copies 4, 8 or 16 bytes");
  const unsigned dst = static_cast<unsigned>(__cvta_generic_to_shared(smem));
  if constexpr (BYTES == 16) {
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(dst), "l"(gmem) : "memory");
  } else {
    asm volatile("cp.async.ca.shared.global [%0], [%1], %2;\n" ::"r"(dst), "l"(gmem), "n"(BYTES)
                 : "memory");
  }
}

// Starts copying VEC elements of T (an aligned vector of at least 4 bytes) in 16-byte pieces;
// those with rp's L2 policy where it has one.
template <typename T, int VEC>
__device__ __forceinline__ void cp_async_vector(T* smem, const T* gmem,
                                                const ReadPolicy& rp = ReadPolicy(false)) {
  constexpr int kBytes = int(sizeof(T)) * VEC;
  static_assert(kBytes >= 4, "cp.async copies at least 4 bytes");
  if constexpr (kBytes >= 16) {
    if (rp.hinted) {
#pragma unroll
      for (int j = 0; j < kBytes / 16; ++j) {
        cp_async16_hinted(reinterpret_cast<unsigned char*>(smem) + 16 * j,
                          reinterpret_cast<const unsigned char*>(gmem) + 16 * j, rp.policy);
      }
      return;
    }
  }
  if constexpr (kBytes <= 16) {
    cp_async<kBytes>(smem, gmem);
  } else {
#pragma unroll
    for (int j = 0; j < kBytes / 16; ++j) {
      cp_async<16>(reinterpret_cast<unsigned char*>(smem) + 16 * j,
                   reinterpret_cast<const unsigned char*>(gmem) + 16 * j);
    }
  }
}

// Closes the group of this thread's copies issued since the last commit (possibly empty).
__device__ __forceinline__ void cp_async_commit() {
  asm volatile("cp.async.commit_group;\n" ::: "memory");
}

// Waits until at most PENDING of this thread's committed groups are still in flight. The
// copies of the completed groups are then visible to this thread (only: other threads need a
// barrier too).
template <int PENDING>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(PENDING) : "memory");
}

// Barrier `id` (1..15; 0 is __syncthreads) over `threads` threads (a multiple of 32): lets the
// row groups of one block synchronize independently.
__device__ __forceinline__ void named_barrier(int id, int threads) {
  asm volatile("bar.sync %0, %1;\n" ::"r"(id), "r"(threads) : "memory");
}

}  // namespace normkit::cuda
