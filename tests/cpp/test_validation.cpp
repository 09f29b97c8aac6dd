// Every validation error of the C API: the exact status, a message naming the argument and its
// value, and no output written. Each test starts from arguments that succeed (checked by
// *.ValidArgumentsSucceed) and breaks exactly one rule.
#include <cmath>
#include <cstring>
#include <limits>
#include <thread>

#include "support.h"

namespace nktest {
namespace {

constexpr int64_t kRows = 4, kHidden = 64;
constexpr size_t kMatrixBytes = kRows * kHidden * 4;

// A buffer on a backend that remembers what it held, to prove a failed call wrote nothing.
struct WatchedBuffer {
  Buffer buffer;
  std::vector<uint8_t> before;
  WatchedBuffer() = default;
  WatchedBuffer(nk_backend backend, std::vector<uint8_t> contents)
      : buffer(backend, contents.size()), before(std::move(contents)) {
    buffer.upload(before);
  }
  char* data() const { return buffer.data(); }
  bool unchanged() const { return buffer.to_host() == before; }
};

// An output: float32 NaN poison.
WatchedBuffer poisoned(nk_backend backend, size_t bytes) {
  std::vector<uint8_t> contents(bytes);
  poison(contents, NK_FLOAT32);
  return WatchedBuffer(backend, std::move(contents));
}

// An input: ordinary float32 values.
WatchedBuffer filled(nk_backend backend, size_t bytes, float value) {
  std::vector<float> values(bytes / 4, value);
  std::vector<uint8_t> contents(bytes);
  std::memcpy(contents.data(), values.data(), bytes);
  return WatchedBuffer(backend, std::move(contents));
}

// Calls `call`, then checks the status, that nk_last_error() contains every substring, and
// that none of `outputs` changed.
template <typename Call>
void expect_rejected(Call call, nk_status expected, const std::vector<std::string>& substrings,
                     const std::vector<const WatchedBuffer*>& outputs, nk_backend backend) {
  const nk_status status = call();
  synchronize(backend);
  const std::string message = nk_last_error();
  EXPECT_EQ(status, expected) << "got " << nk_status_name(status) << " expected "
                              << nk_status_name(expected) << "; message: " << message;
  for (const std::string& s : substrings) {
    EXPECT_NE(message.find(s), std::string::npos)
        << "nk_last_error() should mention \"" << s << "\"; it is: " << message;
  }
  for (size_t i = 0; i < outputs.size(); ++i) {
    EXPECT_TRUE(outputs[i]->unchanged()) << "buffer #" << i << " was written by a failed call";
  }
}

// ---- forward ----

class FwdValidation : public ::testing::TestWithParam<nk_backend> {
 protected:
  void SetUp() override {
    backend_ = GetParam();
    NK_SKIP_IF_UNAVAILABLE(backend_);
    // x and y have room for a doubled row stride (used by the partial-overlap tests).
    x_ = filled(backend_, 2 * kMatrixBytes, 1.5f);
    residual_ = filled(backend_, kMatrixBytes, 0.25f);
    weight_ = filled(backend_, kHidden * 4, 1.0f);
    bias_ = filled(backend_, kHidden * 4, 0.5f);
    y_ = poisoned(backend_, 2 * kMatrixBytes);
    residual_out_ = poisoned(backend_, kMatrixBytes);
    rstd_ = poisoned(backend_, kRows * 4);
    nk_rms_norm_fwd_args_init(&args_);
    args_.rows = kRows;
    args_.hidden = kHidden;
    args_.x = x_.data();
    args_.residual = residual_.data();
    args_.residual_out = residual_out_.data();
    args_.weight = weight_.data();
    args_.bias = bias_.data();
    args_.y = y_.data();
    args_.rstd = reinterpret_cast<float*>(rstd_.data());
  }

  void expect_rejected(const nk_rms_norm_fwd_args& a, const std::vector<std::string>& substrings,
                       nk_status expected = NK_ERROR_INVALID_ARGUMENT) {
    nktest::expect_rejected([&] { return nk_rms_norm_fwd(&a, backend_, nullptr); }, expected,
                            substrings, {&y_, &residual_out_, &rstd_, &x_, &residual_, &weight_},
                            backend_);
  }

  nk_backend backend_ = NK_BACKEND_CPU;
  WatchedBuffer x_, residual_, weight_, bias_;
  WatchedBuffer y_, residual_out_, rstd_;
  nk_rms_norm_fwd_args args_{};
};

TEST_P(FwdValidation, ValidArgumentsSucceed) {
  ASSERT_EQ(nk_rms_norm_fwd(&args_, backend_, nullptr), NK_SUCCESS) << nk_last_error();
  synchronize(backend_);
  EXPECT_STREQ(nk_last_error(), "");
  EXPECT_FALSE(y_.unchanged());
  EXPECT_FALSE(residual_out_.unchanged());
  EXPECT_FALSE(rstd_.unchanged());
}

TEST_P(FwdValidation, NullArgs) {
  nktest::expect_rejected([&] { return nk_rms_norm_fwd(nullptr, backend_, nullptr); },
                          NK_ERROR_INVALID_ARGUMENT, {"args", "NULL"}, {&y_}, backend_);
}

TEST_P(FwdValidation, NullX) {
  args_.x = nullptr;
  expect_rejected(args_, {"x is NULL"});
}

TEST_P(FwdValidation, NullY) {
  args_.y = nullptr;
  expect_rejected(args_, {"y is NULL"});
}

TEST_P(FwdValidation, RowsZero) {
  args_.rows = 0;
  expect_rejected(args_, {"rows", "0", ">= 1"});
}

TEST_P(FwdValidation, RowsNegative) {
  args_.rows = -3;
  expect_rejected(args_, {"rows", "-3"});
}

TEST_P(FwdValidation, HiddenZero) {
  args_.hidden = 0;
  expect_rejected(args_, {"hidden", "0", ">= 1"});
}

TEST_P(FwdValidation, HiddenNegative) {
  args_.hidden = -64;
  expect_rejected(args_, {"hidden", "-64"});
}

TEST_P(FwdValidation, NegativeRowStride) {
  args_.x_row_stride = -64;
  expect_rejected(args_, {"x_row_stride", "-64"});
}

TEST_P(FwdValidation, RowStrideBetweenZeroAndHidden) {
  args_.y_row_stride = kHidden - 1;
  expect_rejected(args_, {"y_row_stride", "63", "64"});
}

TEST_P(FwdValidation, ResidualRowStrideBelowHidden) {
  args_.residual_row_stride = 1;
  expect_rejected(args_, {"residual_row_stride", "1"});
}

TEST_P(FwdValidation, ResidualOutRowStrideBelowHidden) {
  args_.residual_out_row_stride = 32;
  expect_rejected(args_, {"residual_out_row_stride", "32"});
}

TEST_P(FwdValidation, InvalidXDtype) {
  args_.x_dtype = static_cast<nk_dtype>(3);
  expect_rejected(args_, {"x_dtype", "3"});
}

TEST_P(FwdValidation, InvalidWeightDtype) {
  args_.weight_dtype = static_cast<nk_dtype>(-1);
  expect_rejected(args_, {"weight_dtype", "-1"});
}

TEST_P(FwdValidation, InvalidYDtype) {
  args_.y_dtype = static_cast<nk_dtype>(99);
  expect_rejected(args_, {"y_dtype", "99"});
}

TEST_P(FwdValidation, ResidualWithoutResidualOut) {
  args_.residual_out = nullptr;
  expect_rejected(args_, {"residual_out", "NULL"});
}

TEST_P(FwdValidation, ResidualOutWithoutResidual) {
  args_.residual = nullptr;
  expect_rejected(args_, {"residual", "NULL"});
}

TEST_P(FwdValidation, ZeroCenteredWithoutWeight) {
  args_.weight = nullptr;
  args_.zero_centered = 1;
  expect_rejected(args_, {"zero_centered", "weight"});
}

TEST_P(FwdValidation, EpsNegative) {
  args_.eps = -1.0f;
  expect_rejected(args_, {"eps", "-1"});
}

TEST_P(FwdValidation, EpsNaN) {
  args_.eps = std::numeric_limits<float>::quiet_NaN();
  expect_rejected(args_, {"eps", "nan"});
}

TEST_P(FwdValidation, EpsInfinite) {
  args_.eps = std::numeric_limits<float>::infinity();
  expect_rejected(args_, {"eps", "inf"});
}

TEST_P(FwdValidation, Float16PointerAtOddAddress) {
  args_.x_dtype = NK_FLOAT16;
  args_.residual = args_.residual_out = nullptr;
  args_.x = x_.data() + 1;
  expect_rejected(args_, {"x", "aligned", "2", "float16"});
}

TEST_P(FwdValidation, RstdNotFloatAligned) {
  args_.rstd = reinterpret_cast<float*>(rstd_.data() + 2);
  expect_rejected(args_, {"rstd", "aligned", "4"});
}

TEST_P(FwdValidation, YOverlapsResidualOut) {
  args_.residual_out = y_.data() + 32 * 4;  // inside y's first row
  expect_rejected(args_, {"y", "residual_out", "overlap"});
}

TEST_P(FwdValidation, YOverlapsRstd) {
  args_.rstd = reinterpret_cast<float*>(y_.data() + 3 * 4);
  expect_rejected(args_, {"y", "rstd", "overlap"});
}

TEST_P(FwdValidation, XPartiallyOverlapsY) {
  args_.y = x_.data() + 4;  // one element on: overlaps without being the same view
  expect_rejected(args_, {"x", "y", "overlap"});
}

TEST_P(FwdValidation, SamePointerDifferentStrideIsNotInPlace) {
  args_.y = x_.data();
  args_.y_row_stride = 2 * kHidden;
  expect_rejected(args_, {"x", "y", "same view"});
}

TEST_P(FwdValidation, WeightOverlapsOutput) {
  args_.weight = y_.data();
  expect_rejected(args_, {"weight", "y", "overlap"});
}

TEST_P(FwdValidation, InvalidBackend) {
  nktest::expect_rejected(
      [&] { return nk_rms_norm_fwd(&args_, static_cast<nk_backend>(7), nullptr); },
      NK_ERROR_INVALID_ARGUMENT, {"backend", "7"}, {&y_, &residual_out_, &rstd_}, backend_);
}

INSTANTIATE_TEST_SUITE_P(AllBackends, FwdValidation, ::testing::ValuesIn(all_backends()),
                         [](const auto& info) { return std::string(backend_label(info.param)); });

// ---- backward ----

class BwdValidation : public ::testing::TestWithParam<nk_backend> {
 protected:
  void SetUp() override {
    backend_ = GetParam();
    NK_SKIP_IF_UNAVAILABLE(backend_);
    dy_ = filled(backend_, kMatrixBytes, 0.5f);
    x_ = filled(backend_, kMatrixBytes, 1.5f);
    rstd_ = filled(backend_, kRows * 4, 0.6f);
    weight_ = filled(backend_, kHidden * 4, 1.0f);
    dresidual_ = filled(backend_, kMatrixBytes, 0.125f);
    dx_ = poisoned(backend_, kMatrixBytes);
    dweight_ = poisoned(backend_, 2 * kHidden * 4);
    dbias_ = poisoned(backend_, kHidden * 4);
    nk_rms_norm_bwd_args_init(&args_);
    args_.rows = kRows;
    args_.hidden = kHidden;
    args_.dy = dy_.data();
    args_.x = x_.data();
    args_.rstd = reinterpret_cast<const float*>(rstd_.data());
    args_.weight = weight_.data();
    args_.dresidual_out = dresidual_.data();
    args_.dx = dx_.data();
    args_.dweight = dweight_.data();
    args_.dbias = dbias_.data();
    ASSERT_EQ(nk_rms_norm_bwd_workspace_size(&args_, backend_, &workspace_bytes_), NK_SUCCESS)
        << nk_last_error();
    ASSERT_GT(workspace_bytes_, 0u);
    workspace_ = Buffer(backend_, workspace_bytes_ + 64);
    args_.workspace = workspace_.data();
    args_.workspace_bytes = workspace_bytes_;
  }

  void expect_rejected(const nk_rms_norm_bwd_args& a, const std::vector<std::string>& substrings,
                       nk_status expected = NK_ERROR_INVALID_ARGUMENT) {
    nktest::expect_rejected([&] { return nk_rms_norm_bwd(&a, backend_, nullptr); }, expected,
                            substrings, {&dx_, &dweight_, &dbias_, &dy_, &x_, &dresidual_},
                            backend_);
  }

  nk_backend backend_ = NK_BACKEND_CPU;
  WatchedBuffer dy_, x_, rstd_, weight_, dresidual_;
  Buffer workspace_;
  WatchedBuffer dx_, dweight_, dbias_;
  size_t workspace_bytes_ = 0;
  nk_rms_norm_bwd_args args_{};
};

TEST_P(BwdValidation, ValidArgumentsSucceed) {
  ASSERT_EQ(nk_rms_norm_bwd(&args_, backend_, nullptr), NK_SUCCESS) << nk_last_error();
  synchronize(backend_);
  EXPECT_FALSE(dx_.unchanged());
  EXPECT_FALSE(dweight_.unchanged());
  EXPECT_FALSE(dbias_.unchanged());
}

TEST_P(BwdValidation, NullArgs) {
  nktest::expect_rejected([&] { return nk_rms_norm_bwd(nullptr, backend_, nullptr); },
                          NK_ERROR_INVALID_ARGUMENT, {"args", "NULL"}, {&dx_}, backend_);
}

TEST_P(BwdValidation, NullDy) {
  args_.dy = nullptr;
  expect_rejected(args_, {"dy is NULL"});
}

TEST_P(BwdValidation, NullX) {
  args_.x = nullptr;
  expect_rejected(args_, {"x is NULL"});
}

TEST_P(BwdValidation, NullRstd) {
  args_.rstd = nullptr;
  expect_rejected(args_, {"rstd is NULL"});
}

TEST_P(BwdValidation, NullDx) {
  args_.dx = nullptr;
  expect_rejected(args_, {"dx is NULL"});
}

TEST_P(BwdValidation, RowsZero) {
  args_.rows = 0;
  expect_rejected(args_, {"rows", "0"});
}

TEST_P(BwdValidation, HiddenNegative) {
  args_.hidden = -1;
  expect_rejected(args_, {"hidden", "-1"});
}

TEST_P(BwdValidation, NegativeDyRowStride) {
  args_.dy_row_stride = -1;
  expect_rejected(args_, {"dy_row_stride", "-1"});
}

TEST_P(BwdValidation, DxRowStrideBelowHidden) {
  args_.dx_row_stride = 10;
  expect_rejected(args_, {"dx_row_stride", "10", "64"});
}

TEST_P(BwdValidation, DresidualOutRowStrideBelowHidden) {
  args_.dresidual_out_row_stride = 63;
  expect_rejected(args_, {"dresidual_out_row_stride", "63"});
}

TEST_P(BwdValidation, InvalidDyDtype) {
  args_.dy_dtype = static_cast<nk_dtype>(5);
  expect_rejected(args_, {"dy_dtype", "5"});
}

TEST_P(BwdValidation, InvalidXDtype) {
  args_.x_dtype = static_cast<nk_dtype>(-7);
  expect_rejected(args_, {"x_dtype", "-7"});
}

TEST_P(BwdValidation, ZeroCenteredWithoutWeight) {
  args_.weight = nullptr;
  args_.zero_centered = 1;
  expect_rejected(args_, {"zero_centered", "weight"});
}

TEST_P(BwdValidation, Float16DweightAtOddAddress) {
  args_.weight_dtype = NK_FLOAT16;
  args_.weight = nullptr;
  args_.dweight = dweight_.data() + 1;
  expect_rejected(args_, {"dweight", "aligned", "2", "float16"});
}

TEST_P(BwdValidation, DxOverlapsDweight) {
  args_.dweight = dx_.data() + 5 * 4;
  expect_rejected(args_, {"dx", "dweight", "overlap"});
}

TEST_P(BwdValidation, DweightOverlapsDbias) {
  args_.dbias = dweight_.data() + 8 * 4;
  expect_rejected(args_, {"dweight", "dbias", "overlap"});
}

TEST_P(BwdValidation, DyPartiallyOverlapsDx) {
  args_.dx = dy_.data() + 4;  // one element on
  expect_rejected(args_, {"dy", "dx", "overlap"});
}

TEST_P(BwdValidation, WorkspaceMissing) {
  args_.workspace = nullptr;
  args_.workspace_bytes = 0;
  expect_rejected(args_, {"workspace", "NULL", std::to_string(workspace_bytes_)});
}

TEST_P(BwdValidation, WorkspaceTooSmall) {
  args_.workspace_bytes = workspace_bytes_ - 4;
  expect_rejected(args_, {"workspace", std::to_string(workspace_bytes_ - 4),
                          std::to_string(workspace_bytes_)});
}

TEST_P(BwdValidation, WorkspaceNotSixteenByteAligned) {
  args_.workspace = workspace_.data() + 4;
  expect_rejected(args_, {"workspace", "16-byte"});
}

TEST_P(BwdValidation, WorkspaceOverlapsDweight) {
  args_.workspace = dweight_.data();
  expect_rejected(args_, {"dweight", "workspace", "overlap"});
}

TEST_P(BwdValidation, WorkspaceQueryRejectsNullBytes) {
  nktest::expect_rejected(
      [&] { return nk_rms_norm_bwd_workspace_size(&args_, backend_, nullptr); },
      NK_ERROR_INVALID_ARGUMENT, {"bytes", "NULL"}, {}, backend_);
}

TEST_P(BwdValidation, WorkspaceQueryRejectsBadSizes) {
  args_.rows = 0;
  size_t bytes = 12345;
  nktest::expect_rejected(
      [&] { return nk_rms_norm_bwd_workspace_size(&args_, backend_, &bytes); },
      NK_ERROR_INVALID_ARGUMENT, {"rows", "0"}, {}, backend_);
}

TEST_P(BwdValidation, WorkspaceQueryIsZeroWithoutDweightOrDbias) {
  args_.dweight = args_.dbias = nullptr;
  size_t bytes = 12345;
  ASSERT_EQ(nk_rms_norm_bwd_workspace_size(&args_, backend_, &bytes), NK_SUCCESS);
  EXPECT_EQ(bytes, 0u);
  args_.workspace = nullptr;
  args_.workspace_bytes = 0;
  EXPECT_EQ(nk_rms_norm_bwd(&args_, backend_, nullptr), NK_SUCCESS) << nk_last_error();
  synchronize(backend_);
}

INSTANTIATE_TEST_SUITE_P(AllBackends, BwdValidation, ::testing::ValuesIn(all_backends()),
                         [](const auto& info) { return std::string(backend_label(info.param)); });

// ---- CUDA requested where there is none ----

TEST(CudaAvailability, CudaBackendWithoutDeviceReportsNoDevice) {
  if (nk_cuda_device_count() > 0) GTEST_SKIP() << "a CUDA device is present";
  // Valid host buffers: the call must fail before touching any of them.
  const WatchedBuffer x = filled(NK_BACKEND_CPU, kMatrixBytes, 1.0f);
  const WatchedBuffer y = poisoned(NK_BACKEND_CPU, kMatrixBytes);
  const WatchedBuffer dx = poisoned(NK_BACKEND_CPU, kMatrixBytes);
  const std::string why = nk_has_cuda_build() ? "no CUDA device" : "built without CUDA";

  nk_rms_norm_fwd_args f;
  nk_rms_norm_fwd_args_init(&f);
  f.rows = kRows;
  f.hidden = kHidden;
  f.x = x.data();
  f.y = y.data();
  expect_rejected([&] { return nk_rms_norm_fwd(&f, NK_BACKEND_CUDA, nullptr); },
                  NK_ERROR_NO_DEVICE, {"NK_BACKEND_CUDA", why}, {&y}, NK_BACKEND_CPU);

  const WatchedBuffer rstd = filled(NK_BACKEND_CPU, kRows * 4, 1.0f);
  nk_rms_norm_bwd_args b;
  nk_rms_norm_bwd_args_init(&b);
  b.rows = kRows;
  b.hidden = kHidden;
  b.dy = x.data();
  b.x = x.data();
  b.rstd = reinterpret_cast<const float*>(rstd.data());
  b.dx = dx.data();
  expect_rejected([&] { return nk_rms_norm_bwd(&b, NK_BACKEND_CUDA, nullptr); },
                  NK_ERROR_NO_DEVICE, {"NK_BACKEND_CUDA", why}, {&dx}, NK_BACKEND_CPU);
  size_t bytes = 0;
  expect_rejected([&] { return nk_rms_norm_bwd_workspace_size(&b, NK_BACKEND_CUDA, &bytes); },
                  NK_ERROR_NO_DEVICE, {"NK_BACKEND_CUDA"}, {}, NK_BACKEND_CPU);
}

// ---- the small helpers of the C API ----

TEST(ApiBasics, NamesSizesAndDefaults) {
  EXPECT_STREQ(nk_status_name(NK_SUCCESS), "NK_SUCCESS");
  EXPECT_STREQ(nk_status_name(NK_ERROR_NO_DEVICE), "NK_ERROR_NO_DEVICE");
  EXPECT_STREQ(nk_dtype_name(NK_FLOAT32), "float32");
  EXPECT_STREQ(nk_dtype_name(NK_FLOAT16), "float16");
  EXPECT_STREQ(nk_dtype_name(NK_BFLOAT16), "bfloat16");
  EXPECT_STREQ(nk_dtype_name(static_cast<nk_dtype>(9)), "invalid");
  EXPECT_EQ(nk_dtype_size(NK_FLOAT32), 4u);
  EXPECT_EQ(nk_dtype_size(NK_FLOAT16), 2u);
  EXPECT_EQ(nk_dtype_size(NK_BFLOAT16), 2u);
  EXPECT_EQ(nk_dtype_size(static_cast<nk_dtype>(9)), 0u);
  EXPECT_NE(std::string(nk_version()).find("0.1.0"), std::string::npos) << nk_version();
  if (!nk_has_cuda_build()) {
    EXPECT_EQ(nk_cuda_device_count(), 0);
  }

  nk_rms_norm_fwd_args f;
  std::memset(&f, 0xff, sizeof f);
  nk_rms_norm_fwd_args_init(&f);
  EXPECT_EQ(f.x, nullptr);
  EXPECT_EQ(f.residual, nullptr);
  EXPECT_EQ(f.weight, nullptr);
  EXPECT_EQ(f.rstd, nullptr);
  EXPECT_EQ(f.x_row_stride, 0);
  EXPECT_EQ(f.x_dtype, NK_FLOAT32);
  EXPECT_EQ(f.zero_centered, 0);
  EXPECT_FLOAT_EQ(f.eps, 1e-6f);

  nk_rms_norm_bwd_args b;
  std::memset(&b, 0xff, sizeof b);
  nk_rms_norm_bwd_args_init(&b);
  EXPECT_EQ(b.dy, nullptr);
  EXPECT_EQ(b.dweight, nullptr);
  EXPECT_EQ(b.workspace, nullptr);
  EXPECT_EQ(b.workspace_bytes, 0u);
  EXPECT_EQ(b.dy_dtype, NK_FLOAT32);
}

TEST(ApiBasics, LastErrorIsClearedBySuccessAndIsPerThread) {
  nk_rms_norm_fwd_args bad;
  nk_rms_norm_fwd_args_init(&bad);
  ASSERT_EQ(nk_rms_norm_fwd(&bad, NK_BACKEND_CPU, nullptr), NK_ERROR_INVALID_ARGUMENT);
  EXPECT_STRNE(nk_last_error(), "");
  std::string other_thread_message = "unset";
  std::thread([&] { other_thread_message = nk_last_error(); }).join();
  EXPECT_EQ(other_thread_message, "");

  std::vector<float> x(kHidden, 1.0f), y(kHidden);
  nk_rms_norm_fwd_args good;
  nk_rms_norm_fwd_args_init(&good);
  good.rows = 1;
  good.hidden = kHidden;
  good.x = x.data();
  good.y = y.data();
  ASSERT_EQ(nk_rms_norm_fwd(&good, NK_BACKEND_CPU, nullptr), NK_SUCCESS);
  EXPECT_STREQ(nk_last_error(), "");
}

}  // namespace
}  // namespace nktest
