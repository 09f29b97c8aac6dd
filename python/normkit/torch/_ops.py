"""The torch custom ops ``normkit::rms_norm_fwd`` and ``normkit::rms_norm_bwd``.

Each op has a real implementation (CPU or CUDA tensors, through normkit._C and the C API), a fake
implementation (shapes and dtypes only, for torch.compile and meta tensors), and the forward
op has autograd through the backward op. Layout rules live here, in one place:

- Any number of leading dimensions; they are flattened into rows. Rows may be strided (a
  slice of a wider tensor is passed as it is), but the C API needs one row stride and
  contiguous columns, so a tensor that cannot be viewed that way is copied first.
- Outputs are new contiguous tensors. Optional outputs that are absent are empty tensors
  (custom ops cannot return None).
- CUDA work is queued on the caller's current stream with no host synchronization, and
  workspace comes from torch's caching allocator, so the ops can be captured in CUDA graphs.
- The real implementations call the C API through the eager path's raw-pointer entry points
  (_eager.op_fwd / op_bwd) whenever the arguments allow; otherwise through DLPack, which
  checks every array itself. Both make the same C API call, so the results are the same bits;
  the raw-pointer call saves the DLPack import (several microseconds per tensor).
"""

from __future__ import annotations

from typing import Optional

import torch

from normkit import _C
from normkit.torch import _eager
from normkit.torch._eager import _rows_view

SUPPORTED_DTYPES = (torch.float32, torch.float16, torch.bfloat16)

# False: the real implementations always take the DLPack call (tests compare the two calls).
raw_pointer_calls = True


def _stream(device: torch.device) -> int:
    return torch.cuda.current_stream(device).cuda_stream if device.type == "cuda" else 0


class _DeviceGuard:
    """Makes a tensor's CUDA device current (the C API runs on the current device)."""

    def __init__(self, device: torch.device):
        self._ctx = torch.cuda.device(device) if device.type == "cuda" else None

    def __enter__(self):
        if self._ctx is not None:
            self._ctx.__enter__()

    def __exit__(self, *exc):
        if self._ctx is not None:
            self._ctx.__exit__(*exc)


def _check_vector(name, v, hidden):
    torch._check(
        v.dim() == 1 and v.shape[0] == hidden,
        lambda: f"normkit rms_norm: {name} has shape {tuple(v.shape)}; expected ({hidden},)",
    )
    torch._check(
        v.dtype in SUPPORTED_DTYPES,
        lambda: f"normkit rms_norm: {name} has dtype {v.dtype}; expected float32, float16 or bfloat16",
    )


def _check_fwd_args(x, weight, bias, residual, out_dtype):
    """Errors a user can act on, raised the same way in eager, fake and compiled runs."""
    torch._check(x.dim() >= 1, lambda: "normkit rms_norm: x must have at least one dimension")
    torch._check(
        x.dtype in SUPPORTED_DTYPES,
        lambda: f"normkit rms_norm: x has dtype {x.dtype}; expected float32, float16 or bfloat16",
    )
    hidden = x.shape[-1]
    for name, v in (("weight", weight), ("bias", bias)):
        if v is not None:
            _check_vector(name, v, hidden)
    if weight is not None and bias is not None:
        torch._check(
            weight.dtype == bias.dtype,
            lambda: (
                f"normkit rms_norm: bias has dtype {bias.dtype} but weight has {weight.dtype}; they must match"
            ),
        )
    if residual is not None:
        torch._check(
            residual.shape == x.shape,
            lambda: (
                f"normkit rms_norm: residual has shape {tuple(residual.shape)}; expected {tuple(x.shape)}"
            ),
        )
        torch._check(
            residual.dtype == x.dtype,
            lambda: f"normkit rms_norm: residual has dtype {residual.dtype}; expected x's dtype {x.dtype}",
        )
    if out_dtype is not None:
        torch._check(
            out_dtype in SUPPORTED_DTYPES,
            lambda: f"normkit rms_norm: out_dtype is {out_dtype}; expected float32, float16 or bfloat16",
        )


def _fwd_outputs(x, residual, out_dtype):
    y = torch.empty(x.shape, dtype=out_dtype or x.dtype, device=x.device)
    residual_out = torch.empty(x.shape if residual is not None else (0,), dtype=x.dtype, device=x.device)
    rstd = torch.empty(x.shape[:-1], dtype=torch.float32, device=x.device)
    return y, residual_out, rstd


@torch.library.custom_op("normkit::rms_norm_fwd", mutates_args=())
def rms_norm_fwd(
    x: torch.Tensor,
    weight: Optional[torch.Tensor],
    bias: Optional[torch.Tensor],
    residual: Optional[torch.Tensor],
    eps: float,
    zero_centered: bool,
    out_dtype: Optional[torch.dtype],
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Returns (y, residual_out, rstd); residual_out is empty when residual is None."""
    return _fwd_impl(x, weight, bias, residual, eps, zero_centered, out_dtype)


def _fwd_impl(x, weight, bias, residual, eps, zero_centered, out_dtype):
    """rms_norm_fwd's real implementation (a module global: tests count its calls)."""
    if raw_pointer_calls:
        # A plan exists only for arguments that pass every check below, so those come after.
        out = _eager.op_fwd(x, weight, bias, residual, eps, zero_centered, out_dtype)
        if out is not None:
            return out
    _check_fwd_args(x, weight, bias, residual, out_dtype)
    hidden = x.shape[-1]
    if hidden == 0:
        raise ValueError("normkit rms_norm: x has an empty last dimension")
    y, residual_out, rstd = _fwd_outputs(x, residual, out_dtype)
    if x.numel() == 0:
        return y, residual_out, rstd
    with _DeviceGuard(x.device):
        _C.rms_norm_fwd(
            _rows_view(x, hidden),
            y.view(-1, hidden),
            weight=None if weight is None else weight.detach().contiguous(),
            bias=None if bias is None else bias.detach().contiguous(),
            residual=None if residual is None else _rows_view(residual, hidden),
            residual_out=None if residual is None else residual_out.view(-1, hidden),
            rstd=rstd.view(-1),
            eps=eps,
            zero_centered=zero_centered,
            stream=_stream(x.device),
        )
    return y, residual_out, rstd


@rms_norm_fwd.register_fake
def _rms_norm_fwd_fake(x, weight, bias, residual, eps, zero_centered, out_dtype):
    _check_fwd_args(x, weight, bias, residual, out_dtype)
    return _fwd_outputs(x, residual, out_dtype)


def _bwd_outputs(s, weight, want_dweight, want_dbias, param_dtype):
    dx = torch.empty(s.shape, dtype=s.dtype, device=s.device)
    hidden = s.shape[-1]
    dweight = torch.empty((hidden,) if want_dweight else (0,), dtype=param_dtype, device=s.device)
    dbias = torch.empty((hidden,) if want_dbias else (0,), dtype=param_dtype, device=s.device)
    return dx, dweight, dbias


@torch.library.custom_op("normkit::rms_norm_bwd", mutates_args=())
def rms_norm_bwd(
    dy: torch.Tensor,
    s: torch.Tensor,
    rstd: torch.Tensor,
    weight: Optional[torch.Tensor],
    dresidual_out: Optional[torch.Tensor],
    zero_centered: bool,
    want_dweight: bool,
    want_dbias: bool,
    param_dtype: torch.dtype,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Returns (dx, dweight, dbias) for the normalized input s; absent ones are empty.

    param_dtype is the dtype of weight (and of dweight/dbias).
    """
    return _bwd_impl(
        dy, s, rstd, weight, dresidual_out, zero_centered, want_dweight, want_dbias, param_dtype
    )


def _bwd_impl(dy, s, rstd, weight, dresidual_out, zero_centered, want_dweight, want_dbias, param_dtype):
    """rms_norm_bwd's real implementation (a module global: tests count its calls)."""
    if raw_pointer_calls and s.numel():
        out = _eager.op_bwd(
            dy, s, rstd, weight, dresidual_out, zero_centered, want_dweight, want_dbias, param_dtype
        )
        if out is not None:
            return out
    dx, dweight, dbias = _bwd_outputs(s, weight, want_dweight, want_dbias, param_dtype)
    hidden = s.shape[-1]
    if s.numel() == 0:  # no rows: the sums over rows are zero
        dweight.zero_()
        dbias.zero_()
        return dx, dweight, dbias
    backend = "cuda" if s.device.type == "cuda" else "cpu"
    with _DeviceGuard(s.device):
        rows = s.numel() // hidden
        nbytes = _C.rms_norm_bwd_workspace_size(rows, hidden, want_dweight, want_dbias, backend)
        workspace = torch.empty(nbytes, dtype=torch.uint8, device=s.device) if nbytes else None
        _C.rms_norm_bwd(
            _rows_view(dy, hidden),
            _rows_view(s, hidden),
            rstd.detach().reshape(-1).contiguous(),
            dx.view(-1, hidden),
            weight=None if weight is None else weight.detach().contiguous(),
            dresidual_out=None if dresidual_out is None else _rows_view(dresidual_out, hidden),
            dweight=dweight if want_dweight else None,
            dbias=dbias if want_dbias else None,
            workspace=workspace,
            zero_centered=zero_centered,
            stream=_stream(s.device),
        )
    return dx, dweight, dbias


@rms_norm_bwd.register_fake
def _rms_norm_bwd_fake(
    dy, s, rstd, weight, dresidual_out, zero_centered, want_dweight, want_dbias, param_dtype
):
    return _bwd_outputs(s, weight, want_dweight, want_dbias, param_dtype)


def _setup_context(ctx, inputs, output):
    x, weight, bias, residual, _eps, zero_centered, _out_dtype = inputs
    _, residual_out, rstd = output
    # The backward normalizes what the forward normalized: x, or the stored x + residual.
    s = residual_out if residual is not None else x
    ctx.save_for_backward(s, rstd, weight)
    ctx.has_residual = residual is not None
    ctx.has_bias = bias is not None
    ctx.param_dtype = weight.dtype if weight is not None else (bias.dtype if bias is not None else x.dtype)
    ctx.zero_centered = zero_centered
    ctx.mark_non_differentiable(rstd)


def _backward(ctx, dy, dresidual_out, _drstd):
    s, rstd, weight = ctx.saved_tensors
    want_dweight = weight is not None and ctx.needs_input_grad[1]
    want_dbias = ctx.has_bias and ctx.needs_input_grad[2]
    dx, dweight, dbias = torch.ops.normkit.rms_norm_bwd(
        dy,
        s,
        rstd,
        weight,
        dresidual_out if ctx.has_residual else None,
        ctx.zero_centered,
        want_dweight,
        want_dbias,
        ctx.param_dtype,
    )
    return (
        dx,
        dweight if want_dweight else None,
        dbias if want_dbias else None,
        dx if ctx.has_residual else None,  # x + residual: both get dx
        None,
        None,
        None,
    )


rms_norm_fwd.register_autograd(_backward, setup_context=_setup_context)
