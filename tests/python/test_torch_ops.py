"""normkit.torch.rms_norm: outputs and gradients against the float64 reference, layouts,
options, errors, and torch.library.opcheck on both custom ops."""

from __future__ import annotations

import nk_reference as ref
import numpy as np
import pytest

torch = pytest.importorskip("torch")
nt = pytest.importorskip("normkit.torch")

DTYPES = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16}
NAMES = {v: k for k, v in DTYPES.items()}


def f64(t):
    return t.detach().cpu().double().numpy()


def randn(shape, dtype, gen, device, scale=1.0, shift=0.0):
    return (torch.randn(shape, generator=gen) * scale + shift).to(device=device, dtype=dtype)


# (weight dtype: None = no weight, "x" = x's dtype, or a dtype), bias, residual, zero_centered,
# out_dtype ("x" = default)
CONFIGS = {
    "plain": ("x", False, False, False, "x"),
    "no_weight": (None, False, False, False, "x"),
    "fp32_weight": (torch.float32, False, False, False, "x"),
    "bias": ("x", True, False, False, "x"),
    "residual": ("x", False, True, False, "x"),
    "gemma": ("x", False, True, True, "x"),
    "out_fp32": ("x", True, False, False, torch.float32),
}


def run_case(device, dtype, config, shape, seed=0, x_view=None):
    """Forward and backward through rms_norm, checked against the float64 reference."""
    wdt, has_bias, has_res, zc, odt = CONFIGS[config]
    dt = DTYPES[dtype]
    gen = torch.Generator().manual_seed(seed)
    hidden = shape[-1]
    x = randn(shape, dt, gen, device)
    if x_view is not None:
        x = x_view(x)
    x.requires_grad_(True)
    weight = None
    if wdt is not None:
        wdt = dt if wdt == "x" else wdt
        weight = randn((hidden,), wdt, gen, device, 0.3, 0.0 if zc else 1.0).requires_grad_(True)
    pdt = weight.dtype if weight is not None else dt
    bias = randn((hidden,), pdt, gen, device, 0.5).requires_grad_(True) if has_bias else None
    residual = randn(x.shape, dt, gen, device).requires_grad_(True) if has_res else None
    out_dtype = None if odt == "x" else odt
    eps = 1e-5

    out = nt.rms_norm(x, weight, eps, bias=bias, residual=residual, zero_centered=zc, out_dtype=out_dtype)
    y, residual_out = out if has_res else (out, None)
    ydt = out_dtype or dt
    assert y.dtype == ydt and y.shape == x.shape and y.device.type == device
    s = x.detach()
    if has_res:
        s = (x.double() + residual.double()).to(dt).detach()
        assert torch.equal(residual_out, s), "residual_out is not x + residual rounded to x's dtype"
    w64 = None if weight is None else f64(weight)
    b64 = None if bias is None else f64(bias)
    want, _, scale = ref.forward(f64(s), w64, b64, eps, zc)
    ref.assert_close(f64(y), want, scale, NAMES[ydt], "y")

    dy = randn(y.shape, ydt, gen, device)
    outputs, grads_out = [y], [dy]
    dres = None
    if has_res:
        dres = randn(y.shape, dt, gen, device)
        outputs.append(residual_out)
        grads_out.append(dres)
    named = [
        (n, t)
        for n, t in zip(("x", "weight", "bias", "residual"), (x, weight, bias, residual))
        if t is not None
    ]
    grads = dict(zip([n for n, _ in named], torch.autograd.grad(outputs, [t for _, t in named], grads_out)))
    want = ref.backward(f64(dy), f64(s), w64, eps, zc, None if dres is None else f64(dres))
    ref.assert_close(f64(grads["x"]), *want["dx"], dtype, "dx")
    if has_res:
        ref.assert_close(f64(grads["residual"]), *want["dx"], dtype, "dresidual")
    if weight is not None:
        assert grads["weight"].dtype == weight.dtype
        ref.assert_close(f64(grads["weight"]), *want["dweight"], NAMES[weight.dtype], "dweight")
    if bias is not None:
        ref.assert_close(f64(grads["bias"]), *want["dbias"], NAMES[bias.dtype], "dbias")


@pytest.mark.parametrize("dtype", list(DTYPES))
@pytest.mark.parametrize("config", list(CONFIGS))
def test_forward_backward(torch_device, dtype, config):
    run_case(torch_device, dtype, config, (2, 3, 71))


@pytest.mark.parametrize("dtype", list(DTYPES))
@pytest.mark.parametrize("shape", [(1, 1), (5, 1), (1, 29), (3, 17389), (2, 65537), (29,)])
def test_awkward_shapes(torch_device, dtype, shape):
    run_case(torch_device, dtype, "bias", shape, seed=sum(shape))


LAYOUTS = {
    # rows of a wider tensor: strided rows, no copy needed
    "row_slice": lambda x: torch.cat([x, x[..., :7]], -1)[..., : x.shape[-1]],
    # leading dims that do not collapse into one row stride: copied
    "transposed": lambda x: x.transpose(0, 1).contiguous().transpose(0, 1),
    # last dim not contiguous: copied
    "column_step": lambda x: torch.stack([x, x], -1)[..., 0],
    # broadcast rows (stride 0): copied
    "expanded": lambda x: x[:1].expand(x.shape),
}


@pytest.mark.parametrize("layout", list(LAYOUTS))
def test_layouts(torch_device, layout):
    run_case(torch_device, "bfloat16", "residual", (4, 3, 29), x_view=LAYOUTS[layout])


@pytest.mark.parametrize("fast", [True, False], ids=["eager_path", "custom_op"])
def test_strided_rows_are_not_copied(monkeypatch, fast):
    """A slice of a wider tensor reaches the C API as a strided view of the same memory, through
    the eager fast path (raw address and row stride) and through the custom op (DLPack)."""
    from normkit import _C
    from normkit.torch import _eager

    seen = {}
    real_op, real_fast = _C.rms_norm_fwd, _eager._fwd_ptr

    def spy_op(x, y, **kw):
        seen["ptr"], seen["stride"] = x.data_ptr(), x.stride()[0]
        return real_op(x, y, **kw)

    def spy_fast(*args):
        seen["ptr"], seen["stride"] = args[4], args[6]  # x, x_row_stride
        return real_fast(*args)

    monkeypatch.setattr(_eager, "enabled", fast)
    monkeypatch.setattr(_C, "rms_norm_fwd", spy_op)
    monkeypatch.setattr(_eager, "_fwd_ptr", spy_fast)
    base = torch.randn(6, 100)
    x = base[:, 10:90]
    y = nt.rms_norm(x, torch.ones(80))
    assert seen["ptr"] == x.data_ptr() and seen["stride"] == 100
    want, _, scale = ref.forward(f64(x), np.ones(80), eps=torch.finfo(torch.float32).eps)
    ref.assert_close(f64(y), want, scale, "float32", "y")


def test_eps_none_is_finfo_eps():
    for dt in (torch.float32, torch.bfloat16):
        x = torch.randn(3, 64).to(dt) * 1e-3  # small values, so eps matters
        w = torch.randn(64).to(dt)
        got = nt.rms_norm(x, w)
        want, _, scale = ref.forward(f64(x), f64(w), eps=torch.finfo(dt).eps)
        ref.assert_close(f64(got), want, scale, NAMES[dt], "y")


def test_float16_subnormal_inputs(torch_device):
    row = torch.tensor([3e-5, -1e-6, 2.0, 6e-8, -4e-5, 1.0, 5e-7, -0.5] * 4, dtype=torch.float16)
    assert ((row != 0) & (row.abs() < torch.finfo(torch.float16).tiny)).any(), "no subnormals in the test row"
    x = torch.stack([row, -row]).to(torch_device)
    y = nt.rms_norm(x, None, 1e-6, out_dtype=torch.float32)
    want, _, scale = ref.forward(f64(x), eps=1e-6)
    ref.assert_close(f64(y), want, scale, "float32", "y")


def test_only_some_inputs_need_grad():
    x = torch.randn(4, 16)
    w = torch.randn(16, requires_grad=True)
    (gw,) = torch.autograd.grad(nt.rms_norm(x, w).sum(), [w])
    want = ref.backward(np.ones((4, 16)), f64(x), f64(w), torch.finfo(torch.float32).eps)
    ref.assert_close(f64(gw), *want["dweight"], "float32", "dweight")
    x.requires_grad_(True)
    w2 = torch.randn(16)
    (gx,) = torch.autograd.grad(nt.rms_norm(x, w2).sum(), [x])
    assert gx.shape == x.shape and torch.isfinite(gx).all()


def test_unused_y_still_differentiates_residual_out():
    x = torch.randn(3, 8, requires_grad=True)
    r = torch.randn(3, 8, requires_grad=True)
    _, residual_out = nt.rms_norm(x, torch.ones(8), residual=r)
    gx, gr = torch.autograd.grad(residual_out.sum(), [x, r])
    assert torch.allclose(gx, torch.ones_like(x)) and torch.allclose(gr, torch.ones_like(r))


def test_empty_rows():
    x = torch.randn(0, 16, requires_grad=True)
    w = torch.randn(16, requires_grad=True)
    y = nt.rms_norm(x, w)
    assert y.shape == (0, 16)
    gx, gw = torch.autograd.grad(y.sum(), [x, w])
    assert gx.shape == (0, 16) and torch.equal(gw, torch.zeros(16))


def test_errors():
    x = torch.randn(4, 8)
    with pytest.raises(RuntimeError, match="weight has shape \\(7,\\)"):
        nt.rms_norm(x, torch.ones(7))
    with pytest.raises(RuntimeError, match="residual has dtype torch.float16"):
        nt.rms_norm(x, residual=x.half())
    with pytest.raises(RuntimeError, match="float64"):
        nt.rms_norm(x.double())
    with pytest.raises(RuntimeError, match="bias has dtype"):
        nt.rms_norm(x, torch.ones(8), bias=torch.ones(8, dtype=torch.bfloat16))


OPCHECK_CASES = {
    "weight": lambda x, w, b, r: (x, w, None, None, 1e-6, False, None),
    "all": lambda x, w, b, r: (x, w, b, r, 1e-5, True, torch.float32),
    "no_weight": lambda x, w, b, r: (x, None, None, r, 1e-6, False, None),
    "bias_only": lambda x, w, b, r: (x, None, b, None, 1e-6, False, None),
}


@pytest.mark.parametrize("case", list(OPCHECK_CASES))
def test_opcheck_forward(torch_device, case):
    x = torch.randn(3, 5, 32, device=torch_device, dtype=torch.bfloat16, requires_grad=True)
    w = torch.randn(32, device=torch_device, dtype=torch.bfloat16, requires_grad=True)
    b = torch.randn(32, device=torch_device, dtype=torch.bfloat16, requires_grad=True)
    r = torch.randn(3, 5, 32, device=torch_device, dtype=torch.bfloat16, requires_grad=True)
    torch.library.opcheck(torch.ops.normkit.rms_norm_fwd.default, OPCHECK_CASES[case](x, w, b, r))


def test_opcheck_backward(torch_device):
    s = torch.randn(6, 32, device=torch_device)
    dy = torch.randn(6, 32, device=torch_device)
    rstd = torch.rsqrt(s.pow(2).mean(-1) + 1e-6)
    w = torch.randn(32, device=torch_device)
    args = (dy, s, rstd, w, dy * 0.5, False, True, True, torch.float32)
    torch.library.opcheck(torch.ops.normkit.rms_norm_bwd.default, args)
