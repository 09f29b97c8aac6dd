// The C API: validates every argument against the contract in include/normkit/normkit.h,
// resolves row strides, dispatches to a backend, and turns exceptions into status + message.
#include <exception>
#include <string>

#include "common/dtype_host.h"
#include "common/error.h"
#include "common/validate.h"
#include "cpu/cpu_backend.h"
#include "cpu/cpu_paths.h"
#ifdef NK_WITH_CUDA
#include "cuda/cuda_backend.h"
#endif

namespace normkit {
namespace {

// Runs `body` and converts whatever it throws into a status (and the thread's message).
template <typename Body>
nk_status guarded(Body&& body) {
  clear_last_error();
  try {
    body();
    return NK_SUCCESS;
  } catch (const Error& e) {
    set_last_error(e.what());
    return e.status();
  } catch (const std::bad_alloc&) {
    set_last_error("out of host memory");
    return NK_ERROR_INTERNAL;
  } catch (const std::exception& e) {
    set_last_error(std::string("internal error: ") + e.what());
    return NK_ERROR_INTERNAL;
  } catch (...) {
    set_last_error("internal error: unknown exception");
    return NK_ERROR_INTERNAL;
  }
}

void require_backend(nk_backend backend) {
  if (backend == NK_BACKEND_CPU) return;
  if (backend != NK_BACKEND_CUDA) {
    fail_argument("backend is " + std::to_string(static_cast<int>(backend)) +
                  "; expected NK_BACKEND_CPU (0) or NK_BACKEND_CUDA (1)");
  }
#ifdef NK_WITH_CUDA
  if (cuda::device_count() == 0) {
    throw Error(NK_ERROR_NO_DEVICE, "NK_BACKEND_CUDA requested but no CUDA device is available");
  }
#else
  throw Error(NK_ERROR_NO_DEVICE,
              "NK_BACKEND_CUDA requested but this normkit was built without CUDA");
#endif
}

size_t bwd_workspace_bytes(const nk_rms_norm_bwd_args& a, nk_backend backend) {
  const bool want_dw = a.dweight != nullptr, want_db = a.dbias != nullptr;
  if (!want_dw && !want_db) return 0;
#ifdef NK_WITH_CUDA
  if (backend == NK_BACKEND_CUDA) {
    return cuda::rms_norm_bwd_workspace_bytes(a.rows, a.hidden, want_dw, want_db);
  }
#endif
  (void)backend;
  return cpu::rms_norm_bwd_workspace_bytes(a.rows, a.hidden, want_dw, want_db);
}

}  // namespace
}  // namespace normkit

using namespace normkit;

extern "C" {

void nk_rms_norm_fwd_args_init(nk_rms_norm_fwd_args* args) {
  if (!args) return;
  *args = nk_rms_norm_fwd_args{};  // also quant NK_QUANT_NONE, no scales, scale_ub 0 (none)
  args->x_dtype = args->weight_dtype = args->y_dtype = NK_FLOAT32;
  args->eps = 1e-6f;
}

void nk_rms_norm_bwd_args_init(nk_rms_norm_bwd_args* args) {
  if (!args) return;
  *args = nk_rms_norm_bwd_args{};
  args->dy_dtype = args->x_dtype = args->weight_dtype = NK_FLOAT32;
}

nk_status nk_rms_norm_fwd(const nk_rms_norm_fwd_args* args, nk_backend backend, void* stream) {
  return guarded([&] {
    if (!args) fail_argument("args is NULL");
    require_backend(backend);
    const nk_rms_norm_fwd_args resolved = validate_fwd(*args);
#ifdef NK_WITH_CUDA
    if (backend == NK_BACKEND_CUDA) return cuda::rms_norm_fwd(resolved, stream);
#endif
    (void)stream;
    cpu::rms_norm_fwd(resolved);
  });
}

nk_status nk_rms_norm_bwd_workspace_size(const nk_rms_norm_bwd_args* args, nk_backend backend,
                                         size_t* bytes) {
  return guarded([&] {
    if (!args) fail_argument("args is NULL");
    if (!bytes) fail_argument("bytes is NULL");
    require_backend(backend);
    validate_sizes(args->rows, args->hidden);
    *bytes = bwd_workspace_bytes(*args, backend);
  });
}

nk_status nk_rms_norm_bwd(const nk_rms_norm_bwd_args* args, nk_backend backend, void* stream) {
  return guarded([&] {
    if (!args) fail_argument("args is NULL");
    require_backend(backend);
    const nk_rms_norm_bwd_args resolved = validate_bwd(*args);
    const size_t needed = bwd_workspace_bytes(resolved, backend);
    validate_workspace(resolved.workspace, resolved.workspace_bytes, needed);
#ifdef NK_WITH_CUDA
    if (backend == NK_BACKEND_CUDA) return cuda::rms_norm_bwd(resolved, stream);
#endif
    (void)stream;
    cpu::rms_norm_bwd(resolved);
  });
}

const char* nk_last_error(void) { return last_error(); }

const char* nk_status_name(nk_status status) {
  switch (status) {
    case NK_SUCCESS: return "NK_SUCCESS";
    case NK_ERROR_INVALID_ARGUMENT: return "NK_ERROR_INVALID_ARGUMENT";
    case NK_ERROR_UNSUPPORTED: return "NK_ERROR_UNSUPPORTED";
    case NK_ERROR_NO_DEVICE: return "NK_ERROR_NO_DEVICE";
    case NK_ERROR_CUDA: return "NK_ERROR_CUDA";
    case NK_ERROR_INTERNAL: return "NK_ERROR_INTERNAL";
  }
  return "NK_ERROR_UNKNOWN";
}

const char* nk_dtype_name(nk_dtype dtype) {
  switch (dtype) {
    case NK_FLOAT32: return "float32";
    case NK_FLOAT16: return "float16";
    case NK_BFLOAT16: return "bfloat16";
    case NK_FLOAT8_E4M3: return "float8_e4m3";
    case NK_FLOAT8_E5M2: return "float8_e5m2";
    case NK_INT8: return "int8";
    case NK_FLOAT8_E8M0: return "float8_e8m0";
  }
  return "invalid";
}

const char* nk_quant_mode_name(nk_quant_mode mode) {
  switch (mode) {
    case NK_QUANT_NONE: return "none";
    case NK_QUANT_TENSOR: return "tensor";
    case NK_QUANT_TOKEN: return "token";
    case NK_QUANT_BLOCK: return "block";
    case NK_QUANT_MXFP8: return "mxfp8";
  }
  return "invalid";
}

size_t nk_dtype_size(nk_dtype dtype) { return host_dtype_size(dtype); }

int nk_has_cuda_build(void) {
#ifdef NK_WITH_CUDA
  return 1;
#else
  return 0;
#endif
}

int nk_cuda_device_count(void) {
#ifdef NK_WITH_CUDA
  return cuda::device_count();
#else
  return 0;
#endif
}

nk_status nk_cuda_demote_l2(const void* ptr, size_t bytes, void* stream) {
  return guarded([&] {
    require_backend(NK_BACKEND_CUDA);
#ifdef NK_WITH_CUDA
    cuda::demote_l2_lines(ptr, bytes, stream);
#else
    (void)ptr, (void)bytes, (void)stream;
#endif
  });
}

const char* nk_cpu_paths(void) {
  static const std::string paths = normkit::cpu::cpu_paths_description();
  return paths.c_str();
}

const char* nk_version(void) {
#ifdef NK_WITH_CUDA
  return NK_VERSION_STRING " (cpu, cuda archs " NK_CUDA_ARCHS_STRING ")";
#else
  return NK_VERSION_STRING " (cpu only)";
#endif
}

}  // extern "C"
