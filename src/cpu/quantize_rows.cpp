#include "cpu/quantize_rows.h"

#include <algorithm>

#include "common/quant_layout.h"
#include "common/quant_rules.h"
#include "cpu/parallel.h"
#include "cpu/quantize_span.h"
#include "cpu/row_ops.h"

namespace normkit::cpu {
namespace {

// Columns per transpose task, and the square tile both loops walk (a 64 x 64 byte tile keeps
// the 64 source rows and 64 destination rows in L1).
constexpr int64_t kTransposeTile = 64;

}  // namespace

RowQuantizer::RowQuantizer(const nk_rms_norm_fwd_args& a) : a_(a), qmax_(quant_qmax(a.y_dtype)) {
  const bool block_mode = a.quant == NK_QUANT_BLOCK || a.quant == NK_QUANT_MXFP8;
  const bool bad = qmax_ == 0.0f || (a.quant == NK_QUANT_TENSOR && !a.scale) ||
                   (a.quant != NK_QUANT_TENSOR && !a.scales) ||
                   (block_mode && (a.quant_block <= 0 || a.hidden % a.quant_block != 0)) ||
                   (a.y_t && a.y_t_row_stride < a.rows);
  if (bad) {
    throw Error(NK_ERROR_INTERNAL, std::string("cpu::rms_norm_fwd: quantization arguments were "
                                               "not validated (quant ") +
                                       nk_quant_mode_name(a.quant) + ", y_dtype " +
                                       nk_dtype_name(a.y_dtype) + ")");
  }
  if (a.quant == NK_QUANT_TENSOR) tensor_scale_ = *a.scale;
}

float RowQuantizer::write_row(int64_t r, const float* v) const {
  uint8_t* y = static_cast<uint8_t*>(a_.y) + r * a_.y_row_stride;
  switch (a_.quant) {
    case NK_QUANT_TENSOR: return write_tensor(y, v);
    case NK_QUANT_TOKEN: return write_blocks(r, y, v, a_.hidden);
    case NK_QUANT_BLOCK: return write_blocks(r, y, v, a_.quant_block);
    case NK_QUANT_MXFP8: return write_mx_blocks(r, y, v);
    default: break;
  }
  throw Error(NK_ERROR_INTERNAL, "cpu::RowQuantizer: unexpected quant mode " +
                                     std::to_string(static_cast<int>(a_.quant)));
}

float RowQuantizer::write_tensor(uint8_t* y, const float* v) const {
  quantize_span(y, v, a_.hidden, tensor_scale_, a_.y_dtype);
  return abs_max(v, a_.hidden);
}

// TOKEN (block = hidden) and BLOCK: scale = dynamic_scale(block amax), y = Q(v * (1 / scale)).
float RowQuantizer::write_blocks(int64_t r, uint8_t* y, const float* v, int64_t block) const {
  float* scales = static_cast<float*>(a_.scales) + r * (a_.hidden / block);
  return quantize_scaled_blocks(y, scales, v, a_.hidden, block, qmax_, a_.scale_ub, a_.y_dtype);
}

// MXFP8: per 32 elements, e from the block amax, scale byte e + 127, y = Q(v * 2^-e).
float RowQuantizer::write_mx_blocks(int64_t r, uint8_t* y, const float* v) const {
  uint8_t* scales = static_cast<uint8_t*>(a_.scales) + r * (a_.hidden / kMxfp8Block);
  return quantize_mx_blocks(y, scales, v, a_.hidden, a_.y_dtype);
}

void write_transposed(const nk_rms_norm_fwd_args& a) {
  const int64_t n_tasks = (a.hidden + kTransposeTile - 1) / kTransposeTile;
  const int threads = choose_threads(a.rows * a.hidden, n_tasks);
  const uint8_t* y = static_cast<const uint8_t*>(a.y);
  uint8_t* y_t = static_cast<uint8_t*>(a.y_t);
  run_tasks(n_tasks, threads, [&] {
    return [&](int64_t task) {
      const int64_t j0 = task * kTransposeTile, j1 = std::min(a.hidden, j0 + kTransposeTile);
      for (int64_t r0 = 0; r0 < a.rows; r0 += kTransposeTile) {
        const int64_t r1 = std::min(a.rows, r0 + kTransposeTile);
        for (int64_t j = j0; j < j1; ++j) {
          for (int64_t r = r0; r < r1; ++r) y_t[j * a.y_t_row_stride + r] = y[r * a.y_row_stride + j];
        }
      }
    };
  });
}

}  // namespace normkit::cpu
