// ScopedIeeeDenormals: IEEE subnormal handling on this thread for a scope.
//
// XLA's CPU runtime runs computations with flush-to-zero and denormals-are-zero set on its
// threads. normkit's CPU backend converts float16 with float arithmetic that reads subnormal
// float32 values, and its worker threads inherit the caller's floating-point environment, so
// under XLA's setting float16 subnormal inputs would read as 0. The JAX CPU handlers clear the
// two flags around the C API call and restore them afterwards.
#pragma once

#if defined(__x86_64__) || defined(_M_X64) || defined(__i386__)
#include <xmmintrin.h>
#endif

namespace normkit_py {

class ScopedIeeeDenormals {
 public:
#if defined(__x86_64__) || defined(_M_X64) || defined(__i386__)
  ScopedIeeeDenormals() : saved_(_mm_getcsr()) {
    constexpr unsigned kFlushToZero = 1u << 15, kDenormalsAreZero = 1u << 6;
    _mm_setcsr(saved_ & ~(kFlushToZero | kDenormalsAreZero));
  }
  ~ScopedIeeeDenormals() { _mm_setcsr(saved_); }

 private:
  unsigned saved_;
#elif defined(__aarch64__)
  ScopedIeeeDenormals() {
    __asm__ volatile("mrs %0, fpcr" : "=r"(saved_));
    const unsigned long cleared = saved_ & ~(1ul << 24);  // FZ
    __asm__ volatile("msr fpcr, %0" : : "r"(cleared));
  }
  ~ScopedIeeeDenormals() { __asm__ volatile("msr fpcr, %0" : : "r"(saved_)); }

 private:
  unsigned long saved_;
#endif
  ScopedIeeeDenormals(const ScopedIeeeDenormals&) = delete;
  ScopedIeeeDenormals& operator=(const ScopedIeeeDenormals&) = delete;
};

}  // namespace normkit_py
