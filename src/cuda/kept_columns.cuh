// A [hidden] parameter vector (weight or bias) for the columns one thread of a persistent
// kernel owns, read for every row the thread handles.
#pragma once

#include "cuda/element.cuh"

namespace normkit::cuda {

// IMAX vectors of VEC columns each. Up to 2 vectors are kept as float32 in registers. With
// more, 32 more registers would spill in the pipelined kernels, and a packed copy (converted
// at each read) measured slower than re-reading the vector per row, which hits L1: so then
// get() re-reads it. Reads add `offset`: 1 gives the zero-centered weight 1 + w, and a missing
// vector (null) reads as `offset` alone.
template <typename T, int VEC, int IMAX>
struct KeptColumns {
  static constexpr bool kKept = IMAX <= 2;
  float kept[kKept ? IMAX : 1][VEC];
  const T* vector;
  const int64_t* col;
  float offset;

  // col_[i]: the first column of vector i, a multiple of VEC; active[i]: whether it exists.
  // col_ must outlive this object (it is read again when the vector is not kept).
  __device__ __forceinline__ void load(const void* vector_, float offset_, const int64_t* col_,
                                       const bool* active) {
    vector = static_cast<const T*>(vector_);
    col = col_;
    offset = offset_;
    if constexpr (kKept) {
#pragma unroll
      for (int i = 0; i < IMAX; ++i) {
        const bool present = vector && active[i];
        if (present) load_readonly_upto<T, VEC>(vector + col[i], VEC, kept[i]);
#pragma unroll
        for (int k = 0; k < VEC; ++k) kept[i][k] = (present ? kept[i][k] : 0.0f) + offset;
      }
    }
  }

  __device__ __forceinline__ void get(int i, float* out) const {
    if constexpr (kKept) {
#pragma unroll
      for (int k = 0; k < VEC; ++k) out[k] = kept[i][k];
    } else {
      if (vector) {
        load_readonly_upto<T, VEC>(vector + col[i], VEC, out);
      } else {
#pragma unroll
        for (int k = 0; k < VEC; ++k) out[k] = 0.0f;
      }
#pragma unroll
      for (int k = 0; k < VEC; ++k) out[k] += offset;
    }
  }
};

// The weight's offset: 1 for the zero-centered weight (1 + w) and for no weight (all ones).
template <typename Params>
__device__ __forceinline__ float weight_offset(const Params& p) {
  return !p.weight || p.zero_centered ? 1.0f : 0.0f;
}

}  // namespace normkit::cuda
