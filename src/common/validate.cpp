#include "common/validate.h"

#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "common/dtype_host.h"
#include "common/error.h"
#include "common/quant_layout.h"

namespace normkit {
namespace {

std::string str(int64_t v) { return std::to_string(v); }

std::string hex(const void* p) {
  char text[32];
  std::snprintf(text, sizeof text, "%p", p);
  return text;
}

size_t element_size(nk_dtype d) { return nk_dtype_size(d); }

// Inputs (and the unquantized y, checked in validate_quant.cpp) are float dtypes; the 8-bit
// dtypes are outputs of the quantized forward only.
void check_dtype(const char* name, nk_dtype d) {
  if (!is_float_dtype(d)) {
    const bool eight_bit = element_size(d) == 1;
    fail_argument(std::string(name) + " is " +
                  (eight_bit ? std::string(nk_dtype_name(d)) + " (" +
                                   str(static_cast<int>(d)) + ")"
                             : str(static_cast<int>(d))) +
                  "; expected NK_FLOAT32 (0), NK_FLOAT16 (1) or NK_BFLOAT16 (2)" +
                  (eight_bit ? " (8-bit dtypes are quantized outputs only)" : ""));
  }
}

void check_not_null(const char* name, const void* p) {
  if (!p) fail_argument(std::string(name) + " is NULL; it is required");
}

void check_element_aligned(const char* name, const void* p, size_t bytes, const char* what) {
  if (p && reinterpret_cast<uintptr_t>(p) % bytes != 0) {
    fail_argument(std::string(name) + " (" + hex(p) + ") is not aligned to its element size: " +
                  "the address must be a multiple of " + str(static_cast<int64_t>(bytes)) +
                  " for " + what);
  }
}

int64_t resolve_stride(const char* name, int64_t stride, int64_t hidden) {
  if (stride == 0) return hidden;
  if (stride < hidden) {
    fail_argument(std::string(name) + " is " + str(stride) +
                  "; expected 0 (contiguous) or a stride >= hidden (" + str(hidden) + ")");
  }
  return stride;
}

// A region of memory that a tensor touches: `rows` rows of `row_bytes` bytes, `stride_bytes`
// apart (a vector is one row).
struct Region {
  const char* name;
  uintptr_t begin;
  int64_t rows;
  int64_t row_bytes;
  int64_t stride_bytes;
  uintptr_t end() const { return begin + (rows - 1) * stride_bytes + row_bytes; }
};

Region matrix_region(const char* name, const void* p, int64_t rows, int64_t hidden,
                     int64_t stride, nk_dtype d) {
  const int64_t e = static_cast<int64_t>(element_size(d));
  // (rows - 1) * stride + hidden elements must be addressable; reject sizes that overflow.
  int64_t span = 0, bytes = 0;
  if (__builtin_mul_overflow(rows - 1, stride, &span) ||
      __builtin_add_overflow(span, hidden, &span) || __builtin_mul_overflow(span, e, &bytes) ||
      static_cast<uint64_t>(bytes) > UINTPTR_MAX - reinterpret_cast<uintptr_t>(p)) {
    fail_argument(std::string(name) + " spans more memory than can be addressed: rows " +
                  str(rows) + " x row stride " + str(stride) + " elements");
  }
  return Region{name, reinterpret_cast<uintptr_t>(p), rows, hidden * e, stride * e};
}

Region vector_region(const char* name, const void* p, int64_t n, size_t element_bytes) {
  return Region{name, reinterpret_cast<uintptr_t>(p), 1, n * static_cast<int64_t>(element_bytes),
                0};
}

bool same_view(const Region& a, const Region& b) {
  return a.begin == b.begin && a.rows == b.rows && a.row_bytes == b.row_bytes &&
         (a.rows == 1 || a.stride_bytes == b.stride_bytes);
}

// True when the two regions share a byte. Regions with the same row stride may interleave
// (two tensors packed side by side in one strided buffer) without sharing bytes.
bool overlaps(const Region& a, const Region& b) {
  if (a.end() <= b.begin || b.end() <= a.begin) return false;
  if (a.rows > 1 && b.rows > 1 && a.stride_bytes == b.stride_bytes) {
    const int64_t s = a.stride_bytes;
    const Region& first = a.begin <= b.begin ? a : b;
    const Region& second = a.begin <= b.begin ? b : a;
    const int64_t offset = static_cast<int64_t>((second.begin - first.begin) % s);
    // Within each period of s bytes, first covers [0, first.row_bytes) and second covers
    // [offset, offset + second.row_bytes).
    return !(offset >= first.row_bytes && offset + second.row_bytes <= s);
  }
  return true;
}

void check_outputs_disjoint(const std::vector<Region>& outputs) {
  for (size_t i = 0; i < outputs.size(); ++i) {
    for (size_t j = i + 1; j < outputs.size(); ++j) {
      if (overlaps(outputs[i], outputs[j])) {
        fail_argument(std::string("outputs ") + outputs[i].name + " and " + outputs[j].name +
                      " overlap in memory");
      }
    }
  }
}

// An input may be the very same view as a row-matrix output (in-place operation: every element
// is read before the same thread writes it); any other overlap is rejected.
void check_input_vs_outputs(const Region& input, bool may_alias,
                            const std::vector<Region>& outputs, const std::vector<bool>& aliasable) {
  for (size_t i = 0; i < outputs.size(); ++i) {
    if (!overlaps(input, outputs[i])) continue;
    if (may_alias && aliasable[i] && same_view(input, outputs[i])) continue;
    fail_argument(std::string("input ") + input.name + " overlaps output " + outputs[i].name +
                  (may_alias && aliasable[i]
                       ? " without being the same view (in-place use needs the same pointer, "
                         "row stride and element size)"
                       : ""));
  }
}

void check_eps(float eps) {
  if (!std::isfinite(eps) || eps < 0.0f) {
    char text[96];
    std::snprintf(text, sizeof text, "eps is %g; expected a finite value >= 0",
                  static_cast<double>(eps));
    fail_argument(text);
  }
}

}  // namespace

void validate_sizes(int64_t rows, int64_t hidden) {
  if (rows < 1) fail_argument("rows is " + str(rows) + "; expected >= 1");
  if (hidden < 1) fail_argument("hidden is " + str(hidden) + "; expected >= 1");
}

nk_rms_norm_fwd_args validate_fwd(const nk_rms_norm_fwd_args& in) {
  nk_rms_norm_fwd_args a = in;
  validate_sizes(a.rows, a.hidden);
  check_not_null("x", a.x);
  check_not_null("y", a.y);
  check_dtype("x_dtype", a.x_dtype);
  check_dtype("weight_dtype", a.weight_dtype);
  validate_quant_fields(a);  // y_dtype for the mode; resolves quant_block and y_t_row_stride
  if (a.residual && !a.residual_out) {
    fail_argument("residual is given but residual_out is NULL; the fused residual add writes "
                  "x + residual to residual_out");
  }
  if (!a.residual && a.residual_out) {
    fail_argument("residual_out is given but residual is NULL");
  }
  if (a.zero_centered && !a.weight) {
    fail_argument("zero_centered is set but weight is NULL; the (1 + weight) scale needs a weight");
  }
  check_eps(a.eps);

  a.x_row_stride = resolve_stride("x_row_stride", a.x_row_stride, a.hidden);
  a.y_row_stride = resolve_stride("y_row_stride", a.y_row_stride, a.hidden);
  if (a.residual) {
    a.residual_row_stride = resolve_stride("residual_row_stride", a.residual_row_stride, a.hidden);
    a.residual_out_row_stride =
        resolve_stride("residual_out_row_stride", a.residual_out_row_stride, a.hidden);
  } else {
    a.residual_row_stride = a.residual_out_row_stride = a.hidden;
  }

  const char* x_type = nk_dtype_name(a.x_dtype);
  const size_t x_size = element_size(a.x_dtype), w_size = element_size(a.weight_dtype);
  check_element_aligned("x", a.x, x_size, x_type);
  check_element_aligned("y", a.y, element_size(a.y_dtype), nk_dtype_name(a.y_dtype));
  check_element_aligned("residual", a.residual, x_size, x_type);
  check_element_aligned("residual_out", a.residual_out, x_size, x_type);
  check_element_aligned("weight", a.weight, w_size, nk_dtype_name(a.weight_dtype));
  check_element_aligned("bias", a.bias, w_size, nk_dtype_name(a.weight_dtype));
  check_element_aligned("rstd", a.rstd, sizeof(float), "float32");
  check_element_aligned("scale", a.scale, sizeof(float), "float32");
  check_element_aligned("amax", a.amax, sizeof(float), "float32");
  const nk_dtype scale_dtype = quant_scale_dtype(a.quant);
  check_element_aligned("scales", a.scales, element_size(scale_dtype), nk_dtype_name(scale_dtype));

  std::vector<Region> outputs{
      matrix_region("y", a.y, a.rows, a.hidden, a.y_row_stride, a.y_dtype)};
  std::vector<bool> aliasable{true};
  if (a.residual_out) {
    outputs.push_back(matrix_region("residual_out", a.residual_out, a.rows, a.hidden,
                                    a.residual_out_row_stride, a.x_dtype));
    aliasable.push_back(true);
  }
  if (a.rstd) {
    outputs.push_back(vector_region("rstd", a.rstd, a.rows, sizeof(float)));
    aliasable.push_back(false);
  }
  // Quantized outputs: scales (dense [rows, scales per row]), amax ([1]) and y_t ([hidden,
  // rows]); none of them may be written in place of an input.
  if (a.scales) {
    const int64_t per_row = quant_scales_per_row(a.quant, a.quant_block, a.hidden);
    outputs.push_back(matrix_region("scales", a.scales, a.rows, per_row, per_row, scale_dtype));
    aliasable.push_back(false);
  }
  if (a.amax) {
    outputs.push_back(vector_region("amax", a.amax, 1, sizeof(float)));
    aliasable.push_back(false);
  }
  if (a.y_t) {
    outputs.push_back(
        matrix_region("y_t", a.y_t, a.hidden, a.rows, a.y_t_row_stride, a.y_dtype));
    aliasable.push_back(false);
  }
  check_outputs_disjoint(outputs);
  if (a.scale) {
    check_input_vs_outputs(vector_region("scale", a.scale, 1, sizeof(float)), false, outputs,
                           aliasable);
  }
  check_input_vs_outputs(matrix_region("x", a.x, a.rows, a.hidden, a.x_row_stride, a.x_dtype),
                         true, outputs, aliasable);
  if (a.residual) {
    check_input_vs_outputs(matrix_region("residual", a.residual, a.rows, a.hidden,
                                         a.residual_row_stride, a.x_dtype),
                           true, outputs, aliasable);
  }
  if (a.weight) {
    check_input_vs_outputs(vector_region("weight", a.weight, a.hidden, w_size), false, outputs,
                           aliasable);
  }
  if (a.bias) {
    check_input_vs_outputs(vector_region("bias", a.bias, a.hidden, w_size), false, outputs,
                           aliasable);
  }
  return a;
}

nk_rms_norm_bwd_args validate_bwd(const nk_rms_norm_bwd_args& in) {
  nk_rms_norm_bwd_args a = in;
  validate_sizes(a.rows, a.hidden);
  check_not_null("dy", a.dy);
  check_not_null("x", a.x);
  check_not_null("rstd", a.rstd);
  check_not_null("dx", a.dx);
  check_dtype("dy_dtype", a.dy_dtype);
  check_dtype("x_dtype", a.x_dtype);
  check_dtype("weight_dtype", a.weight_dtype);
  if (a.zero_centered && !a.weight) {
    fail_argument("zero_centered is set but weight is NULL; the (1 + weight) scale needs a weight");
  }

  a.dy_row_stride = resolve_stride("dy_row_stride", a.dy_row_stride, a.hidden);
  a.x_row_stride = resolve_stride("x_row_stride", a.x_row_stride, a.hidden);
  a.dx_row_stride = resolve_stride("dx_row_stride", a.dx_row_stride, a.hidden);
  a.dresidual_out_row_stride =
      a.dresidual_out
          ? resolve_stride("dresidual_out_row_stride", a.dresidual_out_row_stride, a.hidden)
          : a.hidden;

  const char* x_type = nk_dtype_name(a.x_dtype);
  const char* w_type = nk_dtype_name(a.weight_dtype);
  const size_t x_size = element_size(a.x_dtype), w_size = element_size(a.weight_dtype);
  check_element_aligned("dy", a.dy, element_size(a.dy_dtype), nk_dtype_name(a.dy_dtype));
  check_element_aligned("x", a.x, x_size, x_type);
  check_element_aligned("rstd", a.rstd, sizeof(float), "float32");
  check_element_aligned("weight", a.weight, w_size, w_type);
  check_element_aligned("dresidual_out", a.dresidual_out, x_size, x_type);
  check_element_aligned("dx", a.dx, x_size, x_type);
  check_element_aligned("dweight", a.dweight, w_size, w_type);
  check_element_aligned("dbias", a.dbias, w_size, w_type);

  std::vector<Region> outputs{
      matrix_region("dx", a.dx, a.rows, a.hidden, a.dx_row_stride, a.x_dtype)};
  std::vector<bool> aliasable{true};
  if (a.dweight) {
    outputs.push_back(vector_region("dweight", a.dweight, a.hidden, w_size));
    aliasable.push_back(false);
  }
  if (a.dbias) {
    outputs.push_back(vector_region("dbias", a.dbias, a.hidden, w_size));
    aliasable.push_back(false);
  }
  if (a.workspace && a.workspace_bytes > 0 && (a.dweight || a.dbias)) {
    outputs.push_back(vector_region("workspace", a.workspace, 1, a.workspace_bytes));
    aliasable.push_back(false);
  }
  check_outputs_disjoint(outputs);
  check_input_vs_outputs(
      matrix_region("dy", a.dy, a.rows, a.hidden, a.dy_row_stride, a.dy_dtype), true, outputs,
      aliasable);
  check_input_vs_outputs(matrix_region("x", a.x, a.rows, a.hidden, a.x_row_stride, a.x_dtype),
                         true, outputs, aliasable);
  if (a.dresidual_out) {
    check_input_vs_outputs(matrix_region("dresidual_out", a.dresidual_out, a.rows, a.hidden,
                                         a.dresidual_out_row_stride, a.x_dtype),
                           true, outputs, aliasable);
  }
  check_input_vs_outputs(vector_region("rstd", a.rstd, a.rows, sizeof(float)), false, outputs,
                         aliasable);
  if (a.weight) {
    check_input_vs_outputs(vector_region("weight", a.weight, a.hidden, w_size), false, outputs,
                           aliasable);
  }
  return a;
}

void validate_workspace(const void* workspace, size_t bytes, size_t needed) {
  if (needed == 0) return;
  if (!workspace || bytes < needed) {
    fail_argument("workspace is " + std::string(workspace ? "" : "NULL, ") +
                  std::to_string(bytes) + " bytes; dweight/dbias need " +
                  std::to_string(needed) +
                  " bytes (query nk_rms_norm_bwd_workspace_size with the same arguments)");
  }
  if (reinterpret_cast<uintptr_t>(workspace) % 16 != 0) {
    fail_argument("workspace (" + hex(workspace) + ") must be 16-byte aligned");
  }
}

}  // namespace normkit
