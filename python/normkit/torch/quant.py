"""normkit.torch.rms_norm_quant: RMSNorm with a quantized (FP8 / INT8) output, fused."""

from __future__ import annotations

from typing import NamedTuple, Optional

import torch

from normkit.torch import _dtensor, _quant_ops  # _quant_ops registers torch.ops.normkit.rms_norm_fwd_quant


class QuantOutput(NamedTuple):
    """What ``rms_norm_quant`` returns; fields a call does not produce are None."""

    y: torch.Tensor
    """``x.shape``, the quantized output (``out_dtype`` codes)."""
    scales: Optional[torch.Tensor]
    """token / block / mxfp8: ``x.shape[:-1] + (hidden // columns,)``, one scale per row
    (token: last dim 1) or per block; float32, or uint8 e8m0 bytes for mxfp8. None for tensor."""
    amax: Optional[torch.Tensor]
    """float32 ``[1]``, max |v| before scaling, when ``return_amax``."""
    y_t: Optional[torch.Tensor]
    """``[hidden, rows]``, y transposed (rows = all leading dims), when ``transposed``."""
    residual_out: Optional[torch.Tensor]
    """``x + residual`` in ``x.dtype``, when a residual is given."""


def rms_norm_quant(
    x: torch.Tensor,
    weight: Optional[torch.Tensor] = None,
    eps: Optional[float] = None,
    *,
    mode: str = "tensor",
    out_dtype: torch.dtype = torch.float8_e4m3fn,
    scale: Optional[torch.Tensor] = None,
    scale_ub: Optional[float] = None,
    block: Optional[int] = None,
    transposed: bool = False,
    return_amax: bool = False,
    residual: Optional[torch.Tensor] = None,
    zero_centered: bool = False,
    bias: Optional[torch.Tensor] = None,
) -> QuantOutput:
    """RMSNorm over the last dimension of ``x`` with ``y`` quantized in the same kernel.

    ``v = s / sqrt(mean(s**2) + eps) * w + bias`` as in ``rms_norm`` (float32), then ``y = Q(v
    * multiplier)``, where ``Q`` rounds to nearest even in ``out_dtype`` and saturates to its
    finite range (448 for e4m3, 57344 for e5m2, 127 for int8). The rules are those of
    ``nk_quant_mode`` in ``normkit.h``:

    - ``"tensor"``: ``y = Q(v * scale)`` with ``scale`` a float32 tensor of one element on
      ``x``'s device (read on the device: no host synchronization). ``transposed=True`` also
      returns ``y_t``. Dequantize with ``y / scale``.
    - ``"token"``: per row, ``scales = max(min(amax_row / qmax, scale_ub), FLT_MIN)`` and ``y =
      Q(v * (1 / scales))``. Dequantize with ``y * scales``.
    - ``"block"``: as token, one scale per ``block`` (32, 64 or 128; default 128) consecutive
      elements of a row; fp8 only.
    - ``"mxfp8"``: OCP MX, blocks of 32, power-of-two scales returned as uint8 e8m0 bytes
      (``2^(byte - 127)``; ``.view(torch.float8_e8m0fnu)`` where torch has that dtype); fp8 only.

    Forward only: this is an inference op with no autograd formula (a backward through its
    outputs raises torch's "no autograd formula was registered" error). It
    is the custom op ``torch.ops.normkit.rms_norm_fwd_quant``, with a fake kernel, so it works
    under ``torch.compile(fullgraph=True)`` and in CUDA graphs; in plain eager execution with
    no input requiring grad it skips the op and makes the op's C API call itself (same bits, a
    fraction of the host time), as ``rms_norm`` does. Invalid combinations (e.g.
    ``"tensor"`` without ``scale``, ``hidden`` not a multiple of ``block``, int8 with a block
    mode) raise ``normkit.NormkitError`` with the C API's message.

    Args:
        x: ``[..., hidden]``, float32/float16/bfloat16. Rows may be strided.
        weight: ``[hidden]`` or None; float32/float16/bfloat16.
        eps: added to the mean square; None means ``torch.finfo(x.dtype).eps``.
        mode: ``"tensor"``, ``"token"``, ``"block"`` or ``"mxfp8"``.
        out_dtype: ``torch.float8_e4m3fn``, ``torch.float8_e5m2`` or ``torch.int8`` (int8 with
            tensor and token only).
        scale: tensor mode's float32 scale, one element.
        scale_ub: token / block: upper bound on every scale (None: no bound).
        block: block mode's block size (None: 128); mxfp8 takes None or 32.
        transposed: tensor mode: also return ``y_t = y.reshape(-1, hidden).T`` (contiguous).
        return_amax: also return ``amax``, max |v| over the tensor before scaling (for delayed
            scaling).
        residual: like ``x``; fused as ``s = x + residual``; ``residual_out`` is returned.
        zero_centered: scale by ``1 + weight`` (the Gemma convention).
        bias: ``[hidden]``, weight's dtype.

    Returns:
        A ``QuantOutput(y, scales, amax, y_t, residual_out)``.
    """
    if eps is None:
        eps = torch.finfo(x.dtype).eps if x.dtype.is_floating_point else 1e-6
    args = (
        x,
        weight,
        bias,
        residual,
        scale,
        float(eps),
        bool(zero_centered),
        mode,
        out_dtype,
        0.0 if scale_ub is None else float(scale_ub),
        0 if block is None else int(block),
        bool(return_amax),
        bool(transposed),
    )
    # Plain eager execution: the op's raw-pointer call without the op (same call, same bits).
    out = _quant_ops.eager_fwd_quant(*args)
    if out is None:
        _dtensor.register_for(x)
        out = torch.ops.normkit.rms_norm_fwd_quant(*args)
    y, scales, amax, y_t, residual_out = out
    return QuantOutput(
        y=y,
        scales=scales if _quant_ops.scale_columns(mode, block or 0, x.shape[-1]) else None,
        amax=amax if return_amax else None,
        y_t=y_t if transposed else None,
        residual_out=residual_out if residual is not None else None,
    )
