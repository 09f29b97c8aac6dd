"""The eager fast path of normkit.torch.rms_norm: the same C API calls as the custom ops in
_ops.py, with a fraction of their host time.

Calling ``torch.ops.normkit.rms_norm_fwd`` from Python costs tens of microseconds of host time
(the op's Python dispatch and its autograd wrapper), more than the kernel itself at small
shapes. In plain eager execution none of that
machinery does anything, so here the outputs are allocated with torch and the C API is called
through ``_C.rms_norm_fwd_ptr`` / ``rms_norm_bwd_ptr`` with raw addresses; autograd comes from a
``torch.autograd.Function``. Both paths issue the identical C API call, so results are
bitwise identical.

The fast path is taken only when nothing could observe the difference; otherwise ``fwd`` returns
None and the caller uses the custom op, which stays the one thing torch.compile, export,
jit.trace, functorch transforms, dispatch modes (FakeTensor, meta, user modes), torch-function
modes and tensor subclasses ever see. Unusual arguments (unsupported dtypes, mismatched shapes or
devices, empty tensors, a CUDA tensor off the current device) also go to the custom op, which
raises its usual errors or handles them.

The custom ops' real implementations use the same raw-pointer calls (``op_fwd`` / ``op_bwd``)
instead of DLPack whenever their arguments allow.
"""

from __future__ import annotations

import torch

from normkit import _C

# Off: every call takes the custom op (tests compare the two paths; users can rule it out).
enabled = True

_NK_DTYPE = {torch.float32: 0, torch.float16: 1, torch.bfloat16: 2}  # nk_dtype values
_PLAIN_TYPES = frozenset((torch.Tensor, torch.nn.Parameter))
_CPU, _CUDA = 0, 1  # nk_backend values

# Bound once: a module global is cheaper to reach than an attribute chain on every call.
_fwd_ptr = _C.rms_norm_fwd_ptr
_bwd_ptr = _C.rms_norm_bwd_ptr
_workspace_size = _C.rms_norm_bwd_workspace_size_ptr
_is_compiling = torch.compiler.is_compiling  # dynamo folds it to True
_grad_enabled = torch.is_grad_enabled
_dispatch_modes = torch._C._len_torch_dispatch_stack
_function_modes = torch._C._is_torch_function_mode_enabled
_functorch_active = torch._C._are_functorch_transforms_active
_jit_tracing = torch._C._is_tracing
_empty = torch.empty
_empty_like = torch.empty_like
_float32 = torch.float32
_contiguous = torch.contiguous_format
_uint8 = torch.uint8
_cuda_device = getattr(torch._C, "_cuda_getDevice", None)
_cuda_stream = getattr(torch._C, "_cuda_getCurrentRawStream", None)

# Workspace bytes by (backend, device, rows, hidden, dweight, dbias): the C API's answer
# depends on nothing else, so each shape is asked once. Emptied when it grows past a bound
# (varying row counts would otherwise grow it without end).
_workspace_bytes: dict[tuple, int] = {}
_WORKSPACE_CACHE_ENTRIES = 4096


def _rows_view(t: torch.Tensor, hidden: int) -> torch.Tensor:
    """A [rows, hidden] view of t (detached) that the C API can describe; copies only if needed."""
    m = t.detach().reshape(-1, hidden)  # a view whenever the leading dims collapse
    rows = m.shape[0]
    if (hidden > 1 and m.stride(1) != 1) or (rows > 1 and m.stride(0) < hidden):
        m = m.contiguous()
    return m


def _beside_x(t, backend, dev) -> bool:
    """t lives where x does (backend and device index)."""
    return t.is_cpu if backend == _CPU else (t.is_cuda and t.get_device() == dev)


def _vector_code(v, hidden, backend, dev):
    """v's nk_dtype when it is a plain, contiguous [hidden] tensor beside x, else None."""
    if (
        type(v) in _PLAIN_TYPES
        and v.shape == (hidden,)
        and v.is_contiguous()
        and (v.is_cpu if backend == _CPU else (v.is_cuda and v.get_device() == dev))
    ):  # _beside_x(), inlined
        return _NK_DTYPE.get(v.dtype)
    return None


def _matrix(t, hidden):
    """(tensor, row stride) for the C API: t itself when contiguous, else the custom op's view."""
    if t.is_contiguous():
        return t, 0
    m = _rows_view(t, hidden)
    return m, (m.stride(0) if m.shape[0] > 1 else 0)


# What fwd learned about its arguments, handed to _launch_fwd and to the backward as one tuple
# (cheaper to build and to unpack than an object). Fields, in order:
#   backend, dev      nk_backend value; CUDA device index (-1 on the CPU)
#   stream            cudaStream_t of the forward (0 on the CPU)
#   rows, hidden      x seen as [rows, hidden]
#   x_code, w_code    nk_dtype of x (and residual, residual_out, dx) and of weight/bias
#   y_code, y_dtype   nk_dtype of y; y's torch dtype, None when it is x's
#   eps, zc           as given
#   param_dtype       torch dtype of dweight/dbias (weight's, else bias's, else x's)
#   has_bias, has_residual


def _launch_fwd(x, weight, bias, residual, plan, rstd_shape):
    """Allocates the outputs and runs the forward: (y, residual_out or None, rstd or None).

    rstd_shape: None (no rstd), or the shape of the float32 rstd to return (rows, or
    x.shape[:-1] for the custom op). New outputs are contiguous with x's shape, laid out as the
    custom op's fake kernel says (empty_like with contiguous_format: the cheapest allocation
    torch offers from Python, and unlike plain empty_like exact even in size-1 dimensions).
    """
    backend, _, stream, rows, hidden, x_code, w_code, y_code, y_dtype, eps, zc, _, _, _ = plan
    y = (
        _empty_like(x, memory_format=_contiguous)
        if y_dtype is None
        else _empty_like(x, dtype=y_dtype, memory_format=_contiguous)
    )
    xm, x_stride = (x, 0) if x.is_contiguous() else _matrix(x, hidden)
    r_ptr = r_stride = ro_ptr = 0
    residual_out = None
    if residual is not None:
        residual_out = _empty_like(x, memory_format=_contiguous)
        rm, r_stride = _matrix(residual, hidden)
        r_ptr, ro_ptr = rm.data_ptr(), residual_out.data_ptr()
    rstd = None if rstd_shape is None else _empty(rstd_shape, dtype=_float32, device=x.device)
    _fwd_ptr(
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
        0 if rstd is None else rstd.data_ptr(),
        eps,
        zc,
    )
    return y, residual_out, rstd


def _fwd_plan(x, weight, bias, residual, eps, zero_centered, out_dtype):
    """The plan tuple (above) when the raw-pointer call can describe these arguments, else None.

    Checks the arguments only (dtypes, shapes, places), not the execution context. Every check
    here runs on every call, so each tensor property is read once and the order puts the cheap,
    decisive ones first.
    """
    x_dtype = x.dtype
    x_code = _NK_DTYPE.get(x_dtype)
    if out_dtype is None or out_dtype is x_dtype:
        y_code, y_dtype = x_code, None
    else:
        y_code, y_dtype = _NK_DTYPE.get(out_dtype), out_dtype
    shape = x.shape
    if x_code is None or y_code is None or not shape:
        return None
    hidden = shape[-1]
    rows = x.numel() // hidden if hidden else 0
    if rows == 0:
        return None
    if x.is_cpu:
        backend, dev, stream = _CPU, -1, 0
    elif x.is_cuda:
        # The C API runs on the current device; tensors elsewhere take the custom op's guard.
        backend, dev = _CUDA, x.get_device()
        if dev != _cuda_device():
            return None
        stream = _cuda_stream(dev)
    else:
        return None
    w_code = 0
    param_dtype = x_dtype
    if weight is not None:
        if not (
            type(weight) in _PLAIN_TYPES
            and weight.shape == (hidden,)
            and weight.is_contiguous()
            and (weight.is_cpu if backend == _CPU else (weight.is_cuda and weight.get_device() == dev))
        ):  # _vector_code(), inlined for the argument nearly every call has
            return None
        param_dtype = weight.dtype
        w_code = _NK_DTYPE.get(param_dtype)
        if w_code is None:
            return None
    if bias is not None:
        b_code = _vector_code(bias, hidden, backend, dev)
        if b_code is None or (weight is not None and b_code != w_code):
            return None
        w_code, param_dtype = b_code, bias.dtype
    if residual is not None and not (
        type(residual) in _PLAIN_TYPES
        and residual.dtype is x_dtype
        and residual.shape == shape
        and _beside_x(residual, backend, dev)
    ):
        return None
    return (
        backend, dev, stream, rows, hidden, x_code, w_code, y_code, y_dtype, eps, zero_centered,
        param_dtype, bias is not None, residual is not None,
    )  # fmt: skip


def fwd(x, weight, bias, residual, eps, zero_centered, out_dtype):
    """(y, residual_out or None) through the fast path, or None when the custom op must run."""
    if _is_compiling() or not enabled:  # first: dynamo folds it and traces nothing below
        return None
    if (
        type(x) not in _PLAIN_TYPES
        or _dispatch_modes()
        or _function_modes()
        or _functorch_active()
        or _jit_tracing()
    ):  # a tracer, transform or mode would want to see the op (so would _Fn.backward's)
        return None
    plan = _fwd_plan(x, weight, bias, residual, eps, zero_centered, out_dtype)
    if plan is None:
        return None
    if _grad_enabled() and (
        x.requires_grad
        or (weight is not None and weight.requires_grad)
        or (bias is not None and bias.requires_grad)
        or (residual is not None and residual.requires_grad)
    ):
        out = _apply(x, weight, bias, residual, plan)
        return (out, None) if residual is None else out
    y, residual_out, _ = _launch_fwd(x, weight, bias, residual, plan, None)
    return y, residual_out


def op_fwd(x, weight, bias, residual, eps, zero_centered, out_dtype):
    """The custom op's forward through the raw-pointer call: (y, residual_out, rstd) as the op
    returns them, or None when only the DLPack call describes the arguments (non-plain
    tensors, mixed devices, a CUDA tensor off the current device).

    Runs inside the op's real implementation, so no context checks: the dispatcher has already
    routed tracers, modes and fake tensors elsewhere. A plan exists only for arguments that pass
    the op's checks (_ops._check_fwd_args), so the op runs those only when this returns None.
    """
    if type(x) not in _PLAIN_TYPES:
        return None
    if weight is not None and not weight.is_contiguous():
        weight = weight.contiguous()
    if bias is not None and not bias.is_contiguous():
        bias = bias.contiguous()
    plan = _fwd_plan(x, weight, bias, residual, eps, zero_centered, out_dtype)
    if plan is None:
        return None
    shape = x.shape
    rstd_shape = plan[3] if len(shape) == 2 else tuple(shape[:-1])  # an int is cheaper to parse
    y, residual_out, rstd = _launch_fwd(x, weight, bias, residual, plan, rstd_shape)
    if residual_out is None:
        residual_out = x.new_empty(0)  # x's dtype and device
    return y, residual_out, rstd


class _Fn(torch.autograd.Function):
    """Autograd for the fast path: the custom op's setup_context and backward, over _C directly."""

    @staticmethod
    def forward(ctx, x, weight, bias, residual, plan):
        y, residual_out, rstd = _launch_fwd(x, weight, bias, residual, plan, plan[3])
        # The backward normalizes what the forward normalized: x, or the stored x + residual.
        ctx.save_for_backward(x if residual is None else residual_out, rstd, weight)
        ctx.plan = plan
        if residual is None:
            return y
        return y, residual_out

    @staticmethod
    def backward(ctx, dy, dresidual_out=None):
        s, rstd, weight = ctx.saved_tensors
        plan = ctx.plan
        dev, has_res = plan[1], plan[13]  # the rest is read where it is used
        # needs_input_grad is False for inputs that were None (no weight, no bias).
        _, want_dweight, want_dbias, _, _ = ctx.needs_input_grad
        if (
            _is_compiling()
            or _grad_enabled()
            or type(dy) not in _PLAIN_TYPES
            or (has_res and type(dresidual_out) not in _PLAIN_TYPES)
            or _dispatch_modes()
            or _function_modes()
            or _functorch_active()
            or _jit_tracing()
            or (dev >= 0 and _cuda_device() != dev)
        ):
            # Compiled autograd, double backward (create_graph), a mode watching, a subclass
            # gradient, another current device: the custom op.
            dx, dweight, dbias = torch.ops.normkit.rms_norm_bwd(
                dy, s, rstd, weight, dresidual_out if has_res else None, plan[10], want_dweight,
                want_dbias, plan[11],
            )  # fmt: skip
            dweight = dweight if want_dweight else None
            dbias = dbias if want_dbias else None
        else:
            # The engine hands dy (and dresidual_out) in the shape, dtype and device of y (and
            # residual_out), so only their layout remains to be looked at (in _launch_bwd).
            dx, dweight, dbias = _launch_bwd(
                dy, s, rstd, weight, dresidual_out if has_res else None, plan, want_dweight,
                want_dbias,
            )  # fmt: skip
        # x + residual: both get dx.
        return dx, dweight, dbias, (dx if has_res else None), None


# Function.apply's Python wrapper exists for functorch transforms (excluded above); the C apply
# under it does the autograd work.
_apply = super(torch.autograd.Function, _Fn).apply


def _launch_bwd(dy, s, rstd, weight, dres, plan, want_dweight, want_dbias):
    """Allocates (dx, dweight or None, dbias or None) and runs the backward on the current stream.

    plan: the forward's plan tuple (above); the fields read here are backend, dev, rows, hidden,
    x_code, w_code, y_code (dy's nk_dtype), zc and param_dtype. The caller guarantees what the
    DLPack call would check: dy, s and dres are [rows, hidden] views beside s (dres in s's
    dtype), rstd is rows contiguous float32 values, weight is a contiguous [hidden] vector whose
    nk_dtype is w_code.
    """
    backend, dev, _, rows, hidden, x_code, w_code, dy_code, _, _, zc, param_dtype, _, _ = plan
    # Contiguous is the common case: test it here rather than through a call of _matrix.
    dym, dy_stride = (dy, 0) if dy.is_contiguous() else _matrix(dy, hidden)
    sm, s_stride = (s, 0) if s.is_contiguous() else _matrix(s, hidden)
    device = s.device  # a new torch.device object on every read
    dx = _empty_like(s, memory_format=_contiguous)
    dweight = dbias = ws = None
    ws_bytes = 0
    if want_dweight or want_dbias:
        # dweight and dbias are like weight when there is one (its dtype is then param_dtype):
        # empty_like costs less than empty with a dtype and a device.
        if weight is not None:
            dweight = _empty_like(weight, memory_format=_contiguous) if want_dweight else None
            dbias = _empty_like(weight, memory_format=_contiguous) if want_dbias else None
        else:
            dweight = _empty(hidden, dtype=param_dtype, device=device) if want_dweight else None
            dbias = _empty(hidden, dtype=param_dtype, device=device) if want_dbias else None
        key = (backend, dev, rows, hidden, want_dweight, want_dbias)
        ws_bytes = _workspace_bytes.get(key)
        if ws_bytes is None:
            ws_bytes = _workspace_size(backend, rows, hidden, want_dweight, want_dbias)
            if len(_workspace_bytes) >= _WORKSPACE_CACHE_ENTRIES:
                _workspace_bytes.clear()
            _workspace_bytes[key] = ws_bytes
        if ws_bytes:
            ws = _empty(ws_bytes, dtype=_uint8, device=device)
    dres_ptr = dres_stride = 0
    if dres is not None:
        dresm, dres_stride = _matrix(dres, hidden)
        dres_ptr = dresm.data_ptr()
    _bwd_ptr(
        backend,
        0 if backend == _CPU else _cuda_stream(dev),
        rows,
        hidden,
        dym.data_ptr(),
        dy_code,
        dy_stride,
        sm.data_ptr(),
        x_code,
        s_stride,
        rstd.data_ptr(),
        0 if weight is None else weight.data_ptr(),
        w_code,
        zc,
        dres_ptr,
        dres_stride,
        dx.data_ptr(),
        0 if dweight is None else dweight.data_ptr(),
        0 if dbias is None else dbias.data_ptr(),
        0 if ws is None else ws.data_ptr(),
        ws_bytes,
    )
    return dx, dweight, dbias


def op_bwd(dy, s, rstd, weight, dres, zero_centered, want_dweight, want_dbias, param_dtype):
    """The custom backward op through the raw-pointer call: (dx, dweight, dbias) as the op
    returns them (absent ones empty), or None when only the DLPack call describes the
    arguments (non-plain tensors, other shapes, dtypes or devices, which it checks or rejects).

    s has at least one element (the op handles empty ones itself).
    """
    if type(s) not in _PLAIN_TYPES or type(dy) not in _PLAIN_TYPES or type(rstd) not in _PLAIN_TYPES:
        return None
    x_code = _NK_DTYPE.get(s.dtype)
    shape = s.shape
    if x_code is None or dy.shape != shape or dy.dtype not in _NK_DTYPE or not shape:
        return None
    hidden = shape[-1]
    rows = s.numel() // hidden
    if s.is_cpu:
        backend, dev = _CPU, -1
    elif s.is_cuda:
        backend, dev = _CUDA, s.get_device()
        if dev != _cuda_device():
            return None
    else:
        return None
    if not (_beside_x(dy, backend, dev) and _beside_x(rstd, backend, dev)):
        return None
    if rstd.dtype is not _float32 or rstd.numel() != rows:
        return None
    if not rstd.is_contiguous():
        rstd = rstd.contiguous()
    # weight, dweight and dbias share one dtype; the C API's default when none is given.
    w_code = _NK_DTYPE.get(param_dtype) if (want_dweight or want_dbias) else 0
    if w_code is None:
        return None
    if weight is not None:
        if weight.dtype is not param_dtype and (want_dweight or want_dbias):
            return None
        if not weight.is_contiguous():
            weight = weight.contiguous()
        w_code = _vector_code(weight, hidden, backend, dev)
        if w_code is None:
            return None
    if dres is not None and not (
        type(dres) in _PLAIN_TYPES
        and dres.dtype is s.dtype
        and dres.shape == shape
        and _beside_x(dres, backend, dev)
    ):
        return None
    # A plan tuple with the fields _launch_bwd reads (the others are the forward's own).
    plan = (
        backend, dev, 0, rows, hidden, x_code, w_code, _NK_DTYPE[dy.dtype], None, 0.0,
        zero_centered, param_dtype, False, dres is not None,
    )  # fmt: skip
    dx, dweight, dbias = _launch_bwd(dy, s, rstd, weight, dres, plan, want_dweight, want_dbias)
    if dweight is None:
        dweight = _empty(0, dtype=param_dtype, device=s.device)
    if dbias is None:
        dbias = _empty(0, dtype=param_dtype, device=s.device)
    return dx, dweight, dbias
