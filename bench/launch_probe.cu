// Whether the way a small forward is launched shows in its event time (docs/notes.md,
// thirty-seventh session, Next 0: at 128 x 4096 ncu has the lean kernel at 3.54 us and
// Triton's at 4.62, the events with the host hidden 5.60 and 5.34). Standalone (no normkit
// code), built on the device by `bench/device.sh launch`:
//
//   nvcc -O3 -arch=sm_90 -std=c++17 -Ibench bench/launch_probe.cu -o launch_probe && ./launch_probe
//
// A plain bf16 RMSNorm of rows of 4096 columns (one row per CTA of 128 threads, 4 vectors of x
// and of the weight per thread loaded together, one barrier), timed as `normkit bench` times
// (bench/probe_timing.cuh: memset flush, events around one call, median of 100) with its own
// span (first CTA start to last CTA end, %globaltimer), launched three ways:
//   small   <<<>>> with 24 bytes of parameters
//   big     <<<>>> with 256 bytes (normkit's FwdParams is about 230)
//   big-ex  cudaLaunchKernelEx with those 256 bytes and no attributes (normkit's launch())
// and an empty kernel of one warp the same three ways. event - span is what the launch and the
// completion cost around the kernel; if it differs between the ways, the way is the gap.
#include <cstdint>
#include <cstdio>

#include "probe_bf16.cuh"
#include "probe_timing.cuh"

namespace {

using probe::check;
using probe::note_end;
using probe::note_start;

constexpr int kHidden = 4096;
constexpr int kThreads = 128;
constexpr int kItems = kHidden / 8 / kThreads;  // 16-byte vectors per thread

struct SmallParams {
  const uint4* x;
  const uint4* w;
  uint4* y;
};
struct BigParams {
  const uint4* x;
  const uint4* w;
  uint4* y;
  char unused[232];  // (the size of normkit's FwdParams, not read)
};

template <typename P>
__global__ void __launch_bounds__(kThreads) rms_rows(P p, unsigned long long* span) {
  note_start(span);
  const size_t row = blockIdx.x;
  uint4 xv[kItems], wv[kItems];
#pragma unroll
  for (int i = 0; i < kItems; ++i) {
    xv[i] = p.x[row * (kHidden / 8) + i * kThreads + threadIdx.x];
    wv[i] = p.w[i * kThreads + threadIdx.x];
  }
  float sum = 0.f;
#pragma unroll
  for (int i = 0; i < kItems; ++i) sum += probe::sum_of_squares(xv[i]);
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) sum += __shfl_xor_sync(0xffffffffu, sum, o);
  __shared__ float warp_sums[kThreads / 32];
  if (threadIdx.x % 32 == 0) warp_sums[threadIdx.x / 32] = sum;
  __syncthreads();
  float total = 0.f;
#pragma unroll
  for (int i = 0; i < kThreads / 32; ++i) total += warp_sums[i];
  const float rstd = rsqrtf(total / kHidden + 1e-6f);
#pragma unroll
  for (int i = 0; i < kItems; ++i) {
    p.y[row * (kHidden / 8) + i * kThreads + threadIdx.x] = probe::scaled(xv[i], wv[i], rstd);
  }
  note_end(span);
}

template <typename P>
__global__ void empty_with(P, unsigned long long* span) {
  note_start(span);
  note_end(span);
}

// kernel<<<grid, block>>>(params, span) through cudaLaunchKernelEx, no attributes.
template <typename P>
void launch_ex(void (*kernel)(P, unsigned long long*), int grid, int block, cudaStream_t stream,
               const P& params, unsigned long long* span) {
  cudaLaunchConfig_t config = {};
  config.gridDim = dim3(grid);
  config.blockDim = dim3(block);
  config.stream = stream;
  check(cudaLaunchKernelEx(&config, kernel, params, span), "cudaLaunchKernelEx");
}

}  // namespace

int main() {
  probe::Probe p;
  const int max_rows = 1024;
  const probe::Bf16Inputs in(size_t(max_rows) * kHidden, kHidden);
  const SmallParams small{in.x, in.w, in.y};
  BigParams big{};
  big.x = in.x, big.w = in.w, big.y = in.y;

  std::printf("%-8s %-7s %9s %9s %9s %9s %9s %9s\n", "rows", "kernel", "small", "span",
              "big", "span", "big-ex", "span");
  for (const int rows : {1, 128, 1024}) {
    const auto norm_small = p.time([&](unsigned long long* s) {
      rms_rows<SmallParams><<<rows, kThreads, 0, p.stream>>>(small, s);
    });
    const auto norm_big = p.time([&](unsigned long long* s) {
      rms_rows<BigParams><<<rows, kThreads, 0, p.stream>>>(big, s);
    });
    const auto norm_ex = p.time([&](unsigned long long* s) {
      launch_ex(rms_rows<BigParams>, rows, kThreads, p.stream, big, s);
    });
    check(cudaGetLastError(), "launch");
    std::printf("%-8d %-7s %9.2f %9.2f %9.2f %9.2f %9.2f %9.2f\n", rows, "rms", norm_small.first,
                norm_small.second, norm_big.first, norm_big.second, norm_ex.first,
                norm_ex.second);
  }
  const auto empty_small = p.time([&](unsigned long long* s) {
    empty_with<SmallParams><<<1, 32, 0, p.stream>>>(small, s);
  });
  const auto empty_big = p.time([&](unsigned long long* s) {
    empty_with<BigParams><<<1, 32, 0, p.stream>>>(big, s);
  });
  const auto empty_ex = p.time([&](unsigned long long* s) {
    launch_ex(empty_with<BigParams>, 1, 32, p.stream, big, s);
  });
  check(cudaGetLastError(), "launch");
  std::printf("%-8d %-7s %9.2f %9.2f %9.2f %9.2f %9.2f %9.2f\n", 1, "empty", empty_small.first,
              empty_small.second, empty_big.first, empty_big.second, empty_ex.first,
              empty_ex.second);
  std::printf("\n(every time in us; span: first CTA start to last CTA end)\n");
  return 0;
}
