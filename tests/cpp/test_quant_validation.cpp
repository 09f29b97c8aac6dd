// Every validation error of the quantized forward: the exact status, a message naming the
// argument and its value, and no output written. Each test starts from arguments that succeed
// (QuantValidation.ValidArgumentsSucceed) and breaks one rule.
#include <cmath>
#include <cstring>
#include <limits>

#include "support.h"

namespace nktest {
namespace {

constexpr int64_t kRows = 4, kHidden = 64;

// A buffer on a backend that remembers what it held, to prove a failed call wrote nothing.
struct Watched {
  Buffer buffer;
  std::vector<uint8_t> before;
  Watched() = default;
  Watched(nk_backend backend, std::vector<uint8_t> contents)
      : buffer(backend, contents.size()), before(std::move(contents)) {
    buffer.upload(before);
  }
  char* data() const { return buffer.data(); }
  bool unchanged() const { return buffer.to_host() == before; }
};

Watched bytes_of(nk_backend backend, size_t n, uint8_t value) {
  return Watched(backend, std::vector<uint8_t>(n, value));
}

Watched floats_of(nk_backend backend, size_t n, float value) {
  std::vector<uint8_t> b(n * 4);
  for (size_t i = 0; i < n; ++i) std::memcpy(&b[4 * i], &value, 4);
  return Watched(backend, std::move(b));
}

// Inputs of varied size, so no mode writes one code everywhere (which might equal the poison).
Watched ramp(nk_backend backend, size_t n) {
  std::vector<uint8_t> b(n * 4);
  for (size_t i = 0; i < n; ++i) {
    const float v = 0.25f + static_cast<float>(i % 13);
    std::memcpy(&b[4 * i], &v, 4);
  }
  return Watched(backend, std::move(b));
}

class QuantValidation : public ::testing::TestWithParam<nk_backend> {
 protected:
  void SetUp() override {
    backend_ = GetParam();
    NK_SKIP_IF_UNAVAILABLE(backend_);
    x_ = ramp(backend_, kRows * kHidden);
    scale_ = floats_of(backend_, 1, 2.0f);
    y_ = bytes_of(backend_, 2 * kRows * kHidden, 0x7f);
    y_t_ = bytes_of(backend_, 2 * kRows * kHidden, 0x7f);
    scales_ = bytes_of(backend_, kRows * kHidden * 4, 0xff);  // room for any mode's scales
    amax_ = bytes_of(backend_, 16, 0xff);
    args_ = args_for(NK_QUANT_TENSOR, NK_FLOAT8_E4M3);
  }

  // Valid arguments for a mode: x float32 [4, 64], y of `y`, and the mode's pointers.
  nk_rms_norm_fwd_args args_for(nk_quant_mode mode, nk_dtype y) const {
    nk_rms_norm_fwd_args a;
    nk_rms_norm_fwd_args_init(&a);
    a.rows = kRows;
    a.hidden = kHidden;
    a.x = x_.data();
    a.y = y_.data();
    a.y_dtype = y;
    a.quant = mode;
    a.amax = reinterpret_cast<float*>(amax_.data());
    if (mode == NK_QUANT_TENSOR) {
      a.scale = reinterpret_cast<const float*>(scale_.data());
      a.y_t = y_t_.data();
    } else if (mode != NK_QUANT_NONE) {
      a.scales = scales_.data();
      if (mode == NK_QUANT_BLOCK) a.quant_block = 32;
    }
    return a;
  }

  void expect_rejected(const nk_rms_norm_fwd_args& a, const std::vector<std::string>& substrings) {
    const nk_status status = nk_rms_norm_fwd(&a, backend_, nullptr);
    synchronize(backend_);
    const std::string message = nk_last_error();
    EXPECT_EQ(status, NK_ERROR_INVALID_ARGUMENT) << nk_status_name(status) << ": " << message;
    for (const std::string& s : substrings) {
      EXPECT_NE(message.find(s), std::string::npos)
          << "nk_last_error() should mention \"" << s << "\"; it is: " << message;
    }
    EXPECT_TRUE(y_.unchanged()) << "y written by a failed call";
    EXPECT_TRUE(y_t_.unchanged()) << "y_t written by a failed call";
    EXPECT_TRUE(scales_.unchanged()) << "scales written by a failed call";
    EXPECT_TRUE(amax_.unchanged()) << "amax written by a failed call";
    EXPECT_TRUE(x_.unchanged() && scale_.unchanged()) << "an input was written";
  }

  nk_backend backend_ = NK_BACKEND_CPU;
  Watched x_, scale_, y_, y_t_, scales_, amax_;
  nk_rms_norm_fwd_args args_{};
};

TEST_P(QuantValidation, ValidArgumentsSucceed) {
  struct Mode {
    nk_quant_mode mode;
    nk_dtype y;
  };
  for (const Mode m : {Mode{NK_QUANT_TENSOR, NK_FLOAT8_E4M3}, Mode{NK_QUANT_TENSOR, NK_INT8},
                       Mode{NK_QUANT_TOKEN, NK_FLOAT8_E5M2}, Mode{NK_QUANT_TOKEN, NK_INT8},
                       Mode{NK_QUANT_BLOCK, NK_FLOAT8_E4M3}, Mode{NK_QUANT_MXFP8, NK_FLOAT8_E5M2}}) {
    SCOPED_TRACE(std::string(nk_quant_mode_name(m.mode)) + " " + nk_dtype_name(m.y));
    const nk_rms_norm_fwd_args a = args_for(m.mode, m.y);
    ASSERT_EQ(nk_rms_norm_fwd(&a, backend_, nullptr), NK_SUCCESS) << nk_last_error();
    synchronize(backend_);
    EXPECT_STREQ(nk_last_error(), "");
    EXPECT_FALSE(y_.unchanged());
    EXPECT_FALSE(amax_.unchanged());
    EXPECT_FALSE(m.mode == NK_QUANT_TENSOR ? y_t_.unchanged() : scales_.unchanged());
  }
  // Defaults that are spelled out: BLOCK quant_block 0 is 128, MXFP8 accepts 0 and 32, y_t
  // stride >= rows, e8m0 scales at any byte address.
  nk_rms_norm_fwd_args a = args_for(NK_QUANT_BLOCK, NK_FLOAT8_E4M3);
  a.hidden = 128;
  a.rows = 2;
  a.quant_block = 0;
  EXPECT_EQ(nk_rms_norm_fwd(&a, backend_, nullptr), NK_SUCCESS) << nk_last_error();
  a = args_for(NK_QUANT_MXFP8, NK_FLOAT8_E4M3);
  a.quant_block = 32;
  a.scales = scales_.data() + 1;
  EXPECT_EQ(nk_rms_norm_fwd(&a, backend_, nullptr), NK_SUCCESS) << nk_last_error();
  a = args_for(NK_QUANT_TENSOR, NK_FLOAT8_E5M2);
  a.y_t_row_stride = kRows + 3;
  EXPECT_EQ(nk_rms_norm_fwd(&a, backend_, nullptr), NK_SUCCESS) << nk_last_error();
  a = args_for(NK_QUANT_TOKEN, NK_INT8);
  a.scale_ub = 0.5f;
  a.amax = nullptr;  // optional
  EXPECT_EQ(nk_rms_norm_fwd(&a, backend_, nullptr), NK_SUCCESS) << nk_last_error();
  synchronize(backend_);
}

// ---- mode and dtypes ----

TEST_P(QuantValidation, ModeOutOfRange) {
  args_.quant = static_cast<nk_quant_mode>(7);
  expect_rejected(args_, {"quant is 7", "NK_QUANT_MXFP8 (4)"});
  args_.quant = static_cast<nk_quant_mode>(-1);
  expect_rejected(args_, {"quant is -1"});
}

TEST_P(QuantValidation, FloatOutputWithQuantMode) {
  args_.y_dtype = NK_BFLOAT16;
  expect_rejected(args_, {"y_dtype is bfloat16 (2)", "NK_QUANT_TENSOR", "NK_FLOAT8_E4M3"});
  nk_rms_norm_fwd_args a = args_for(NK_QUANT_TOKEN, NK_FLOAT32);
  expect_rejected(a, {"y_dtype is float32 (0)", "NK_QUANT_TOKEN"});
  a.y_dtype = static_cast<nk_dtype>(42);
  expect_rejected(a, {"y_dtype is 42"});
}

TEST_P(QuantValidation, Int8OnlyWithTensorOrToken) {
  expect_rejected(args_for(NK_QUANT_BLOCK, NK_INT8), {"y_dtype is int8 (5)", "NK_QUANT_BLOCK"});
  expect_rejected(args_for(NK_QUANT_MXFP8, NK_INT8), {"y_dtype is int8 (5)", "NK_QUANT_MXFP8"});
}

TEST_P(QuantValidation, EightBitOutputWithoutQuantMode) {
  nk_rms_norm_fwd_args a = args_for(NK_QUANT_NONE, NK_FLOAT8_E4M3);
  a.amax = nullptr;
  expect_rejected(a, {"y_dtype is float8_e4m3 (3)", "NK_QUANT_NONE", "needs a quantization mode"});
  a.y_dtype = NK_INT8;
  expect_rejected(a, {"y_dtype is int8 (5)", "needs a quantization mode"});
}

TEST_P(QuantValidation, E8m0IsNeverAnOutputDtype) {
  expect_rejected(args_for(NK_QUANT_TOKEN, NK_FLOAT8_E8M0),
                  {"y_dtype is float8_e8m0 (6)", "scales only"});
  nk_rms_norm_fwd_args a = args_for(NK_QUANT_NONE, NK_FLOAT8_E8M0);
  a.amax = nullptr;
  expect_rejected(a, {"y_dtype is float8_e8m0 (6)"});
}

TEST_P(QuantValidation, EightBitInputs) {
  args_.x_dtype = NK_FLOAT8_E4M3;
  expect_rejected(args_, {"x_dtype is float8_e4m3 (3)", "outputs only"});
  args_.x_dtype = NK_FLOAT32;
  args_.weight_dtype = NK_INT8;
  expect_rejected(args_, {"weight_dtype is int8 (5)", "outputs only"});
}

// ---- pointers each mode needs, and pointers it would ignore ----

TEST_P(QuantValidation, TensorWithoutScale) {
  args_.scale = nullptr;
  expect_rejected(args_, {"scale pointer missing", "scale is NULL", "NK_QUANT_TENSOR"});
}

TEST_P(QuantValidation, DynamicModesWithoutScales) {
  for (nk_quant_mode mode : {NK_QUANT_TOKEN, NK_QUANT_BLOCK, NK_QUANT_MXFP8}) {
    nk_rms_norm_fwd_args a = args_for(mode, NK_FLOAT8_E4M3);
    a.scales = nullptr;
    const char* name = mode == NK_QUANT_TOKEN   ? "NK_QUANT_TOKEN"
                       : mode == NK_QUANT_BLOCK ? "NK_QUANT_BLOCK"
                                                : "NK_QUANT_MXFP8";
    expect_rejected(a, {"scales is NULL", name});
  }
}

TEST_P(QuantValidation, PointersTheModeWouldIgnore) {
  nk_rms_norm_fwd_args a = args_for(NK_QUANT_TENSOR, NK_FLOAT8_E4M3);
  a.scales = scales_.data();
  expect_rejected(a, {"scales is given", "NK_QUANT_TENSOR"});
  a = args_for(NK_QUANT_TOKEN, NK_FLOAT8_E4M3);
  a.scale = reinterpret_cast<const float*>(scale_.data());
  expect_rejected(a, {"scale is given", "NK_QUANT_TOKEN"});
  a = args_for(NK_QUANT_BLOCK, NK_FLOAT8_E4M3);
  a.y_t = y_t_.data();
  expect_rejected(a, {"y_t is given", "NK_QUANT_BLOCK", "NK_QUANT_TENSOR only"});
}

TEST_P(QuantValidation, QuantFieldsWithoutQuantMode) {
  const auto none = [&] {
    nk_rms_norm_fwd_args a = args_for(NK_QUANT_NONE, NK_FLOAT32);
    a.amax = nullptr;
    return a;
  };
  nk_rms_norm_fwd_args a = none();
  a.scales = scales_.data();
  expect_rejected(a, {"scales is set", "NK_QUANT_NONE"});
  a = none();
  a.amax = reinterpret_cast<float*>(amax_.data());
  expect_rejected(a, {"amax is set", "NK_QUANT_NONE"});
  a = none();
  a.scale = reinterpret_cast<const float*>(scale_.data());
  expect_rejected(a, {"scale is set"});
  a = none();
  a.y_t = y_t_.data();
  expect_rejected(a, {"y_t is set"});
  a = none();
  a.quant_block = 32;
  expect_rejected(a, {"quant_block is set"});
  a = none();
  a.scale_ub = 1.0f;
  expect_rejected(a, {"scale_ub is set"});
}

// ---- block size, scale_ub, y_t stride ----

TEST_P(QuantValidation, UnsupportedBlockSizes) {
  nk_rms_norm_fwd_args a = args_for(NK_QUANT_BLOCK, NK_FLOAT8_E4M3);
  for (int64_t b : {16, 256, -32, 48}) {
    a.quant_block = b;
    expect_rejected(a, {"quant_block is " + std::to_string(b), "32, 64 or 128"});
  }
  a = args_for(NK_QUANT_MXFP8, NK_FLOAT8_E4M3);
  a.quant_block = 64;
  expect_rejected(a, {"quant_block is 64", "NK_QUANT_MXFP8", "32"});
  for (nk_quant_mode mode : {NK_QUANT_TENSOR, NK_QUANT_TOKEN}) {
    a = args_for(mode, NK_FLOAT8_E4M3);
    a.quant_block = 32;
    expect_rejected(a, {"quant_block is 32", "expected 0"});
  }
}

TEST_P(QuantValidation, HiddenNotAMultipleOfTheBlock) {
  nk_rms_norm_fwd_args a = args_for(NK_QUANT_BLOCK, NK_FLOAT8_E4M3);
  a.quant_block = 0;  // 128 > hidden 64
  expect_rejected(a, {"hidden is 64", "multiple of 128"});
  a.quant_block = 64;
  a.hidden = 48;
  expect_rejected(a, {"hidden is 48", "multiple of 64"});
  a = args_for(NK_QUANT_MXFP8, NK_FLOAT8_E5M2);
  a.hidden = 33;
  expect_rejected(a, {"hidden is 33", "multiple of 32"});
}

TEST_P(QuantValidation, ScaleUpperBound) {
  nk_rms_norm_fwd_args a = args_for(NK_QUANT_TOKEN, NK_FLOAT8_E4M3);
  for (float ub : {-1.0f, std::numeric_limits<float>::quiet_NaN(), INFINITY}) {
    a.scale_ub = ub;
    expect_rejected(a, {"scale_ub is", "finite value >= 0"});
  }
  for (nk_quant_mode mode : {NK_QUANT_TENSOR, NK_QUANT_MXFP8}) {
    a = args_for(mode, NK_FLOAT8_E4M3);
    a.scale_ub = 0.5f;
    expect_rejected(a, {"scale_ub is 0.5", mode == NK_QUANT_TENSOR ? "NK_QUANT_TENSOR"
                                                                   : "NK_QUANT_MXFP8"});
  }
}

TEST_P(QuantValidation, TransposedStrideBelowRows) {
  args_.y_t_row_stride = kRows - 1;
  expect_rejected(args_, {"y_t_row_stride is 3", "rows (4)"});
  args_.y_t_row_stride = -4;
  expect_rejected(args_, {"y_t_row_stride is -4"});
}

// ---- alignment and overlap ----

TEST_P(QuantValidation, MisalignedFloatPointers) {
  nk_rms_norm_fwd_args a = args_for(NK_QUANT_TOKEN, NK_FLOAT8_E4M3);
  a.scales = scales_.data() + 2;
  expect_rejected(a, {"scales", "aligned", "float32"});
  a = args_for(NK_QUANT_TENSOR, NK_FLOAT8_E4M3);
  a.amax = reinterpret_cast<float*>(amax_.data() + 1);
  expect_rejected(a, {"amax", "aligned"});
  a = args_for(NK_QUANT_TENSOR, NK_FLOAT8_E4M3);
  a.scale = reinterpret_cast<const float*>(scale_.data() + 1);
  expect_rejected(a, {"scale", "aligned"});
}

TEST_P(QuantValidation, OutputsOverlap) {
  nk_rms_norm_fwd_args a = args_for(NK_QUANT_TOKEN, NK_FLOAT8_E4M3);
  a.scales = y_.data();
  expect_rejected(a, {"scales", "overlap"});
  a = args_for(NK_QUANT_TOKEN, NK_FLOAT8_E4M3);
  a.amax = reinterpret_cast<float*>(scales_.data() + 4);
  expect_rejected(a, {"amax", "scales", "overlap"});
  a = args_for(NK_QUANT_TENSOR, NK_FLOAT8_E4M3);
  a.y_t = y_.data() + 8;
  expect_rejected(a, {"y_t", "overlap"});
  a = args_for(NK_QUANT_TENSOR, NK_FLOAT8_E4M3);
  a.scale = reinterpret_cast<const float*>(y_t_.data());  // the scale input inside an output
  expect_rejected(a, {"input scale overlaps output y_t"});
  a = args_for(NK_QUANT_TENSOR, NK_FLOAT8_E4M3);
  a.y = const_cast<void*>(a.x);  // a 1-byte y over a float32 x is never in place
  expect_rejected(a, {"input x overlaps output y"});
}

INSTANTIATE_TEST_SUITE_P(AllBackends, QuantValidation, ::testing::ValuesIn(all_backends()),
                         [](const auto& info) { return backend_label(info.param); });

TEST(QuantNames, DtypesAndModes) {
  EXPECT_STREQ(nk_dtype_name(NK_FLOAT8_E4M3), "float8_e4m3");
  EXPECT_STREQ(nk_dtype_name(NK_FLOAT8_E5M2), "float8_e5m2");
  EXPECT_STREQ(nk_dtype_name(NK_INT8), "int8");
  EXPECT_STREQ(nk_dtype_name(NK_FLOAT8_E8M0), "float8_e8m0");
  EXPECT_STREQ(nk_dtype_name(static_cast<nk_dtype>(7)), "invalid");
  for (nk_dtype d : {NK_FLOAT8_E4M3, NK_FLOAT8_E5M2, NK_INT8, NK_FLOAT8_E8M0}) {
    EXPECT_EQ(nk_dtype_size(d), 1u) << nk_dtype_name(d);
  }
  EXPECT_EQ(nk_dtype_size(static_cast<nk_dtype>(7)), 0u);
  EXPECT_STREQ(nk_quant_mode_name(NK_QUANT_NONE), "none");
  EXPECT_STREQ(nk_quant_mode_name(NK_QUANT_TENSOR), "tensor");
  EXPECT_STREQ(nk_quant_mode_name(NK_QUANT_TOKEN), "token");
  EXPECT_STREQ(nk_quant_mode_name(NK_QUANT_BLOCK), "block");
  EXPECT_STREQ(nk_quant_mode_name(NK_QUANT_MXFP8), "mxfp8");
  EXPECT_STREQ(nk_quant_mode_name(static_cast<nk_quant_mode>(5)), "invalid");
  nk_rms_norm_fwd_args a;
  std::memset(&a, 0xab, sizeof a);
  nk_rms_norm_fwd_args_init(&a);
  EXPECT_EQ(a.quant, NK_QUANT_NONE);
  EXPECT_EQ(a.quant_block, 0);
  EXPECT_EQ(a.scale, nullptr);
  EXPECT_EQ(a.scale_ub, 0.0f);
  EXPECT_EQ(a.scales, nullptr);
  EXPECT_EQ(a.amax, nullptr);
  EXPECT_EQ(a.y_t, nullptr);
  EXPECT_EQ(a.y_t_row_stride, 0);
}

}  // namespace
}  // namespace nktest
