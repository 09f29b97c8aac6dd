"""normkit._C.rms_norm_fwd_quant, the nanobind layer of the quantized forward.

Outputs are poisoned before each call (a code never produced: 0x7F, an FP8 NaN, or 0x80, int8
-128; NaN scales and amax; e8m0 byte 0xFF), so an element the call forgets to write fails the
reference comparison. y, y_t and residual_out are strided views cut from poisoned buffers whose
gaps must stay poisoned, and a call the C API rejects must leave every output untouched.
"""

from __future__ import annotations

import zlib

import nk_quant_reference as qref
import nk_reference as ref
import pytest
import quant_cases as qc
from normkit import NormkitError, _C

torch = pytest.importorskip("torch")

PAD = 13


def f64(t):
    return t.detach().cpu().double().numpy()


def poison_code(name):
    return 0x80 if name == "int8" else 0x7F


def code_buffer(shape, name, device):
    return torch.full(shape, poison_code(name), dtype=torch.uint8, device=device)


def code_values(codes, name):
    """Values of uint8 codes, decoded by torch."""
    dtype = {"float8_e4m3": torch.float8_e4m3fn, "float8_e5m2": torch.float8_e5m2, "int8": torch.int8}[name]
    return f64(codes.cpu().view(dtype).float())


@pytest.mark.parametrize("case", qc.MODE_CASES, ids=qc.case_id)
def test_every_output_written_and_nothing_else(torch_device, case):
    mode, name, block = case
    rows, hidden = 5, qc.awkward_hidden(case)
    gen = torch.Generator().manual_seed(zlib.crc32(qc.case_id(case).encode()))
    dev = torch_device

    def randn(*shape):
        return torch.randn(shape, generator=gen).to(dev, torch.bfloat16)

    x = randn(rows, hidden + PAD)[:, :hidden]
    residual = randn(rows, hidden + 2 * PAD)[:, PAD : PAD + hidden]
    weight = randn(hidden) * 0.3 + 1
    y_buf = code_buffer((rows, hidden + PAD), name, dev)
    y = y_buf[:, PAD:]
    ro_buf = torch.full((rows, hidden + PAD), float("nan"), dtype=torch.bfloat16, device=dev)
    residual_out = ro_buf[:, :hidden]
    rstd = torch.full((rows,), float("nan"), device=dev)
    amax = torch.full((1,), float("nan"), device=dev)
    s = (x.double() + residual.double()).to(torch.bfloat16)
    v = qc.v_of(f64(s), f64(weight), None, 1e-5, False)
    kwargs = {}
    scale_value = None
    y_t_buf = None
    if mode == "tensor":
        scale_value = qc.tensor_scale(v, name, 0.9)
        kwargs["scale"] = torch.tensor([scale_value], device=dev)
        y_t_buf = code_buffer((hidden, rows + PAD), name, dev)
        kwargs["y_t"] = y_t_buf[:, :rows]
    else:
        per_row = hidden // qref.scale_columns(mode, block, hidden)
        kwargs["scales"] = (
            torch.full((rows, per_row), 0xFF, dtype=torch.uint8, device=dev)
            if mode == "mxfp8"
            else torch.full((rows, per_row), float("nan"), device=dev)
        )
    _C.rms_norm_fwd_quant(
        x, y, y_dtype=name, mode=mode, weight=weight, residual=residual,
        residual_out=residual_out, rstd=rstd, amax=amax, block=block or 0, eps=1e-5, **kwargs,
    )  # fmt: skip

    assert torch.equal(residual_out, s), "residual_out is not x + residual rounded to x's dtype"
    _, want_rstd, _ = ref.forward(f64(s), f64(weight), None, 1e-5)
    ref.assert_close(f64(rstd), want_rstd, want_rstd, "float32", "rstd")
    scales = kwargs.get("scales")
    qc.check(
        case, v, y_values=code_values(y, name), y_bytes=y.cpu().numpy(),
        scales=None if scales is None else scales.cpu().numpy(), amax=f64(amax),
        y_t_bytes=None if y_t_buf is None else y_t_buf[:, :rows].cpu().numpy(),
        scale=scale_value, what=qc.case_id(case),
    )  # fmt: skip
    assert (y_buf[:, :PAD] == poison_code(name)).all(), "wrote outside y's rows"
    assert torch.isnan(ro_buf[:, hidden:]).all(), "wrote outside residual_out's rows"
    if y_t_buf is not None:
        assert (y_t_buf[:, rows:] == poison_code(name)).all(), "wrote outside y_t's rows"


REJECTED = {
    "hidden_not_multiple_of_block": dict(mode="block", hidden=96, scales_per_row=1),
    "tensor_without_scale": dict(mode="tensor", hidden=64),
    "int8_block": dict(mode="block", hidden=64, block=32, name="int8", scales_per_row=2),
}


@pytest.mark.parametrize("case", list(REJECTED))
def test_rejected_call_writes_nothing(torch_device, case):
    c = dict(REJECTED[case])
    mode, hidden, name = c["mode"], c["hidden"], c.get("name", "float8_e4m3")
    x = torch.randn(3, hidden, device=torch_device)
    y = code_buffer((3, hidden), name, torch_device)
    amax = torch.full((1,), float("nan"), device=torch_device)
    scales = None
    if "scales_per_row" in c:
        scales = torch.full((3, c["scales_per_row"]), float("nan"), device=torch_device)
    with pytest.raises(NormkitError, match="NK_ERROR_INVALID_ARGUMENT"):
        _C.rms_norm_fwd_quant(x, y, y_dtype=name, mode=mode, scales=scales, amax=amax,
                              block=c.get("block", 0))  # fmt: skip
    assert (y == poison_code(name)).all() and torch.isnan(amax).all()
    if scales is not None:
        assert torch.isnan(scales).all()


def test_binding_checks():
    """What the C API cannot see (shapes, dtypes of untyped outputs, names) is checked here."""
    x = torch.randn(4, 64)
    y = torch.empty(4, 64, dtype=torch.uint8)
    scales = torch.empty(4, 1)
    cases = [
        (dict(y=torch.empty(4, 32, dtype=torch.uint8)), ValueError, "y has shape"),
        (dict(y=torch.empty(4, 64, dtype=torch.float16)), TypeError, "1-byte"),
        (dict(scales=torch.empty(4, 2)), ValueError, "scales has 8 elements; expected 4 x 1"),
        (dict(scales=torch.empty(4, 1, dtype=torch.float16)), TypeError, "scales"),
        (dict(y_dtype="float16"), ValueError, "y_dtype is 'float16'"),
        (dict(mode="none"), ValueError, "mode is 'none'"),
        (dict(mode="mxfp8", scales=torch.empty(4, 2)), TypeError, "1-byte"),
        (dict(mode="tensor", scales=None, scale=torch.ones(1), y_t=torch.empty(4, 64, dtype=torch.uint8)),
         ValueError, "y_t has shape"),  # fmt: skip
        (dict(amax=torch.empty(2)), ValueError, "amax has 2 elements"),
    ]
    for change, error, match in cases:
        kwargs = dict(y=y, y_dtype="float8_e4m3", mode="token", scales=scales)
        kwargs.update(change)
        with pytest.raises(error, match=match):
            _C.rms_norm_fwd_quant(x, kwargs.pop("y"), **kwargs)


def test_float8_tensors_through_dlpack():
    """Where torch exports float8 through DLPack, y may be passed as float8 directly."""
    x = torch.randn(2, 64)
    y = torch.empty(2, 64, dtype=torch.float8_e4m3fn)
    scales = torch.empty(2, 1)
    try:
        _C.rms_norm_fwd_quant(x, y, y_dtype="float8_e4m3", mode="token", scales=scales)
    except (TypeError, BufferError, RuntimeError) as e:  # older torch: no float8 in DLPack
        pytest.skip(f"this torch cannot export float8 through DLPack: {e}")
    v = qc.v_of(f64(x), None, None, 1e-6, False)
    qc.check(("token", "float8_e4m3", None), v, y_values=f64(y.float()),
             y_bytes=y.view(torch.uint8).numpy(), scales=scales.numpy(), what="float8 y")  # fmt: skip
