// Cache-policy variants of the forward's 16-byte accesses of x and y, for an A/B of how HBM
// traffic is scheduled (KernelFacts::fwd_cache_hints, NK_TUNE_FWD_CACHE_HINTS). Bits:
//   kHintLoad256B      x loaded with an L2 prefetch size of 256 bytes (.L2::256B)
//   kHintLoadEvictFirst x loaded with an L2 evict-first policy, not allocated in L1
//   kHintStoreStreaming y stored as streaming (st.global.cs: evict first)
//   kHintStoreDefault   y stored write-back (st.global), instead of st.global.cg
#pragma once

#include <cstdint>

namespace normkit::cuda {

enum CacheHint : int {
  kHintLoad256B = 1,
  kHintLoadEvictFirst = 2,
  kHintStoreStreaming = 4,
  kHintStoreDefault = 8,
};

// The settings that have instantiations (others are refused by the planner's knob check).
constexpr bool cache_hints_supported(int hints) {
  return hints == 0 || hints == 1 || hints == 2 || hints == 3 || hints == 4 || hints == 5 ||
         hints == 8;
}

template <int HINTS>
__device__ __forceinline__ uint4 load16_hinted(const void* p) {
  uint4 v;
  if constexpr ((HINTS & kHintLoadEvictFirst) != 0) {
    uint64_t policy;
    asm volatile("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;" : "=l"(policy));
    if constexpr ((HINTS & kHintLoad256B) != 0) {
      asm volatile(
          "ld.global.L1::no_allocate.L2::cache_hint.L2::256B.v4.u32 {%0, %1, %2, %3}, [%4], %5;"
          : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
          : "l"(p), "l"(policy));
    } else {
      asm volatile("ld.global.L1::no_allocate.L2::cache_hint.v4.u32 {%0, %1, %2, %3}, [%4], %5;"
                   : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
                   : "l"(p), "l"(policy));
    }
  } else if constexpr ((HINTS & kHintLoad256B) != 0) {
    asm volatile("ld.global.L2::256B.v4.u32 {%0, %1, %2, %3}, [%4];"
                 : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
                 : "l"(p));
  } else {
    v = *static_cast<const uint4*>(p);
  }
  return v;
}

template <int HINTS>
__device__ __forceinline__ void store16_hinted(void* p, uint4 v) {
  if constexpr ((HINTS & kHintStoreStreaming) != 0) {
    asm volatile("st.global.cs.v4.u32 [%0], {%1, %2, %3, %4};" ::"l"(p), "r"(v.x), "r"(v.y),
                 "r"(v.z), "r"(v.w)
                 : "memory");
  } else if constexpr ((HINTS & kHintStoreDefault) != 0) {
    asm volatile("st.global.v4.u32 [%0], {%1, %2, %3, %4};" ::"l"(p), "r"(v.x), "r"(v.y),
                 "r"(v.z), "r"(v.w)
                 : "memory");
  } else {
    __stcg(static_cast<uint4*>(p), v);
  }
}

}  // namespace normkit::cuda
