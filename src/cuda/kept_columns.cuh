// A [hidden] parameter vector (weight or bias) for the columns one thread of a persistent
// kernel owns, read for every row the thread handles.
#pragma once

#include "cuda/element.cuh"

namespace normkit::cuda {

// IMAX vectors of VEC columns each. Up to 2 vectors are kept as float32 in registers. With
// more, 32 more registers would spill in the pipelined kernels, and a packed copy (converted
// at each read) measured slower than re-reading the vector per row, which hits L1: so then
// get() re-reads it (where the kernel's shared memory leaves L1 too small for that,
// SharedColumns below holds it instead). Reads add `offset`: 1 gives the zero-centered weight
// 1 + w, and a missing vector (null) reads as `offset` alone.
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

// The CTA's chunk of a [hidden] parameter vector in shared memory, in its own type at the
// thread's stage columns, loaded once: for the pipelined clusters of more than 2 vectors per
// thread, whose stages leave L1 too small to hold the chunk, so that KeptColumns' re-reads of
// it (two per row) went to L2. Each thread writes and reads only its own columns (no barrier).
// get() as KeptColumns': the element plus `offset`, or `offset` alone without a vector.
template <typename T, int VEC, int IMAX>
struct SharedColumns {
  T* chunk;
  const int* stage_col;
  float offset;
  bool present;

  // chunk_: shared memory for the CTA's columns; col_[i] / stage_col_[i]: vector i's first
  // column in the row / in the chunk (stage_col_ must outlive this object); active[i]: whether
  // it exists (whole vectors: the pipelined plans need hidden % VEC == 0).
  __device__ __forceinline__ void load(T* chunk_, const void* vector, float offset_,
                                       const int64_t* col_, const int* stage_col_,
                                       const bool* active) {
    chunk = chunk_;
    stage_col = stage_col_;
    offset = offset_;
    present = vector != nullptr;
    if (!present) return;
#pragma unroll
    for (int i = 0; i < IMAX; ++i) {
      if (!active[i]) continue;
      Lanes<T, VEC> lanes;
      lanes.load_readonly(static_cast<const T*>(vector) + col_[i]);
      T* to = chunk + stage_col[i];
      if constexpr (Lanes<T, VEC>::kBytes >= 16) {
#pragma unroll
        for (int j = 0; j < Lanes<T, VEC>::kCount / 4; ++j) {
          reinterpret_cast<uint4*>(to)[j] =
              make_uint4(lanes.lane[4 * j], lanes.lane[4 * j + 1], lanes.lane[4 * j + 2],
                         lanes.lane[4 * j + 3]);
        }
      } else {
#pragma unroll
        for (int k = 0; k < VEC; ++k) to[k] = lanes.get(k);
      }
    }
  }

  __device__ __forceinline__ void get(int i, float* out) const {
    if (present) {
      Lanes<T, VEC> lanes;
      lanes.load(chunk + stage_col[i]);
#pragma unroll
      for (int k = 0; k < VEC; ++k) out[k] = lanes.get_float(k) + offset;
    } else {
#pragma unroll
      for (int k = 0; k < VEC; ++k) out[k] = offset;
    }
  }
};

// The weight's offset: 1 for the zero-centered weight (1 + w) and for no weight (all ones).
template <typename Params>
__device__ __forceinline__ float weight_offset(const Params& p) {
  return !p.weight || p.zero_centered ? 1.0f : 0.0f;
}

}  // namespace normkit::cuda
