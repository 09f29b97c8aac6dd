"""normkit.torch.rms_norm_quant: every mode and code dtype against the float64 reference
(exact codes except counted rounding-boundary cases, scales, amax, y_t), forward options,
layouts, errors (the C API's messages), torch.compile and torch.library.opcheck; the op's
raw-pointer C API call against its DLPack call, and the eager fast path against the op (same
bits, and which one ran; the fast path never under compile, modes, fake tensors or grad)."""

from __future__ import annotations

import collections
import zlib

import nk_quant_reference as qref
import numpy as np
import pytest
import quant_cases as qc

torch = pytest.importorskip("torch")
nt = pytest.importorskip("normkit.torch")
from normkit import NormkitError, _C  # noqa: E402
from normkit.torch import _eager, _ops, _quant_ops  # noqa: E402
from torch_modes import DispatchLog, FunctionLog  # noqa: E402

CODE_DTYPES = {"float8_e4m3": torch.float8_e4m3fn, "float8_e5m2": torch.float8_e5m2, "int8": torch.int8}
X_DTYPES = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16}
CASE_IDS = [qc.case_id(c) for c in qc.MODE_CASES]


def f64(t):
    return None if t is None else t.detach().cpu().double().numpy()


def code_bytes(t):
    return t.detach().cpu().view(torch.uint8).numpy()


def generator(*parts):
    return torch.Generator().manual_seed(zlib.crc32("/".join(map(str, parts)).encode()))


def randn(shape, dtype, gen, device, scale=1.0, shift=0.0):
    return (torch.randn(shape, generator=gen) * scale + shift).to(device=device, dtype=dtype)


def poison_cuda_cache(device, nbytes):
    """Fills blocks of torch's CUDA caching allocator with 0x7F (an FP8 NaN, never a valid code
    here) and frees them, so that outputs the op allocates next likely start as poison and an
    element it forgets to write fails. Best effort; nothing to do on the CPU."""
    if device == "cuda":
        blocks = [torch.full((n,), 0x7F, dtype=torch.uint8, device=device) for n in nbytes]
        del blocks


def make_inputs(config, shape, x_dtype, device, gen):
    has_w, has_b, has_r, zc = qc.CONFIGS[config]
    hidden = shape[-1]
    x = randn(shape, x_dtype, gen, device)
    w = randn((hidden,), x_dtype, gen, device, 0.3, 0.0 if zc else 1.0) if has_w else None
    b = randn((hidden,), x_dtype, gen, device, 0.5) if has_b else None
    r = randn(shape, x_dtype, gen, device) if has_r else None
    return x, w, b, r, zc


def run_case(device, case, config="plain", shape=None, x_dtype=torch.bfloat16, *, scale_factor=0.8,
             ub_quantile=None, x_view=None):  # fmt: skip
    """One rms_norm_quant call with every output it can give, checked against the reference."""
    mode, name, block = case
    shape = shape or (5, qc.awkward_hidden(case))
    hidden = shape[-1]
    gen = generator(qc.case_id(case), config, shape, x_dtype, scale_factor, ub_quantile)
    x, w, b, r, zc = make_inputs(config, shape, x_dtype, device, gen)
    if x_view is not None:
        x = x_view(x)
    eps = 1e-5
    s = x if r is None else (x.double() + r.double()).to(x_dtype)
    v = qc.v_of(f64(s), f64(w), f64(b), eps, zc)
    scale = scale_value = None
    ub = 0.0
    if mode == "tensor":
        scale_value = qc.tensor_scale(v, name, scale_factor)
        scale = torch.tensor([scale_value], dtype=torch.float32, device=device)
    if ub_quantile is not None:
        groups = qref.reference(v, mode, name, block=block).scales.reshape(-1)
        ub = float(np.float32(np.quantile(groups, ub_quantile)))
    poison_cuda_cache(device, [x.numel(), x.numel() * 4, 4096])
    out = nt.rms_norm_quant(
        x, w, eps, mode=mode, out_dtype=CODE_DTYPES[name], scale=scale, scale_ub=ub or None,
        block=block, transposed=mode == "tensor", return_amax=True, residual=r,
        zero_centered=zc, bias=b,
    )  # fmt: skip

    assert isinstance(out, nt.QuantOutput)
    assert out.y.shape == x.shape and out.y.dtype == CODE_DTYPES[name]
    assert out.y.device.type == device
    assert out.amax.shape == (1,) and out.amax.dtype == torch.float32
    rows = x.numel() // hidden
    if mode == "tensor":
        assert out.scales is None
        assert out.y_t.shape == (hidden, rows) and out.y_t.dtype == out.y.dtype
    else:
        columns = qref.scale_columns(mode, block, hidden)
        assert out.scales.shape == (*x.shape[:-1], hidden // columns)
        assert out.scales.dtype == (torch.uint8 if mode == "mxfp8" else torch.float32)
        assert out.y_t is None
    if r is None:
        assert out.residual_out is None
    else:
        assert torch.equal(out.residual_out, s), "residual_out is not x + residual rounded to x's dtype"
    return qc.check(
        case, v, y_values=f64(out.y.float()), y_bytes=code_bytes(out.y),
        scales=None if out.scales is None else out.scales.cpu().numpy(), amax=f64(out.amax),
        y_t_bytes=None if out.y_t is None else code_bytes(out.y_t), scale=scale_value,
        scale_ub=ub, what=f"{qc.case_id(case)} {config} {tuple(shape)} {x_dtype}",
    )  # fmt: skip


@pytest.mark.parametrize("x_dtype", list(X_DTYPES))
@pytest.mark.parametrize("rows", [(1,), (7,), (2, 3)], ids=["one_row", "odd_rows", "3d"])
@pytest.mark.parametrize("case", qc.MODE_CASES, ids=CASE_IDS)
def test_modes_dtypes_shapes(torch_device, case, rows, x_dtype):
    run_case(torch_device, case, "plain", (*rows, qc.awkward_hidden(case)), X_DTYPES[x_dtype])


@pytest.mark.parametrize("config", list(qc.CONFIGS))
@pytest.mark.parametrize("case", qc.MODE_CASES, ids=CASE_IDS)
def test_options(torch_device, case, config):
    run_case(torch_device, case, config)


@pytest.mark.parametrize("case", qc.MODE_CASES, ids=CASE_IDS)
def test_hidden_4096(torch_device, case):
    run_case(torch_device, case, "residual", (3, 4096))


@pytest.mark.parametrize("case", [c for c in qc.MODE_CASES if c[0] == "tensor"], ids=qc.case_id)
def test_tensor_scale_saturates(torch_device, case):
    """A scale mapping amax to 8 * qmax: most large values saturate to +-qmax."""
    run_case(torch_device, case, "bias", scale_factor=8.0)


@pytest.mark.parametrize("case", [c for c in qc.MODE_CASES if c[0] in ("token", "block")], ids=qc.case_id)
def test_scale_ub_binds(torch_device, case):
    """scale_ub at the median group scale: about half the scales are clamped to it."""
    mode, name, block = case
    shape = (16, qc.awkward_hidden(case))
    run_case(torch_device, case, "plain", shape, ub_quantile=0.5)


@pytest.mark.parametrize(
    "layout",
    [
        lambda x: torch.cat([x, x[..., :32]], -1)[..., : x.shape[-1]],  # strided rows, no copy
        lambda x: x.transpose(0, 1).contiguous().transpose(0, 1),  # rows that need a copy
    ],
    ids=["row_slice", "transposed"],
)
@pytest.mark.parametrize("mode", ["tensor", "mxfp8"])
def test_layouts(torch_device, layout, mode):
    case = next(c for c in qc.MODE_CASES if c[0] == mode)
    run_case(torch_device, case, "residual", (4, 3, 160), x_view=layout)


def test_outputs_not_asked_for_are_none(torch_device):
    x = torch.randn(3, 64, device=torch_device)
    out = nt.rms_norm_quant(x, mode="tensor", scale=torch.ones(1, device=torch_device))
    assert out.scales is None and out.amax is None and out.y_t is None and out.residual_out is None
    out = nt.rms_norm_quant(x, mode="token")
    assert out.scales.shape == (3, 1) and out.amax is None and out.y_t is None


def test_eps_none_is_finfo_eps():
    x = torch.randn(3, 64, generator=generator("eps")).to(torch.bfloat16) * 1e-3
    got = nt.rms_norm_quant(x, mode="token", return_amax=True)
    v = qc.v_of(f64(x), None, None, torch.finfo(torch.bfloat16).eps, False)
    case = ("token", "float8_e4m3", None)
    qc.check(case, v, y_values=f64(got.y.float()), y_bytes=code_bytes(got.y),
             scales=got.scales.numpy(), amax=f64(got.amax), what="eps=None")  # fmt: skip


def test_empty_rows(torch_device):
    x = torch.randn(0, 64, device=torch_device)
    out = nt.rms_norm_quant(x, mode="token", return_amax=True)
    assert out.y.shape == (0, 64) and out.scales.shape == (0, 1)
    assert torch.equal(out.amax.cpu(), torch.zeros(1))


def test_no_autograd_formula(quant_calls):
    """Inputs requiring grad take the op (never the fast path), whose outputs raise on backward."""
    x = torch.randn(2, 64, requires_grad=True)
    out = nt.rms_norm_quant(x, mode="token", residual=torch.randn(2, 64))
    assert quant_calls["op"] == 1 and quant_calls["fast"] == 0, dict(quant_calls)
    with pytest.raises(RuntimeError, match="no autograd formula"):
        out.residual_out.sum().backward()


@pytest.mark.parametrize("needs_grad", ["x", "weight", "bias", "residual", "scale"])
def test_inputs_requiring_grad_take_the_op(quant_calls, needs_grad):
    """Any input requiring grad (grad mode on) sends the call to the op, as it did before the
    fast path; under no_grad the fast path runs, and nothing requires grad either way."""
    tensors = dict(x=torch.randn(2, 64), weight=torch.randn(64), bias=torch.randn(64),
                   residual=torch.randn(2, 64), scale=torch.tensor([4.0]))  # fmt: skip
    tensors[needs_grad].requires_grad_(True)
    outs = {}
    for grad in (True, False):
        quant_calls.clear()
        with torch.set_grad_enabled(grad):
            outs[grad] = nt.rms_norm_quant(mode="tensor", return_amax=True, **tensors)
        want = {"op": 1, "c": 1, "raw": 1} if grad else {"c": 1, "raw": 1, "fast": 1}
        assert dict(quant_calls) == want, (grad, dict(quant_calls))
    assert not any(t.requires_grad for t in outs[False] if t is not None)
    for field in nt.QuantOutput._fields:
        assert _same(getattr(outs[True], field), getattr(outs[False], field)), field


ERRORS = {
    # The C API's messages, raised as NormkitError.
    "tensor_without_scale": (dict(mode="tensor"), NormkitError, "scale pointer missing"),
    "hidden_not_multiple_of_block": (dict(mode="block"), NormkitError, "multiple of 128"),
    "mxfp8_hidden": (dict(mode="mxfp8", hidden=48), NormkitError, "multiple of 32"),
    "bad_block": (dict(mode="block", block=48, hidden=96), NormkitError, "32, 64 or 128"),
    "mxfp8_block": (dict(mode="mxfp8", block=64), NormkitError, "always 32"),
    "int8_block": (dict(mode="block", block=32, out_dtype=torch.int8), NormkitError, "int8"),
    "int8_mxfp8": (dict(mode="mxfp8", out_dtype=torch.int8), NormkitError, "int8"),
    "scale_with_token": (dict(mode="token", scale=1.0), NormkitError, "scale is given"),
    "y_t_with_token": (dict(mode="token", transposed=True), NormkitError, "y_t"),
    "scale_ub_with_tensor": (dict(mode="tensor", scale=1.0, scale_ub=2.0), NormkitError, "scale_ub"),
    "negative_scale_ub": (dict(mode="token", scale_ub=-1.0), NormkitError, "scale_ub"),
    "block_with_token": (dict(mode="token", block=32), NormkitError, "quant_block"),
    # The binding's checks (what the C API cannot see) and the op's.
    "scale_two_elements": (dict(mode="tensor", scale=[1.0, 2.0]), ValueError, "scale has 2 elements"),
    "scale_float16": (dict(mode="tensor", scale=torch.ones(1, dtype=torch.float16)), TypeError, "scale"),
    "bad_mode": (dict(mode="channel"), RuntimeError, "mode is 'channel'"),
    "bad_out_dtype": (dict(mode="token", out_dtype=torch.float16), RuntimeError, "out_dtype"),
}


@pytest.fixture
def quant_calls(monkeypatch):
    """Counts of what ran: 'op' the op's real implementation (_quant_ops._fwd_quant_impl), 'c'
    every C API call (raw-pointer or DLPack entry point), 'dlpack' the DLPack ones, 'raw' the
    raw-pointer ones, 'fast' the raw-pointer calls made outside the op (the eager fast path)."""
    counts = collections.Counter()
    inside_op = [0]

    def spy(names, fn):
        def wrapper(*args, **kwargs):
            counts.update(names)
            return fn(*args, **kwargs)

        return wrapper

    def op_spy(*args, **kwargs):
        counts["op"] += 1
        inside_op[0] += 1
        try:
            return impl(*args, **kwargs)
        finally:
            inside_op[0] -= 1

    def raw_spy(*args, **kwargs):
        counts.update(("c", "raw") if inside_op[0] else ("c", "raw", "fast"))
        return ptr(*args, **kwargs)

    impl, ptr = _quant_ops._fwd_quant_impl, _quant_ops._fwd_quant_ptr
    monkeypatch.setattr(_quant_ops, "_fwd_quant_impl", op_spy)
    monkeypatch.setattr(_quant_ops, "_fwd_quant_ptr", raw_spy)
    monkeypatch.setattr(_C, "rms_norm_fwd_quant", spy(("c", "dlpack"), _C.rms_norm_fwd_quant))
    return counts


@pytest.mark.parametrize("path", ["eager", "raw_pointer", "dlpack"])
@pytest.mark.parametrize("name", list(ERRORS))
def test_errors(torch_device, monkeypatch, quant_calls, name, path):
    """The same errors whichever path runs: the eager fast path, the op's raw-pointer call or
    the op's DLPack call."""
    raw = path != "dlpack"
    monkeypatch.setattr(_ops, "raw_pointer_calls", raw)
    monkeypatch.setattr(_eager, "enabled", path == "eager")
    kwargs, error, match = ERRORS[name]
    kwargs = dict(kwargs)
    hidden = kwargs.pop("hidden", 64)
    x = torch.randn(3, hidden, device=torch_device)
    scale = kwargs.get("scale")
    if scale is not None and not isinstance(scale, torch.Tensor):
        kwargs["scale"] = torch.tensor(scale if isinstance(scale, list) else [scale])
    if "scale" in kwargs:
        kwargs["scale"] = kwargs["scale"].to(torch_device)
    with pytest.raises(error, match=match):
        nt.rms_norm_quant(x, torch.ones(hidden, device=torch_device), 1e-6, **kwargs)
    if not raw:
        assert quant_calls["raw"] == 0 and quant_calls["fast"] == 0, dict(quant_calls)
    elif error is NormkitError:  # the C API's own message: through the raw call
        assert quant_calls["raw"] == 1 and quant_calls["dlpack"] == 0, dict(quant_calls)
        want = {"fast": 1, "op": 0} if path == "eager" else {"fast": 0, "op": 1}
        assert {k: quant_calls[k] for k in want} == want, dict(quant_calls)
    else:  # the op's own checks (or the DLPack call's): the fast path leaves these to the op
        assert quant_calls["fast"] == 0 and quant_calls["op"] == 1, dict(quant_calls)


# The raw-pointer call against the DLPack call. Modes: (mode, out_dtype, scale, scale_ub, block,
# want_amax, transposed).
RAW_MODES = {
    "tensor_e4m3_amax_t": ("tensor", torch.float8_e4m3fn, 3.0, 0.0, 0, True, True),
    "tensor_int8": ("tensor", torch.int8, 40.0, 0.0, 0, False, False),
    "token_e5m2_ub": ("token", torch.float8_e5m2, None, 0.004, 0, True, False),
    "token_int8": ("token", torch.int8, None, 0.0, 0, False, False),
    "block32_e4m3": ("block", torch.float8_e4m3fn, None, 0.0, 32, True, False),
    "block64_e5m2_ub": ("block", torch.float8_e5m2, None, 0.003, 64, False, False),
    "mxfp8_e4m3": ("mxfp8", torch.float8_e4m3fn, None, 0.0, 0, True, False),
}
# (x dtype, weight dtype or None, bias, residual, zero_centered)
RAW_CONFIGS = {
    "plain_bf16": (torch.bfloat16, torch.bfloat16, False, False, False),
    "no_weight_fp32": (torch.float32, None, False, False, False),
    "fp32_weight_bias_fp16": (torch.float16, torch.float32, True, False, False),
    "bias_only_bf16": (torch.bfloat16, None, True, False, False),
    "gemma_residual_bf16": (torch.bfloat16, torch.bfloat16, False, True, True),
}
RAW_LAYOUTS = {
    "contiguous": lambda x: x,
    "row_slice": lambda x: torch.cat([x, x[..., :32]], -1)[..., : x.shape[-1]],
    "transposed": lambda x: x.transpose(0, 1).contiguous().transpose(0, 1),
    "column_step": lambda x: torch.stack([x, x], -1)[..., 0],
}


def _raw_args(device, mode_name, config, layout, shape=(3, 2, 128)):
    mode, out_dtype, scale, ub, block, amax, transposed = RAW_MODES[mode_name]
    x_dtype, w_dtype, has_b, has_r, zc = RAW_CONFIGS[config]
    gen = generator("raw", mode_name, config, layout, shape)
    hidden = shape[-1]
    x = RAW_LAYOUTS[layout](randn(shape, x_dtype, gen, device, 2.0))
    w = randn((hidden,), w_dtype, gen, device, 0.3, 0.0 if zc else 1.0) if w_dtype else None
    b = randn((hidden,), w_dtype or x_dtype, gen, device, 0.5) if has_b else None
    r = RAW_LAYOUTS[layout](randn(shape, x_dtype, gen, device)) if has_r else None
    s = None if scale is None else torch.tensor([scale], device=device)
    # A large eps, so that a wrong eps would change the bits.
    return (x, w, b, r, s, 0.1, zc, mode, out_dtype, ub, block, amax, transposed)


def _assert_same_outputs(got, want, what):
    assert len(got) == len(want) == 5
    for field, a, b in zip(("y", "scales", "amax", "y_t", "residual_out"), got, want):
        assert a.dtype == b.dtype and a.shape == b.shape and a.device == b.device, (what, field)
        assert a.is_contiguous() and b.is_contiguous(), (what, field)
        bits = {1: torch.uint8, 2: torch.int16, 4: torch.int32}[a.element_size()]
        assert torch.equal(a.view(bits), b.view(bits)), f"{what}: {field} differs"


def _public_call(args):
    """rms_norm_quant with the op's positional arguments (as _raw_args makes them)."""
    x, w, b, r, s, eps, zc, mode, out_dtype, ub, block, amax, transposed = args
    return nt.rms_norm_quant(
        x, w, eps, mode=mode, out_dtype=out_dtype, scale=s, scale_ub=ub or None,
        block=block or None, transposed=transposed, return_amax=amax, residual=r,
        zero_centered=zc, bias=b,
    )  # fmt: skip


def _eager_and_op(monkeypatch, quant_calls, args):
    """rms_norm_quant through the eager fast path and through the op (_eager.enabled = False);
    checks which one ran."""
    results = {}
    for fast in (True, False):
        monkeypatch.setattr(_eager, "enabled", fast)
        poison_cuda_cache(args[0].device.type, [4096, 1 << 16])
        quant_calls.clear()
        results[fast] = _public_call(args)
        want = {"c": 1, "raw": 1, "fast": 1} if fast else {"op": 1, "c": 1, "raw": 1}
        assert dict(quant_calls) == want, (fast, dict(quant_calls))
    return results[True], results[False]


def _assert_same_quant_output(got, want, what):
    assert type(got) is type(want) is nt.QuantOutput
    for field in nt.QuantOutput._fields:
        a, b = getattr(got, field), getattr(want, field)
        assert (a is None) == (b is None), (what, field)
        if a is not None:
            assert a.device == b.device and a.is_contiguous() == b.is_contiguous(), (what, field)
            assert a.requires_grad is b.requires_grad is False, (what, field)
        assert _same(a, b), f"{what}: {field} differs between the eager path and the op"


def _layout_args(device, mode_name, layout):
    """_raw_args of the layout tests: the zero-centered config with a residual, 12 rows."""
    shape = (4, 3, 160 if "mxfp8" in mode_name else 192)
    return _raw_args(device, mode_name, "gemma_residual_bf16", layout, shape)


def _both_calls(monkeypatch, quant_calls, args):
    """The op with the raw-pointer call and with the DLPack call; checks which one ran."""
    results = {}
    for raw in (True, False):
        monkeypatch.setattr(_ops, "raw_pointer_calls", raw)
        poison_cuda_cache(args[0].device.type, [4096, 1 << 16])
        quant_calls.clear()
        results[raw] = torch.ops.normkit.rms_norm_fwd_quant(*args)
        want = {"op": 1, "c": 1, "raw": int(raw), "dlpack": int(not raw)}
        assert dict(quant_calls) == {k: v for k, v in want.items() if v}, (raw, dict(quant_calls))
    return results[True], results[False]


@pytest.mark.parametrize("config", list(RAW_CONFIGS))
@pytest.mark.parametrize("mode_name", list(RAW_MODES))
def test_op_raw_pointer_call_matches_dlpack(torch_device, monkeypatch, quant_calls, mode_name, config):
    """The op takes the raw-pointer call for plain arguments, with the DLPack call's bits."""
    args = _raw_args(torch_device, mode_name, config, "contiguous")
    got, want = _both_calls(monkeypatch, quant_calls, args)
    _assert_same_outputs(got, want, f"{mode_name} {config}")


@pytest.mark.parametrize("layout", list(RAW_LAYOUTS))
@pytest.mark.parametrize("mode_name", list(RAW_MODES))
def test_op_raw_pointer_call_layouts(torch_device, monkeypatch, quant_calls, mode_name, layout):
    args = _layout_args(torch_device, mode_name, layout)
    got, want = _both_calls(monkeypatch, quant_calls, args)
    _assert_same_outputs(got, want, f"{mode_name} {layout}")


@pytest.mark.parametrize("config", list(RAW_CONFIGS))
@pytest.mark.parametrize("mode_name", list(RAW_MODES))
def test_eager_path_matches_op(torch_device, monkeypatch, quant_calls, mode_name, config):
    """rms_norm_quant's eager fast path (no custom op) has the op's bits, every output."""
    args = _raw_args(torch_device, mode_name, config, "contiguous")
    got, want = _eager_and_op(monkeypatch, quant_calls, args)
    _assert_same_quant_output(got, want, f"{mode_name} {config}")


@pytest.mark.parametrize("layout", list(RAW_LAYOUTS))
@pytest.mark.parametrize("mode_name", list(RAW_MODES))
def test_eager_path_layouts(torch_device, monkeypatch, quant_calls, mode_name, layout):
    args = _layout_args(torch_device, mode_name, layout)
    got, want = _eager_and_op(monkeypatch, quant_calls, args)
    _assert_same_quant_output(got, want, f"{mode_name} {layout}")


def test_rms_norm_quant_takes_the_eager_path(torch_device, monkeypatch, quant_calls):
    """The public function's default path: the fast path's raw-pointer call, no op, no DLPack;
    with _eager.enabled = False, the op with the raw-pointer call."""
    x = torch.randn(2, 5, 64, device=torch_device, dtype=torch.bfloat16)
    w = torch.ones(64, device=torch_device, dtype=torch.bfloat16)
    for fast in (True, False):
        monkeypatch.setattr(_eager, "enabled", fast)
        want = {"c": 1, "raw": 1, "fast": 1} if fast else {"op": 1, "c": 1, "raw": 1}
        for kwargs in (dict(mode="tensor", scale=torch.ones(1, 1, device=torch_device), return_amax=True),
                       dict(mode="token"), dict(mode="block", block=32), dict(mode="mxfp8", residual=x)):
            quant_calls.clear()
            nt.rms_norm_quant(x, w[::1], 1e-6, **kwargs)
            assert dict(quant_calls) == want, (fast, kwargs, dict(quant_calls))


def test_inference_mode_takes_the_eager_path(quant_calls):
    x = torch.randn(3, 64, requires_grad=True)
    with torch.inference_mode():
        got = nt.rms_norm_quant(x, mode="mxfp8", return_amax=True)
        assert got.y.is_inference() and got.scales.is_inference()
    assert dict(quant_calls) == {"c": 1, "raw": 1, "fast": 1}, dict(quant_calls)
    with torch.no_grad():
        want = nt.rms_norm_quant(x, mode="mxfp8", return_amax=True)
    for field in ("y", "scales", "amax"):
        assert _same(getattr(got, field), getattr(want, field)), field


def test_op_takes_dlpack_for_what_raw_calls_do_not_describe(torch_device, quant_calls):
    """A non-contiguous weight is copied (raw call); no rows never reaches the C API; a scale
    in another dtype is the DLPack call's error to raise."""
    x = torch.randn(3, 64, device=torch_device)
    w = torch.randn(128, device=torch_device)[::2]
    got = nt.rms_norm_quant(x, w, mode="token")
    want = nt.rms_norm_quant(x, w.contiguous(), mode="token")
    assert _same(got.y, want.y) and _same(got.scales, want.scales), "strided weight"
    assert quant_calls["raw"] == 2 and quant_calls["dlpack"] == 0, dict(quant_calls)
    quant_calls.clear()
    nt.rms_norm_quant(x[:0], w, mode="token", return_amax=True)
    assert dict(quant_calls) == {"op": 1}, dict(quant_calls)
    with pytest.raises(TypeError, match="scale"):
        nt.rms_norm_quant(x, w, mode="tensor", scale=torch.ones(1, dtype=torch.float64, device=torch_device))
    assert quant_calls["dlpack"] == 1 and quant_calls["raw"] == 0, dict(quant_calls)


COMPILE_CASES = {
    "tensor": dict(mode="tensor", transposed=True, return_amax=True),
    "token": dict(mode="token", out_dtype=torch.int8, scale_ub=0.01),
    "block64": dict(mode="block", block=64, out_dtype=torch.float8_e5m2),
    "mxfp8": dict(mode="mxfp8", return_amax=True),
}


def _compile_args(device, rows=6, hidden=128):
    gen = generator("compile", rows)
    x = randn((2, rows, hidden), torch.bfloat16, gen, device)
    w = randn((hidden,), torch.bfloat16, gen, device, 0.2, 1.0)
    r = randn((2, rows, hidden), torch.bfloat16, gen, device)
    return x, w, r


def _same(a, b):
    if a is None or b is None:
        return a is None and b is None
    if a.dtype.itemsize == 1:
        a, b = a.view(torch.uint8), b.view(torch.uint8)
    return a.dtype == b.dtype and a.shape == b.shape and torch.equal(a, b)


@pytest.mark.parametrize("name", list(COMPILE_CASES))
def test_compile_fullgraph_matches_eager(torch_device, quant_calls, name):
    """The compiled graph runs the same op: outputs are bitwise identical to eager."""
    kwargs = COMPILE_CASES[name]

    def fn(x, w, r, scale):
        extra = {"scale": scale} if kwargs["mode"] == "tensor" else {}
        return nt.rms_norm_quant(x, w, 1e-6, residual=r, **kwargs, **extra)

    args = (*_compile_args(torch_device), torch.tensor([30.0], device=torch_device))
    torch._dynamo.reset()
    compiled = torch.compile(fn, fullgraph=True, backend="aot_eager")
    got = compiled(*args)
    # The compiled graph runs the op (never the fast path); eager takes the fast path.
    assert quant_calls["op"] >= 1 and quant_calls["fast"] == 0, dict(quant_calls)
    quant_calls.clear()
    want = fn(*args)
    assert dict(quant_calls) == {"c": 1, "raw": 1, "fast": 1}, dict(quant_calls)
    assert type(got) is nt.QuantOutput
    for field in nt.QuantOutput._fields:
        assert _same(getattr(got, field), getattr(want, field)), field


def test_compile_dynamic_rows_one_graph(torch_device):
    import torch._dynamo.testing

    torch._dynamo.reset()
    counter = torch._dynamo.testing.CompileCounter()

    def fn(x, w):
        out = nt.rms_norm_quant(x, w, 1e-6, mode="block", block=32)
        return out.y, out.scales

    compiled = torch.compile(fn, fullgraph=True, dynamic=True, backend=counter)
    for rows in (3, 5, 9):
        x, w, _ = _compile_args(torch_device, rows)
        for g, e in zip(compiled(x, w), fn(x, w)):
            assert _same(g, e)
    assert counter.frame_count == 1


OPCHECK_CASES = {
    "tensor": (None, None, True, "tensor", torch.float8_e4m3fn, 0.0, 0, True, True),
    "token_residual": (None, None, False, "token", torch.int8, 0.0, 0, True, False),
    "block_ub": (None, None, False, "block", torch.float8_e5m2, 0.05, 32, False, False),
    "mxfp8_bias": (None, True, False, "mxfp8", torch.float8_e4m3fn, 0.0, 0, True, False),
}


@pytest.mark.parametrize("case", list(OPCHECK_CASES))
def test_opcheck(torch_device, case):
    _, with_bias, with_scale, mode, out_dtype, ub, block, amax, transposed = OPCHECK_CASES[case]
    gen = generator("opcheck", case)
    x = randn((3, 5, 64), torch.bfloat16, gen, torch_device)
    w = randn((64,), torch.float32, gen, torch_device, 0.2, 1.0)
    b = randn((64,), torch.float32, gen, torch_device) if with_bias else None
    r = randn((3, 5, 64), torch.bfloat16, gen, torch_device) if case == "token_residual" else None
    scale = torch.tensor([20.0], device=torch_device) if with_scale else None
    args = (x, w, b, r, scale, 1e-6, False, mode, out_dtype, ub, block, amax, transposed)
    torch.library.opcheck(torch.ops.normkit.rms_norm_fwd_quant.default, args)


def test_dispatch_mode_sees_the_op(quant_calls):
    x = torch.randn(3, 64)
    with DispatchLog() as log:
        got = nt.rms_norm_quant(x, torch.ones(64), 1e-6, mode="token")
    assert "normkit.rms_norm_fwd_quant.default" in log.ops
    assert quant_calls["op"] == 1 and quant_calls["fast"] == 0, dict(quant_calls)
    want = nt.rms_norm_quant(x, torch.ones(64), 1e-6, mode="token")
    assert _same(got.y, want.y) and _same(got.scales, want.scales)


def test_function_mode_sees_the_op(quant_calls):
    with FunctionLog() as log:
        nt.rms_norm_quant(torch.randn(3, 64), None, 1e-6, mode="mxfp8")
    assert any("normkit.rms_norm_fwd_quant" in f for f in log.funcs)
    assert quant_calls["op"] == 1 and quant_calls["fast"] == 0, dict(quant_calls)


def test_fake_and_meta_tensors(quant_calls):
    from torch._subclasses.fake_tensor import FakeTensorMode

    with FakeTensorMode():
        out = nt.rms_norm_quant(torch.empty(2, 3, 64), torch.empty(64), mode="block", block=32,
                                residual=torch.empty(2, 3, 64), return_amax=True)  # fmt: skip
    assert out.y.shape == out.residual_out.shape == (2, 3, 64) and out.scales.shape == (2, 3, 2)
    out = nt.rms_norm_quant(torch.empty(4, 64, device="meta", dtype=torch.bfloat16), None, 1e-6,
                            mode="token", out_dtype=torch.int8)  # fmt: skip
    assert out.y.device.type == "meta" and out.y.dtype == torch.int8 and out.scales.shape == (4, 1)
    assert dict(quant_calls) == {}, dict(quant_calls)  # fake kernels only


def test_jit_trace_records_the_op(quant_calls):
    w = torch.randn(64)
    # The scales (float32): jit cannot trace a view of the float8 codes as uint8.
    traced = torch.jit.trace(lambda x: nt.rms_norm_quant(x, w, 1e-6, mode="token").scales,
                             torch.randn(2, 64), check_trace=False)  # fmt: skip
    assert "normkit::rms_norm_fwd_quant" in str(traced.graph)
    assert quant_calls["fast"] == 0, dict(quant_calls)
    x = torch.randn(5, 64)
    assert _same(traced(x), nt.rms_norm_quant(x, w, 1e-6, mode="token").scales)


def test_tensor_subclass_takes_the_op(quant_calls):
    class Tagged(torch.Tensor):
        pass

    x = torch.randn(3, 64)
    got = nt.rms_norm_quant(x.as_subclass(Tagged), torch.ones(64), 1e-6, mode="token")
    assert quant_calls["op"] == 1 and quant_calls["fast"] == 0, dict(quant_calls)
    want = nt.rms_norm_quant(x, torch.ones(64), 1e-6, mode="token")
    assert _same(got.y.as_subclass(torch.Tensor), want.y)


def test_cuda_current_stream_and_graph(torch_cuda):
    """CUDA: work goes on the caller's stream and can be captured in a CUDA graph."""
    x, w, _ = _compile_args("cuda", rows=64, hidden=256)
    scale = torch.tensor([20.0], device="cuda")
    want = nt.rms_norm_quant(x, w, mode="tensor", scale=scale, transposed=True, return_amax=True)
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        got = nt.rms_norm_quant(x, w, mode="tensor", scale=scale, transposed=True, return_amax=True)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            captured = nt.rms_norm_quant(x, w, mode="mxfp8", return_amax=True)
    torch.cuda.current_stream().wait_stream(s)
    for field in ("y", "amax", "y_t"):
        assert _same(getattr(got, field), getattr(want, field)), field
    x.mul_(2.0).add_(1.0)  # new data, replayed
    graph.replay()
    eager = nt.rms_norm_quant(x, w, mode="mxfp8", return_amax=True)
    torch.cuda.synchronize()
    for field in ("y", "scales", "amax"):
        assert _same(getattr(captured, field), getattr(eager, field)), field
