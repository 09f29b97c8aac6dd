// XLA FFI handler for the quantized forward (see nk_quant_mode), one per platform (CPU; CUDA when
// built with it), over the C API. Operand conventions: see jax_ffi_common.h. Like the other
// bindings it checks only what the C API cannot see (buffer sizes and element types); the
// combination of mode, dtype, block and optional outputs is the C API's to validate.
#include <cstdint>
#include <string>
#include <string_view>

#include "denormals.h"
#include "jax_ffi.h"
#include "jax_ffi_common.h"
#include "normkit/normkit.h"
#include "quant_args.h"
#include "xla/ffi/api/ffi.h"

#ifdef NK_PY_JAX_CUDA
#include <cuda_runtime_api.h>
#endif

namespace ffi = xla::ffi;
namespace nb = nanobind;

namespace normkit_py {

namespace {

using namespace jax_ffi;  // NOLINT: the shared helpers

bool to_code_dtype(ffi::DataType t, nk_dtype* out) {
  switch (t) {
    case ffi::DataType::F8E4M3FN: *out = NK_FLOAT8_E4M3; return true;
    case ffi::DataType::F8E5M2: *out = NK_FLOAT8_E5M2; return true;
    case ffi::DataType::S8: *out = NK_INT8; return true;
    default: return false;
  }
}

// `scales` must hold exactly rows * hidden / block elements of the mode's scale type.
ffi::Error check_scales(const ffi::AnyBuffer& scales, nk_quant_mode mode, int64_t block,
                        const Layout& L) {
  const bool e8m0 = quant_scale_dtype(mode) == NK_FLOAT8_E8M0;
  if (e8m0 ? ffi::ByteWidth(scales.element_type()) != 1
           : scales.element_type() != ffi::DataType::F32) {
    return invalid(e8m0 ? "scales must have 1-byte elements (e8m0) with mode mxfp8"
                        : "scales must be float32");
  }
  const int64_t columns = quant_scale_columns(mode, block, L.hidden);
  // Otherwise the C API rejects the call (no scales, or hidden no multiple of the block).
  if (columns > 0 && L.hidden % columns == 0) {
    return require_count(scales, L.rows * (L.hidden / columns), "scales");
  }
  return ffi::Error::Success();
}

ffi::Error run_fwd_quant(nk_backend backend, void* stream, ffi::AnyBuffer x,
                         ffi::AnyBuffer residual, ffi::AnyBuffer weight, ffi::AnyBuffer bias,
                         ffi::AnyBuffer scale, ffi::Result<ffi::AnyBuffer> y,
                         ffi::Result<ffi::AnyBuffer> scales, ffi::Result<ffi::AnyBuffer> amax,
                         ffi::Result<ffi::AnyBuffer> y_t,
                         ffi::Result<ffi::AnyBuffer> residual_out, float eps, bool zero_centered,
                         std::string_view mode_name, int64_t block, float scale_ub) {
  nk_quant_mode mode;
  if (!quant_mode_from_name(mode_name, &mode) || mode == NK_QUANT_NONE) {
    return invalid("mode is '" + std::string(mode_name) +
                   "'; expected 'tensor', 'token', 'block' or 'mxfp8'");
  }
  Layout L;
  NK_FFI_TRY(make_layout(x, {&weight, &bias}, {&scale, &(*amax)}, &L));
  const int64_t n = L.rows * L.hidden;

  nk_rms_norm_fwd_args a;
  nk_rms_norm_fwd_args_init(&a);
  a.rows = L.rows_per_group;
  a.hidden = L.hidden;
  NK_FFI_TRY(require_dtype(x, &a.x_dtype, "x"));
  if (!to_code_dtype(y->element_type(), &a.y_dtype)) {
    return invalid("y must be float8_e4m3fn, float8_e5m2 or int8");
  }
  NK_FFI_TRY(require_count(*y, n, "y"));
  NK_FFI_TRY(require_param_dtype(weight, bias, &a.weight_dtype));
  NK_FFI_TRY(check_residual(x, residual, *residual_out, n));
  for (const ffi::AnyBuffer* s : {&scale, &(*amax)}) {
    if (present(*s) && s->element_type() != ffi::DataType::F32) {
      return invalid("scale and amax must be float32");
    }
  }
  if (present(*scales)) NK_FFI_TRY(check_scales(*scales, mode, block, L));
  if (present(*y_t)) {
    NK_FFI_TRY(require_count(*y_t, n, "y_t"));
    if (y_t->element_type() != y->element_type()) return invalid("y_t must have y's dtype");
  }
  a.eps = eps;
  a.zero_centered = zero_centered ? 1 : 0;
  a.quant = mode;
  a.quant_block = block;
  a.scale_ub = scale_ub;
  const int64_t scales_per_row =
      present(*scales) ? static_cast<int64_t>(scales->element_count()) / L.rows : 0;

  for (int64_t g = 0; g < L.groups; ++g) {
    const int64_t row0 = g * L.rows_per_group;
    set_fwd_inputs(&a, L, g, x, weight, bias, residual, *residual_out);
    a.y = element_ptr(*y, row0 * L.hidden);
    a.scale = present(scale) ? static_cast<const float*>(element_ptr(scale, g)) : nullptr;
    a.scales = present(*scales) ? element_ptr(*scales, row0 * scales_per_row) : nullptr;
    a.amax = present(*amax) ? static_cast<float*>(element_ptr(*amax, g)) : nullptr;
    // Each group's y_t is a dense [hidden, rows_per_group] slice.
    a.y_t = present(*y_t) ? element_ptr(*y_t, row0 * L.hidden) : nullptr;
    NK_FFI_TRY(from_status(nk_rms_norm_fwd(&a, backend, stream), "nk_rms_norm_fwd"));
  }
  return ffi::Error::Success();
}

ffi::Error fwd_quant_cpu(ffi::AnyBuffer x, ffi::AnyBuffer residual, ffi::AnyBuffer weight,
                         ffi::AnyBuffer bias, ffi::AnyBuffer scale,
                         ffi::Result<ffi::AnyBuffer> y, ffi::Result<ffi::AnyBuffer> scales,
                         ffi::Result<ffi::AnyBuffer> amax, ffi::Result<ffi::AnyBuffer> y_t,
                         ffi::Result<ffi::AnyBuffer> residual_out, float eps, bool zero_centered,
                         std::string_view mode, int64_t block, float scale_ub) {
  ScopedIeeeDenormals ieee_denormals;  // XLA's flush-to-zero would zero float16 subnormals
  return run_fwd_quant(NK_BACKEND_CPU, nullptr, x, residual, weight, bias, scale, y, scales,
                       amax, y_t, residual_out, eps, zero_centered, mode, block, scale_ub);
}

#ifdef NK_PY_JAX_CUDA
ffi::Error fwd_quant_cuda(cudaStream_t stream, ffi::AnyBuffer x, ffi::AnyBuffer residual,
                          ffi::AnyBuffer weight, ffi::AnyBuffer bias, ffi::AnyBuffer scale,
                          ffi::Result<ffi::AnyBuffer> y, ffi::Result<ffi::AnyBuffer> scales,
                          ffi::Result<ffi::AnyBuffer> amax, ffi::Result<ffi::AnyBuffer> y_t,
                          ffi::Result<ffi::AnyBuffer> residual_out, float eps,
                          bool zero_centered, std::string_view mode, int64_t block,
                          float scale_ub) {
  return run_fwd_quant(NK_BACKEND_CUDA, stream, x, residual, weight, bias, scale, y, scales,
                       amax, y_t, residual_out, eps, zero_centered, mode, block, scale_ub);
}
#endif

}  // namespace

// Operand order and attribute names are the contract with normkit/jax/_ffi.py.
#define NK_FWD_QUANT_BINDING(CTX)                                         \
  ffi::Ffi::Bind()                                                        \
      CTX.Arg<ffi::AnyBuffer>()  /* x */                                  \
          .Arg<ffi::AnyBuffer>() /* residual (empty if none) */           \
          .Arg<ffi::AnyBuffer>() /* weight (empty if none) */             \
          .Arg<ffi::AnyBuffer>() /* bias (empty if none) */               \
          .Arg<ffi::AnyBuffer>() /* scale, float32 [1] (empty if none) */ \
          .Ret<ffi::AnyBuffer>() /* y: e4m3fn, e5m2 or int8 codes */      \
          .Ret<ffi::AnyBuffer>() /* scales (empty if none) */             \
          .Ret<ffi::AnyBuffer>() /* amax, float32 [1] (empty if none) */  \
          .Ret<ffi::AnyBuffer>() /* y_t [hidden, rows] (empty if none) */ \
          .Ret<ffi::AnyBuffer>() /* residual_out (empty if none) */       \
          .Attr<float>("eps")                                             \
          .Attr<bool>("zero_centered")                                    \
          .Attr<std::string_view>("mode")                                 \
          .Attr<int64_t>("block")                                         \
          .Attr<float>("scale_ub")
#define NK_NO_CTX

XLA_FFI_DEFINE_HANDLER_SYMBOL(NkJaxRmsNormFwdQuantCpu, fwd_quant_cpu,
                              NK_FWD_QUANT_BINDING(NK_NO_CTX));
#ifdef NK_PY_JAX_CUDA
// Allocates nothing and never synchronizes: safe inside XLA command buffers.
XLA_FFI_DEFINE_HANDLER_SYMBOL(NkJaxRmsNormFwdQuantCuda, fwd_quant_cuda,
                              NK_FWD_QUANT_BINDING(.Ctx<ffi::PlatformStream<cudaStream_t>>()),
                              {ffi::Traits::kCmdBufferCompatible});
#endif

nb::dict jax_quant_handlers() {
  nb::dict platforms;
  platforms["cpu"] = nb::capsule(reinterpret_cast<void*>(NkJaxRmsNormFwdQuantCpu));
#ifdef NK_PY_JAX_CUDA
  platforms["CUDA"] = nb::capsule(reinterpret_cast<void*>(NkJaxRmsNormFwdQuantCuda));
#endif
  return platforms;
}

}  // namespace normkit_py
