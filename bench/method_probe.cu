// What the benchmark's timing method gives a kernel that only moves bytes: how much of the
// event time above bytes / copy bandwidth belongs to the method (launch, the flush's
// aftermath) rather than to normkit's kernels. Standalone (no normkit code), built on the
// device by `bench/device.sh method`:
//
//   nvcc -O3 -arch=sm_90 -std=c++17 -Ibench bench/method_probe.cu -o method_probe && ./method_probe
//
// Per size (bytes read = bytes written = half the total, as a forward of that many bytes):
// CUDA events around one call after an L2 flush, median of 100, as `normkit bench` times its
// passes (tools/bench_cuda.cpp), for
//   memcpy      cudaMemcpyAsync device to device (what `--same-size-copy` times)
//   kcopy       a grid-stride copy kernel of 16-byte vectors, the grid one wave of full SMs
//   kcopy-last  the same with its loads marked L2 evict-last (as normkit's forwards read x)
//   kcopy8      the plain one with 8 vectors in flight per thread instead of 4
//   empty       a kernel of one CTA that does nothing
// each after two flushes: "memset" (cudaMemsetAsync of 100 MiB, the bench's: leaves L2 full of
// dirty lines) and "read" (a kernel that reads 100 MiB: leaves L2 full of clean lines). The
// copy kernels also report their own span (first CTA's start to last CTA's end, by
// %globaltimer), so event time - span = what the launch and its completion cost.
#include <algorithm>
#include <cstdint>
#include <cstdio>

#include "probe_timing.cuh"

namespace {

using probe::check;
using probe::empty_kernel;
using probe::note_end;
using probe::note_start;

template <bool kEvictLast, int kUnroll = 4>
__global__ void __launch_bounds__(512)
    copy16(const uint4* __restrict__ src, uint4* __restrict__ dst, size_t n,
           unsigned long long* span) {
  note_start(span);
  uint64_t policy = 0;
  if (kEvictLast)
    asm volatile("createpolicy.fractional.L2::evict_last.b64 %0, 1.0;" : "=l"(policy));
  const size_t stride = size_t(gridDim.x) * blockDim.x;
  size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x;
  // kUnroll vectors in flight per thread.
  for (; i + (kUnroll - 1) * stride < n; i += kUnroll * stride) {
    uint4 v[kUnroll];
#pragma unroll
    for (int k = 0; k < kUnroll; ++k) {
      const uint4* p = src + i + k * stride;
      if (kEvictLast) {
        asm volatile("ld.global.L1::no_allocate.L2::cache_hint.v4.u32 {%0, %1, %2, %3}, [%4], %5;"
                     : "=r"(v[k].x), "=r"(v[k].y), "=r"(v[k].z), "=r"(v[k].w)
                     : "l"(p), "l"(policy));
      } else {
        v[k] = *p;
      }
    }
#pragma unroll
    for (int k = 0; k < kUnroll; ++k) dst[i + k * stride] = v[k];
  }
  for (; i < n; i += stride) dst[i] = src[i];
  note_end(span);
}

}  // namespace

int main() {
  probe::Probe p;
  cudaDeviceProp prop{};
  check(cudaGetDeviceProperties(&prop, 0), "properties");
  // The copy ceiling as `normkit bench` measures it; its buffers serve the copies below.
  const probe::CopyCeiling ceiling(p);
  const double gbps = ceiling.gbps;
  void* src = ceiling.src;
  void* dst = ceiling.dst;
  std::printf("device: %s, %d SMs; copy ceiling %.1f GB/s (memcpy of 2 x 512 MiB, memset flush)\n",
              prop.name, p.sms, gbps);
  std::printf(
      "timing: events around one call after an L2 flush, median of 100; span = the kernel's "
      "first CTA start to last CTA end (%%globaltimer)\n\n");

  // Total bytes (read + written) of sweep passes: 1x4096, 128x4096 and 4096x1024 bf16 forwards,
  // 4096x4096, 8192x4096, 8192x8192, 32768x8192.
  const size_t totals[] = {size_t{16} << 10,  size_t{2} << 20,   size_t{16} << 20,
                           size_t{64} << 20,  size_t{128} << 20, size_t{256} << 20,
                           size_t{1024} << 20};
  const int copy_threads = 512;
  const int copy_grid = p.sms * (2048 / copy_threads);
  std::printf("%-10s %-7s %9s %9s %9s %9s %9s %9s %9s %9s %9s\n", "total", "flush", "floor",
              "memcpy", "kcopy", "span", "kc-last", "span", "kcopy8", "span", "empty");
  for (const size_t total : totals) {
    const size_t half = total / 2;
    const size_t n = half / 16;
    const double floor_us = total / (gbps * 1e3);
    for (const bool read_flush : {false, true}) {
      p.read_flush = read_flush;
      const double memcpy_us = ceiling.time_memcpy(p, half);
      const int grid =
          static_cast<int>(std::min<size_t>(copy_grid, (n + copy_threads - 1) / copy_threads));
      // One of copy16's instantiations over the same bytes and grid.
      const auto time_copy_kernel = [&](auto kernel) {
        return p.time([&](unsigned long long* span) {
          kernel<<<grid, copy_threads, 0, p.stream>>>(static_cast<const uint4*>(src),
                                                      static_cast<uint4*>(dst), n, span);
        });
      };
      const auto kcopy = time_copy_kernel(copy16<false>);
      const auto kcopy_last = time_copy_kernel(copy16<true>);
      const auto kcopy8 = time_copy_kernel(copy16<false, 8>);
      const double empty_us =
          p.time([&](unsigned long long*) { empty_kernel<<<1, 32, 0, p.stream>>>(); }).first;
      check(cudaGetLastError(), "launch");
      std::printf("%-10.1f %-7s %9.2f %9.2f %9.2f %9.2f %9.2f %9.2f %9.2f %9.2f %9.2f\n",
                  total / 1048576.0, read_flush ? "read" : "memset", floor_us, memcpy_us,
                  kcopy.first, kcopy.second, kcopy_last.first, kcopy_last.second, kcopy8.first,
                  kcopy8.second, empty_us);
    }
  }
  std::printf("\n(total in MiB; every time in us)\n");
  return 0;
}
