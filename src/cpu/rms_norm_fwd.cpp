// CPU RMSNorm forward: one row at a time, rows split into tasks for threads. Without a quant
// mode each row goes straight from x (and residual) to y (fwd_row_direct); with one, the row is
// normalized in float32 scratch (fwd_row) and goes to a RowQuantizer; amax is a max over
// per-task maxima (exact in any order). With y_t, tasks are whole groups of kTransposeRows rows,
// and each task transposes its rows into y_t as soon as it has written them, from cache (one
// transpose of the whole y after all rows read y back from memory: at 4096 x 4096 it cost
// ~4.3 ms on top of a ~5.0 ms forward on the 2-core machine; ~3.4 ms this way, ~1.6 ms with
// store_run streaming y_t).
#include <algorithm>
#include <memory>
#include <vector>

#include "cpu/cpu_backend.h"
#include "cpu/parallel.h"
#include "cpu/quantize_rows.h"
#include "cpu/row_kernels.h"
#include "cpu/row_ops.h"

namespace normkit::cpu {
namespace {

// Rows per task: enough elements that a task amortizes taking it, few enough to balance.
constexpr int64_t kTaskElements = 1 << 14;

void check_fwd(const nk_rms_norm_fwd_args& a) {
  const bool bad_sizes = a.rows < 1 || a.hidden < 1;
  const bool bad_strides = a.x_row_stride < a.hidden || a.y_row_stride < a.hidden ||
                           (a.residual && (a.residual_row_stride < a.hidden ||
                                           a.residual_out_row_stride < a.hidden));
  const bool bad_pointers = !a.x || !a.y || (!a.residual != !a.residual_out);
  const bool bad_dtypes = !is_float_dtype(a.x_dtype) || !is_float_dtype(a.weight_dtype) ||
                          (a.quant == NK_QUANT_NONE ? !is_float_dtype(a.y_dtype)
                                                    : !is_quantized_dtype(a.y_dtype));
  if (bad_sizes || bad_strides || bad_pointers || bad_dtypes) {
    throw Error(NK_ERROR_INTERNAL, "cpu::rms_norm_fwd: arguments were not validated (rows " +
                                       std::to_string(a.rows) + ", hidden " +
                                       std::to_string(a.hidden) + ")");
  }
}

}  // namespace

void rms_norm_fwd(const nk_rms_norm_fwd_args& a) {
  check_fwd(a);
  const int64_t H = a.hidden;
  const std::vector<float> w = effective_weight(a.weight, a.weight_dtype, H, a.zero_centered);
  std::vector<float> b;
  if (a.bias) {
    b.resize(static_cast<size_t>(H));
    load_row(a.bias, a.weight_dtype, 0, 0, H, b.data());
  }
  const float* bias = a.bias ? b.data() : nullptr;

  int64_t rows_per_task = std::max<int64_t>(1, kTaskElements / H);
  if (a.y_t) {  // (whole groups of kTransposeRows rows: write_transposed_rows's tiles)
    rows_per_task = (rows_per_task + kTransposeRows - 1) / kTransposeRows * kTransposeRows;
  }
  const int64_t n_tasks = (a.rows + rows_per_task - 1) / rows_per_task;
  const int threads = choose_threads(a.rows * H, n_tasks);
  const bool quantized = a.quant != NK_QUANT_NONE;
  // The rounding order of v that nk_quant_mode documents for NK_QUANT_TOKEN without bias: its
  // row maximum is then (max |s * w_eff|) * rstd, which the CUDA kernel reduces in one pass.
  const bool fold_rstd_last = a.quant == NK_QUANT_TOKEN && !a.bias;
  std::unique_ptr<RowQuantizer> quantizer;
  if (quantized) quantizer = std::make_unique<RowQuantizer>(a);
  std::vector<float> task_amax(quantized ? static_cast<size_t>(n_tasks) : 0, 0.0f);

  run_tasks(n_tasks, threads, [&] {
    // Each thread's scratch for fwd_row: s = the row being normalized, t = residual, then the
    // output row. Reading the whole row before writing any output makes exact in-place views
    // safe.
    const size_t scratch = quantized ? static_cast<size_t>(H) : 0;
    return [&, s = std::vector<float>(scratch),
            t = std::vector<float>(scratch)](int64_t task) mutable {
      const int64_t begin = task * rows_per_task;
      const int64_t end = std::min(a.rows, begin + rows_per_task);
      for (int64_t r = begin; r < end; ++r) {
        const float rstd =
            quantized ? fwd_row(a, w.data(), bias, fold_rstd_last, r, s.data(), t.data())
                      : fwd_row_direct(a, w.data(), bias, r);
        if (quantized) {
          task_amax[task] = std::max(task_amax[task], quantizer->write_row(r, t.data()));
        }
        if (a.rstd) a.rstd[r] = rstd;
      }
      if (a.y_t) write_transposed_rows(a, begin, end);  // (y_t overlaps no input: validate.cpp)
    };
  });
  if (a.amax) *a.amax = *std::max_element(task_amax.begin(), task_amax.end());
}

}  // namespace normkit::cpu
