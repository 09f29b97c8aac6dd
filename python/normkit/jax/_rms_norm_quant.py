"""normkit.jax.rms_norm_quant: RMSNorm with a quantized (FP8 / INT8) output, through XLA FFI."""

from __future__ import annotations

from typing import NamedTuple, Optional

import jax
import jax.numpy as jnp

from normkit.jax import _ffi, _sharding
from normkit.jax._rms_norm import _check

CODE_DTYPES = (jnp.dtype(jnp.float8_e4m3fn), jnp.dtype(jnp.float8_e5m2), jnp.dtype(jnp.int8))
MODES = ("tensor", "token", "block", "mxfp8")


class QuantOutput(NamedTuple):
    """What ``rms_norm_quant`` returns; fields a call does not produce are None."""

    y: jax.Array
    """``x.shape``, the quantized output (``out_dtype`` codes)."""
    scales: Optional[jax.Array]
    """token / block / mxfp8: ``x.shape[:-1] + (hidden // columns,)``; float32, or uint8 e8m0
    bytes for mxfp8. None for tensor."""
    amax: Optional[jax.Array]
    """float32 ``[1]``, max |v| before scaling, when ``return_amax``."""
    y_t: Optional[jax.Array]
    """``[hidden, rows]``, y transposed (rows = all leading dims), when ``transposed``."""
    residual_out: Optional[jax.Array]
    """``x + residual`` in ``x.dtype``, when a residual is given."""


def _scale_columns(mode: str, block: int, hidden: int) -> int:
    """Columns of a row one scale covers (0: the mode writes no scales)."""
    if mode == "token":
        return hidden
    if mode == "block":
        return block or 128
    return 32 if mode == "mxfp8" else 0  # MXFP8 blocks are always 32 (another is an error)


def _scale_operand(scale):
    scale = jnp.asarray(scale)
    if scale.dtype != jnp.float32 or scale.size != 1:
        raise TypeError(
            f"normkit rms_norm_quant: scale is {scale.dtype}{list(scale.shape)}; expected one float32"
        )
    return scale.reshape((1,))


def rms_norm_quant(
    x,
    weight=None,
    eps: float = 1e-6,
    *,
    mode: str = "tensor",
    out_dtype=jnp.float8_e4m3fn,
    scale=None,
    scale_ub: Optional[float] = None,
    block: Optional[int] = None,
    transposed: bool = False,
    return_amax: bool = False,
    residual=None,
    zero_centered: bool = False,
    bias=None,
) -> QuantOutput:
    """RMSNorm over the last axis of ``x`` with ``y`` quantized in the same kernel (CPU, CUDA).

    ``v = s / sqrt(mean(s**2) + eps) * w + bias`` as in ``rms_norm`` (float32), then ``y =
    Q(v * multiplier)``, ``Q`` rounding to nearest even in ``out_dtype`` and saturating to its
    finite range (448 e4m3, 57344 e5m2, 127 int8). The modes follow ``nk_quant_mode`` in
    ``normkit.h``: ``"tensor"`` (``y = Q(v * scale)``; optional ``y_t``), ``"token"`` (per-row
    ``scales = max(min(amax_row / qmax, scale_ub), FLT_MIN)``, ``y = Q(v / scales)``),
    ``"block"`` (per ``block`` of 32/64/128 columns, default 128; fp8 only) and ``"mxfp8"``
    (blocks of 32, power-of-two scales as uint8 e8m0 bytes ``2^(byte - 127)``; fp8 only).

    Forward only (no JVP/VJP is defined: ``jax.grad`` through it fails); works under ``jit``
    and ``vmap`` (a batched ``scale`` gives each batch element its own scale and ``amax``).
    Under ``jit`` with ``x`` sharded over a mesh, each device quantizes its own rows; ``amax``
    is the max over them; with ``transposed`` only ``x``'s first axis stays split (``y_t``'s
    columns split as it), the other row axes are gathered.
    ``eps``, ``mode``, ``out_dtype``, ``scale_ub``, ``block`` and the flags are compile-time
    constants. Invalid combinations (``"tensor"`` without ``scale``, ``hidden`` not a multiple
    of ``block``, int8 with a block mode, ...) fail when the call runs, with the C API's message.

    Args:
        x: ``[..., hidden]``, float32/float16/bfloat16.
        weight: ``[hidden]`` or None; its dtype may differ from ``x``'s.
        eps: a Python float.
        mode: ``"tensor"``, ``"token"``, ``"block"`` or ``"mxfp8"``.
        out_dtype: ``jnp.float8_e4m3fn``, ``jnp.float8_e5m2`` or ``jnp.int8``.
        scale: tensor mode: one float32 (a scalar or ``[1]`` array).
        scale_ub: token / block: upper bound on every scale (None: no bound).
        block: block mode's block size (None: 128); mxfp8 takes None or 32.
        transposed: tensor mode: also return ``y_t``, ``[hidden, rows]``.
        return_amax: also return ``amax`` (float32 ``[1]``), max |v| before scaling.
        residual: like ``x``; fused as ``s = x + residual``; ``residual_out`` is returned.
        zero_centered: scale by ``1 + weight`` (the Gemma convention).
        bias: ``[hidden]``, weight's dtype.

    Returns:
        A ``QuantOutput(y, scales, amax, y_t, residual_out)``.
    """
    x = jnp.asarray(x)
    weight = None if weight is None else jnp.asarray(weight)
    bias = None if bias is None else jnp.asarray(bias)
    residual = None if residual is None else jnp.asarray(residual)
    _check(x, weight, bias, residual, None)
    if mode not in MODES:
        raise ValueError(f"normkit rms_norm_quant: mode is {mode!r}; expected one of {MODES}")
    out_dtype = jnp.dtype(out_dtype)
    if out_dtype not in CODE_DTYPES:
        raise TypeError(
            f"normkit rms_norm_quant: out_dtype is {out_dtype}; expected float8_e4m3fn, "
            "float8_e5m2 or int8"
        )
    scale = None if scale is None else _scale_operand(scale)
    block = 0 if block is None else int(block)
    hidden = x.shape[-1]
    columns = _scale_columns(mode, block, hidden)
    scales_shape = _ffi.quant_scales_shape(x.shape, columns)
    scales_dtype = jnp.uint8 if mode == "mxfp8" else jnp.float32
    if x.size == 0:  # no rows: nothing to quantize (the C API needs rows >= 1)
        y, scales = jnp.zeros(x.shape, out_dtype), jnp.zeros(scales_shape, scales_dtype)
        amax = jnp.zeros((1,), jnp.float32)
        y_t = jnp.zeros((hidden, 0), out_dtype)
        residual_out = None if residual is None else x + residual
    else:
        y, scales, amax, y_t, residual_out = _sharding.fwd_quant_call(
            x, weight, bias, residual, scale, float(eps), bool(zero_centered), mode, out_dtype,
            0.0 if scale_ub is None else float(scale_ub), block, bool(return_amax),
            bool(transposed), columns, scales_dtype,
        )  # fmt: skip
    return QuantOutput(
        y=y,
        scales=scales if columns else None,
        amax=amax if return_amax else None,
        y_t=y_t if transposed else None,
        residual_out=residual_out if residual is not None else None,
    )
