// CUDA entry point of the forward with a quantized output: vector width, configuration, the
// amax reset, and for a transposed output, row chunks small enough that the transpose reads the
// freshly written y from L2 rather than HBM.
#include <string>

#include "cuda/cuda_backend.h"
#include "cuda/cuda_check.h"
#include "cuda/launch_common.cuh"
#include "cuda/launchers.h"
#include "cuda/transpose_bytes.cuh"
#include "cuda/vector_width.h"

namespace normkit::cuda {
namespace {

// y bytes per chunk when y_t is requested: well inside the 50 MB L2 of an H100 next to the
// input streaming through it.
constexpr int64_t kTransposeChunkBytes = int64_t(8) << 20;

// Vector width: x's natural width at most (y's one-byte codes would allow 16).
int quant_vector_width(const nk_rms_norm_fwd_args& a) {
  const size_t xs = nk_dtype_size(a.x_dtype), ws = nk_dtype_size(a.weight_dtype);
  return vector_width(a.rows,
                      {{a.x, xs, a.x_row_stride},
                       {a.residual, xs, a.residual_row_stride},
                       {a.residual_out, xs, a.residual_out_row_stride},
                       {a.y, 1, a.y_row_stride},
                       {a.weight, ws, 0},
                       {a.bias, ws, 0}},
                      static_cast<int>(16 / xs));
}

LaunchConfig quant_config(const nk_rms_norm_fwd_args& a) {
  const int64_t block = quant_block_size(a);
  const LaunchConfig cfg = plan_fwd_quant(a.rows, a.hidden, quant_vector_width(a),
                                          static_cast<int>(block),
                                          kernel_facts(current_device_facts()));
  if (cfg.vec == 0) {
    throw Error(NK_ERROR_UNSUPPORTED,
                "quantized forward with blocks of " + std::to_string(block) +
                    " on CUDA needs x, residual, residual_out and y rows aligned to " +
                    std::to_string(block / 32 * nk_dtype_size(a.x_dtype)) +
                    " bytes (pointers and row strides)");
  }
  return cfg;
}

void launch_quant(const nk_rms_norm_fwd_args& a, cudaStream_t stream) {
  const LaunchConfig cfg = quant_config(a);
  dispatch_dtype(a.x_dtype, "rms_norm_fwd x",
                 [&](auto x) { launch_fwd_quant_for_x<decltype(x)>(a, cfg, stream); });
}

void launch_transpose(const nk_rms_norm_fwd_args& a, int64_t first_row, cudaStream_t stream) {
  TransposeParams t;
  t.src = static_cast<const uint8_t*>(a.y);
  t.src_stride = a.y_row_stride;
  t.dst = static_cast<uint8_t*>(a.y_t) + first_row;
  t.dst_stride = a.y_t_row_stride;  // resolved by the caller (never 0)
  t.rows = a.rows;
  t.cols = a.hidden;
  auto aligned = [](const void* p, int64_t stride, int64_t extent) {
    return reinterpret_cast<uintptr_t>(p) % 16 == 0 && stride % 16 == 0 && extent % 16 == 0;
  };
  t.wide_loads = aligned(t.src, t.src_stride, t.cols);
  t.wide_stores = aligned(t.dst, t.dst_stride, t.rows);
  const int64_t tiles = ((a.rows + kTransposeTile - 1) / kTransposeTile) *
                        ((a.hidden + kTransposeTile - 1) / kTransposeTile);
  launch(transpose_bytes, tiles, dim3(kTransposeThreads), {}, stream, "transpose of y", 0, t);
}

// The rows [first, first + count) of `a` as a call of their own (y_t handled by the caller).
nk_rms_norm_fwd_args row_chunk(const nk_rms_norm_fwd_args& a, int64_t first, int64_t count) {
  nk_rms_norm_fwd_args c = a;
  const size_t xs = nk_dtype_size(a.x_dtype);
  auto at = [&](const void* p, int64_t stride, size_t bytes) -> const char* {
    return p ? static_cast<const char*>(p) + first * stride * bytes : nullptr;
  };
  c.rows = count;
  c.x = at(a.x, a.x_row_stride, xs);
  c.residual = at(a.residual, a.residual_row_stride, xs);
  c.residual_out = const_cast<char*>(at(a.residual_out, a.residual_out_row_stride, xs));
  c.y = const_cast<char*>(at(a.y, a.y_row_stride, 1));
  c.rstd = a.rstd ? a.rstd + first : nullptr;
  c.y_t = nullptr;
  return c;
}

}  // namespace

void rms_norm_fwd_quant(const nk_rms_norm_fwd_args& a, void* stream) {
  const auto s = static_cast<cudaStream_t>(stream);
  try {
    if (a.amax) check_cuda(cudaMemsetAsync(a.amax, 0, sizeof(float), s), "cudaMemsetAsync(amax)");
    if (!a.y_t) return launch_quant(a, s);
    // y_t comes only with NK_QUANT_TENSOR (validated), whose chunks share the one scale.
    // Whole tiles of rows per chunk, so each transpose writes whole 64-byte runs of y_t.
    int64_t chunk = kTransposeChunkBytes / a.hidden / kTransposeTile * kTransposeTile;
    if (chunk < kTransposeTile) chunk = kTransposeTile;
    for (int64_t first = 0; first < a.rows; first += chunk) {
      const nk_rms_norm_fwd_args part = row_chunk(a, first, std::min(chunk, a.rows - first));
      launch_quant(part, s);
      nk_rms_norm_fwd_args whole_t = part;
      whole_t.y_t = a.y_t;
      whole_t.y_t_row_stride = a.y_t_row_stride ? a.y_t_row_stride : a.rows;
      launch_transpose(whole_t, first, s);
    }
  } catch (const Error& e) {
    throw Error(e.status(), std::string(e.what()) + "; rms_norm_fwd quantized (" +
                                nk_quant_mode_name(a.quant) + ") rows=" + std::to_string(a.rows) +
                                " hidden=" + std::to_string(a.hidden) + " x " +
                                nk_dtype_name(a.x_dtype) + " y " + nk_dtype_name(a.y_dtype));
  }
}

}  // namespace normkit::cuda
