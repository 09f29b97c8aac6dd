"""normkit.jax.rms_norm: the FFI calls wrapped in jax.custom_vjp."""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp

from normkit.jax import _ffi, _sharding


@functools.partial(jax.custom_vjp, nondiff_argnums=(4, 5, 6))
def _rms_norm(x, weight, bias, residual, eps, zero_centered, out_dtype):
    out, _ = _rms_norm_fwd(x, weight, bias, residual, eps, zero_centered, out_dtype)
    return out


def _rms_norm_fwd(x, weight, bias, residual, eps, zero_centered, out_dtype):
    y, residual_out, rstd = _sharding.fwd_call(
        x, weight, bias, residual, eps, zero_centered, out_dtype
    )
    # The backward normalizes what the forward did: x, or the stored x + residual.
    s = residual_out if residual is not None else x
    out = (y, residual_out) if residual is not None else y
    return out, (s, rstd, weight, bias)


def _rms_norm_bwd(eps, zero_centered, out_dtype, saved, g):
    s, rstd, weight, bias = saved
    has_residual = isinstance(g, tuple)  # the output was (y, residual_out)
    dy, dresidual_out = g if has_residual else (g, None)
    param_dtype = weight.dtype if weight is not None else (bias.dtype if bias is not None else s.dtype)
    dx, dweight, dbias = _sharding.bwd_call(
        dy, s, rstd, weight, dresidual_out, zero_centered, bias is not None, param_dtype,
        bias_axes=_ffi.varying_axes(bias) if bias is not None else (),
    )
    return (
        dx,
        dweight if weight is not None else None,
        dbias if bias is not None else None,
        dx if has_residual else None,
    )


_rms_norm.defvjp(_rms_norm_fwd, _rms_norm_bwd)


def _check(x, weight, bias, residual, out_dtype):
    if x.ndim < 1:
        raise ValueError("normkit rms_norm: x must have at least one dimension")
    hidden = x.shape[-1]
    if hidden < 1:
        raise ValueError("normkit rms_norm: x has an empty last dimension")
    for name, a in (("x", x), ("weight", weight), ("bias", bias), ("out_dtype", out_dtype)):
        dtype = None if a is None else (jnp.dtype(a) if name == "out_dtype" else a.dtype)
        if dtype is not None and dtype not in _ffi.SUPPORTED_DTYPES:
            raise TypeError(
                f"normkit rms_norm: {name} has dtype {dtype}; expected float32, float16 or bfloat16"
            )
    for name, v in (("weight", weight), ("bias", bias)):
        if v is not None and v.shape != (hidden,):
            raise ValueError(f"normkit rms_norm: {name} has shape {v.shape}; expected ({hidden},)")
    if weight is not None and bias is not None and weight.dtype != bias.dtype:
        raise TypeError(
            f"normkit rms_norm: bias has dtype {bias.dtype} but weight has {weight.dtype}; they must match"
        )
    if residual is not None and (residual.shape != x.shape or residual.dtype != x.dtype):
        raise ValueError(
            f"normkit rms_norm: residual is {residual.dtype}{list(residual.shape)}; "
            f"expected x's shape and dtype {x.dtype}{list(x.shape)}"
        )


def rms_norm(
    x,
    weight=None,
    eps: float = 1e-6,
    *,
    bias=None,
    residual=None,
    zero_centered: bool = False,
    out_dtype=None,
):
    """RMSNorm over the last axis of ``x`` through normkit's XLA FFI targets (CPU and CUDA).

    ``y = s / sqrt(mean(s**2) + eps) * w + bias`` with ``s = x`` (or ``x + residual``), where
    ``w`` is ``weight``, ``1 + weight`` when ``zero_centered``, or 1 when ``weight`` is None.
    Arithmetic is float32; ``y`` is rounded once to ``out_dtype`` (default ``x.dtype``).

    Differentiable in reverse mode (``jax.grad``, ``jax.vjp``) through ``jax.custom_vjp``;
    works under ``jit``, ``vmap``, ``shard_map`` and inside ``lax.scan``. Forward-mode (``jvp``)
    is not defined. Under ``jit`` with operands sharded over a mesh, each device normalizes its
    own rows (no gather; a sharded hidden axis is gathered) and the gradients of ``weight`` and
    ``bias`` are float32 sums over the row shards, added by one ``psum``; inside ``shard_map``
    they are summed over the axes the rows vary over and the parameter does not.

    Args:
        x: ``[..., hidden]``, float32/float16/bfloat16.
        weight: ``[hidden]`` or None; its dtype may differ from ``x``'s.
        eps: a Python float (it is compiled in).
        bias: ``[hidden]``, weight's dtype.
        residual: like ``x``; fused as ``s = x + residual``.
        zero_centered: scale by ``1 + weight`` (the Gemma convention).
        out_dtype: dtype of ``y``.

    Returns:
        ``y``, or ``(y, residual_out)`` with ``residual_out = x + residual`` when a residual is given.
    """
    x = jnp.asarray(x)
    weight = None if weight is None else jnp.asarray(weight)
    bias = None if bias is None else jnp.asarray(bias)
    residual = None if residual is None else jnp.asarray(residual)
    _check(x, weight, bias, residual, out_dtype)
    out_dtype = x.dtype if out_dtype is None else jnp.dtype(out_dtype)
    if x.size == 0:  # no rows: nothing to normalize (the C API needs rows >= 1)
        y = jnp.zeros(x.shape, out_dtype)
        return (y, x + residual) if residual is not None else y
    return _rms_norm(x, weight, bias, residual, float(eps), bool(zero_centered), out_dtype)
