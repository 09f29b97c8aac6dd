// Test support: backends (with skips for CUDA), memory on either backend, seeded random inputs,
// host images of strided matrices, poisoning and coverage checks.
#pragma once

#include <gtest/gtest.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <random>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "common/dtype_host.h"
#include "normkit/normkit.h"
#include "reference/reference.h"

namespace nktest {

// ---- backends ----

const char* backend_label(nk_backend backend);  // "Cpu" / "Cuda", for test names

// Shape parameters of the parameterized tests, and their test names ("Cuda_rows29_hidden17389").
using RowsHidden = std::pair<int64_t, int64_t>;
std::string shape_test_name(nk_backend backend, int64_t rows, int64_t hidden);
struct ShapeTestName {
  std::string operator()(
      const ::testing::TestParamInfo<std::tuple<nk_backend, int64_t, int64_t>>& info) const {
    return shape_test_name(std::get<0>(info.param), std::get<1>(info.param),
                           std::get<2>(info.param));
  }
  std::string operator()(
      const ::testing::TestParamInfo<std::tuple<nk_backend, RowsHidden>>& info) const {
    const RowsHidden shape = std::get<1>(info.param);
    return shape_test_name(std::get<0>(info.param), shape.first, shape.second);
  }
};

// "" when `backend` can run here; otherwise why not (for the skip message).
std::string backend_unavailable_reason(nk_backend backend);

// CUDA tests on a machine (or build) without a device are skipped, never passed.
#define NK_SKIP_IF_UNAVAILABLE(backend)                                          \
  do {                                                                           \
    const std::string nk_why_ = ::nktest::backend_unavailable_reason(backend);   \
    if (!nk_why_.empty()) GTEST_SKIP() << "no CUDA device: " << nk_why_;         \
  } while (0)

// Shapes of more than 4Mi elements on the CPU backend are skipped (with why): its float64
// reference makes them slow, and `covered_by` (a test name) covers that backend.
#define NK_SKIP_IF_SLOW_ON_CPU(backend, rows, hidden, covered_by)                              \
  do {                                                                                       \
    if ((backend) == NK_BACKEND_CPU && (rows) * (hidden) > (int64_t{1} << 22)) {             \
      GTEST_SKIP() << "slow on CPU (" << (rows) * (hidden) << " elements); the CPU backend " \
                   << "is covered by " << (covered_by);                                      \
    }                                                                                        \
  } while (0)

// Waits for the backend's queued work and reports an asynchronous failure as a test failure.
void synchronize(nk_backend backend);

// Both backends, for INSTANTIATE_TEST_SUITE_P.
std::vector<nk_backend> all_backends();

// ---- memory ----

// Bytes on a backend: host memory for the CPU, device memory for CUDA. Move-only.
class Buffer {
 public:
  Buffer() = default;
  // Uninitialized (host: aligned to 256 bytes, like cudaMalloc).
  Buffer(nk_backend backend, size_t bytes);
  // Zero-filled on the host via calloc, so untouched pages of a huge buffer cost nothing;
  // uninitialized on a device.
  static Buffer lazy(nk_backend backend, size_t bytes);
  ~Buffer();
  Buffer(Buffer&& other) noexcept;
  Buffer& operator=(Buffer&& other) noexcept;
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;

  char* data() const { return static_cast<char*>(ptr_); }
  size_t size() const { return bytes_; }
  nk_backend backend() const { return backend_; }

  void upload(const void* src, size_t bytes, size_t offset = 0);
  void download(void* dst, size_t bytes, size_t offset = 0) const;
  void upload(const std::vector<uint8_t>& host) { upload(host.data(), host.size()); }
  std::vector<uint8_t> to_host() const;

 private:
  void release();
  nk_backend backend_ = NK_BACKEND_CPU;
  void* ptr_ = nullptr;
  size_t bytes_ = 0;
  bool host_calloc_ = false;
};

// ---- random numbers ----

// A seeded generator. Seeds are fresh per test unless NK_TEST_SEED is set; the seed is printed
// (NK_SEED_TRACE) with every failure so a failing run can be repeated.
class Rng {
 public:
  Rng();
  uint64_t seed() const { return seed_; }
  double normal() { return normal_(gen_); }
  double uniform(double lo, double hi) { return std::uniform_real_distribution<double>(lo, hi)(gen_); }
  int64_t below(int64_t n) { return static_cast<int64_t>(gen_() % static_cast<uint64_t>(n)); }

 private:
  uint64_t seed_;
  std::mt19937_64 gen_;
  std::normal_distribution<double> normal_{0.0, 1.0};
};

std::string seed_message(const Rng& rng);
#define NK_SEED_TRACE(rng) SCOPED_TRACE(::nktest::seed_message(rng))

// ---- host images of strided tensors ----

// A [rows, cols] matrix of `dtype` with `stride` elements per row, starting `offset` elements
// into its allocation and followed by kTail spare elements. Everything that is not an element
// (offset, row padding, tail) is "padding": it holds the poison pattern and must never change.
// A vector is a matrix with one row.
struct Matrix {
  static constexpr int64_t kTail = 8;

  Matrix() = default;
  Matrix(nk_dtype dtype, int64_t rows, int64_t cols, int64_t stride = 0, int64_t offset = 0);

  nk_dtype dtype = NK_FLOAT32;
  int64_t rows = 0, cols = 0, stride = 0, offset = 0;
  std::vector<uint8_t> bytes;  // the whole allocation, poisoned at construction

  size_t element_size() const { return normkit::host_dtype_size(dtype); }
  int64_t index(int64_t r, int64_t c) const { return offset + r * stride + c; }
  float get(int64_t r, int64_t c) const {
    return normkit::load_as_float(bytes.data(), dtype, index(r, c));
  }
  void set(int64_t r, int64_t c, float v) {
    normkit::store_from_float(bytes.data(), dtype, index(r, c), v);
  }
  const void* first() const { return bytes.data() + offset * element_size(); }
  void* first() { return bytes.data() + offset * element_size(); }
  std::vector<double> dense() const;  // the elements, row-major, as doubles
};

// The NaN bit pattern outputs are poisoned with (a quiet NaN with a payload, per dtype).
void poison(std::vector<uint8_t>& bytes, nk_dtype dtype);

// Fills every element with mean + sd * N(0,1) rounded to the dtype; an element that would be
// zero is redrawn (inputs are never zero).
void fill_normal(Matrix& m, Rng& rng, double mean, double sd);
// As fill_normal with mean 0 and sd `scale`, each row scaled by its own factor in [1/4, 4] so
// rows have different rstd.
void fill_rows_of_varied_scale(Matrix& m, Rng& rng, double scale = 1.0);

// A Matrix mirrored on a backend: the host image (before the call), and the backend copy.
struct Tensor {
  Matrix host;
  Buffer buffer;
  Tensor() = default;
  Tensor(nk_backend backend, Matrix m);  // uploads m
  void* ptr() const { return buffer.data() + host.offset * host.element_size(); }
  std::vector<uint8_t> fetch() const { return buffer.to_host(); }
};

// Stride to pass in the args: 0 (contiguous) when the matrix is dense and `use_zero` is set.
int64_t stride_arg(const Matrix& m, bool use_zero);

// Checks that `after` (the allocation after a call) differs from `before` only at element
// positions: padding, offsets and tails were not written. `what` names the tensor.
void expect_padding_untouched(const Matrix& before, const std::vector<uint8_t>& after,
                              const std::string& what);

// Compares the elements of `after` (an allocation laid out like `layout`) with `expected`
// (`allowance`: see normkit::ref::compare).
normkit::ref::Comparison compare_matrix(const Matrix& layout, const std::vector<uint8_t>& after,
                                        const std::vector<double>& expected, double tolerance,
                                        const std::vector<double>* allowance = nullptr);

// EXPECTs that a comparison passed, naming the tensor.
void expect_close(const normkit::ref::Comparison& c, const std::string& what);

// All nine (dtype, dtype) pairs and 27 triples, in a fixed order.
const std::vector<nk_dtype>& all_dtypes();
std::string dtype_label(nk_dtype dtype);  // "f32", "f16", "bf16", "e4m3", "e5m2", "i8", "e8m0"

// The lower precision of two dtypes (for tolerance_for's `in`).
nk_dtype lowest_precision(nk_dtype a, nk_dtype b);

// count(begin, end, &example) over all 2^32 float32 bit patterns, on 2 threads (halves of the
// patterns); expects every half's count to be 0, naming the half's first mismatch (`example`).
using PatternMismatchCount = std::function<int64_t(uint64_t begin, uint64_t end, uint32_t* example)>;
void expect_no_mismatch_over_every_float32(const PatternMismatchCount& count);

// expect_no_mismatch_over_every_float32 for a whole-array float32 -> 16-bit encoding: every
// pattern's encode bits against oracle's, 65536 patterns per encode call.
using Float32Encode = std::function<void(const float* in, uint16_t* out, int64_t n)>;
void expect_every_float32_encodes_as(const Float32Encode& encode, uint16_t (*oracle)(float));

}  // namespace nktest
