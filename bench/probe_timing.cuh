// The timing harness of the bench probes (method_probe.cu, ring_probe.cu, launch_probe.cu,
// rows_probe.cu): what `normkit bench` does around a call (tools/bench_cuda.cpp: an L2 flush,
// CUDA events around one call, the median of 100, calls enqueued back to back), with a read
// flush as the alternative and each call's own span (first CTA start to last CTA end, by
// %globaltimer) for kernels that note it.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <utility>
#include <vector>

namespace probe {

inline void check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) {
    std::fprintf(stderr, "probe: %s: %s\n", what, cudaGetErrorString(e));
    std::exit(1);
  }
}

__device__ __forceinline__ uint64_t global_ns() {
  uint64_t t;
  asm volatile("mov.u64 %0, %globaltimer;" : "=l"(t));
  return t;
}

// span[0] = min start, span[1] = max end (ns); reset before each call.
__device__ __forceinline__ void note_start(unsigned long long* span) {
  if (threadIdx.x == 0) atomicMin(&span[0], static_cast<unsigned long long>(global_ns()));
}
__device__ __forceinline__ void note_end(unsigned long long* span) {
  __syncthreads();
  if (threadIdx.x == 0) atomicMax(&span[1], static_cast<unsigned long long>(global_ns()));
}

__global__ void read_all(const uint4* __restrict__ src, size_t n, unsigned* sink) {
  unsigned acc = 0;
  for (size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += size_t(gridDim.x) * blockDim.x) {
    const uint4 v = __ldcg(src + i);
    acc ^= v.x ^ v.y ^ v.z ^ v.w;
  }
  if (acc == 0x9e3779b9u) *sink = acc;  // (never, in practice: keeps the loads)
}

__global__ void empty_kernel() {}

inline double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

struct Probe {
  static constexpr int kMaxReps = 100;  // span cells for this many calls
  cudaStream_t stream{};
  int sms = 0;
  void* flush = nullptr;
  size_t flush_bytes = size_t{100} << 20;
  unsigned* sink = nullptr;
  unsigned long long* span = nullptr;
  bool read_flush = false;

  Probe() {
    cudaDeviceProp prop{};
    check(cudaGetDeviceProperties(&prop, 0), "properties");
    sms = prop.multiProcessorCount;
    check(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "stream");
    check(cudaMalloc(&flush, flush_bytes), "flush buffer");
    check(cudaMalloc(&sink, sizeof(unsigned)), "sink");
    check(cudaMalloc(&span, 2 * kMaxReps * sizeof(unsigned long long)), "span");
  }

  void flush_l2() {
    if (read_flush) {
      read_all<<<sms * 4, 512, 0, stream>>>(static_cast<const uint4*>(flush), flush_bytes / 16,
                                            sink);
    } else {
      check(cudaMemsetAsync(flush, 0, flush_bytes, stream), "flush memset");
    }
  }

  // Median event time (us) and median span (us; 0 where the call notes none). Calls are
  // enqueued back to back as the bench's are; each gets its own span cells.
  std::pair<double, double> time(const std::function<void(unsigned long long*)>& call,
                                 int reps = kMaxReps) {
    reps = std::min(reps, kMaxReps);
    for (int i = 0; i < 20; ++i) {
      flush_l2();
      call(span);
    }
    check(cudaStreamSynchronize(stream), "warm-up");
    std::vector<unsigned long long> init(2 * reps);
    for (int i = 0; i < reps; ++i) init[2 * i] = ~0ull, init[2 * i + 1] = 0;
    check(cudaMemcpy(span, init.data(), init.size() * sizeof(init[0]), cudaMemcpyHostToDevice),
          "span reset");
    std::vector<cudaEvent_t> a(reps), b(reps);
    for (int i = 0; i < reps; ++i) {
      check(cudaEventCreate(&a[i]), "event");
      check(cudaEventCreate(&b[i]), "event");
    }
    for (int i = 0; i < reps; ++i) {
      flush_l2();
      check(cudaEventRecord(a[i], stream), "record");
      call(span + 2 * i);
      check(cudaEventRecord(b[i], stream), "record");
    }
    check(cudaStreamSynchronize(stream), "timed calls");
    std::vector<unsigned long long> got(2 * reps);
    check(cudaMemcpy(got.data(), span, got.size() * sizeof(got[0]), cudaMemcpyDeviceToHost),
          "span read");
    std::vector<double> us(reps), spans(reps);
    for (int i = 0; i < reps; ++i) {
      float ms = 0;
      check(cudaEventElapsedTime(&ms, a[i], b[i]), "elapsed");
      us[i] = ms * 1000.0;
      const unsigned long long s0 = got[2 * i], s1 = got[2 * i + 1];
      spans[i] = s0 != ~0ull && s1 > s0 ? (s1 - s0) / 1000.0 : 0.0;
      cudaEventDestroy(a[i]);
      cudaEventDestroy(b[i]);
    }
    return {median(us), median(spans)};
  }
};

// The copy ceiling as `normkit bench` measures it: a device-to-device cudaMemcpyAsync of
// 512 MiB each way after the memset flush, median of 20; GB/s of bytes read + written. The
// buffers stay allocated for the caller's own copies (src filled with 1s, dst with 0s).
struct CopyCeiling {
  size_t half = size_t{512} << 20;
  void* src = nullptr;
  void* dst = nullptr;
  double gbps = 0.0;

  explicit CopyCeiling(Probe& p) {
    check(cudaMalloc(&src, half), "copy source");
    check(cudaMalloc(&dst, half), "copy destination");
    check(cudaMemset(src, 1, half), "copy source init");
    check(cudaMemset(dst, 0, half), "copy destination init");
    const bool read_flush = p.read_flush;
    p.read_flush = false;
    gbps = 2.0 * half / (time_memcpy(p, half, 20) * 1e-6) / 1e9;
    p.read_flush = read_flush;
  }
  ~CopyCeiling() {
    cudaFree(src);
    cudaFree(dst);
  }
  CopyCeiling(const CopyCeiling&) = delete;
  CopyCeiling& operator=(const CopyCeiling&) = delete;

  // Median us of a cudaMemcpyAsync of `bytes` (<= half) from src to dst, timed by p.
  double time_memcpy(Probe& p, size_t bytes, int reps = Probe::kMaxReps) const {
    const auto copy = [&](unsigned long long*) {
      check(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, p.stream), "copy");
    };
    return p.time(copy, reps).first;
  }
};

}  // namespace probe
