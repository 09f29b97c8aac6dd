// A prototype before any library change: the plain bf16 forward with its rows fed by bulk
// copies (cp.async.bulk, the TMA) into a deep ring of shared memory, against what the timing
// method gives a copy (bench/method_probe.cu: a copy kernel with 8 vectors of 16 bytes in
// flight per thread spans 22.2 us at 64 MiB after the bench's flush, normkit's registers
// forward of the same bytes 25.8: the forward holds at most ~64 KB per SM in flight, its rows
// in registers). Here each SM keeps up to ~190 KB of rows in flight, each row reduced by a
// group of 1-8 warps. Measured slower than normkit's forward at every shape and layout
// (docs/notes.md, twenty-first session), so not in the library.
// Built and run on the device by `bench/device.sh ring`:
//
//   nvcc -O3 -arch=sm_90 -std=c++17 -Isrc -Ibench bench/ring_probe.cu -o ring_probe && ./ring_probe
//
// Per shape and ring layout: event time and span as `normkit bench` times its passes (the
// memset flush, median of 100), the fraction of copy, and the largest difference from a
// float64 reference over sampled rows in bf16 units in the last place (must be <= 1).
#include <cuda_bf16.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <random>
#include <vector>

#include "cuda/bulk_copy.cuh"
#include "probe_timing.cuh"

namespace {

using normkit::cuda::bulk_copy_to_shared;
using normkit::cuda::mbarrier_arrive_expecting;
using normkit::cuda::mbarrier_init;
using normkit::cuda::shared_address;
using probe::check;

__device__ __forceinline__ void wait_parity(uint64_t* bar, unsigned parity) {
  asm volatile(
      "{\n"
      ".reg .pred done;\n"
      "RING_WAIT:\n"
      "mbarrier.try_wait.parity.shared::cta.b64 done, [%0], %1;\n"
      "@!done bra RING_WAIT;\n"
      "}\n" ::"r"(shared_address(bar)),
      "r"(parity)
      : "memory");
}

// Starts the bulk copy of `row` into a slot (lane 0 of the owning warp), if the row exists.
__device__ __forceinline__ void fetch_row(const __nv_bfloat16* x, int64_t row, int64_t rows,
                                          unsigned row_bytes, int hidden, void* slot,
                                          uint64_t* bar) {
  if (row >= rows) return;
  mbarrier_arrive_expecting(bar, row_bytes);
  bulk_copy_to_shared(slot, x + row * hidden, row_bytes, bar);
}

__device__ __forceinline__ void unpack(const uint4& q, float (&f)[8]) {
  const __nv_bfloat162* h = reinterpret_cast<const __nv_bfloat162*>(&q);
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const float2 p = __bfloat1622float2(h[i]);
    f[2 * i] = p.x;
    f[2 * i + 1] = p.y;
  }
}

// Row group g (warps_per_row warps) of CTA b takes rows g, g + G, ... (G = all groups), each
// into the next of its `slots` ring slots; a slot is refilled as soon as its row's y is
// stored. Shared memory: the weight row, then groups x slots rows, then their mbarriers and the
// weight's, then one float per warp for the row sums.
__global__ void __launch_bounds__(1024, 1)
    ring_fwd(const __nv_bfloat16* __restrict__ x, const __nv_bfloat16* __restrict__ w,
             __nv_bfloat16* __restrict__ y, float* __restrict__ rstd, int64_t rows, int hidden,
             int slots, int warps_per_row, float eps, unsigned long long* span) {
  probe::note_start(span);
  extern __shared__ __align__(128) unsigned char smem[];
  const int warps = blockDim.x / 32, warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int groups = warps / warps_per_row, group = warp / warps_per_row;
  const int group_warp = warp % warps_per_row, group_threads = warps_per_row * 32;
  const int t = group_warp * 32 + lane;  // thread within the group
  const unsigned row_bytes = static_cast<unsigned>(hidden) * 2;
  const uint4* w_smem = reinterpret_cast<const uint4*>(smem);
  unsigned char* ring = smem + row_bytes + size_t(group) * slots * row_bytes;
  uint64_t* bars =
      reinterpret_cast<uint64_t*>(smem + row_bytes + size_t(groups) * slots * row_bytes);
  uint64_t* my_bars = bars + group * slots;
  uint64_t* w_bar = bars + groups * slots;
  float* sums = reinterpret_cast<float*>(w_bar + 1);
  if (threadIdx.x == 0) {
    for (int i = 0; i <= groups * slots; ++i) mbarrier_init(bars + i, 1);
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    mbarrier_arrive_expecting(w_bar, row_bytes);
    bulk_copy_to_shared(smem, w, row_bytes, w_bar);
  }
  const int64_t first = int64_t(blockIdx.x) * groups + group;
  const int64_t step = int64_t(gridDim.x) * groups;
  const bool leader = t == 0;
  if (leader) {
    for (int k = 0; k < slots; ++k) {
      fetch_row(x, first + k * step, rows, row_bytes, hidden, ring + size_t(k) * row_bytes,
                my_bars + k);
    }
  }
  wait_parity(w_bar, 0);
  // The group's own named barrier (0 is __syncthreads').
  auto group_sync = [&] {
    if (warps_per_row > 1) {
      asm volatile("bar.sync %0, %1;" ::"r"(group + 1), "r"(group_threads) : "memory");
    } else {
      __syncwarp();
    }
  };
  const int nvec = hidden / 8;
  int k = 0;
  for (int64_t row = first; row < rows; row += step, ++k) {
    const int s = k % slots;
    wait_parity(my_bars + s, (k / slots) & 1);
    const uint4* xs = reinterpret_cast<const uint4*>(ring + size_t(s) * row_bytes);
    float ss = 0.0f;
#pragma unroll 4
    for (int v = t; v < nvec; v += group_threads) {
      float f[8];
      unpack(xs[v], f);
#pragma unroll
      for (int i = 0; i < 8; ++i) ss = fmaf(f[i], f[i], ss);
    }
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) ss += __shfl_xor_sync(0xffffffffu, ss, o);
    if (warps_per_row > 1) {
      if (lane == 0) sums[warp] = ss;
      group_sync();
      ss = 0.0f;
      for (int i = 0; i < warps_per_row; ++i) ss += sums[group * warps_per_row + i];
    }
    const float r = rsqrtf(ss / hidden + eps);
    if (leader) rstd[row] = r;
    uint4* yr = reinterpret_cast<uint4*>(y + row * hidden);
#pragma unroll 4
    for (int v = t; v < nvec; v += group_threads) {
      float f[8], g[8];
      unpack(xs[v], f);
      unpack(w_smem[v], g);
      uint4 out;
      __nv_bfloat162* o = reinterpret_cast<__nv_bfloat162*>(&out);
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        o[i] = __floats2bfloat162_rn(f[2 * i] * r * g[2 * i], f[2 * i + 1] * r * g[2 * i + 1]);
      }
      yr[v] = out;
    }
    group_sync();  // every thread has read the slot (and the sums)
    if (leader) {
      normkit::cuda::fence_proxy_async_shared();  // (the reads before the copy's writes)
      fetch_row(x, row + int64_t(slots) * step, rows, row_bytes, hidden,
                ring + size_t(s) * row_bytes, my_bars + s);
    }
  }
  probe::note_end(span);
}

uint16_t to_bf16_bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return static_cast<uint16_t>((u + 0x7fff + ((u >> 16) & 1)) >> 16);
}
double from_bf16_bits(uint16_t b) {
  const uint32_t u = uint32_t(b) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

}  // namespace

int main() {
  probe::Probe p;
  cudaDeviceProp prop{};
  check(cudaGetDeviceProperties(&prop, 0), "properties");
  const double gbps = probe::CopyCeiling(p).gbps;
  std::printf("device: %s, %d SMs; copy %.1f GB/s (memcpy of 2 x 512 MiB, memset flush)\n",
              prop.name, p.sms, gbps);
  std::printf("timing: memset flush of 100 MiB, events around one call, median of 100\n\n");
  std::printf("%-12s %6s %6s %6s %7s %9s %9s %9s %7s %9s\n", "shape", "warps", "w/row", "slots",
              "smem KB", "floor us", "event us", "span us", "% copy", "max ulp");

  const int shapes[][2] = {{4096, 4096},  {8192, 2048},  {4096, 1024},  {8192, 4096},
                           {16384, 4096}, {4096, 12288}, {2048, 16384}, {8192, 8192}};
  const int smem_max = static_cast<int>(prop.sharedMemPerBlockOptin);
  check(cudaFuncSetAttribute(ring_fwd, cudaFuncAttributeMaxDynamicSharedMemorySize, smem_max),
        "smem attribute");
  std::mt19937 gen(7);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  for (const auto& shape : shapes) {
    const int64_t rows = shape[0];
    const int hidden = shape[1];
    const size_t n = size_t(rows) * hidden;
    const unsigned row_bytes = hidden * 2;
    std::vector<uint16_t> hx(n), hw(hidden);
    for (auto& v : hx) v = to_bf16_bits(normal(gen));
    for (auto& v : hw) v = to_bf16_bits(1.0f + 0.1f * normal(gen));
    __nv_bfloat16 *x, *w, *y;
    float* rstd;
    check(cudaMalloc(&x, n * 2), "x");
    check(cudaMalloc(&y, n * 2), "y");
    check(cudaMalloc(&w, hidden * 2), "w");
    check(cudaMalloc(&rstd, rows * 4), "rstd");
    check(cudaMemcpy(x, hx.data(), n * 2, cudaMemcpyHostToDevice), "x up");
    check(cudaMemcpy(w, hw.data(), hidden * 2, cudaMemcpyHostToDevice), "w up");
    const double bytes = 2.0 * n * 2 + hidden * 2;
    const double floor_us = bytes / (gbps * 1e3);
    // Layouts: as many ring rows as fit beside the weight, the barriers and the sums, over
    // groups of 1-8 warps per row (at most 15 groups: the named barriers).
    const int ring_rows =
        (smem_max - static_cast<int>(row_bytes) - 8 * 128) / static_cast<int>(row_bytes);
    const int layouts[][2] = {{8, 1}, {16, 2}, {32, 4}, {16, 4}, {32, 8}};
    for (const auto& layout : layouts) {
      const int warps = layout[0], warps_per_row = layout[1], groups = warps / warps_per_row;
      const int slots = ring_rows / groups;
      if (slots < 1 || groups > 15) continue;
      const size_t smem =
          size_t(row_bytes) * (1 + groups * slots) + 8 * (groups * slots + 1) + 4 * warps;
      check(cudaMemset(y, 0xff, n * 2), "poison y");
      // One trial launch: a layout the device refuses is reported and skipped.
      ring_fwd<<<p.sms, warps * 32, smem, p.stream>>>(x, w, y, rstd, rows, hidden, slots,
                                                      warps_per_row, 1e-6f, p.span);
      if (const cudaError_t e = cudaGetLastError(); e != cudaSuccess) {
        std::printf("%5lldx%-6d %6d %6d %6d %7zu   not launched: %s\n",
                    static_cast<long long>(rows), hidden, warps, warps_per_row, slots, smem / 1024,
                    cudaGetErrorString(e));
        continue;
      }
      const auto t = p.time([&](unsigned long long* span) {
        ring_fwd<<<p.sms, warps * 32, smem, p.stream>>>(x, w, y, rstd, rows, hidden, slots,
                                                        warps_per_row, 1e-6f, span);
      });
      check(cudaGetLastError(), "launch");
      check(cudaDeviceSynchronize(), "run");
      // Sampled rows against float64.
      std::vector<uint16_t> hy(n);
      check(cudaMemcpy(hy.data(), y, n * 2, cudaMemcpyDeviceToHost), "y down");
      double worst = 0.0;
      for (int64_t row = 0; row < rows; row += std::max<int64_t>(1, rows / 97)) {
        double ss = 0;
        for (int c = 0; c < hidden; ++c) {
          const double v = from_bf16_bits(hx[row * hidden + c]);
          ss += v * v;
        }
        const double r = 1.0 / std::sqrt(ss / hidden + 1e-6);
        for (int c = 0; c < hidden; ++c) {
          const double ref = from_bf16_bits(hx[row * hidden + c]) * r * from_bf16_bits(hw[c]);
          const double got = from_bf16_bits(hy[row * hidden + c]);
          const double ulp = std::ldexp(1.0, std::ilogb(std::fabs(ref) + 1e-30) - 7);
          worst = std::max(worst, std::fabs(got - ref) / ulp);
        }
      }
      std::printf("%5lldx%-6d %6d %6d %6d %7zu %9.2f %9.2f %9.2f %6.1f%% %9.2f\n",
                  static_cast<long long>(rows), hidden, warps, warps_per_row, slots, smem / 1024,
                  floor_us, t.first, t.second, 100.0 * floor_us / t.first, worst);
    }
    cudaFree(x);
    cudaFree(y);
    cudaFree(w);
    cudaFree(rstd);
  }
  return 0;
}
