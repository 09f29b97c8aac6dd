// Translation of DLPack arrays (nb::ndarray) into what the C API takes: a pointer, an nk_dtype,
// a [rows, hidden] shape with a row stride in elements, and the backend the memory belongs to.
// Nothing is copied; an array whose layout the C API cannot describe is refused with a
// ValueError that names it (the Python layer makes such arrays contiguous before calling).
#pragma once

#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>

#include <cstdint>

#include "normkit/normkit.h"

namespace normkit_py {

namespace nb = nanobind;

using InArray = nb::ndarray<nb::ro>;  // read by the call
using OutArray = nb::ndarray<>;       // written by the call

// Where an array's memory lives, as the C API sees it.
struct Placement {
  nk_backend backend = NK_BACKEND_CPU;
  int32_t device_id = 0;
};

// A [rows, hidden] matrix whose columns are contiguous. row_stride is 0 ("contiguous") when
// rows == 1, where the stride never matters and frameworks may report anything.
struct MatrixView {
  void* data = nullptr;
  nk_dtype dtype = NK_FLOAT32;
  int64_t rows = 0;
  int64_t hidden = 0;
  int64_t row_stride = 0;
  Placement place;
};

// A contiguous 1-D array.
struct VectorView {
  void* data = nullptr;
  nk_dtype dtype = NK_FLOAT32;
  int64_t size = 0;
  Placement place;
};

// Raw facts of an ndarray, so one function serves read-only and writable arrays.
struct ArrayFacts {
  void* data;
  nb::dlpack::dtype dtype;
  size_t ndim;
  const int64_t* shape;
  const int64_t* strides;
  int device_type;
  int device_id;
  size_t itemsize;
};

template <typename Array>
ArrayFacts facts_of(const Array& a) {
  return ArrayFacts{const_cast<void*>(static_cast<const void*>(a.data())),
                    a.dtype(),
                    a.ndim(),
                    a.shape_ptr(),
                    a.stride_ptr(),
                    a.device_type(),
                    a.device_id(),
                    a.itemsize()};
}

// float32 / float16 / bfloat16; TypeError naming the array otherwise.
nk_dtype to_nk_dtype(nb::dlpack::dtype dtype, const char* name);

// The array must be 2-D with contiguous columns.
MatrixView matrix_view(const ArrayFacts& a, const char* name);

// A matrix of 8-bit codes (quantized outputs): any dtype of dtype's element size, since
// frameworks differ in which 8-bit dtypes DLPack carries; `dtype` says what the bytes mean.
MatrixView code_matrix_view(const ArrayFacts& a, const char* name, nk_dtype dtype);

// The array must be 1-D and contiguous; `expected_size` < 0 skips the size check.
VectorView vector_view(const ArrayFacts& a, const char* name, int64_t expected_size);

// A contiguous array of any dtype and rank (the backward's workspace): its address and bytes.
VectorView bytes_view(const ArrayFacts& a, const char* name, size_t* bytes);

// ValueError unless `other` lives where `x` lives (same backend and device).
void require_same_placement(const Placement& x, const Placement& other, const char* name);

// ValueError unless a matrix has the shape [rows, hidden].
void require_shape(const MatrixView& m, int64_t rows, int64_t hidden, const char* name);

// TypeError unless dtypes agree.
void require_dtype(nk_dtype actual, nk_dtype expected, const char* name);

}  // namespace normkit_py
