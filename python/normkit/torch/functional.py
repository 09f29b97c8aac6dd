"""normkit.torch.rms_norm: the functional entry point."""

from __future__ import annotations

from typing import Optional, Union

import torch

from normkit.torch import _dtensor, _eager, _ops  # _ops registers torch.ops.normkit.*

# torch.finfo(dtype).eps, looked up once per dtype (torch.finfo is slow next to a small kernel).
_FINFO_EPS = {dt: torch.finfo(dt).eps for dt in _ops.SUPPORTED_DTYPES}


def rms_norm(
    x: torch.Tensor,
    weight: Optional[torch.Tensor] = None,
    eps: Optional[float] = None,
    *,
    bias: Optional[torch.Tensor] = None,
    residual: Optional[torch.Tensor] = None,
    zero_centered: bool = False,
    out_dtype: Optional[torch.dtype] = None,
) -> Union[torch.Tensor, tuple[torch.Tensor, torch.Tensor]]:
    """RMSNorm over the last dimension of ``x``, on CPU or CUDA tensors.

    ``y = s / sqrt(mean(s**2) + eps) * w + bias`` with ``s = x`` (or ``x + residual``), where
    ``w`` is ``weight``, ``1 + weight`` when ``zero_centered`` (the Gemma convention), or 1 when
    ``weight`` is None. Arithmetic is float32 whatever the dtypes; ``y`` is rounded once.

    Args:
        x: ``[..., hidden]``, float32/float16/bfloat16. Rows may be strided (e.g. a slice).
        weight: ``[hidden]``, any supported dtype (it need not match ``x``).
        eps: added to the mean square; ``None`` means ``torch.finfo(x.dtype).eps``, as
            ``torch.nn.RMSNorm`` does.
        bias: ``[hidden]``, weight's dtype.
        residual: like ``x`` (same shape and dtype); fused as ``s = x + residual``.
        zero_centered: scale by ``1 + weight``.
        out_dtype: dtype of ``y``; defaults to ``x.dtype``.

    Returns:
        ``y``, or ``(y, residual_out)`` with ``residual_out = x + residual`` (in ``x.dtype``)
        when a residual is given.
    """
    if eps is None:
        eps = _FINFO_EPS.get(x.dtype) or torch.finfo(x.dtype).eps
    eps, zero_centered = float(eps), bool(zero_centered)
    # Eager calls on plain tensors skip the custom op's Python machinery (see _eager.py);
    # torch.compile, tracers, modes and every unusual case get the custom op.
    out = _eager.fwd(x, weight, bias, residual, eps, zero_centered, out_dtype)
    if out is None:
        _dtensor.register_for(x)
        y, residual_out, _ = torch.ops.normkit.rms_norm_fwd(
            x, weight, bias, residual, eps, zero_centered, out_dtype
        )
    else:
        y, residual_out = out
    if residual is not None:
        return y, residual_out
    return y
