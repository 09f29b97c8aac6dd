"""The torch custom op ``normkit::rms_norm_fwd_quant``: the forward with a quantized ``y``.

A real implementation (CPU or CUDA tensors, through the C API) and a fake one (shapes and
dtypes only, for torch.compile, export and meta tensors). No
autograd: quantized outputs are an inference (or forward-only) feature, and 8-bit codes carry no
gradient. Layout rules are the plain op's (``_ops.py``): leading dims flatten into rows, strided
rows are used in place, outputs are new and contiguous, absent outputs are empty tensors, CUDA
work goes on the current stream without host synchronization.

Validation of the mode / dtype / block / optional-output combination is the C API's: a bad
combination raises ``normkit.NormkitError`` with its message when the op runs. The checks here
are only those the fake kernel needs to know the output shapes.

As the plain ops do (``_ops.py``), the real implementation calls the C API through a raw-pointer
entry point (``_C.rms_norm_fwd_quant_ptr``, from ``op_fwd_quant``) whenever the arguments allow,
and through DLPack (``_C.rms_norm_fwd_quant``, which checks every array itself) otherwise: the
same C API call, so the same bits. ``normkit.torch._ops.raw_pointer_calls = False`` forces DLPack.

In plain eager execution ``rms_norm_quant`` skips the custom op altogether (``eager_fwd_quant``,
the quantized counterpart of ``_eager.fwd``): it calls ``op_fwd_quant`` itself, so the same C API
call with the same outputs, without torch's custom-op machinery (~19 us of host time on a CPU).
``normkit.torch._eager.enabled = False`` turns this off too.
"""

from __future__ import annotations

from typing import Optional

import torch

from normkit import _C
from normkit.torch import _eager, _ops
from normkit.torch._eager import (
    _PLAIN_TYPES,
    _beside_x,
    _dispatch_modes,
    _function_modes,
    _functorch_active,
    _fwd_plan,
    _grad_enabled,
    _is_compiling,
    _jit_tracing,
    _matrix,
)
from normkit.torch._ops import _check_fwd_args, _DeviceGuard, _rows_view, _stream

# torch dtype of y -> the C API's name of its codes.
CODE_DTYPES = {
    torch.float8_e4m3fn: "float8_e4m3",
    torch.float8_e5m2: "float8_e5m2",
    torch.int8: "int8",
}
MODES = ("tensor", "token", "block", "mxfp8")

# The raw-pointer call's integer arguments: nk_quant_mode and nk_dtype values (normkit.h).
_MODE_CODE = {"tensor": 1, "token": 2, "block": 3, "mxfp8": 4}
_Y_CODE = {torch.float8_e4m3fn: 3, torch.float8_e5m2: 4, torch.int8: 5}
_fwd_quant_ptr = _C.rms_norm_fwd_quant_ptr  # a module global: cheaper, and tests spy on it
_empty = torch.empty
_empty_like = torch.empty_like
_float32 = torch.float32
_uint8 = torch.uint8
_contiguous = torch.contiguous_format


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
    return _fwd_quant_impl(
        x, weight, bias, residual, scale, eps, zero_centered, mode, out_dtype, scale_ub, block,
        want_amax, transposed,
    )  # fmt: skip


def _fwd_quant_impl(
    x, weight, bias, residual, scale, eps, zero_centered, mode, out_dtype, scale_ub, block,
    want_amax, transposed,
):  # fmt: skip
    """rms_norm_fwd_quant's real implementation (a module global: tests count its calls)."""
    if _ops.raw_pointer_calls:
        # A raw call exists only for arguments that pass every check below, so those come after.
        out = op_fwd_quant(
            x, weight, bias, residual, scale, eps, zero_centered, mode, out_dtype, scale_ub, block,
            want_amax, transposed,
        )  # fmt: skip
        if out is not None:
            return out
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


def op_fwd_quant(
    x, weight, bias, residual, scale, eps, zero_centered, mode, out_dtype, scale_ub, block,
    want_amax, transposed,
):  # fmt: skip
    """The op's outputs through the raw-pointer call, or None when only the DLPack call describes
    the arguments (non-plain tensors, mixed devices, a CUDA tensor off the current device, a
    scale that is not one float32 beside x, empty x, a negative block, an unknown mode or dtype:
    the DLPack path checks or rejects those with its own errors).

    Runs inside the op's real implementation, so no context checks (as _eager.op_fwd). The plan
    (_eager._fwd_plan) implies _check_fwd_args; combinations only the C API judges (a mode's
    dtypes, blocks, scale or y_t where the mode takes none) reach it with the same pointers set
    as the DLPack call sets, so it raises the same NormkitError.
    """
    if type(x) not in _PLAIN_TYPES:
        return None
    mode_code = _MODE_CODE.get(mode)
    y_code = _Y_CODE.get(out_dtype)
    if mode_code is None or y_code is None:
        return None
    if weight is not None and not weight.is_contiguous():
        weight = weight.contiguous()
    if bias is not None and not bias.is_contiguous():
        bias = bias.contiguous()
    plan = _fwd_plan(x, weight, bias, residual, eps, zero_centered, None)
    if plan is None:
        return None
    backend, dev, stream, rows, hidden, x_code, w_code = plan[:7]
    columns = scale_columns(mode, block, hidden)
    if columns < 0:
        return None
    scale_ptr = 0
    if scale is not None:
        # The DLPack call takes scale.reshape(-1) and requires one float32 beside x.
        if not (
            type(scale) in _PLAIN_TYPES
            and scale.dtype is _float32
            and scale.numel() == 1
            and _beside_x(scale, backend, dev)
        ):
            return None
        scale_ptr = scale.data_ptr()
    # Outputs as _quant_outputs makes them (the fake kernel's shapes, contiguous), more cheaply.
    device = x.device
    shape = x.shape  # at least one dim (a plan exists)
    y = _empty_like(x, dtype=out_dtype, memory_format=_contiguous)
    if columns:
        per_row = -(-hidden // columns)  # rounded up, as _quant_outputs
        # Sizes as separate ints: torch parses them about 1 us faster than a tuple.
        scale_dtype = _uint8 if mode_code == 4 else _float32
        scales = _empty(*shape[:-1], per_row, dtype=scale_dtype, device=device)
    else:
        scales = _empty(0, dtype=_float32, device=device)
    amax = _empty(1 if want_amax else 0, dtype=_float32, device=device)
    if transposed:
        y_t = _empty(hidden, rows, dtype=out_dtype, device=device)
    else:
        y_t = _empty(0, dtype=out_dtype, device=device)
    xm, x_stride = (x, 0) if x.is_contiguous() else _matrix(x, hidden)
    r_ptr = r_stride = ro_ptr = 0
    if residual is not None:
        residual_out = _empty_like(x, memory_format=_contiguous)
        rm, r_stride = _matrix(residual, hidden)
        r_ptr, ro_ptr = rm.data_ptr(), residual_out.data_ptr()
    else:
        residual_out = _empty(0, dtype=x.dtype, device=device)
    _fwd_quant_ptr(
        backend,
        stream,
        rows,
        hidden,
        xm.data_ptr(),
        x_code,
        x_stride,
        r_ptr,
        r_stride,
        ro_ptr,
        0 if weight is None else weight.data_ptr(),
        0 if bias is None else bias.data_ptr(),
        w_code,
        y.data_ptr(),
        y_code,
        mode_code,
        scale_ptr,
        scale_ub,
        scales.data_ptr() if columns else 0,
        amax.data_ptr() if want_amax else 0,
        y_t.data_ptr() if transposed else 0,
        block,
        eps,
        zero_centered,
    )
    return y, scales, amax, y_t, residual_out


def eager_fwd_quant(
    x, weight, bias, residual, scale, eps, zero_centered, mode, out_dtype, scale_ub, block,
    want_amax, transposed,
):  # fmt: skip
    """The op's outputs without the op, in plain eager execution; None when the op must run.

    The context checks are ``_eager.fwd``'s (inlined: a helper call would cost the plain path
    host time): nothing compiling, no dispatch or torch-function mode, no functorch transform,
    no jit tracing, a plain x (op_fwd_quant checks the other tensors' types). The op has no
    autograd formula: when grad mode is on and any input requires grad, the op runs, so that
    its outputs keep the autograd node that raises "no autograd formula" on backward. Arguments
    op_fwd_quant does not describe (it returns None) also go to the op, which checks them or
    takes the DLPack call.
    """
    if _is_compiling() or not _eager.enabled:  # first: dynamo folds it and traces nothing below
        return None
    if (
        type(x) not in _PLAIN_TYPES
        or _dispatch_modes()
        or _function_modes()
        or _functorch_active()
        or _jit_tracing()
    ):
        return None
    if _grad_enabled() and (
        x.requires_grad
        or (weight is not None and weight.requires_grad)
        or (bias is not None and bias.requires_grad)
        or (residual is not None and residual.requires_grad)
        or (scale is not None and scale.requires_grad)
    ):
        return None
    return op_fwd_quant(
        x, weight, bias, residual, scale, eps, zero_centered, mode, out_dtype, scale_ub, block,
        want_amax, transposed,
    )  # fmt: skip


@rms_norm_fwd_quant.register_fake
def _rms_norm_fwd_quant_fake(
    x, weight, bias, residual, scale, eps, zero_centered, mode, out_dtype, scale_ub, block,
    want_amax, transposed,
):  # fmt: skip
    _check_quant_args(x, weight, bias, residual, mode, out_dtype)
    return _quant_outputs(x, residual, mode, out_dtype, block, want_amax, transposed)
