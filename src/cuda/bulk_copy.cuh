// Bulk global -> shared copies through the Tensor Memory Accelerator (cp.async.bulk, sm_90),
// completed on a shared-memory mbarrier, and the split arrive/wait of the cluster barrier.
// One thread can put a whole row segment in flight with one instruction and no registers:
// the way to keep a small grid's loads all in flight at once.
#pragma once

#include <cstdint>

#include "cuda/async_copy.cuh"

namespace normkit::cuda {

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
#define NK_HAS_BULK_COPY 1
#else
#define NK_HAS_BULK_COPY 0
#endif

// Initializes an mbarrier that completes its phase after `arrivals` arrivals and all expected
// bytes; then makes the initialization visible to the async proxy (the copy engine).
__device__ __forceinline__ void mbarrier_init(uint64_t* bar, unsigned arrivals) {
#if NK_HAS_BULK_COPY
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(shared_address(bar)),
               "r"(arrivals)
               : "memory");
  asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
  asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
#endif
}

// Arrives once and adds `bytes` to the transaction count of the current phase.
__device__ __forceinline__ void mbarrier_arrive_expecting(uint64_t* bar, unsigned bytes) {
#if NK_HAS_BULK_COPY
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(
                   shared_address(bar)),
               "r"(bytes)
               : "memory");
#endif
}

// Waits until the phase of parity PARITY of the mbarrier at shared address `bar` completes.
template <unsigned PARITY = 0>
__device__ __forceinline__ void mbarrier_wait(unsigned bar) {
#if NK_HAS_BULK_COPY
  asm volatile(
      "{\n"
      ".reg .pred done;\n"
      "WAIT:\n"
      "mbarrier.try_wait.parity.shared::cta.b64 done, [%0], %1;\n"
      "@!done bra WAIT;\n"
      "}\n" ::"r"(bar),
      "n"(PARITY)
      : "memory");
#endif
}

template <unsigned PARITY = 0>
__device__ __forceinline__ void mbarrier_wait(uint64_t* bar) {
  mbarrier_wait<PARITY>(shared_address(bar));
}

// Copies `bytes` (a multiple of 16; both addresses 16-byte aligned) from global to this CTA's
// shared memory; completion is counted on `bar` (whose expected bytes must include them).
__device__ __forceinline__ void bulk_copy_to_shared(void* smem, const void* gmem, unsigned bytes,
                                                    uint64_t* bar) {
#if NK_HAS_BULK_COPY
  asm volatile(
      "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];\n" ::
          "r"(shared_address(smem)),
      "l"(gmem), "r"(bytes), "r"(shared_address(bar))
      : "memory");
#endif
}

// Copies `bytes` (a multiple of 16; both addresses 16-byte aligned) from this CTA's shared
// memory to another CTA's of the cluster: `dst` and `bar` are shared::cluster addresses
// (cluster_address), and completion is counted on that CTA's mbarrier. The source must stay
// untouched, and its CTA resident, until the copy has landed.
__device__ __forceinline__ void bulk_copy_to_cluster(unsigned dst, const void* src, unsigned bytes,
                                                     unsigned bar) {
#if NK_HAS_BULK_COPY
  asm volatile(
      "cp.async.bulk.shared::cluster.shared::cta.mbarrier::complete_tx::bytes [%0], [%1], %2, "
      "[%3];\n" ::"r"(dst),
      "r"(shared_address(src)), "r"(bytes), "r"(bar)
      : "memory");
#endif
}

// Makes this thread's ordinary shared-memory stores visible to the copy engine (before the
// barrier after which a bulk copy reads them).
__device__ __forceinline__ void fence_proxy_async_shared() {
#if NK_HAS_BULK_COPY
  asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
#endif
}

// The cluster barrier in two halves: arrive, then wait (acquiring what the others released).
// Every thread of every CTA of the cluster takes part; between the two, a CTA may work on while
// the others catch up.
// An arrive that releases nothing: only says that this thread has started (for example, that
// its CTA's mbarriers are initialized, given fence.mbarrier_init).
__device__ __forceinline__ void cluster_arrive_relaxed() {
#if NK_HAS_BULK_COPY
  asm volatile("barrier.cluster.arrive.relaxed.aligned;\n" ::: "memory");
#endif
}

// An arrive that releases this thread's earlier memory operations (shared-memory writes that
// other CTAs will read after their wait; reads of other CTAs' shared memory that must be done
// before they overwrite it).
__device__ __forceinline__ void cluster_arrive() {
#if NK_HAS_BULK_COPY
  asm volatile("barrier.cluster.arrive.release.aligned;\n" ::: "memory");
#endif
}

__device__ __forceinline__ void cluster_wait() {
#if NK_HAS_BULK_COPY
  asm volatile("barrier.cluster.wait.acquire.aligned;\n" ::: "memory");
#endif
}

}  // namespace normkit::cuda
