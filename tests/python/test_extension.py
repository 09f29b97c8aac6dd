"""normkit._C, the nanobind layer: DLPack arrays in, C API calls out.

Outputs are poisoned with NaN before each call, so an element the call forgets to write fails
the comparison with the float64 reference; strided outputs are cut from NaN-filled buffers and
the gaps between rows must stay NaN (nothing written outside the view).
"""

from __future__ import annotations

import nk_reference as ref
import numpy as np
import pytest
from normkit import _C

torch = pytest.importorskip("torch")

DTYPES = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16}
HIDDEN_SIZES = [1, 29, 71, 17389, 65537]


def f64(t):
    return t.detach().cpu().double().numpy()


def nan_like(shape, dtype, device="cpu"):
    return torch.full(shape, float("nan"), dtype=dtype, device=device)


def randn(shape, dtype, gen, device="cpu"):
    return torch.randn(shape, generator=gen, dtype=torch.float32).to(device=device, dtype=dtype)


@pytest.mark.parametrize("dtype", list(DTYPES))
@pytest.mark.parametrize("hidden", HIDDEN_SIZES)
@pytest.mark.parametrize("rows", [1, 3])
def test_forward_matches_reference(torch_device, dtype, hidden, rows):
    gen = torch.Generator().manual_seed(hidden * 10 + rows)
    dt = DTYPES[dtype]
    x = randn((rows, hidden), dt, gen, torch_device)
    weight = randn((hidden,), torch.float32, gen, torch_device)  # weight dtype != x dtype
    y = nan_like((rows, hidden), dt, torch_device)
    rstd = nan_like((rows,), torch.float32, torch_device)
    _C.rms_norm_fwd(x, y, weight=weight, rstd=rstd, eps=1e-5)
    want, want_rstd, scale = ref.forward(f64(x), f64(weight), eps=1e-5)
    ref.assert_close(f64(y), want, scale, dtype, "y")
    ref.assert_close(f64(rstd), want_rstd, want_rstd, "float32", "rstd")


@pytest.mark.parametrize("dtype", list(DTYPES))
@pytest.mark.parametrize("zero_centered", [False, True])
def test_forward_residual_bias_strided(torch_device, dtype, zero_centered):
    """Residual fused, bias, zero-centered weight, and every matrix a strided view."""
    gen = torch.Generator().manual_seed(7)
    dt = DTYPES[dtype]
    rows, hidden, pad = 5, 71, 13
    base_x = randn((rows, hidden + pad), dt, gen, torch_device)
    base_r = randn((rows, hidden + 2 * pad), dt, gen, torch_device)
    x, residual = base_x[:, 3 : 3 + hidden], base_r[:, pad : pad + hidden]
    weight = randn((hidden,), dt, gen, torch_device) * 0.5
    bias = randn((hidden,), dt, gen, torch_device)
    y_buf = nan_like((rows, hidden + pad), dt, torch_device)
    ro_buf = nan_like((rows, hidden + pad), dt, torch_device)
    y, residual_out = y_buf[:, :hidden], ro_buf[:, pad:]
    _C.rms_norm_fwd(
        x,
        y,
        weight=weight,
        bias=bias,
        residual=residual,
        residual_out=residual_out,
        eps=1e-6,
        zero_centered=zero_centered,
    )
    s = (x.double() + residual.double()).to(dt)  # x + residual rounded once to x's dtype
    assert torch.equal(residual_out.cpu(), s.cpu()), "residual_out is not x + residual rounded to x's dtype"
    want, _, scale = ref.forward(f64(s), f64(weight), f64(bias), 1e-6, zero_centered)
    ref.assert_close(f64(y), want, scale, dtype, "y")
    assert torch.isnan(y_buf[:, hidden:]).all(), "wrote outside y's rows"
    assert torch.isnan(ro_buf[:, :pad]).all(), "wrote outside residual_out's rows"


@pytest.mark.parametrize("dtype", list(DTYPES))
@pytest.mark.parametrize("hidden,rows", [(1, 3), (29, 1), (71, 7), (17389, 3), (65537, 2)])
def test_backward_matches_reference(torch_device, dtype, hidden, rows):
    gen = torch.Generator().manual_seed(hidden + rows)
    dt = DTYPES[dtype]
    s = randn((rows, hidden), dt, gen, torch_device)
    dy = randn((rows, hidden), dt, gen, torch_device)
    dres = randn((rows, hidden), dt, gen, torch_device)
    weight = randn((hidden,), dt, gen, torch_device)
    rstd = torch.empty(rows, device=torch_device)
    _C.rms_norm_fwd(s, torch.empty_like(s), weight=weight, rstd=rstd, eps=1e-6)

    backend = "cuda" if torch_device == "cuda" else "cpu"
    nbytes = _C.rms_norm_bwd_workspace_size(rows, hidden, True, True, backend)
    workspace = torch.empty(nbytes, dtype=torch.uint8, device=torch_device)
    dx = nan_like((rows, hidden), dt, torch_device)
    dweight = nan_like((hidden,), dt, torch_device)
    dbias = nan_like((hidden,), dt, torch_device)
    _C.rms_norm_bwd(
        dy, s, rstd, dx, weight=weight, dresidual_out=dres, dweight=dweight, dbias=dbias, workspace=workspace
    )
    want = ref.backward(f64(dy), f64(s), f64(weight), 1e-6, dresidual_out=f64(dres))
    ref.assert_close(f64(dx), *want["dx"], dtype, "dx")
    ref.assert_close(f64(dweight), *want["dweight"], dtype, "dweight")
    ref.assert_close(f64(dbias), *want["dbias"], dtype, "dbias")


def test_backward_is_deterministic(torch_device):
    gen = torch.Generator().manual_seed(3)
    rows, hidden = 257, 300
    s, dy = (
        randn((rows, hidden), torch.bfloat16, gen, torch_device),
        randn((rows, hidden), torch.bfloat16, gen, torch_device),
    )
    weight = randn((hidden,), torch.float32, gen, torch_device)
    rstd = torch.empty(rows, device=torch_device)
    _C.rms_norm_fwd(s, torch.empty_like(s), weight=weight, rstd=rstd)
    nbytes = _C.rms_norm_bwd_workspace_size(
        rows, hidden, True, False, "cuda" if torch_device == "cuda" else "cpu"
    )
    results = []
    for _ in range(2):
        dx, dw = torch.empty_like(s), torch.empty_like(weight)
        _C.rms_norm_bwd(
            dy,
            s,
            rstd,
            dx,
            weight=weight,
            dweight=dw,
            workspace=torch.empty(nbytes, dtype=torch.uint8, device=torch_device),
        )
        results.append((dx, dw))
    assert torch.equal(results[0][0], results[1][0]) and torch.equal(results[0][1], results[1][1])


def test_numpy_float32_arrays():
    """The extension takes any DLPack producer, not just torch."""
    rng = np.random.default_rng(0)
    x = rng.standard_normal((4, 33)).astype(np.float32)
    w = rng.standard_normal(33).astype(np.float32)
    y = np.full_like(x, np.nan)
    _C.rms_norm_fwd(x, y, weight=w, eps=1e-6)
    want, _, scale = ref.forward(x, w, eps=1e-6)
    ref.assert_close(y, want, scale, "float32", "y")


def test_workspace_query():
    assert _C.rms_norm_bwd_workspace_size(64, 128, False, False, "cpu") == 0
    assert _C.rms_norm_bwd_workspace_size(64, 128, True, False, "cpu") > 0
    both = _C.rms_norm_bwd_workspace_size(64, 128, True, True, "cpu")
    assert both >= _C.rms_norm_bwd_workspace_size(64, 128, True, False, "cpu")
    with pytest.raises(ValueError, match="backend"):
        _C.rms_norm_bwd_workspace_size(64, 128, True, False, "tpu")


def test_errors_name_the_argument():
    x = torch.randn(4, 8)
    y = torch.empty(4, 8)
    with pytest.raises(ValueError, match="weight has 7 elements; expected 8"):
        _C.rms_norm_fwd(x, y, weight=torch.ones(7))
    with pytest.raises(ValueError, match="y has shape \\[4, 9\\]"):
        _C.rms_norm_fwd(x, torch.empty(4, 9))
    with pytest.raises(ValueError, match="column stride 2"):
        _C.rms_norm_fwd(torch.randn(4, 16)[:, ::2], y)
    with pytest.raises(ValueError, match="3 dimensions"):
        _C.rms_norm_fwd(torch.randn(2, 2, 8), y)
    with pytest.raises(TypeError, match="float64"):
        _C.rms_norm_fwd(x.double(), y)
    with pytest.raises(TypeError, match="residual has dtype float16"):
        _C.rms_norm_fwd(x, y, residual=x.half(), residual_out=torch.empty(4, 8, dtype=torch.half))
    with pytest.raises(ValueError, match="together"):
        _C.rms_norm_fwd(x, y, residual=x)
    with pytest.raises(_C.NormkitError, match="NK_ERROR_INVALID_ARGUMENT.*eps"):
        _C.rms_norm_fwd(x, y, eps=-1.0)
    # Overlapping rows (row stride < hidden) are refused by the C API with the stride.
    with pytest.raises(_C.NormkitError, match="stride"):
        _C.rms_norm_fwd(torch.randn(40).as_strided((4, 8), (4, 1)), y)
    rstd = torch.empty(4)
    _C.rms_norm_fwd(x, y, rstd=rstd)
    with pytest.raises(_C.NormkitError, match="workspace"):
        _C.rms_norm_bwd(y, x, rstd, torch.empty(4, 8), weight=torch.ones(8), dweight=torch.empty(8))
    assert issubclass(_C.NormkitError, RuntimeError)


def test_cuda_backend_absent_is_reported():
    import normkit

    if normkit.has_cuda_build():
        pytest.skip("this build has the CUDA backend")
    with pytest.raises(_C.NormkitError, match="NK_ERROR_NO_DEVICE"):
        _C.rms_norm_bwd_workspace_size(8, 8, True, False, "cuda")


def test_cpu_paths_name_the_level_and_the_conversions():
    import normkit

    paths = normkit.cpu_paths()
    assert paths.startswith("row kernels "), paths
    assert "; float16 " in paths and "; bfloat16 rounding " in paths, paths
    assert normkit.cpu_paths() == paths


def test_cuda_demote_l2_keeps_the_data():
    """_C.cuda_demote_l2 (nk_cuda_demote_l2: benchmark harnesses call it before an L2 flush)
    changes cache priorities only; without a device it says so."""
    if _C.cuda_device_count() == 0:
        with pytest.raises(_C.NormkitError, match="CUDA"):
            _C.cuda_demote_l2(0, 16)
        return
    t = torch.randint(0, 256, ((3 << 20) + 5,), dtype=torch.uint8, device="cuda")
    before = t.clone()
    stream = torch.cuda.current_stream().cuda_stream
    _C.cuda_demote_l2(t.data_ptr() + 3, t.numel() - 7, stream)  # (mid-line start and end)
    _C.cuda_demote_l2(t.data_ptr(), 0, stream)
    torch.cuda.synchronize()
    assert torch.equal(t, before)
