// Shared-memory stages of the pipelined kernels: per row group, kPipelineStages stages, each
// holding one row (cols elements) of up to three operands, one after the other.
#pragma once

#include <cstdint>

#include "cuda/launch_config.h"

namespace normkit::cuda {

struct StageRing {
  unsigned char* base;
  int64_t stage_bytes;
  int64_t offset[3];

  // element_bytes[j]: element size of operand j, 0 when the kernel does not stage it. Group
  // threadIdx.y's stages follow those of the groups before it.
  __device__ __forceinline__ StageRing(unsigned char* block_smem, int64_t cols, int64_t bytes0,
                                       int64_t bytes1, int64_t bytes2) {
    offset[0] = 0;
    offset[1] = cols * bytes0;
    offset[2] = offset[1] + cols * bytes1;
    stage_bytes = offset[2] + cols * bytes2;
    base = block_smem + threadIdx.y * kPipelineStages * stage_bytes;
  }
  template <typename T>
  __device__ __forceinline__ T* at(int stage, int operand) const {
    return reinterpret_cast<T*>(base + stage * stage_bytes + offset[operand]);
  }
};

}  // namespace normkit::cuda
