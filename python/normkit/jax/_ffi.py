"""The XLA FFI calls behind normkit.jax: target registration and the two ffi_calls."""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np

from normkit import _C

if not getattr(_C, "has_jax_targets", False):
    raise ImportError(
        "normkit.jax is unavailable: this normkit was built without its XLA FFI targets "
        "because jax was not importable at build time. Install jax, then reinstall normkit "
        "(pip install --no-build-isolation .) so that the build finds jax.ffi.include_dir()."
    )

FWD_TARGET = "normkit_rms_norm_fwd"
BWD_TARGET = "normkit_rms_norm_bwd"
QUANT_TARGET = "normkit_rms_norm_fwd_quant"

for _name, _platforms in _C.jax_targets().items():
    for _platform, _capsule in _platforms.items():
        jax.ffi.register_ffi_target(_name, _capsule, platform=_platform)

SUPPORTED_DTYPES = (jnp.dtype(jnp.float32), jnp.dtype(jnp.float16), jnp.dtype(jnp.bfloat16))

# vmap: every operand gains the batch dims in front, and the handler splits rows into groups
# (see python/csrc/jax_ffi.cpp).
_VMAP_METHOD = "broadcast_all"


def varying_axes(*operands) -> tuple:
    """The manual mesh axes (inside shard_map) over which any operand varies (none where this
    jax does not track them)."""
    typeof = getattr(jax, "typeof", None)
    axes = set()
    for a in operands if typeof is not None else ():
        mat = getattr(typeof(a), "manual_axis_type", None)
        axes |= set(getattr(mat, "varying", ()))
    return tuple(sorted(axes))


def _call(target: str, result_shapes, operands, **attrs):
    """ffi_call of target, its results varying over the manual axes its operands vary over
    (an ffi_call's results otherwise carry none, and a custom_vjp's cotangents, which do, no
    longer match them)."""
    call = jax.ffi.ffi_call(target, result_shapes, vmap_method=_VMAP_METHOD)
    results = call(*operands, **attrs)
    axes = varying_axes(*operands)
    return jax.lax.pcast(results, axes, to="varying") if axes else results


def _absent(dtype) -> jax.Array:
    """An absent optional operand: a zero-element array (the handler tests element counts)."""
    return jnp.zeros((0,), dtype)


@functools.lru_cache(maxsize=256)
def workspace_bytes(rows: int, hidden: int, dweight: bool, dbias: bool) -> int:
    """Scratch the backward needs, valid wherever the call is placed: the C API's answer for the
    CPU backend and, when a GPU is visible, for the current CUDA device, whichever is larger."""
    nbytes = _C.rms_norm_bwd_workspace_size(rows, hidden, dweight, dbias, "cpu")
    if _C.cuda_device_count() > 0:
        nbytes = max(nbytes, _C.rms_norm_bwd_workspace_size(rows, hidden, dweight, dbias, "cuda"))
    return nbytes


def _fwd_inputs(x, residual, weight, bias):
    """The operands both forward targets start with: x, residual, weight, bias, each missing
    one as an empty array of its dtype (weight and bias share one)."""
    param_dtype = weight.dtype if weight is not None else (bias.dtype if bias is not None else x.dtype)
    return (
        x,
        residual if residual is not None else _absent(x.dtype),
        weight if weight is not None else _absent(param_dtype),
        bias if bias is not None else _absent(param_dtype),
    )


def fwd_call(x, weight, bias, residual, eps: float, zero_centered: bool, out_dtype):
    """(y, residual_out, rstd); residual_out has zero elements when residual is None."""
    result_shapes = (
        jax.ShapeDtypeStruct(x.shape, out_dtype),
        jax.ShapeDtypeStruct(x.shape if residual is not None else (0,), x.dtype),
        jax.ShapeDtypeStruct(x.shape[:-1], jnp.float32),
    )
    return _call(
        FWD_TARGET,
        result_shapes,
        _fwd_inputs(x, residual, weight, bias),
        eps=np.float32(eps),
        zero_centered=np.bool_(zero_centered),
    )


def bwd_call(dy, s, rstd, weight, dresidual_out, zero_centered: bool, want_dbias: bool, param_dtype):
    """(dx, dweight, dbias); dweight has zero elements without weight, dbias unless wanted."""
    hidden = s.shape[-1]
    rows = int(np.prod(s.shape[:-1], dtype=np.int64))
    want_dweight = weight is not None
    nbytes = workspace_bytes(rows, hidden, want_dweight, want_dbias)
    result_shapes = (
        jax.ShapeDtypeStruct(s.shape, s.dtype),
        jax.ShapeDtypeStruct((hidden,) if want_dweight else (0,), param_dtype),
        jax.ShapeDtypeStruct((hidden,) if want_dbias else (0,), param_dtype),
        jax.ShapeDtypeStruct((nbytes,), jnp.uint8),
    )
    dx, dweight, dbias, _workspace = _call(
        BWD_TARGET,
        result_shapes,
        (
            dy,
            s,
            rstd,
            weight if weight is not None else _absent(param_dtype),
            dresidual_out if dresidual_out is not None else _absent(s.dtype),
        ),
        zero_centered=np.bool_(zero_centered),
    )
    return dx, dweight, dbias


def quant_scales_shape(x_shape, columns: int) -> tuple:
    """The quantized forward's scales for x of x_shape, one per `columns` of a row ((0,): none).
    Rounded up: a hidden that is no multiple of the block is the C API's error to raise."""
    return (*x_shape[:-1], -(-x_shape[-1] // columns)) if columns else (0,)


def fwd_quant_call(
    x, weight, bias, residual, scale, eps: float, zero_centered: bool, mode: str, out_dtype,
    scale_ub: float, block: int, want_amax: bool, transposed: bool, scales_shape, scales_dtype,
):  # fmt: skip
    """(y, scales, amax, y_t, residual_out) of the quantized forward; absent ones have zero
    elements. scale_ub 0 and block 0 mean "unset" (the C API's convention)."""
    hidden = x.shape[-1]
    rows = int(np.prod(x.shape[:-1], dtype=np.int64))
    result_shapes = (
        jax.ShapeDtypeStruct(x.shape, out_dtype),
        jax.ShapeDtypeStruct(scales_shape, scales_dtype),
        jax.ShapeDtypeStruct((1,) if want_amax else (0,), jnp.float32),
        jax.ShapeDtypeStruct((hidden, rows) if transposed else (0,), out_dtype),
        jax.ShapeDtypeStruct(x.shape if residual is not None else (0,), x.dtype),
    )
    return _call(
        QUANT_TARGET,
        result_shapes,
        (*_fwd_inputs(x, residual, weight, bias), scale if scale is not None else _absent(jnp.float32)),
        eps=np.float32(eps),
        zero_centered=np.bool_(zero_centered),
        mode=mode,
        block=np.int64(block),
        scale_ub=np.float32(scale_ub),
    )
