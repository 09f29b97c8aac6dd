// XLA FFI handlers for RMSNorm forward and backward, one per platform (CPU; CUDA when built
// with it), over the C API.
//
// Operand conventions: see jax_ffi_common.h. The backward's workspace is a uint8 result sized
// at trace time from the C API's query; groups run one after another on one stream, so they
// share its first bytes.
#include "jax_ffi.h"

#include <cstdint>
#include <string>

#include "denormals.h"
#include "jax_ffi_common.h"
#include "normkit/normkit.h"
#include "xla/ffi/api/ffi.h"

#ifdef NK_PY_JAX_CUDA
#include <cuda_runtime_api.h>
#endif

namespace ffi = xla::ffi;
namespace nb = nanobind;

namespace normkit_py {

namespace {

using namespace jax_ffi;  // NOLINT: the shared helpers

ffi::Error run_fwd(nk_backend backend, void* stream, ffi::AnyBuffer x, ffi::AnyBuffer residual,
                   ffi::AnyBuffer weight, ffi::AnyBuffer bias, ffi::Result<ffi::AnyBuffer> y,
                   ffi::Result<ffi::AnyBuffer> residual_out, ffi::Result<ffi::AnyBuffer> rstd,
                   float eps, bool zero_centered) {
  Layout L;
  NK_FFI_TRY(make_layout(x, {&weight, &bias}, {}, &L));
  const int64_t n = L.rows * L.hidden;
  NK_FFI_TRY(require_count(*y, n, "y"));
  NK_FFI_TRY(require_count(*rstd, L.rows, "rstd"));
  if (rstd->element_type() != ffi::DataType::F32) return invalid("rstd must be float32");
  NK_FFI_TRY(check_residual(x, residual, *residual_out, n));

  nk_rms_norm_fwd_args a;
  nk_rms_norm_fwd_args_init(&a);
  a.rows = L.rows_per_group;
  a.hidden = L.hidden;
  NK_FFI_TRY(require_dtype(x, &a.x_dtype, "x"));
  NK_FFI_TRY(require_dtype(*y, &a.y_dtype, "y"));
  NK_FFI_TRY(require_param_dtype(weight, bias, &a.weight_dtype));
  a.eps = eps;
  a.zero_centered = zero_centered ? 1 : 0;

  for (int64_t g = 0; g < L.groups; ++g) {
    const int64_t row0 = g * L.rows_per_group;
    set_fwd_inputs(&a, L, g, x, weight, bias, residual, *residual_out);
    a.y = element_ptr(*y, row0 * L.hidden);
    a.rstd = static_cast<float*>(element_ptr(*rstd, row0));
    NK_FFI_TRY(from_status(nk_rms_norm_fwd(&a, backend, stream), "nk_rms_norm_fwd"));
  }
  return ffi::Error::Success();
}

ffi::Error run_bwd(nk_backend backend, void* stream, ffi::AnyBuffer dy, ffi::AnyBuffer x,
                   ffi::AnyBuffer rstd, ffi::AnyBuffer weight, ffi::AnyBuffer dresidual_out,
                   ffi::Result<ffi::AnyBuffer> dx, ffi::Result<ffi::AnyBuffer> dweight,
                   ffi::Result<ffi::AnyBuffer> dbias, ffi::Result<ffi::AnyBuffer> workspace,
                   bool zero_centered) {
  Layout L;
  NK_FFI_TRY(make_layout(x, {&weight, &(*dweight), &(*dbias)}, {}, &L));
  const int64_t n = L.rows * L.hidden;
  NK_FFI_TRY(require_count(dy, n, "dy"));
  NK_FFI_TRY(require_count(*dx, n, "dx"));
  NK_FFI_TRY(require_count(rstd, L.rows, "rstd"));
  if (rstd.element_type() != ffi::DataType::F32) return invalid("rstd must be float32");
  if (dx->element_type() != x.element_type()) return invalid("dx must have x's dtype");
  const bool has_dres = present(dresidual_out);
  if (has_dres) {
    NK_FFI_TRY(require_count(dresidual_out, n, "dresidual_out"));
    if (dresidual_out.element_type() != x.element_type()) {
      return invalid("dresidual_out must have x's dtype");
    }
  }

  nk_rms_norm_bwd_args a;
  nk_rms_norm_bwd_args_init(&a);
  a.rows = L.rows_per_group;
  a.hidden = L.hidden;
  NK_FFI_TRY(require_dtype(x, &a.x_dtype, "x"));
  NK_FFI_TRY(require_dtype(dy, &a.dy_dtype, "dy"));
  // weight, dweight and dbias share weight_dtype.
  bool have_wdtype = false;
  for (const ffi::AnyBuffer* v : {&weight, &(*dweight), &(*dbias)}) {
    if (!present(*v)) continue;
    nk_dtype d;
    NK_FFI_TRY(require_dtype(*v, &d, "weight/dweight/dbias"));
    if (have_wdtype && d != a.weight_dtype)
      return invalid("weight, dweight and dbias must share a dtype");
    a.weight_dtype = d;
    have_wdtype = true;
  }
  a.zero_centered = zero_centered ? 1 : 0;
  a.workspace = workspace->element_count() > 0 ? workspace->untyped_data() : nullptr;
  a.workspace_bytes = workspace->size_bytes();

  for (int64_t g = 0; g < L.groups; ++g) {
    const int64_t row0 = g * L.rows_per_group;
    a.dy = element_ptr(dy, row0 * L.hidden);
    a.x = element_ptr(x, row0 * L.hidden);
    a.rstd = static_cast<const float*>(element_ptr(rstd, row0));
    a.dx = element_ptr(*dx, row0 * L.hidden);
    a.weight = present(weight) ? element_ptr(weight, g * L.hidden) : nullptr;
    a.dweight = present(*dweight) ? element_ptr(*dweight, g * L.hidden) : nullptr;
    a.dbias = present(*dbias) ? element_ptr(*dbias, g * L.hidden) : nullptr;
    a.dresidual_out = has_dres ? element_ptr(dresidual_out, row0 * L.hidden) : nullptr;
    NK_FFI_TRY(from_status(nk_rms_norm_bwd(&a, backend, stream), "nk_rms_norm_bwd"));
  }
  return ffi::Error::Success();
}

ffi::Error fwd_cpu(ffi::AnyBuffer x, ffi::AnyBuffer residual, ffi::AnyBuffer weight,
                   ffi::AnyBuffer bias, ffi::Result<ffi::AnyBuffer> y,
                   ffi::Result<ffi::AnyBuffer> residual_out, ffi::Result<ffi::AnyBuffer> rstd,
                   float eps, bool zero_centered) {
  ScopedIeeeDenormals ieee_denormals;  // XLA's flush-to-zero would zero float16 subnormals
  return run_fwd(NK_BACKEND_CPU, nullptr, x, residual, weight, bias, y, residual_out, rstd, eps,
                 zero_centered);
}

ffi::Error bwd_cpu(ffi::AnyBuffer dy, ffi::AnyBuffer x, ffi::AnyBuffer rstd, ffi::AnyBuffer weight,
                   ffi::AnyBuffer dresidual_out, ffi::Result<ffi::AnyBuffer> dx,
                   ffi::Result<ffi::AnyBuffer> dweight, ffi::Result<ffi::AnyBuffer> dbias,
                   ffi::Result<ffi::AnyBuffer> workspace, bool zero_centered) {
  ScopedIeeeDenormals ieee_denormals;
  return run_bwd(NK_BACKEND_CPU, nullptr, dy, x, rstd, weight, dresidual_out, dx, dweight, dbias,
                 workspace, zero_centered);
}

#ifdef NK_PY_JAX_CUDA
ffi::Error fwd_cuda(cudaStream_t stream, ffi::AnyBuffer x, ffi::AnyBuffer residual,
                    ffi::AnyBuffer weight, ffi::AnyBuffer bias, ffi::Result<ffi::AnyBuffer> y,
                    ffi::Result<ffi::AnyBuffer> residual_out, ffi::Result<ffi::AnyBuffer> rstd,
                    float eps, bool zero_centered) {
  return run_fwd(NK_BACKEND_CUDA, stream, x, residual, weight, bias, y, residual_out, rstd, eps,
                 zero_centered);
}

ffi::Error bwd_cuda(cudaStream_t stream, ffi::AnyBuffer dy, ffi::AnyBuffer x, ffi::AnyBuffer rstd,
                    ffi::AnyBuffer weight, ffi::AnyBuffer dresidual_out,
                    ffi::Result<ffi::AnyBuffer> dx, ffi::Result<ffi::AnyBuffer> dweight,
                    ffi::Result<ffi::AnyBuffer> dbias, ffi::Result<ffi::AnyBuffer> workspace,
                    bool zero_centered) {
  return run_bwd(NK_BACKEND_CUDA, stream, dy, x, rstd, weight, dresidual_out, dx, dweight, dbias,
                 workspace, zero_centered);
}
#endif

}  // namespace

// Bindings: operand order and attribute names are the contract with normkit/jax.py.
#define NK_FWD_BINDING(CTX)                                         \
  ffi::Ffi::Bind()                                                  \
      CTX.Arg<ffi::AnyBuffer>()  /* x */                            \
          .Arg<ffi::AnyBuffer>() /* residual (empty if none) */     \
          .Arg<ffi::AnyBuffer>() /* weight (empty if none) */       \
          .Arg<ffi::AnyBuffer>() /* bias (empty if none) */         \
          .Ret<ffi::AnyBuffer>() /* y */                            \
          .Ret<ffi::AnyBuffer>() /* residual_out (empty if none) */ \
          .Ret<ffi::AnyBuffer>() /* rstd, float32 [rows] */         \
          .Attr<float>("eps")                                       \
          .Attr<bool>("zero_centered")
#define NK_BWD_BINDING(CTX)                                          \
  ffi::Ffi::Bind()                                                   \
      CTX.Arg<ffi::AnyBuffer>()  /* dy */                            \
          .Arg<ffi::AnyBuffer>() /* x: the normalized input s */     \
          .Arg<ffi::AnyBuffer>() /* rstd */                          \
          .Arg<ffi::AnyBuffer>() /* weight (empty if none) */        \
          .Arg<ffi::AnyBuffer>() /* dresidual_out (empty if none) */ \
          .Ret<ffi::AnyBuffer>() /* dx */                            \
          .Ret<ffi::AnyBuffer>() /* dweight (empty if not wanted) */ \
          .Ret<ffi::AnyBuffer>() /* dbias (empty if not wanted) */   \
          .Ret<ffi::AnyBuffer>() /* workspace, uint8 */              \
          .Attr<bool>("zero_centered")
#define NK_NO_CTX

XLA_FFI_DEFINE_HANDLER_SYMBOL(NkJaxRmsNormFwdCpu, fwd_cpu, NK_FWD_BINDING(NK_NO_CTX));
XLA_FFI_DEFINE_HANDLER_SYMBOL(NkJaxRmsNormBwdCpu, bwd_cpu, NK_BWD_BINDING(NK_NO_CTX));
#ifdef NK_PY_JAX_CUDA
// The CUDA handlers allocate nothing and never synchronize: safe inside XLA command buffers.
XLA_FFI_DEFINE_HANDLER_SYMBOL(NkJaxRmsNormFwdCuda, fwd_cuda,
                              NK_FWD_BINDING(.Ctx<ffi::PlatformStream<cudaStream_t>>()),
                              {ffi::Traits::kCmdBufferCompatible});
XLA_FFI_DEFINE_HANDLER_SYMBOL(NkJaxRmsNormBwdCuda, bwd_cuda,
                              NK_BWD_BINDING(.Ctx<ffi::PlatformStream<cudaStream_t>>()),
                              {ffi::Traits::kCmdBufferCompatible});
#endif

namespace {

nb::capsule handler_capsule(XLA_FFI_Error* (*fn)(XLA_FFI_CallFrame*)) {
  return nb::capsule(reinterpret_cast<void*>(fn));
}

}  // namespace

void add_jax_targets(nb::module_& m) {
  m.def(
      "jax_targets",
      [] {
        nb::dict fwd, bwd, targets;
        fwd["cpu"] = handler_capsule(NkJaxRmsNormFwdCpu);
        bwd["cpu"] = handler_capsule(NkJaxRmsNormBwdCpu);
#ifdef NK_PY_JAX_CUDA
        fwd["CUDA"] = handler_capsule(NkJaxRmsNormFwdCuda);
        bwd["CUDA"] = handler_capsule(NkJaxRmsNormBwdCuda);
#endif
        targets["normkit_rms_norm_fwd"] = fwd;
        targets["normkit_rms_norm_bwd"] = bwd;
        targets["normkit_rms_norm_fwd_quant"] = jax_quant_handlers();
        return targets;
      },
      "XLA FFI handlers: {target name: {platform: PyCapsule}}, for jax.ffi.register_ffi_target.");
}

}  // namespace normkit_py
