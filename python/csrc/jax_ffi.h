// XLA FFI handlers behind normkit.jax (built only when jax is importable at build time).
#pragma once

#include <nanobind/nanobind.h>

namespace normkit_py {

// Adds jax_targets() to the module: {target name: {platform: PyCapsule}} for
// jax.ffi.register_ffi_target, with platform "cpu" always and "CUDA" in CUDA builds.
void add_jax_targets(nanobind::module_& m);

// {platform: PyCapsule} of the quantized forward's handlers (jax_quant_ffi.cpp).
nanobind::dict jax_quant_handlers();

}  // namespace normkit_py
