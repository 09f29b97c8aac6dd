#include "support.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <new>
#include <stdexcept>
#include <thread>
#include <utility>

#ifdef NK_WITH_CUDA
#include <cuda_runtime.h>
#endif

namespace nktest {

// ---- backends ----

const char* backend_label(nk_backend backend) {
  return backend == NK_BACKEND_CUDA ? "Cuda" : "Cpu";
}

std::string shape_test_name(nk_backend backend, int64_t rows, int64_t hidden) {
  return std::string(backend_label(backend)) + "_rows" + std::to_string(rows) + "_hidden" +
         std::to_string(hidden);
}

std::string backend_unavailable_reason(nk_backend backend) {
  if (backend == NK_BACKEND_CPU) return "";
  if (!nk_has_cuda_build()) return "this build has no CUDA backend (NK_WITH_CUDA off)";
  if (nk_cuda_device_count() == 0) return "nk_cuda_device_count() == 0";
  return "";
}

std::vector<nk_backend> all_backends() { return {NK_BACKEND_CPU, NK_BACKEND_CUDA}; }

#ifdef NK_WITH_CUDA
namespace {
void check_cuda(cudaError_t status, const char* what) {
  if (status != cudaSuccess) {
    throw std::runtime_error(std::string(what) + " failed: " + cudaGetErrorString(status));
  }
}
}  // namespace
#endif

void synchronize(nk_backend backend) {
  if (backend != NK_BACKEND_CUDA) return;
#ifdef NK_WITH_CUDA
  const cudaError_t status = cudaDeviceSynchronize();
  EXPECT_EQ(status, cudaSuccess) << "cudaDeviceSynchronize: " << cudaGetErrorString(status);
#endif
}

// ---- memory ----

Buffer::Buffer(nk_backend backend, size_t bytes) : backend_(backend), bytes_(bytes) {
  const size_t n = bytes == 0 ? 1 : bytes;
  if (backend == NK_BACKEND_CPU) {
    ptr_ = ::operator new(n, std::align_val_t{256});
    return;
  }
#ifdef NK_WITH_CUDA
  check_cuda(cudaMalloc(&ptr_, n), "cudaMalloc");
#else
  throw std::runtime_error("Buffer: no CUDA in this build");
#endif
}

Buffer Buffer::lazy(nk_backend backend, size_t bytes) {
  if (backend != NK_BACKEND_CPU) return Buffer(backend, bytes);
  Buffer b;
  b.backend_ = backend;
  b.bytes_ = bytes;
  b.ptr_ = std::calloc(bytes == 0 ? 1 : bytes, 1);
  if (!b.ptr_) throw std::bad_alloc();
  b.host_calloc_ = true;
  return b;
}

Buffer::~Buffer() { release(); }

Buffer::Buffer(Buffer&& o) noexcept { *this = std::move(o); }

Buffer& Buffer::operator=(Buffer&& o) noexcept {
  if (this != &o) {
    release();
    backend_ = o.backend_;
    ptr_ = std::exchange(o.ptr_, nullptr);
    bytes_ = std::exchange(o.bytes_, 0);
    host_calloc_ = o.host_calloc_;
  }
  return *this;
}

void Buffer::release() {
  if (!ptr_) return;
  if (backend_ == NK_BACKEND_CPU) {
    if (host_calloc_) {
      std::free(ptr_);
    } else {
      ::operator delete(ptr_, std::align_val_t{256});
    }
  } else {
#ifdef NK_WITH_CUDA
    cudaFree(ptr_);
#endif
  }
  ptr_ = nullptr;
}

void Buffer::upload(const void* src, size_t bytes, size_t offset) {
  if (offset + bytes > bytes_) throw std::out_of_range("Buffer::upload past the end");
  if (bytes == 0) return;
  if (backend_ == NK_BACKEND_CPU) {
    std::memcpy(data() + offset, src, bytes);
    return;
  }
#ifdef NK_WITH_CUDA
  check_cuda(cudaMemcpy(data() + offset, src, bytes, cudaMemcpyHostToDevice), "cudaMemcpy H2D");
#endif
}

void Buffer::download(void* dst, size_t bytes, size_t offset) const {
  if (offset + bytes > bytes_) throw std::out_of_range("Buffer::download past the end");
  if (bytes == 0) return;
  if (backend_ == NK_BACKEND_CPU) {
    std::memcpy(dst, data() + offset, bytes);
    return;
  }
#ifdef NK_WITH_CUDA
  check_cuda(cudaMemcpy(dst, data() + offset, bytes, cudaMemcpyDeviceToHost), "cudaMemcpy D2H");
#endif
}

std::vector<uint8_t> Buffer::to_host() const {
  std::vector<uint8_t> out(bytes_);
  download(out.data(), bytes_);
  return out;
}

// ---- random numbers ----

Rng::Rng() {
  if (const char* env = std::getenv("NK_TEST_SEED")) {
    seed_ = std::strtoull(env, nullptr, 0);
  } else {
    std::random_device device;
    seed_ = (uint64_t{device()} << 32) ^ device();
  }
  gen_.seed(seed_);
}

std::string seed_message(const Rng& rng) {
  return "random seed " + std::to_string(rng.seed()) + " (repeat with NK_TEST_SEED=" +
         std::to_string(rng.seed()) + ")";
}

// ---- host images ----

Matrix::Matrix(nk_dtype dtype_, int64_t rows_, int64_t cols_, int64_t stride_, int64_t offset_)
    : dtype(dtype_), rows(rows_), cols(cols_), stride(stride_ == 0 ? cols_ : stride_),
      offset(offset_) {
  const int64_t elements = offset + (rows - 1) * stride + cols + kTail;
  bytes.resize(static_cast<size_t>(elements) * element_size());
  poison(bytes, dtype);
}

std::vector<double> Matrix::dense() const {
  std::vector<double> out(static_cast<size_t>(rows * cols));
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t c = 0; c < cols; ++c) out[r * cols + c] = get(r, c);
  }
  return out;
}

void poison(std::vector<uint8_t>& bytes, nk_dtype dtype) {
  // Quiet NaNs with a recognizable payload; an unwritten element reads back as NaN.
  // 8-bit dtypes: a NaN code (e4m3, e5m2, e8m0), or -128 for int8, which Q never produces.
  if (dtype == NK_FLOAT32) {
    const uint32_t p = 0x7fc0dead;
    for (size_t i = 0; i + 4 <= bytes.size(); i += 4) std::memcpy(&bytes[i], &p, 4);
  } else if (normkit::host_dtype_size(dtype) == 1) {
    const uint8_t p = dtype == NK_INT8 ? 0x80 : dtype == NK_FLOAT8_E8M0 ? 0xff : 0x7f;
    std::memset(bytes.data(), p, bytes.size());
  } else {
    const uint16_t p = dtype == NK_FLOAT16 ? 0x7e5a : 0x7fda;
    for (size_t i = 0; i + 2 <= bytes.size(); i += 2) std::memcpy(&bytes[i], &p, 2);
  }
}

void fill_normal(Matrix& m, Rng& rng, double mean, double sd) {
  for (int64_t r = 0; r < m.rows; ++r) {
    for (int64_t c = 0; c < m.cols; ++c) {
      float v;
      do {
        v = normkit::round_float_to_dtype(static_cast<float>(mean + sd * rng.normal()), m.dtype);
      } while (v == 0.0f);
      m.set(r, c, v);
    }
  }
}

void fill_rows_of_varied_scale(Matrix& m, Rng& rng, double base_scale) {
  fill_normal(m, rng, 0.0, 1.0);
  for (int64_t r = 0; r < m.rows; ++r) {
    const double scale = base_scale * std::exp2(rng.uniform(-2.0, 2.0));
    for (int64_t c = 0; c < m.cols; ++c) {
      float v = normkit::round_float_to_dtype(static_cast<float>(m.get(r, c) * scale), m.dtype);
      m.set(r, c, v == 0.0f ? static_cast<float>(scale) : v);
    }
  }
}

Tensor::Tensor(nk_backend backend, Matrix m) : host(std::move(m)), buffer(backend, host.bytes.size()) {
  buffer.upload(host.bytes);
}

int64_t stride_arg(const Matrix& m, bool use_zero) {
  return (use_zero && m.stride == m.cols) ? 0 : m.stride;
}

void expect_padding_untouched(const Matrix& before, const std::vector<uint8_t>& after,
                              const std::string& what) {
  ASSERT_EQ(before.bytes.size(), after.size()) << what;
  const int64_t es = static_cast<int64_t>(before.element_size());
  int64_t changed = 0, first_changed = -1;
  // Walk the allocation element by element; an element slot is "inside" if it is one of the
  // rows * cols elements.
  const int64_t slots = static_cast<int64_t>(before.bytes.size()) / es;
  for (int64_t i = 0; i < slots; ++i) {
    const int64_t k = i - before.offset;
    const bool inside = k >= 0 && k / before.stride < before.rows && k % before.stride < before.cols;
    if (inside) continue;
    if (std::memcmp(&before.bytes[i * es], &after[i * es], es) != 0) {
      if (changed++ == 0) first_changed = i;
    }
  }
  EXPECT_EQ(changed, 0) << what << ": " << changed
                        << " padding/offset/tail element(s) were written, first at element slot "
                        << first_changed << " (offset " << before.offset << ", stride "
                        << before.stride << ", cols " << before.cols << ")";
}

normkit::ref::Comparison compare_matrix(const Matrix& layout, const std::vector<uint8_t>& after,
                                        const std::vector<double>& expected, double tolerance,
                                        const std::vector<double>* allowance) {
  return normkit::ref::compare(after.data() + layout.offset * layout.element_size(), layout.dtype,
                               layout.rows, layout.cols, layout.stride, expected, tolerance,
                               allowance);
}

void expect_close(const normkit::ref::Comparison& c, const std::string& what) {
  // NK_TEST_VERBOSE=1 prints every comparison (to see how close results come to tolerance).
  static const bool verbose = std::getenv("NK_TEST_VERBOSE") != nullptr;
  if (verbose) std::printf("[compare] %-26s ratio %.3f  %s\n", what.c_str(),
                           c.tolerance > 0 ? c.worst_error / c.tolerance : c.worst_error,
                           c.describe().c_str());
  EXPECT_TRUE(c.passed) << what << ": " << c.describe();
}

const std::vector<nk_dtype>& all_dtypes() {
  static const std::vector<nk_dtype> d{NK_FLOAT32, NK_FLOAT16, NK_BFLOAT16};
  return d;
}

std::string dtype_label(nk_dtype dtype) {
  switch (dtype) {
    case NK_FLOAT32: return "f32";
    case NK_FLOAT16: return "f16";
    case NK_BFLOAT16: return "bf16";
    case NK_FLOAT8_E4M3: return "e4m3";
    case NK_FLOAT8_E5M2: return "e5m2";
    case NK_INT8: return "i8";
    case NK_FLOAT8_E8M0: return "e8m0";
  }
  return "invalid";
}

nk_dtype lowest_precision(nk_dtype a, nk_dtype b) {
  auto bits = [](nk_dtype d) { return d == NK_FLOAT32 ? 24 : d == NK_FLOAT16 ? 11 : 8; };
  return bits(a) <= bits(b) ? a : b;
}

void expect_no_mismatch_over_every_float32(const PatternMismatchCount& count) {
  constexpr uint64_t kAll = uint64_t{1} << 32;
  constexpr int kThreads = 2;
  int64_t mismatches[kThreads] = {};
  uint32_t example[kThreads] = {};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      mismatches[t] = count(kAll / kThreads * t, kAll / kThreads * (t + 1), &example[t]);
    });
  }
  for (auto& t : threads) t.join();
  for (int t = 0; t < kThreads; ++t) {
    EXPECT_EQ(mismatches[t], 0) << "first at float32 bits 0x" << std::hex << example[t];
  }
}

void expect_every_float32_encodes_as(const Float32Encode& encode, uint16_t (*oracle)(float)) {
  // Patterns in [first, last) whose encode bits differ from oracle's, one span at a time; the
  // first one's float32 bits in *example.
  expect_no_mismatch_over_every_float32([&](uint64_t first, uint64_t last, uint32_t* example) {
    constexpr int64_t kSpan = 1 << 16;
    std::vector<float> in(kSpan);
    std::vector<uint16_t> out(kSpan), want(kSpan);
    int64_t mismatches = 0;
    for (uint64_t base = first; base < last; base += kSpan) {
      for (int64_t j = 0; j < kSpan; ++j) {
        in[j] = normkit::bits_to_float(static_cast<uint32_t>(base + j));
      }
      for (int64_t j = 0; j < kSpan; ++j) want[j] = oracle(in[j]);
      encode(in.data(), out.data(), kSpan);
      if (out == want) continue;
      for (int64_t j = 0; j < kSpan; ++j) {
        if (out[j] != want[j] && mismatches++ == 0) *example = static_cast<uint32_t>(base + j);
      }
    }
    return mismatches;
  });
}

}  // namespace nktest
