// 64-bit indexing: rows so far apart that (rows - 1) * row_stride exceeds 2^31 elements. The
// buffers are ~4 GiB each but only the pages around the rows are touched (calloc on the host,
// so the rest costs nothing; cudaMalloc on a GPU).
#include <cmath>

#include "fwd_harness.h"

namespace nktest {
namespace {

constexpr int64_t kRows = 2, kHidden = 64;
constexpr int64_t kHugeStride = (int64_t{1} << 31) + 64;  // (rows - 1) * stride > 2^31
constexpr int64_t kGuard = 128;  // elements watched on each side of every row

// A [kRows, kHidden] matrix with row stride kHugeStride in a lazily allocated buffer. Only the
// windows [row start - kGuard, row end + kGuard) are ever written by the test or read back.
class SparseMatrix {
 public:
  SparseMatrix(nk_backend backend, nk_dtype dtype)
      : dtype_(dtype),
        esize_(normkit::host_dtype_size(dtype)),
        buffer_(Buffer::lazy(backend, static_cast<size_t>(kGuard + (kRows - 1) * kHugeStride +
                                                          kHidden + kGuard) * esize_)) {
    for (int64_t r = 0; r < kRows; ++r) {
      windows_.emplace_back(dtype, 1, kHidden, 0, kGuard);  // poisoned guard + row + tail
      windows_.back().bytes.resize(static_cast<size_t>(kGuard + kHidden + kGuard) * esize_);
      poison(windows_.back().bytes, dtype);
    }
  }

  void fill_random(Rng& rng, double mean, double sd) {
    for (Matrix& w : windows_) fill_normal(w, rng, mean, sd);
    upload();
  }
  void upload() {
    for (int64_t r = 0; r < kRows; ++r) buffer_.upload(windows_[r].bytes.data(), window_bytes(), window_offset(r));
  }

  // The first element (row 0, column 0).
  void* ptr() const { return buffer_.data() + kGuard * esize_; }

  // Dense host copy of the rows (for the reference).
  Matrix compact() const {
    Matrix m(dtype_, kRows, kHidden);
    for (int64_t r = 0; r < kRows; ++r)
      for (int64_t j = 0; j < kHidden; ++j) m.set(r, j, windows_[r].get(0, j));
    return m;
  }

  // Reads the windows back; checks them against `expected` (dense) and that guards are intact.
  void expect_rows(const std::vector<double>& expected, double tolerance, const std::string& what) const {
    for (int64_t r = 0; r < kRows; ++r) {
      std::vector<uint8_t> after(window_bytes());
      buffer_.download(after.data(), after.size(), window_offset(r));
      const std::vector<double> row(expected.begin() + r * kHidden,
                                    expected.begin() + (r + 1) * kHidden);
      expect_close(compare_matrix(windows_[r], after, row, tolerance),
                   what + " row " + std::to_string(r));
      expect_padding_untouched(windows_[r], after, what + " row " + std::to_string(r));
    }
  }

 private:
  size_t window_bytes() const { return static_cast<size_t>(kGuard + kHidden + kGuard) * esize_; }
  size_t window_offset(int64_t r) const { return static_cast<size_t>(r * kHugeStride) * esize_; }

  nk_dtype dtype_;
  size_t esize_;
  Buffer buffer_;
  std::vector<Matrix> windows_;
};

class LargeIndex : public ::testing::TestWithParam<nk_backend> {};

TEST_P(LargeIndex, ForwardRowsMoreThanTwoToThe31ElementsApart) {
  const nk_backend backend = GetParam();
  NK_SKIP_IF_UNAVAILABLE(backend);
  Rng rng;
  NK_SEED_TRACE(rng);
  SparseMatrix x(backend, NK_FLOAT16), y(backend, NK_FLOAT16);
  x.fill_random(rng, 0.0, 1.0);
  y.upload();  // poison
  Matrix weight(NK_FLOAT32, 1, kHidden);
  fill_normal(weight, rng, 1.0, 0.1);
  Tensor w(backend, weight);
  Tensor rstd(backend, Matrix(NK_FLOAT32, 1, kRows));

  nk_rms_norm_fwd_args a;
  nk_rms_norm_fwd_args_init(&a);
  a.rows = kRows;
  a.hidden = kHidden;
  a.x = x.ptr();
  a.x_dtype = NK_FLOAT16;
  a.x_row_stride = kHugeStride;
  a.y = y.ptr();
  a.y_dtype = NK_FLOAT16;
  a.y_row_stride = kHugeStride;
  a.weight = w.ptr();
  a.rstd = static_cast<float*>(rstd.ptr());
  ASSERT_EQ(nk_rms_norm_fwd(&a, backend, nullptr), NK_SUCCESS) << nk_last_error();
  synchronize(backend);

  const Matrix x_dense = x.compact();
  nk_rms_norm_fwd_args host = a;
  host.x = x_dense.first();
  host.x_row_stride = 0;
  host.weight = weight.first();
  const normkit::ref::FwdResult ref = normkit::ref::rms_norm_fwd(host);
  y.expect_rows(ref.y, normkit::ref::tolerance_for(NK_FLOAT16, NK_FLOAT16, kHidden), "y");
  expect_close(compare_matrix(rstd.host, rstd.fetch(), ref.rstd, rstd_tolerance(kHidden)), "rstd");
}

TEST_P(LargeIndex, BackwardRowsMoreThanTwoToThe31ElementsApart) {
  const nk_backend backend = GetParam();
  NK_SKIP_IF_UNAVAILABLE(backend);
  Rng rng;
  NK_SEED_TRACE(rng);
  SparseMatrix dy(backend, NK_FLOAT16), x(backend, NK_FLOAT16), dx(backend, NK_FLOAT16);
  dy.fill_random(rng, 0.0, 1.0);
  x.fill_random(rng, 0.0, 1.0);
  dx.upload();  // poison
  const Matrix x_dense = x.compact(), dy_dense = dy.compact();
  Matrix rstd_host(NK_FLOAT32, 1, kRows);
  for (int64_t r = 0; r < kRows; ++r) {
    double ss = 0;
    for (int64_t j = 0; j < kHidden; ++j) ss += double{x_dense.get(r, j)} * x_dense.get(r, j);
    rstd_host.set(0, r, static_cast<float>(1.0 / std::sqrt(ss / kHidden + 1e-6)));
  }
  Tensor rstd(backend, rstd_host), dweight(backend, Matrix(NK_FLOAT32, 1, kHidden));

  nk_rms_norm_bwd_args a;
  nk_rms_norm_bwd_args_init(&a);
  a.rows = kRows;
  a.hidden = kHidden;
  a.dy = dy.ptr();
  a.dy_dtype = NK_FLOAT16;
  a.dy_row_stride = kHugeStride;
  a.x = x.ptr();
  a.x_dtype = NK_FLOAT16;
  a.x_row_stride = kHugeStride;
  a.dx = dx.ptr();
  a.dx_row_stride = kHugeStride;
  a.rstd = static_cast<const float*>(rstd.ptr());
  a.dweight = dweight.ptr();
  size_t bytes = 0;
  ASSERT_EQ(nk_rms_norm_bwd_workspace_size(&a, backend, &bytes), NK_SUCCESS) << nk_last_error();
  Buffer workspace(backend, bytes);
  a.workspace = workspace.data();
  a.workspace_bytes = bytes;
  ASSERT_EQ(nk_rms_norm_bwd(&a, backend, nullptr), NK_SUCCESS) << nk_last_error();
  synchronize(backend);

  nk_rms_norm_bwd_args host = a;
  host.dy = dy_dense.first();
  host.dy_row_stride = 0;
  host.x = x_dense.first();
  host.x_row_stride = 0;
  host.rstd = static_cast<const float*>(rstd_host.first());
  const normkit::ref::BwdResult ref = normkit::ref::rms_norm_bwd(host);
  dx.expect_rows(ref.dx, normkit::ref::tolerance_for(NK_FLOAT16, NK_FLOAT16, kHidden), "dx");
  expect_close(compare_matrix(dweight.host, dweight.fetch(), ref.dweight,
                              normkit::ref::tolerance_for(NK_FLOAT32, NK_FLOAT16, kRows)),
               "dweight");
}

INSTANTIATE_TEST_SUITE_P(AllBackends, LargeIndex, ::testing::ValuesIn(all_backends()),
                         [](const auto& info) { return std::string(backend_label(info.param)); });

}  // namespace
}  // namespace nktest
