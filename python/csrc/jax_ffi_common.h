// Helpers shared by the XLA FFI handlers (jax_ffi.cpp: plain forward/backward; jax_quant_ffi.cpp:
// quantized forward): errors, dtypes, optional buffers and the vmap group layout.
//
// Operand conventions (normkit.jax builds the calls):
//  - Matrices arrive as row-major [..., hidden] buffers; all leading dims are rows.
//  - An optional operand or result that is absent is passed as a zero-element buffer, so
//    "present" means element_count() > 0 (real operands have at least one element).
//  - jax.vmap uses vmap_method="broadcast_all": every operand and result gains the same leading
//    batch dims. Per-call vectors (weight, bias, dweight, dbias: [hidden]) and scalars (scale,
//    amax: [1]) then hold `groups` consecutive slices, and the rows of each matrix split into
//    `groups` equal consecutive blocks, so a handler makes one C API call per group.
//    Unbatched calls have groups == 1.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <string>

#include "normkit/normkit.h"
#include "xla/ffi/api/ffi.h"

// Returns from the enclosing function with the error of `expr`, if any.
#define NK_FFI_TRY(expr)                               \
  do {                                                 \
    ::xla::ffi::Error nk_ffi_error_ = (expr);          \
    if (nk_ffi_error_.failure()) return nk_ffi_error_; \
  } while (0)

namespace normkit_py::jax_ffi {

namespace ffi = xla::ffi;

inline ffi::Error invalid(const std::string& message) {
  return ffi::Error(ffi::ErrorCode::kInvalidArgument, "normkit: " + message);
}

// A failed C API call as an FFI error carrying nk_last_error().
inline ffi::Error from_status(nk_status status, const char* what) {
  if (status == NK_SUCCESS) return ffi::Error::Success();
  const ffi::ErrorCode code = status == NK_ERROR_INVALID_ARGUMENT ? ffi::ErrorCode::kInvalidArgument
                              : status == NK_ERROR_UNSUPPORTED    ? ffi::ErrorCode::kUnimplemented
                                                                  : ffi::ErrorCode::kInternal;
  return ffi::Error(
      code, std::string(what) + " failed (" + nk_status_name(status) + "): " + nk_last_error());
}

// float32 / float16 / bfloat16.
inline bool to_nk_dtype(ffi::DataType t, nk_dtype* out) {
  switch (t) {
    case ffi::DataType::F32: *out = NK_FLOAT32; return true;
    case ffi::DataType::F16: *out = NK_FLOAT16; return true;
    case ffi::DataType::BF16: *out = NK_BFLOAT16; return true;
    default: return false;
  }
}

inline bool present(const ffi::AnyBuffer& b) { return b.element_count() > 0; }

// Byte address of element `index` of a buffer.
inline void* element_ptr(const ffi::AnyBuffer& b, int64_t index) {
  return static_cast<char*>(b.untyped_data()) +
         index * static_cast<int64_t>(ffi::ByteWidth(b.element_type()));
}

struct Layout {
  int64_t rows = 0;  // all rows of all groups
  int64_t hidden = 0;
  int64_t groups = 1;  // vmap groups (see the file comment)
  int64_t rows_per_group = 0;
};

// rows/hidden from x ([..., hidden]); groups from the first present per-call buffer: a vector
// ([hidden] per group) or a scalar ([1] per group). Every present one must agree.
inline ffi::Error make_layout(const ffi::AnyBuffer& x,
                              std::initializer_list<const ffi::AnyBuffer*> vectors,
                              std::initializer_list<const ffi::AnyBuffer*> scalars,
                              Layout* layout) {
  const auto dims = x.dimensions();
  if (dims.size() < 1) return invalid("x must have at least one dimension");
  layout->hidden = dims.back();
  if (layout->hidden < 1) return invalid("x has an empty last dimension");
  layout->rows = static_cast<int64_t>(x.element_count()) / layout->hidden;
  int64_t groups = 0;
  auto take = [&](const ffi::AnyBuffer* b, int64_t per_group, const char* what) -> ffi::Error {
    if (!present(*b)) return ffi::Error::Success();
    const int64_t count = static_cast<int64_t>(b->element_count());
    if (groups == 0) groups = count / per_group;
    if (groups < 1 || count != groups * per_group) {
      return invalid(std::string("a ") + what + " operand has " + std::to_string(count) +
                     " elements; expected " + std::to_string(groups) + " x " +
                     std::to_string(per_group));
    }
    return ffi::Error::Success();
  };
  for (const ffi::AnyBuffer* v : vectors) {
    ffi::Error e = take(v, layout->hidden, "weight-like");
    if (e.failure()) return e;
  }
  for (const ffi::AnyBuffer* s : scalars) {
    ffi::Error e = take(s, 1, "scalar (scale, amax)");
    if (e.failure()) return e;
  }
  layout->groups = groups == 0 ? 1 : groups;
  if (layout->rows % layout->groups != 0) {
    return invalid(std::to_string(layout->rows) + " rows do not split into " +
                   std::to_string(layout->groups) + " vmap groups");
  }
  layout->rows_per_group = layout->rows / layout->groups;
  return ffi::Error::Success();
}

inline ffi::Error require_count(const ffi::AnyBuffer& b, int64_t count, const char* name) {
  if (static_cast<int64_t>(b.element_count()) != count) {
    return invalid(std::string(name) + " has " + std::to_string(b.element_count()) +
                   " elements; expected " + std::to_string(count));
  }
  return ffi::Error::Success();
}

inline ffi::Error require_dtype(const ffi::AnyBuffer& b, nk_dtype* out, const char* name) {
  if (!to_nk_dtype(b.element_type(), out)) {
    return invalid(std::string(name) + " must be float32, float16 or bfloat16");
  }
  return ffi::Error::Success();
}

// The forwards' residual operand: when present, it and residual_out hold `n` elements of x's
// dtype.
inline ffi::Error check_residual(const ffi::AnyBuffer& x, const ffi::AnyBuffer& residual,
                                 const ffi::AnyBuffer& residual_out, int64_t n) {
  if (!present(residual)) return ffi::Error::Success();
  NK_FFI_TRY(require_count(residual, n, "residual"));
  NK_FFI_TRY(require_count(residual_out, n, "residual_out"));
  if (residual.element_type() != x.element_type() ||
      residual_out.element_type() != x.element_type()) {
    return invalid("residual and residual_out must have x's dtype");
  }
  return ffi::Error::Success();
}

// The forwards' weight_dtype: that of weight and bias (which must agree), where present;
// `out` is left alone when neither is.
inline ffi::Error require_param_dtype(const ffi::AnyBuffer& weight, const ffi::AnyBuffer& bias,
                                      nk_dtype* out) {
  if (present(weight)) NK_FFI_TRY(require_dtype(weight, out, "weight"));
  if (present(bias)) {
    nk_dtype bias_dtype;
    NK_FFI_TRY(require_dtype(bias, &bias_dtype, "bias"));
    if (present(weight) && bias_dtype != *out) return invalid("bias must have weight's dtype");
    *out = bias_dtype;
  }
  return ffi::Error::Success();
}

// The operands both forwards take, for group g: x, weight, bias, residual and residual_out.
inline void set_fwd_inputs(nk_rms_norm_fwd_args* a, const Layout& L, int64_t g,
                           const ffi::AnyBuffer& x, const ffi::AnyBuffer& weight,
                           const ffi::AnyBuffer& bias, const ffi::AnyBuffer& residual,
                           const ffi::AnyBuffer& residual_out) {
  const int64_t row0 = g * L.rows_per_group;
  a->x = element_ptr(x, row0 * L.hidden);
  a->weight = present(weight) ? element_ptr(weight, g * L.hidden) : nullptr;
  a->bias = present(bias) ? element_ptr(bias, g * L.hidden) : nullptr;
  if (present(residual)) {
    a->residual = element_ptr(residual, row0 * L.hidden);
    a->residual_out = element_ptr(residual_out, row0 * L.hidden);
  }
}

}  // namespace normkit_py::jax_ffi

