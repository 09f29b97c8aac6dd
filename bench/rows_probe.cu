// What a plain bf16 RMSNorm forward of many rows reaches under the bench's timing, by CTA shape
// and L2 hints (docs/notes.md, thirty-seventh session, Next 1: torch.compile's one-warp programs
// take 24.4 us at 16384 x 1024, normkit 27.1-27.5, the floor 22.6). Standalone (no normkit
// code), built on the device by `bench/device.sh rows`:
//
//   nvcc -O3 -arch=sm_90 -std=c++17 -Ibench bench/rows_probe.cu -o rows_probe && ./rows_probe
//
// Each variant: ROWS rows per CTA of THREADS threads per row (threadIdx.y: the row), x and the
// weight loaded together (16-byte vectors, ITEMS = hidden / 8 / THREADS per thread), the sum
// of squares by shuffles (and shared memory past a warp), y stored; x's loads with no hint,
// L2::evict_last (what normkit's forwards do from 1 MiB) or L2::evict_first, y's stores plain
// or st.global.cs (streaming). Timed as `normkit bench` times (bench/probe_timing.cuh), with
// each call's span; floor = bytes / the copy ceiling measured here.
#include <cstdint>
#include <cstdio>

#include "probe_bf16.cuh"
#include "probe_timing.cuh"

namespace {

using probe::check;
using probe::note_end;
using probe::note_start;

enum Hint { kPlain = 0, kEvictLast = 1, kEvictFirst = 2 };

__device__ __forceinline__ uint4 load_x(const uint4* p, int hint, uint64_t policy) {
  if (hint == kPlain) return *p;
  uint4 v;
  asm volatile("ld.global.L1::no_allocate.L2::cache_hint.v4.u32 {%0, %1, %2, %3}, [%4], %5;"
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
               : "l"(p), "l"(policy));
  return v;
}

__device__ __forceinline__ void store_y(uint4* p, uint4 v, bool streaming) {
  if (streaming) {
    __stcs(p, v);
  } else {
    *p = v;
  }
}

template <int HIDDEN, int THREADS, int ROWS, int HINT, bool STREAMING>
__global__ void __launch_bounds__(THREADS* ROWS)
    rms_rows(const uint4* __restrict__ x, const uint4* __restrict__ w, uint4* __restrict__ y,
             int rows, unsigned long long* span) {
  constexpr int kItems = HIDDEN / 8 / THREADS;
  constexpr int kWarps = THREADS / 32;
  static_assert(kItems * THREADS * 8 == HIDDEN && THREADS % 32 == 0, "whole warps, whole row");
  note_start(span);
  uint64_t policy = 0;
  if (HINT == kEvictLast) {
    asm volatile("createpolicy.fractional.L2::evict_last.b64 %0, 1.0;" : "=l"(policy));
  } else if (HINT == kEvictFirst) {
    asm volatile("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;" : "=l"(policy));
  }
  const int row = blockIdx.x * ROWS + threadIdx.y;
  const bool live = row < rows;
  const size_t base = size_t(row) * (HIDDEN / 8);
  uint4 xv[kItems], wv[kItems];
#pragma unroll
  for (int i = 0; i < kItems; ++i) {
    if (live) xv[i] = load_x(x + base + i * THREADS + threadIdx.x, HINT, policy);
    wv[i] = __ldg(w + i * THREADS + threadIdx.x);
  }
  float sum = 0.f;
  if (live) {
#pragma unroll
    for (int i = 0; i < kItems; ++i) sum += probe::sum_of_squares(xv[i]);
  }
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) sum += __shfl_xor_sync(0xffffffffu, sum, o);
  if constexpr (kWarps > 1) {
    __shared__ float warp_sums[ROWS][kWarps];
    if (threadIdx.x % 32 == 0) warp_sums[threadIdx.y][threadIdx.x / 32] = sum;
    __syncthreads();
    sum = 0.f;
#pragma unroll
    for (int i = 0; i < kWarps; ++i) sum += warp_sums[threadIdx.y][i];
  }
  const float rstd = rsqrtf(sum / HIDDEN + 1e-6f);
  if (live) {
#pragma unroll
    for (int i = 0; i < kItems; ++i) {
      store_y(y + base + i * THREADS + threadIdx.x, probe::scaled(xv[i], wv[i], rstd), STREAMING);
    }
  }
  note_end(span);
}

template <int HIDDEN, int THREADS, int ROWS, int HINT, bool STREAMING>
void run(probe::Probe& p, const probe::Bf16Inputs& b, int rows, double gbps) {
  const int grid = (rows + ROWS - 1) / ROWS;
  const auto t = p.time([&](unsigned long long* span) {
    rms_rows<HIDDEN, THREADS, ROWS, HINT, STREAMING>
        <<<grid, dim3(THREADS, ROWS), 0, p.stream>>>(b.x, b.w, b.y, rows, span);
  });
  check(cudaGetLastError(), "launch");
  static const char* const hints[] = {"plain", "evict-last", "evict-first"};
  const double bytes = 2.0 * 2.0 * double(rows) * HIDDEN + 2.0 * HIDDEN;
  std::printf("%6dx%-6d %8d %5d %12s %5s %9.2f %9.2f %9.2f\n", rows, HIDDEN, THREADS, ROWS,
              hints[HINT], STREAMING ? "cs" : "-", t.first, t.second, bytes / (gbps * 1e3));
}

}  // namespace

int main() {
  probe::Probe p;
  probe::CopyCeiling ceiling(p);
  const double gbps = ceiling.gbps;
  const probe::Bf16Inputs b(size_t{16384} * 1024, 4096);

  std::printf("copy %.1f GB/s\n%13s %8s %5s %12s %5s %9s %9s %9s\n", gbps, "shape", "threads",
              "rows", "x loads", "y", "event", "span", "floor");
  for (const int rows : {16384, 4096}) {
    run<1024, 32, 1, kPlain, false>(p, b, rows, gbps);
    run<1024, 32, 1, kEvictLast, false>(p, b, rows, gbps);
    run<1024, 32, 1, kEvictFirst, false>(p, b, rows, gbps);
    run<1024, 32, 1, kPlain, true>(p, b, rows, gbps);
    run<1024, 32, 4, kPlain, false>(p, b, rows, gbps);
    run<1024, 32, 8, kEvictLast, false>(p, b, rows, gbps);
    run<1024, 64, 1, kPlain, false>(p, b, rows, gbps);
  }
  for (const int rows : {8192}) {
    run<2048, 64, 1, kPlain, false>(p, b, rows, gbps);
    run<2048, 64, 1, kEvictLast, false>(p, b, rows, gbps);
    run<2048, 64, 4, kEvictLast, false>(p, b, rows, gbps);
    run<2048, 128, 1, kPlain, false>(p, b, rows, gbps);
  }
  for (const int rows : {4096}) {
    run<4096, 128, 1, kPlain, false>(p, b, rows, gbps);
    run<4096, 128, 1, kEvictLast, false>(p, b, rows, gbps);
    run<4096, 128, 2, kEvictLast, false>(p, b, rows, gbps);
    run<4096, 256, 1, kPlain, false>(p, b, rows, gbps);
  }
  std::printf("\n(every time in us; span: first CTA start to last CTA end; floor: bytes / copy)\n");
  return 0;
}
