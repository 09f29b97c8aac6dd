// normkit._C: the nanobind extension module. Framework-neutral: it takes DLPack arrays
// (torch tensors, numpy arrays, ...) and scalars, and calls the C API; normkit.torch and
// normkit.jax build on it.
#include <nanobind/nanobind.h>
#include <nanobind/stl/string.h>

#include <cstdint>

#include "normkit/normkit.h"
#include "ops.h"
#include "quant_ops.h"
#include "status.h"
#ifdef NK_PY_WITH_JAX
#include "jax_ffi.h"
#endif

namespace nb = nanobind;
using namespace nb::literals;

NB_MODULE(_C, m) {
  m.doc() = "normkit C API bindings (RMSNorm forward/backward over DLPack arrays)";

  nb::exception<normkit_py::NormkitError>(m, "NormkitError", PyExc_RuntimeError);

  m.def("rms_norm_fwd", &normkit_py::rms_norm_fwd, "x"_a, "y"_a, "weight"_a.none() = nb::none(),
        "bias"_a.none() = nb::none(), "residual"_a.none() = nb::none(),
        "residual_out"_a.none() = nb::none(), "rstd"_a.none() = nb::none(), "eps"_a = 1e-6f,
        "zero_centered"_a = false, "stream"_a = 0,
        "RMSNorm forward into preallocated y (and residual_out, rstd) over [rows, hidden] "
        "arrays with contiguous columns. stream is a cudaStream_t as an int (0 = default).");

  m.def("rms_norm_fwd_quant", &normkit_py::rms_norm_fwd_quant, "x"_a, "y"_a, nb::kw_only(),
        "y_dtype"_a, "mode"_a, "weight"_a.none() = nb::none(), "bias"_a.none() = nb::none(),
        "residual"_a.none() = nb::none(), "residual_out"_a.none() = nb::none(),
        "rstd"_a.none() = nb::none(), "scale"_a.none() = nb::none(), "scale_ub"_a = 0.0f,
        "scales"_a.none() = nb::none(), "amax"_a.none() = nb::none(),
        "y_t"_a.none() = nb::none(), "block"_a = 0, "eps"_a = 1e-6f, "zero_centered"_a = false,
        "stream"_a = 0,
        "RMSNorm forward with a quantized y (nk_quant_mode) into preallocated outputs. y and "
        "y_t hold y_dtype codes ('float8_e4m3', 'float8_e5m2', 'int8') in any 1-byte dtype; "
        "mode is 'tensor' (scale: float32 [1]), 'token', 'block' or 'mxfp8' (scales: float32, "
        "or e8m0 bytes for mxfp8, rows * hidden / block elements); amax: float32 [1]; y_t: "
        "[hidden, rows] (tensor mode). scale_ub 0 and block 0 mean unset. The C API validates "
        "the combination and its message is raised as NormkitError.");

  m.def("rms_norm_bwd", &normkit_py::rms_norm_bwd, "dy"_a, "x"_a, "rstd"_a, "dx"_a,
        "weight"_a.none() = nb::none(), "dresidual_out"_a.none() = nb::none(),
        "dweight"_a.none() = nb::none(), "dbias"_a.none() = nb::none(),
        "workspace"_a.none() = nb::none(), "zero_centered"_a = false, "stream"_a = 0,
        "RMSNorm backward into preallocated dx (and dweight, dbias); x is the normalized input "
        "(residual_out when the forward fused a residual).");

  m.def("rms_norm_bwd_workspace_size", &normkit_py::rms_norm_bwd_workspace_size, "rows"_a,
        "hidden"_a, "dweight"_a = true, "dbias"_a = false, "backend"_a = "cpu",
        "Bytes of workspace rms_norm_bwd needs ('cpu' or 'cuda' backend).");

  // Positional-only, no defaults and no docstring keywords: the cheapest call nanobind has.
  // Internal to normkit.torch (see ops.h for the contract the caller must keep).
  m.def("rms_norm_fwd_ptr", &normkit_py::rms_norm_fwd_ptr,
        "Internal (normkit.torch): rms_norm_fwd over raw addresses; the caller guarantees "
        "shapes, dtypes and devices.");
  m.def("rms_norm_fwd_quant_ptr", &normkit_py::rms_norm_fwd_quant_ptr,
        "Internal (normkit.torch): rms_norm_fwd_quant over raw addresses (mode: nk_quant_mode "
        "value, y_dtype: nk_dtype value); the caller guarantees shapes, dtypes and devices.");
  m.def("rms_norm_bwd_ptr", &normkit_py::rms_norm_bwd_ptr,
        "Internal (normkit.torch): rms_norm_bwd over raw addresses; the caller guarantees "
        "shapes, dtypes and devices.");
  m.def("rms_norm_bwd_workspace_size_ptr", &normkit_py::rms_norm_bwd_workspace_size_ptr,
        "Internal (normkit.torch): rms_norm_bwd_workspace_size(backend: nk_backend value, rows, "
        "hidden, dweight, dbias).");

  m.def("version", [] { return std::string(nk_version()); });
  m.def("has_cuda_build", [] { return nk_has_cuda_build() != 0; });
  m.def("cuda_device_count", [] { return nk_cuda_device_count(); });
  m.def(
      "cuda_demote_l2",
      [](uintptr_t ptr, size_t nbytes, uintptr_t stream) {
        normkit_py::check_status(nk_cuda_demote_l2(reinterpret_cast<const void*>(ptr), nbytes,
                                                   reinterpret_cast<void*>(stream)),
                                 "nk_cuda_demote_l2");
      },
      "ptr"_a, "nbytes"_a, "stream"_a = 0,
      "For benchmark harnesses (nk_cuda_demote_l2): on the CUDA stream `stream` (a "
      "cudaStream_t as an int; 0: the default stream), give the cached L2 lines of device "
      "memory [ptr, ptr + nbytes) the normal eviction priority, so that an L2 flush that follows "
      "evicts them (normkit's kernels read inputs evict-last). Data untouched.");
  m.def("cpu_paths", [] { return std::string(nk_cpu_paths()); },
        "The CPU backend's code paths on this CPU (nk_cpu_paths): the row kernels' x86-64 "
        "level and the instructions behind its float16 conversions and bfloat16 rounding.");

#ifdef NK_PY_WITH_JAX
  normkit_py::add_jax_targets(m);
  m.attr("has_jax_targets") = true;
#else
  m.attr("has_jax_targets") = false;
#endif
}
