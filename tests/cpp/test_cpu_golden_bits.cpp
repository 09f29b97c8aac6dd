// The CPU backend's output bits, pinned: a hash of every output over shapes, dtype combinations,
// options and in-place layouts, against the value the code gave when it was written. The CPU
// row loops are compiled for several x86-64 levels and picked at load time (row_kernels.h); the
// float operations are the same, one by one, in each, so every machine must give these bits,
// and a change to the arithmetic (its order included) must show here and be deliberate. The
// values themselves are checked against the float64 reference elsewhere (test_fwd, test_bwd,
// test_quant_fwd); this test only fixes their bits.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <vector>

#include "normkit/normkit.h"

namespace {

// FNV-1a over bytes.
class Fnv {
 public:
  void add(const void* p, size_t n) {
    const auto* b = static_cast<const unsigned char*>(p);
    for (size_t i = 0; i < n; ++i) value_ = (value_ ^ b[i]) * 1099511628211ull;
  }
  uint64_t value() const { return value_; }

 private:
  uint64_t value_ = 1469598103934665603ull;
};

// A fixed sequence of inputs (a linear congruential generator: the same on every platform).
class Inputs {
 public:
  explicit Inputs(uint32_t seed) : state_(seed) {}
  uint32_t next() { return state_ = state_ * 1664525u + 1013904223u; }
  // A value in [-4 * unit, 4 * unit] on a grid of unit/2500.
  float value(float unit = 1.0f) {
    return static_cast<float>(static_cast<int>(next() >> 8) % 20001 - 10000) / (2500.0f / unit);
  }

  // Fills `bytes` with values of `dtype` (float16: rounded down, magnitudes under 2^-14 as 1).
  void fill(std::vector<unsigned char>& bytes, nk_dtype dtype) {
    const size_t size = nk_dtype_size(dtype);
    for (size_t i = 0; i < bytes.size(); i += size) {
      const float f = value();
      if (dtype == NK_FLOAT32) {
        std::memcpy(&bytes[i], &f, 4);
        continue;
      }
      uint32_t u;
      std::memcpy(&u, &f, 4);
      uint16_t h;
      if (dtype == NK_BFLOAT16) {
        h = static_cast<uint16_t>(u >> 16);
      } else {
        const float magnitude = f < 0 ? -f : f;
        h = magnitude < 6.2e-5f ? uint16_t{0x3c00}
                                : static_cast<uint16_t>(((u >> 16) & 0x8000u) |
                                                        ((((u >> 23) & 0xffu) - 112u) << 10) |
                                                        ((u >> 13) & 0x3ffu));
      }
      std::memcpy(&bytes[i], &h, 2);
    }
  }

 private:
  uint32_t state_;
};

constexpr nk_dtype kFloatTypes[] = {NK_FLOAT32, NK_BFLOAT16, NK_FLOAT16};

std::vector<unsigned char> bytes_of(int64_t elements, nk_dtype dtype) {
  return std::vector<unsigned char>(static_cast<size_t>(elements) * nk_dtype_size(dtype));
}

void run_fwd(const nk_rms_norm_fwd_args& a) {
  ASSERT_EQ(nk_rms_norm_fwd(&a, NK_BACKEND_CPU, nullptr), NK_SUCCESS) << nk_last_error();
}

// The forward arguments every test here sets: x and y rows `stride` elements apart, a weight,
// rstd, eps 1e-6.
nk_rms_norm_fwd_args fwd_args(int64_t rows, int64_t hidden, int64_t stride, const void* x,
                              nk_dtype x_dtype, const void* weight, nk_dtype weight_dtype,
                              void* y, nk_dtype y_dtype, float* rstd) {
  nk_rms_norm_fwd_args a;
  nk_rms_norm_fwd_args_init(&a);
  a.rows = rows;
  a.hidden = hidden;
  a.x = x;
  a.x_dtype = x_dtype;
  a.x_row_stride = stride;
  a.weight = weight;
  a.weight_dtype = weight_dtype;
  a.eps = 1e-6f;
  a.y = y;
  a.y_dtype = y_dtype;
  a.y_row_stride = stride;
  a.rstd = rstd;
  return a;
}

// Forward without a residual: bias, zero-centred weight, padded strides, y in place of x.
TEST(CpuGoldenBits, Forward) {
  Fnv hash;
  Inputs in(12345);
  const int64_t shapes[][2] = {{37, 4099}, {64, 8192}, {3, 100003}, {513, 17}, {5, 1}};
  for (const auto& shape : shapes) {
    for (nk_dtype xd : kFloatTypes) {
      for (nk_dtype yd : kFloatTypes) {
        for (nk_dtype wd : kFloatTypes) {
          for (int variant = 0; variant < 4; ++variant) {
            const int64_t rows = shape[0], hidden = shape[1];
            const int64_t stride = hidden + (variant == 2 ? 3 : 0);
            const bool in_place = variant == 3 && nk_dtype_size(xd) == nk_dtype_size(yd);
            auto x = bytes_of(rows * stride, xd), y = bytes_of(rows * stride, yd);
            auto w = bytes_of(hidden, wd), b = bytes_of(hidden, wd);
            std::vector<float> rstd(static_cast<size_t>(rows));
            in.fill(x, xd);
            in.fill(w, wd);
            in.fill(b, wd);
            nk_rms_norm_fwd_args a =
                fwd_args(rows, hidden, stride, x.data(), xd, w.data(), wd,
                         in_place ? static_cast<void*>(x.data()) : y.data(),
                         in_place && xd == NK_FLOAT32 ? NK_FLOAT32 : yd, rstd.data());
            a.bias = variant == 1 ? b.data() : nullptr;
            a.zero_centered = variant == 2;
            run_fwd(a);
            hash.add(in_place ? x.data() : y.data(), in_place ? x.size() : y.size());
            hash.add(rstd.data(), rstd.size() * sizeof(float));
          }
        }
      }
    }
  }
  EXPECT_EQ(hash.value(), 0xb2919846924c9df6ull);
}

// Forward with the fused residual: residual_out over residual or over x, y over x.
TEST(CpuGoldenBits, ForwardWithResidual) {
  Fnv hash;
  Inputs in(4242);
  const int64_t shapes[][2] = {{37, 4099}, {64, 8192}, {3, 100003}, {513, 17}, {5, 1}};
  for (const auto& shape : shapes) {
    for (nk_dtype xd : kFloatTypes) {
      for (nk_dtype yd : kFloatTypes) {
        for (nk_dtype wd : kFloatTypes) {
          for (int variant = 0; variant < 6; ++variant) {
            const int64_t rows = shape[0], hidden = shape[1];
            const int64_t stride = hidden + (variant == 2 ? 3 : 0);
            auto x = bytes_of(rows * stride, xd), residual = bytes_of(rows * stride, xd);
            auto residual_out = bytes_of(rows * stride, xd), y = bytes_of(rows * stride, yd);
            auto w = bytes_of(hidden, wd), b = bytes_of(hidden, wd);
            std::vector<float> rstd(static_cast<size_t>(rows));
            in.fill(x, xd);
            in.fill(residual, xd);
            in.fill(w, wd);
            in.fill(b, wd);
            void* y_ptr = y.data();
            void* sum_ptr = residual_out.data();
            if (variant == 3) sum_ptr = residual.data();
            if (variant == 4) sum_ptr = x.data();
            if (variant == 5 && nk_dtype_size(xd) == nk_dtype_size(yd)) {
              y_ptr = x.data();
              sum_ptr = residual.data();
            }
            nk_rms_norm_fwd_args a = fwd_args(rows, hidden, stride, x.data(), xd, w.data(), wd,
                                              y_ptr, yd, rstd.data());
            a.residual = residual.data();
            a.residual_row_stride = stride;
            a.residual_out = sum_ptr;
            a.residual_out_row_stride = stride;
            a.bias = variant == 1 ? b.data() : nullptr;
            a.zero_centered = variant == 2;
            run_fwd(a);
            hash.add(y_ptr, y.size());
            hash.add(sum_ptr, residual_out.size());
            hash.add(rstd.data(), rstd.size() * sizeof(float));
          }
        }
      }
    }
  }
  EXPECT_EQ(hash.value(), 0x3ac2ff9f508bbc23ull);
}

// Backward: dx, dweight, dbias; zero-centred, no weight, dresidual_out, dx over dy or over
// dresidual_out.
TEST(CpuGoldenBits, Backward) {
  Fnv hash;
  Inputs in(777);
  const int64_t shapes[][2] = {{37, 4099}, {64, 8192}, {3, 100003}, {513, 17}, {5, 1}, {200, 300}};
  for (const auto& shape : shapes) {
    for (nk_dtype xd : kFloatTypes) {
      for (nk_dtype dyd : kFloatTypes) {
        for (nk_dtype wd : kFloatTypes) {
          for (int variant = 0; variant < 6; ++variant) {
            const int64_t rows = shape[0], hidden = shape[1];
            const int64_t stride = hidden + (variant == 2 ? 5 : 0);
            auto x = bytes_of(rows * stride, xd), dy = bytes_of(rows * stride, dyd);
            auto dres = bytes_of(rows * stride, xd), dx = bytes_of(rows * stride, xd);
            auto w = bytes_of(hidden, wd), dw = bytes_of(hidden, wd), db = bytes_of(hidden, wd);
            std::vector<float> rstd(static_cast<size_t>(rows));
            for (float& r : rstd) r = 0.5f + static_cast<float>(in.next() % 1000) / 1000.0f;
            in.fill(x, xd);
            in.fill(dy, dyd);
            in.fill(dres, xd);
            in.fill(w, wd);
            void* dx_ptr = dx.data();
            if (variant == 5) dx_ptr = dres.data();
            if (variant == 2 && xd == dyd) dx_ptr = dy.data();
            nk_rms_norm_bwd_args a;
            nk_rms_norm_bwd_args_init(&a);
            a.rows = rows;
            a.hidden = hidden;
            a.dy = dy.data();
            a.dy_dtype = dyd;
            a.dy_row_stride = stride;
            a.x = x.data();
            a.x_dtype = xd;
            a.x_row_stride = stride;
            a.rstd = rstd.data();
            a.weight = variant == 4 ? nullptr : w.data();
            a.weight_dtype = wd;
            a.zero_centered = variant == 1;
            a.dresidual_out = variant == 3 || variant == 5 ? dres.data() : nullptr;
            a.dresidual_out_row_stride = stride;
            a.dx = dx_ptr;
            a.dx_row_stride = stride;
            a.dweight = variant == 4 ? nullptr : dw.data();
            a.dbias = variant % 2 == 0 ? db.data() : nullptr;
            size_t bytes = 0;
            ASSERT_EQ(nk_rms_norm_bwd_workspace_size(&a, NK_BACKEND_CPU, &bytes), NK_SUCCESS);
            std::vector<float> workspace(bytes / sizeof(float) + 4);
            a.workspace = workspace.data();
            a.workspace_bytes = bytes;
            ASSERT_EQ(nk_rms_norm_bwd(&a, NK_BACKEND_CPU, nullptr), NK_SUCCESS) << nk_last_error();
            hash.add(dx_ptr, dx.size());
            if (a.dweight) hash.add(dw.data(), dw.size());
            if (a.dbias) hash.add(db.data(), db.size());
          }
        }
      }
    }
  }
  EXPECT_EQ(hash.value(), 0xa9a74642f7b80012ull);
}

// Quantized forward: codes, scales and amax of every mode and format, with and without the
// residual; a -0 and a float32 subnormal among the inputs.
TEST(CpuGoldenBits, QuantizedForward) {
  Fnv hash;
  Inputs in(99);
  const int64_t shapes[][2] = {{37, 4096}, {64, 8192}, {3, 1024}, {513, 128}, {5, 32}};
  const nk_quant_mode modes[] = {NK_QUANT_TENSOR, NK_QUANT_TOKEN, NK_QUANT_BLOCK, NK_QUANT_MXFP8};
  const nk_dtype codes[] = {NK_FLOAT8_E4M3, NK_FLOAT8_E5M2, NK_INT8};
  for (const auto& shape : shapes) {
    for (nk_quant_mode mode : modes) {
      for (nk_dtype code : codes) {
        for (int residual = 0; residual < 2; ++residual) {
          if ((mode == NK_QUANT_MXFP8 || mode == NK_QUANT_BLOCK) && code == NK_INT8) continue;
          const int64_t rows = shape[0], hidden = shape[1];
          const size_t n = static_cast<size_t>(rows * hidden);
          std::vector<float> x(n), w(static_cast<size_t>(hidden)), res(n), res_out(n);
          for (float& f : x) f = in.value(10.0f);
          for (float& f : res) f = in.value();
          for (float& f : w) f = 0.5f + static_cast<float>(in.next() % 1000) / 1000.0f;
          if (rows > 3) {
            x[5] = -0.0f;
            x[7] = 1e-30f;
          }
          std::vector<uint8_t> y(n);
          std::vector<float> scales(n), rstd(static_cast<size_t>(rows));
          float scale = 0.75f, amax = -1.0f;
          nk_rms_norm_fwd_args a = fwd_args(rows, hidden, hidden, x.data(), NK_FLOAT32, w.data(),
                                            NK_FLOAT32, y.data(), code, rstd.data());
          a.quant = mode;
          a.amax = &amax;
          if (residual) {
            a.residual = res.data();
            a.residual_out = res_out.data();
          }
          if (mode == NK_QUANT_TENSOR) {
            a.scale = &scale;
          } else {
            a.scales = scales.data();
          }
          if (mode == NK_QUANT_BLOCK && hidden % 128 != 0) a.quant_block = 32;
          run_fwd(a);
          hash.add(y.data(), y.size());
          hash.add(&amax, sizeof(amax));
          if (mode != NK_QUANT_TENSOR) hash.add(scales.data(), scales.size() * sizeof(float));
        }
      }
    }
  }
  EXPECT_EQ(hash.value(), 0x54f915dbdcd8584full);
}

// The per-tensor forward's transposed copy y_t (e4m3), with y_t rows of the row count and
// padded past it (the padding must stay as it was).
TEST(CpuGoldenBits, TransposedOutput) {
  Fnv hash;
  Inputs in(5);
  const int64_t shapes[][2] = {{37, 4096}, {64, 8192}, {3, 1024},  {513, 128},
                               {5, 32},    {130, 200},  {4096, 64}, {77, 129}};
  for (const auto& shape : shapes) {
    for (int pad = 0; pad < 2; ++pad) {
      const int64_t rows = shape[0], hidden = shape[1], t_stride = rows + (pad ? 13 : 0);
      std::vector<float> x(static_cast<size_t>(rows * hidden)), w(static_cast<size_t>(hidden));
      for (float& f : x) f = in.value(10.0f);
      for (float& f : w) f = 0.5f + static_cast<float>(in.next() % 1000) / 1000.0f;
      std::vector<uint8_t> y(x.size()), y_t(static_cast<size_t>(hidden * t_stride), 0xAB);
      float scale = 0.75f, amax = 0.0f;
      nk_rms_norm_fwd_args a = fwd_args(rows, hidden, hidden, x.data(), NK_FLOAT32, w.data(),
                                        NK_FLOAT32, y.data(), NK_FLOAT8_E4M3, nullptr);
      a.quant = NK_QUANT_TENSOR;
      a.scale = &scale;
      a.amax = &amax;
      a.y_t = y_t.data();
      a.y_t_row_stride = t_stride;
      run_fwd(a);
      hash.add(y_t.data(), y_t.size());
      hash.add(y.data(), y.size());
    }
  }
  EXPECT_EQ(hash.value(), 0xc66926004b3fb466ull);
}

}  // namespace
