"""The torch custom op ``normkit::rms_norm_fwd_quant``: the forward with a quantized ``y``.

A real implementation (CPU or CUDA tensors, through ``normkit._C.rms_norm_fwd_quant`` and the C
API) and a fake one (shapes and dtypes only, for torch.compile, export and meta tensors). No
autograd: quantized outputs are an inference (or forward-only) feature, and 8-bit codes carry no
gradient. Layout rules are the plain op's (``_ops.py``): leading dims flatten into rows, strided
rows are used in place, outputs are new and contiguous, absent outputs are empty tensors, CUDA
work goes on the current stream without host synchronization.

Validation of the mode / dtype / block / optional-output combination is the C API's: a bad
combination raises ``normkit.NormkitError`` with its message when the op runs. The checks here
are only those the fake kernel needs to know the output shapes.
"""

from __future__ import annotations

from typing import Optional

import torch

from normkit import _C
from normkit.torch._ops import _check_fwd_args, _DeviceGuard, _rows_view, _stream

# torch dtype of y -> the C API's name of its codes.
CODE_DTYPES = {
    torch.float8_e4m3fn: "float8_e4m3",
    torch.float8_e5m2: "float8_e5m2",
    torch.int8: "int8",
}
MODES = ("tensor", "token", "block", "mxfp8")


def scale_columns(mode: str, block: int, hidden):
    """Columns of a row one scale covers (0: the mode writes no scales), as nk_quant_mode says."""
    if mode == "token":
        return hidden
    if mode == "block":
        return block or 128
    return 32 if mode == "mxfp8" else 0  # MXFP8 blocks are always 32 (another is an error)


def _check_quant_args(x, weight, bias, residual, mode, out_dtype):
    _check_fwd_args(x, weight, bias, residual, None)
    torch._check(
        mode in MODES, lambda: f"normkit rms_norm_quant: mode is {mode!r}; expected one of {MODES}"
    )
    torch._check(
        out_dtype in CODE_DTYPES,
        lambda: (
            f"normkit rms_norm_quant: out_dtype is {out_dtype}; expected torch.float8_e4m3fn, "
            "torch.float8_e5m2 or torch.int8"
        ),
    )


def _quant_outputs(x, residual, mode, out_dtype, block, want_amax, transposed):
    """(y, scales, amax, y_t, residual_out), the absent ones empty.

    scales is ``x.shape[:-1] + (hidden // columns,)``: float32, or uint8 e8m0 bytes for mxfp8.
    """
    hidden = x.shape[-1]
    dev = x.device
    y = torch.empty(x.shape, dtype=out_dtype, device=dev)
    columns = scale_columns(mode, block, hidden)
    if columns:
        # Rounded up: a hidden that is no multiple of the block is the C API's error to raise
        # (it writes nothing then), and it needs a scales buffer to reach that check.
        per_row = -(-hidden // columns)
        scale_dtype = torch.uint8 if mode == "mxfp8" else torch.float32
        scales = torch.empty((*x.shape[:-1], per_row), dtype=scale_dtype, device=dev)
    else:
        scales = torch.empty((0,), dtype=torch.float32, device=dev)
    amax = torch.empty((1,) if want_amax else (0,), dtype=torch.float32, device=dev)
    rows = x.numel() // hidden if hidden else 0
    y_t = torch.empty((hidden, rows) if transposed else (0,), dtype=out_dtype, device=dev)
    residual_out = torch.empty(x.shape if residual is not None else (0,), dtype=x.dtype, device=dev)
    return y, scales, amax, y_t, residual_out


def _codes(t: torch.Tensor) -> torch.Tensor:
    """8-bit codes as uint8: older torch versions cannot export float8 through DLPack."""
    return t.view(torch.uint8)


@torch.library.custom_op("normkit::rms_norm_fwd_quant", mutates_args=())
def rms_norm_fwd_quant(
    x: torch.Tensor,
    weight: Optional[torch.Tensor],
    bias: Optional[torch.Tensor],
    residual: Optional[torch.Tensor],
    scale: Optional[torch.Tensor],
    eps: float,
    zero_centered: bool,
    mode: str,
    out_dtype: torch.dtype,
    scale_ub: float,
    block: int,
    want_amax: bool,
    transposed: bool,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """Returns (y, scales, amax, y_t, residual_out); absent ones are empty.

    scale_ub 0 and block 0 mean "unset" (the C API's convention).
    """
    _check_quant_args(x, weight, bias, residual, mode, out_dtype)
    outs = _quant_outputs(x, residual, mode, out_dtype, block, want_amax, transposed)
    y, scales, amax, y_t, residual_out = outs
    hidden = x.shape[-1]
    if hidden == 0:
        raise ValueError("normkit rms_norm_quant: x has an empty last dimension")
    if x.numel() == 0:  # no rows (the C API needs rows >= 1): nothing to quantize
        amax.zero_()
        return outs
    with _DeviceGuard(x.device):
        _C.rms_norm_fwd_quant(
            _rows_view(x, hidden),
            _codes(y.view(-1, hidden)),
            y_dtype=CODE_DTYPES[out_dtype],
            mode=mode,
            weight=None if weight is None else weight.detach().contiguous(),
            bias=None if bias is None else bias.detach().contiguous(),
            residual=None if residual is None else _rows_view(residual, hidden),
            residual_out=None if residual is None else residual_out.view(-1, hidden),
            scale=None if scale is None else scale.detach().reshape(-1),
            scale_ub=scale_ub,
            scales=scales if scale_columns(mode, block, hidden) else None,
            amax=amax if want_amax else None,
            y_t=_codes(y_t) if transposed else None,
            block=block,
            eps=eps,
            zero_centered=zero_centered,
            stream=_stream(x.device),
        )
    return outs


@rms_norm_fwd_quant.register_fake
def _rms_norm_fwd_quant_fake(
    x, weight, bias, residual, scale, eps, zero_centered, mode, out_dtype, scale_ub, block,
    want_amax, transposed,
):  # fmt: skip
    _check_quant_args(x, weight, bias, residual, mode, out_dtype)
    return _quant_outputs(x, residual, mode, out_dtype, block, want_amax, transposed)
