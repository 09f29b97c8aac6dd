// Turns CUDA runtime failures into normkit::Error(NK_ERROR_CUDA) naming the failed operation.
#pragma once

#include <cuda_runtime.h>

#include <string>

#include "common/error.h"

namespace normkit::cuda {

inline void check_cuda(cudaError_t err, const char* what, const std::string& context = "") {
  if (err != cudaSuccess) {
    throw Error(NK_ERROR_CUDA, std::string(what) + " failed: " + cudaGetErrorName(err) + " (" +
                                   cudaGetErrorString(err) + ")" +
                                   (context.empty() ? "" : "; " + context));
  }
}

}  // namespace normkit::cuda
