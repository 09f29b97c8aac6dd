// What the kernels receive by value: raw pointers, resolved strides (elements) and the launch
// shape. Filled by the launchers from validated C API arguments and a LaunchConfig.
#pragma once

#include <cstdint>

namespace normkit::cuda {

struct RowShape {
  int64_t rows = 0;
  int64_t hidden = 0;
  float inv_hidden = 0;
  int items = 1;             // vectors per thread per row
  int cluster_size = 1;      // CTAs per row
  int64_t cols_per_cta = 0;  // columns per cluster CTA (multiple of the vector width)
};

struct FwdParams {
  RowShape shape;
  const void* x;
  int64_t x_stride;
  const void* residual;  // may be null
  int64_t residual_stride;
  void* residual_out;    // non-null iff residual
  int64_t residual_out_stride;
  const void* weight;  // may be null
  const void* bias;    // may be null
  bool zero_centered;
  float eps;
  void* y;
  int64_t y_stride;
  float* rstd;  // may be null
};

struct BwdParams {
  RowShape shape;
  const void* dy;
  int64_t dy_stride;
  const void* x;
  int64_t x_stride;
  const float* rstd;
  const void* weight;  // may be null
  bool zero_centered;
  const void* dresidual_out;  // may be null
  int64_t dresidual_out_stride;
  void* dx;
  int64_t dx_stride;
  float* partial_dweight;  // [slots, hidden] or null
  float* partial_dbias;    // [slots, hidden] or null
};

}  // namespace normkit::cuda
