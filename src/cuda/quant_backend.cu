// CUDA entry point of the forward with a quantized output: vector width, configuration, the
// amax reset, and y_t: the ticketed grid where it applies (with its band counters), else the
// forward then the transpose.
#include <algorithm>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <tuple>

#include "cuda/cuda_backend.h"
#include "cuda/cuda_check.h"
#include "cuda/launch_common.cuh"
#include "cuda/launchers.h"
#include "cuda/transpose_bytes.cuh"
#include "cuda/transpose_tickets.h"
#include "cuda/vector_width.h"

namespace normkit::cuda {
namespace {

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

// Calls f(x, w) with values of x's and the weight's element types.
template <typename F>
void dispatch_x_and_weight(const nk_rms_norm_fwd_args& a, F&& f) {
  dispatch_dtype(a.x_dtype, "rms_norm_fwd x", [&](auto x) {
    dispatch_dtype(a.weight_dtype, "rms_norm_fwd weight", [&](auto w) { f(x, w); });
  });
}

// Whether the launcher has 56-register kernels for these (pin_quant_registers): 16-bit x and
// weights, and not TOKEN with a bias, which keeps the 64-register kernel (two CTAs of 512 x 3
// per SM at 12288 columns, not two of 384 x 4).
bool pinnable(nk_dtype x, nk_dtype weight, nk_quant_mode mode, bool bias) {
  return nk_dtype_size(x) == 2 && nk_dtype_size(weight) == 2 && !(mode == NK_QUANT_TOKEN && bias);
}

// plan_fwd_quant (pinned where `pin`) with the L2 policy of the inputs it reads once (x,
// residual): what the launches and --explain share.
LaunchConfig plan_quant_with_reads(int64_t rows, int64_t hidden, int vec, int scale_block,
                                   nk_quant_mode mode, bool pin, nk_dtype x, bool with_residual,
                                   const KernelFacts& facts) {
  const bool dynamic = mode != NK_QUANT_TENSOR;
  LaunchConfig c = plan_fwd_quant(rows, hidden, vec, scale_block, dynamic, facts);
  // (No full-items kernel for TOKEN.)
  const bool token = mode == NK_QUANT_TOKEN;
  if (pin) {
    pin_quant_registers(c, rows, hidden, facts, !token,
                        quant_e4m3_kernels(mode, scale_block, with_residual, hidden, facts));
  }
  apply_read_policy(c, fwd_read_once_bytes(rows, hidden, nk_dtype_size(x), with_residual), false,
                    facts);
  apply_amax_ticket(c, facts);  // (after pinning, which may reshape the rows)
  apply_mxfp8_pairs(c, mode, facts);
  apply_row_sum_quads(c, mode, facts);
  return c;
}

LaunchConfig quant_config(const nk_rms_norm_fwd_args& a, const KernelFacts& facts) {
  return plan_quant_with_reads(a.rows, a.hidden, quant_vector_width(a),
                               static_cast<int>(quant_block_size(a)), a.quant,
                               pinnable(a.x_dtype, a.weight_dtype, a.quant, a.bias != nullptr),
                               a.x_dtype, a.residual != nullptr, facts);
}

void launch_quant(const nk_rms_norm_fwd_args& a, const LaunchConfig& cfg, cudaStream_t stream) {
  dispatch_x_and_weight(a, [&](auto x, auto w) {
    launch_fwd_quant_for<decltype(x), decltype(w)>(a, cfg, stream);
  });
}

// Whether every row of a one-byte-code matrix (start, row stride in bytes) begins on 16 bytes.
bool rows_16_byte_aligned(const void* p, int64_t stride) {
  return reinterpret_cast<uintptr_t>(p) % 16 == 0 && stride % 16 == 0;
}

// The one-kernel plan for y_t where it applies (plan_fwd_quant_transposed) and y_t allows its
// 32-byte runs as 16-byte stores; else grid 0.
LaunchConfig fused_transposed_config(const nk_rms_norm_fwd_args& a, const KernelFacts& facts) {
  LaunchConfig c = plan_fwd_quant_transposed(a.rows, a.hidden, quant_vector_width(a),
                                             static_cast<int>(nk_dtype_size(a.x_dtype)), facts);
  if (!rows_16_byte_aligned(a.y_t, a.y_t_row_stride)) c.grid = 0;
  return c;
}

// Whether the shape and plan allow the ticketed grid (KernelFacts::quant_fused_transpose 3;
// rms_norm_fwd_quant_ticketed): a pinned plan without clusters (16-bit x and weights, 16-byte
// vectors), whole warps per CTA (a transpose unit's columns are its threads), rows per CTA
// dividing a band, and hidden a multiple of 16 (16-byte reads of y). Pointers and strides are
// the caller's to check (ticketed_operands).
bool ticketed_shape(const LaunchConfig& cfg, int64_t hidden, const KernelFacts& facts) {
  const int threads = cfg.threads_per_row * cfg.rows_per_block;
  return facts.quant_fused_transpose == 3 && cfg.plan == RowPlan::kRegisters &&
         cfg.pinned_registers && cfg.exact && cfg.cluster_size == 1 && cfg.vec == 8 &&
         threads % 32 == 0 && kBandRows % cfg.rows_per_block == 0 && hidden % 16 == 0;
}

// y's and y_t's rows 16-byte aligned (the transpose units' loads and stores).
bool ticketed_operands(const nk_rms_norm_fwd_args& a) {
  return rows_16_byte_aligned(a.y, a.y_row_stride) &&
         rows_16_byte_aligned(a.y_t, a.y_t_row_stride);
}

void launch_transpose(const nk_rms_norm_fwd_args& a, cudaStream_t stream) {
  TransposeParams t;
  t.src = static_cast<const uint8_t*>(a.y);
  t.src_stride = a.y_row_stride;
  t.dst = static_cast<uint8_t*>(a.y_t);
  t.dst_stride = a.y_t_row_stride;  // resolved by validation (never 0)
  t.rows = a.rows;
  t.cols = a.hidden;
  t.wide_loads = rows_16_byte_aligned(t.src, t.src_stride) && t.cols % 16 == 0;
  t.wide_stores = rows_16_byte_aligned(t.dst, t.dst_stride) && t.rows % 16 == 0;
  const int64_t tiles = ((a.rows + kTransposeTile - 1) / kTransposeTile) *
                        ((a.hidden + kTransposeTile - 1) / kTransposeTile);
  launch(transpose_bytes, tiles, dim3(kTransposeThreads), {}, stream, "transpose of y", 0, t);
}

}  // namespace

unsigned* band_counters(int64_t bands, cudaStream_t stream) {
  struct Counters {
    unsigned* ptr = nullptr;
    int64_t count = 0;
  };
  const char* what = "band counters of the quantized forward";
  // Not into graphs: a captured launch would keep this stream's array, and replays of two such
  // graphs on two streams at once would share it (one launch's reset would strand the other's
  // waits).
  cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
  check_cuda(cudaStreamIsCapturing(stream, &capture), "cudaStreamIsCapturing", what);
  if (capture != cudaStreamCaptureStatusNone) return nullptr;
  // cudaStreamPerThread names another stream in every host thread: the thread is part of its key.
  const std::thread::id thread =
      stream == cudaStreamPerThread ? std::this_thread::get_id() : std::thread::id();
  static std::mutex mutex;
  static std::map<std::tuple<int, cudaStream_t, std::thread::id>, Counters> arrays;
  int device = 0;
  check_cuda(cudaGetDevice(&device), "cudaGetDevice", what);
  std::lock_guard<std::mutex> lock(mutex);
  Counters& c = arrays[{device, stream, thread}];
  if (c.count >= bands) return c.ptr;
  const int64_t count = std::max<int64_t>({bands, 2 * c.count, 1024});
  unsigned* fresh = nullptr;
  check_cuda(cudaMalloc(&fresh, static_cast<size_t>(count) * sizeof(unsigned)), "cudaMalloc",
             what);
  check_cuda(cudaMemsetAsync(fresh, 0, static_cast<size_t>(count) * sizeof(unsigned), stream),
             "cudaMemsetAsync", what);
  if (c.ptr) {  // earlier launches on this stream may still use the old array
    check_cuda(cudaStreamSynchronize(stream), "cudaStreamSynchronize", what);
    check_cuda(cudaFree(c.ptr), "cudaFree", what);
  }
  c = {fresh, count};
  return fresh;
}

namespace {

// The vector width the explain functions assume: 16 bytes of x where the rows allow it
// (quant_vector_width; the weight only adds alignment limits).
int explained_quant_vec(int64_t hidden, nk_dtype x) {
  const int natural = static_cast<int>(16 / nk_dtype_size(x));
  return hidden % natural == 0 ? natural : 1;
}

}  // namespace

std::string explain_fwd_quant(int64_t rows, int64_t hidden, nk_dtype x, nk_dtype w,
                              nk_quant_mode mode, int block, bool bias) {
  const int scale_block = mode == NK_QUANT_MXFP8 ? 32 : mode == NK_QUANT_BLOCK ? block : 0;
  return plan_quant_with_reads(rows, hidden, explained_quant_vec(hidden, x), scale_block, mode,
                               pinnable(x, w, mode, bias), x, false,
                               kernel_facts(current_device_facts()))
      .describe();
}

std::string explain_fwd_quant_transposed(int64_t rows, int64_t hidden, nk_dtype x, nk_dtype w) {
  const KernelFacts facts = facts_with_transposed_output(kernel_facts(current_device_facts()));
  const int vec = explained_quant_vec(hidden, x);
  const LaunchConfig fused =
      plan_fwd_quant_transposed(rows, hidden, vec, static_cast<int>(nk_dtype_size(x)), facts);
  if (fused.grid > 0) return fused.describe() + " (y and y_t in one kernel)";
  // (explain_fwd_quant's plan for NK_QUANT_TENSOR)
  const LaunchConfig cfg = plan_quant_with_reads(
      rows, hidden, vec, 0, NK_QUANT_TENSOR, pinnable(x, w, NK_QUANT_TENSOR, false), x, false,
      facts);
  if (ticketed_shape(cfg, hidden, facts)) {
    return cfg.describe() + "; forward and transpose units in one grid (bands of " +
           std::to_string(kBandRows) + " rows, " +
           std::to_string(cfg.threads_per_row * cfg.rows_per_block * facts.quant_ticket_slices) +
           " columns per transpose unit, lag " + std::to_string(facts.quant_ticket_lag_percent) +
           "% of a resident wave), where y and y_t rows are 16-byte aligned";
  }
  return keep_y_for_transpose(cfg, facts).describe() + "; then transpose_bytes 64x64 tiles";
}

void rms_norm_fwd_quant(const nk_rms_norm_fwd_args& a, void* stream) {
  const auto s = static_cast<cudaStream_t>(stream);
  try {
    if (a.amax) check_cuda(cudaMemsetAsync(a.amax, 0, sizeof(float), s), "cudaMemsetAsync(amax)");
    const KernelFacts device_facts = kernel_facts(current_device_facts());
    const KernelFacts facts =
        a.y_t ? facts_with_transposed_output(device_facts) : device_facts;
    const LaunchConfig cfg = quant_config(a, facts);
    // y_t comes only with NK_QUANT_TENSOR (validated).
    if (a.y_t) {
      const LaunchConfig fused = fused_transposed_config(a, facts);
      if (fused.grid > 0) {
        dispatch_x_and_weight(a, [&](auto x, auto w) {
          launch_fwd_quant_transposed_for<decltype(x), decltype(w)>(a, fused, s);
        });
        return;
      }
      if (ticketed_shape(cfg, a.hidden, facts) && ticketed_operands(a)) {
        bool launched = false;
        dispatch_x_and_weight(a, [&](auto x, auto w) {
          launched = launch_fwd_quant_ticketed_for<decltype(x), decltype(w)>(
              a, cfg, facts.quant_ticket_lag_percent, facts.quant_ticket_slices, s);
        });
        if (launched) return;
      }
    }
    launch_quant(a, a.y_t ? keep_y_for_transpose(cfg, facts) : cfg, s);
    // The transpose reads y back. Chunks of rows small enough for y to stay in L2 were slower
    // (launch gaps; docs/notes.md, q2).
    if (a.y_t) launch_transpose(a, s);
  } catch (const Error& e) {
    throw Error(e.status(), std::string(e.what()) + "; rms_norm_fwd quantized (" +
                                nk_quant_mode_name(a.quant) + ") rows=" + std::to_string(a.rows) +
                                " hidden=" + std::to_string(a.hidden) + " x " +
                                nk_dtype_name(a.x_dtype) + " y " + nk_dtype_name(a.y_dtype));
  }
}

}  // namespace normkit::cuda
