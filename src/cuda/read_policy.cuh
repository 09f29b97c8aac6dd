// L2 eviction priority of the inputs a kernel reads once (x, dy, residual). A load normally
// allocates its line in L2 as evict-normal; once L2 is full, every new line evicts an old one,
// and an old dirty line (the previous kernel's output, or in the benchmark the flush buffer)
// must be written to HBM first. Marked evict-first, the lines of inputs already consumed are
// the victims instead: clean, so nothing is written back, and the other data stays. Marked
// evict-last (the default from 1 MiB), they stay and the dirty lines are the victims: measured
// faster still, the consumed lines kept at evict-last included (docs/notes.md, eleventh
// session). Where each pays is measured, not assumed: KernelFacts::evict_first_max_mib and
// evict_last_min_mib.
#pragma once

#include <cstdint>

namespace normkit::cuda {

// NK_ONE_FORM_LOADS (CMake option, off): every ReadPolicy is hinted, evict-normal where neither
// hint is asked. Where `hinted` is a runtime value the compiler keeps both a hinted and a plain
// copy of each load, both issued (one predicated off): in the lean forward that cost 7% of the
// kernel's time at 4096 x 1024 (forty-third session). The A/B build of every other kernel
// (forty-fourth session): the quantized forwards 1-3% faster (since then their default, through
// `always`), the plain forwards and backwards level, float32's wide-row forwards 6-13% slower
// (spills of the 8-vector registers kernel). The option stays for such A/Bs.
#ifndef NK_ONE_FORM_LOADS
#define NK_ONE_FORM_LOADS 0
#endif

// One of the two hints (evict-first wins), or none. `always` (a constant at each call): hinted
// in any case, evict-normal where neither hint is asked, so that the loads take one form.
struct ReadPolicy {
  bool hinted = false;  // loads carry `policy`
  uint64_t policy = 0;  // an L2 cache policy (createpolicy) when hinted

  __device__ __forceinline__ explicit ReadPolicy(bool first, bool last = false,
                                                 bool always = false)
      : hinted(NK_ONE_FORM_LOADS || always || first || last) {
    // (The evict-normal form only where asked: when ReadPolicy went through read_policy_always,
    // the pipelined kernels took 8 instructions more each, that branch kept.)
    if (first) {
      asm volatile("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;" : "=l"(policy));
    } else if (last) {
      asm volatile("createpolicy.fractional.L2::evict_last.b64 %0, 1.0;" : "=l"(policy));
    } else if (NK_ONE_FORM_LOADS || always) {
      asm volatile("createpolicy.fractional.L2::evict_normal.b64 %0, 1.0;" : "=l"(policy));
    }
  }
};

// An L2 policy for every load: evict-first or evict-last as asked (evict-first wins), else
// evict-normal (what an unhinted load gets), so that copies need no branch between a hinted
// and a plain form (rms_norm_bwd_lean).
__device__ __forceinline__ uint64_t read_policy_always(bool evict_first, bool evict_last) {
  return ReadPolicy(evict_first, evict_last, /*always=*/true).policy;
}

// 16 bytes through L2 with that policy, not allocated in L1 (read once).
__device__ __forceinline__ uint4 load16_hinted(const void* p, uint64_t policy) {
  uint4 v;
  asm volatile("ld.global.L1::no_allocate.L2::cache_hint.v4.u32 {%0, %1, %2, %3}, [%4], %5;"
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
               : "l"(p), "l"(policy));
  return v;
}

// cp.async of 16 bytes (bypassing L1) with that L2 policy.
__device__ __forceinline__ void cp_async16_hinted(void* smem, const void* gmem,
                                                  uint64_t policy) {
  const unsigned dst = static_cast<unsigned>(__cvta_generic_to_shared(smem));
  asm volatile("cp.async.cg.shared.global.L2::cache_hint [%0], [%1], 16, %2;\n" ::"r"(dst),
               "l"(gmem), "l"(policy)
               : "memory");
}

}  // namespace normkit::cuda
