// Benchmark support: give a buffer's L2 lines back the normal eviction priority.
//
// The kernels read their inputs with an evict-last L2 policy where that pays (read_policy.cuh).
// Lines kept at evict-last outlive a memset flush of the L2, which writes at normal priority:
// at 128 x 4096 the forward then read x from L2, not HBM, in the call after the flush (ncu,
// forty-first session). `normkit bench` demotes every input with this before each flush, so
// that the flush leaves nothing of them in L2, as for a peer that reads with no hint.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>

#include "cuda/cuda_backend.h"
#include "cuda/cuda_check.h"

namespace normkit::cuda {
namespace {

constexpr size_t kLineBytes = 128;  // (applypriority's only size)

__global__ void demote_lines_kernel(const char* base, size_t lines) {
  const size_t stride = static_cast<size_t>(gridDim.x) * blockDim.x;
  for (size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < lines;
       i += stride) {
    // Changes only the priority of a line that is in L2 (a line that is not stays out); the
    // data is untouched, dirty lines included.
    asm volatile("applypriority.global.L2::evict_normal [%0], 128;" ::"l"(base + i * kLineBytes)
                 : "memory");
  }
}

}  // namespace

void demote_l2_lines(const void* ptr, size_t bytes, void* stream) {
  if (!ptr || bytes == 0) return;
  // From the line that holds the first byte to the one that holds the last.
  const auto first = reinterpret_cast<uintptr_t>(ptr) & ~uintptr_t{kLineBytes - 1};
  const auto end = reinterpret_cast<uintptr_t>(ptr) + bytes;
  const size_t lines = (end - first + kLineBytes - 1) / kLineBytes;
  constexpr int kThreads = 256;
  const size_t blocks = std::min<size_t>((lines + kThreads - 1) / kThreads, 4096);
  demote_lines_kernel<<<static_cast<unsigned>(blocks), kThreads, 0,
                        static_cast<cudaStream_t>(stream)>>>(reinterpret_cast<const char*>(first),
                                                             lines);
  check_cuda(cudaGetLastError(), "demote_l2_lines launch");
}

}  // namespace normkit::cuda
