#include "array_view.h"

#include <string>

namespace normkit_py {

namespace {

std::string dtype_string(nb::dlpack::dtype dtype) {
  static const char* const codes[] = {"int",    "uint",    "float", "opaque",
                                      "bfloat", "complex", "bool"};
  const std::string code = dtype.code < 7 ? codes[dtype.code] : "code" + std::to_string(dtype.code);
  std::string s = code + std::to_string(dtype.bits);
  if (dtype.lanes != 1) s += "x" + std::to_string(dtype.lanes);
  return s;
}

Placement placement_of(int device_type, int device_id, const char* name) {
  switch (device_type) {
    case nb::device::cpu::value:
    case nb::device::cuda_host::value:  // pinned host memory: still host memory
      return Placement{NK_BACKEND_CPU, 0};
    case nb::device::cuda::value:
    case nb::device::cuda_managed::value:
      return Placement{NK_BACKEND_CUDA, device_id};
    default:
      throw nb::value_error((std::string(name) + " is on DLPack device type " +
                             std::to_string(device_type) + "; normkit takes CPU or CUDA memory")
                                .c_str());
  }
}

const char* backend_name(nk_backend b) { return b == NK_BACKEND_CUDA ? "cuda" : "cpu"; }

// Shape, stride and placement of a [rows, hidden] matrix; the dtype is the caller's to set.
MatrixView matrix_layout(const ArrayFacts& a, const char* name) {
  if (a.ndim != 2) {
    throw nb::value_error((std::string(name) + " has " + std::to_string(a.ndim) +
                           " dimensions; expected a [rows, hidden] matrix")
                              .c_str());
  }
  MatrixView m;
  m.data = a.data;
  m.rows = a.shape[0];
  m.hidden = a.shape[1];
  m.place = placement_of(a.device_type, a.device_id, name);
  if (m.hidden > 1 && a.strides[1] != 1) {
    throw nb::value_error((std::string(name) + " has column stride " +
                           std::to_string(a.strides[1]) +
                           "; normkit needs contiguous columns (stride 1)")
                              .c_str());
  }
  // The C API checks row_stride >= hidden and reports it with the value.
  m.row_stride = m.rows == 1 ? 0 : a.strides[0];
  return m;
}

}  // namespace

nk_dtype to_nk_dtype(nb::dlpack::dtype dtype, const char* name) {
  if (dtype == nb::dtype<float>()) return NK_FLOAT32;
  if (dtype.lanes == 1 && dtype.bits == 16) {
    if (dtype.code == static_cast<uint8_t>(nb::dlpack::dtype_code::Float)) return NK_FLOAT16;
    if (dtype.code == static_cast<uint8_t>(nb::dlpack::dtype_code::Bfloat)) return NK_BFLOAT16;
  }
  throw nb::type_error((std::string(name) + " has dtype " + dtype_string(dtype) +
                        "; normkit takes float32, float16 or bfloat16")
                           .c_str());
}

MatrixView matrix_view(const ArrayFacts& a, const char* name) {
  MatrixView m = matrix_layout(a, name);
  m.dtype = to_nk_dtype(a.dtype, name);
  return m;
}

MatrixView code_matrix_view(const ArrayFacts& a, const char* name, nk_dtype dtype) {
  MatrixView m = matrix_layout(a, name);
  if (a.itemsize != nk_dtype_size(dtype)) {
    throw nb::type_error((std::string(name) + " has dtype " + dtype_string(a.dtype) + "; " +
                          nk_dtype_name(dtype) + " codes need " +
                          std::to_string(nk_dtype_size(dtype)) + "-byte elements")
                             .c_str());
  }
  m.dtype = dtype;
  return m;
}

VectorView vector_view(const ArrayFacts& a, const char* name, int64_t expected_size) {
  if (a.ndim != 1) {
    throw nb::value_error(
        (std::string(name) + " has " + std::to_string(a.ndim) + " dimensions; expected a 1-D array")
            .c_str());
  }
  VectorView v;
  v.data = a.data;
  v.dtype = to_nk_dtype(a.dtype, name);
  v.size = a.shape[0];
  v.place = placement_of(a.device_type, a.device_id, name);
  if (expected_size >= 0 && v.size != expected_size) {
    throw nb::value_error((std::string(name) + " has " + std::to_string(v.size) +
                           " elements; expected " + std::to_string(expected_size))
                              .c_str());
  }
  if (v.size > 1 && a.strides[0] != 1) {
    throw nb::value_error((std::string(name) + " has stride " + std::to_string(a.strides[0]) +
                           "; normkit needs it contiguous")
                              .c_str());
  }
  return v;
}

VectorView bytes_view(const ArrayFacts& a, const char* name, size_t* bytes) {
  VectorView v;
  v.data = a.data;
  v.place = placement_of(a.device_type, a.device_id, name);
  // Contiguous (row-major) check, ignoring dimensions of size 1.
  int64_t expected = 1;
  int64_t count = 1;
  for (size_t i = a.ndim; i-- > 0;) {
    if (a.shape[i] != 1 && a.strides[i] != expected) {
      throw nb::value_error((std::string(name) + " must be contiguous").c_str());
    }
    expected *= a.shape[i];
    count *= a.shape[i];
  }
  v.size = count;
  *bytes = static_cast<size_t>(count) * a.itemsize;
  return v;
}

void require_same_placement(const Placement& x, const Placement& other, const char* name) {
  if (x.backend != other.backend ||
      (x.backend == NK_BACKEND_CUDA && x.device_id != other.device_id)) {
    throw nb::value_error((std::string(name) + " is on " + backend_name(other.backend) + ":" +
                           std::to_string(other.device_id) + " but x is on " +
                           backend_name(x.backend) + ":" + std::to_string(x.device_id))
                              .c_str());
  }
}

void require_shape(const MatrixView& m, int64_t rows, int64_t hidden, const char* name) {
  if (m.rows != rows || m.hidden != hidden) {
    throw nb::value_error((std::string(name) + " has shape [" + std::to_string(m.rows) + ", " +
                           std::to_string(m.hidden) + "]; expected [" + std::to_string(rows) +
                           ", " + std::to_string(hidden) + "]")
                              .c_str());
  }
}

void require_dtype(nk_dtype actual, nk_dtype expected, const char* name) {
  if (actual != expected) {
    throw nb::type_error((std::string(name) + " has dtype " + nk_dtype_name(actual) +
                          "; expected " + nk_dtype_name(expected))
                             .c_str());
  }
}

}  // namespace normkit_py
