"""normkit.jax.rms_norm_quant: every mode and code dtype against the float64 reference, forward
options, jit, vmap (per-batch scales and amax), and errors (the C API's messages)."""

from __future__ import annotations

import zlib

import nk_quant_reference as qref
import numpy as np
import pytest
import quant_cases as qc

jax = pytest.importorskip("jax")
jnp = jax.numpy
import normkit.jax as nj  # noqa: E402  (with jax installed, normkit.jax must import)

CODE_DTYPES = {"float8_e4m3": jnp.float8_e4m3fn, "float8_e5m2": jnp.float8_e5m2, "int8": jnp.int8}
X_DTYPES = {"float32": jnp.float32, "float16": jnp.float16, "bfloat16": jnp.bfloat16}
CASE_IDS = [qc.case_id(c) for c in qc.MODE_CASES]


def f64(a):
    return None if a is None else np.asarray(jnp.asarray(a, jnp.float32), np.float64)


def code_bytes(a):
    return np.asarray(a).view(np.uint8)


def rng_for(*parts):
    return np.random.default_rng(zlib.crc32("/".join(map(str, parts)).encode()))


def randn(rng, shape, dtype, scale=1.0, shift=0.0):
    return jnp.asarray(rng.standard_normal(shape) * scale + shift, dtype)


def run_case(device, case, config="plain", shape=None, x_dtype=jnp.bfloat16, *, jit=False,
             scale_factor=0.8, ub_quantile=None):  # fmt: skip
    mode, name, block = case
    shape = shape or (5, qc.awkward_hidden(case))
    hidden = shape[-1]
    has_w, has_b, has_r, zc = qc.CONFIGS[config]
    rng = rng_for(qc.case_id(case), config, shape, jnp.dtype(x_dtype).name, scale_factor, ub_quantile)
    eps = 1e-5
    with jax.default_device(device):
        x = randn(rng, shape, x_dtype)
        w = randn(rng, (hidden,), x_dtype, 0.3, 0.0 if zc else 1.0) if has_w else None
        b = randn(rng, (hidden,), x_dtype, 0.5) if has_b else None
        r = randn(rng, shape, x_dtype) if has_r else None
        s = x if r is None else jnp.asarray(f64(x) + f64(r), x_dtype)
        v = qc.v_of(f64(s), f64(w), f64(b), eps, zc)
        scale_value, ub = None, 0.0
        kwargs = dict(mode=mode, out_dtype=CODE_DTYPES[name], block=block, return_amax=True,
                      transposed=mode == "tensor", zero_centered=zc)  # fmt: skip
        if mode == "tensor":
            scale_value = qc.tensor_scale(v, name, scale_factor)
            kwargs["scale"] = jnp.asarray([scale_value], jnp.float32)
        if ub_quantile is not None:
            groups = qref.reference(v, mode, name, block=block).scales.reshape(-1)
            ub = float(np.float32(np.quantile(groups, ub_quantile)))
            kwargs["scale_ub"] = ub

        def f(x, w, b, r):
            return nj.rms_norm_quant(x, w, eps, residual=r, bias=b, **kwargs)

        out = (jax.jit(f) if jit else f)(x, w, b, r)

    assert isinstance(out, nj.QuantOutput)
    assert out.y.shape == shape and out.y.dtype == jnp.dtype(CODE_DTYPES[name])
    assert list(out.y.devices()) == [device]
    assert out.amax.shape == (1,) and out.amax.dtype == jnp.float32
    rows = int(np.prod(shape[:-1]))
    if mode == "tensor":
        assert out.scales is None and out.y_t.shape == (hidden, rows)
    else:
        columns = qref.scale_columns(mode, block, hidden)
        assert out.scales.shape == (*shape[:-1], hidden // columns) and out.y_t is None
        assert out.scales.dtype == (jnp.uint8 if mode == "mxfp8" else jnp.float32)
    if r is None:
        assert out.residual_out is None
    else:
        assert out.residual_out.dtype == x.dtype
        assert np.array_equal(f64(out.residual_out), f64(s)), "residual_out is not x + residual rounded"
    return qc.check(
        case, v, y_values=f64(out.y), y_bytes=code_bytes(out.y),
        scales=None if out.scales is None else np.asarray(out.scales), amax=f64(out.amax),
        y_t_bytes=None if out.y_t is None else code_bytes(out.y_t), scale=scale_value,
        scale_ub=ub, what=f"{qc.case_id(case)} {config} {shape}",
    )  # fmt: skip


@pytest.mark.parametrize("x_dtype", list(X_DTYPES))
@pytest.mark.parametrize("case", qc.MODE_CASES, ids=CASE_IDS)
def test_modes_dtypes(jax_device, case, x_dtype):
    run_case(jax_device, case, "plain", (2, 3, qc.awkward_hidden(case)), X_DTYPES[x_dtype])


@pytest.mark.parametrize("config", list(qc.CONFIGS))
@pytest.mark.parametrize("case", qc.MODE_CASES, ids=CASE_IDS)
def test_options_under_jit(jax_device, case, config):
    run_case(jax_device, case, config, jit=True)


@pytest.mark.parametrize("rows", [1, 7])
@pytest.mark.parametrize("case", [qc.MODE_CASES[i] for i in (0, 5, 8, 10)], ids=qc.case_id)
def test_hidden_4096(jax_device, case, rows):
    run_case(jax_device, case, "residual", (rows, 4096))


@pytest.mark.parametrize("case", [c for c in qc.MODE_CASES if c[0] in ("token", "block")], ids=qc.case_id)
def test_scale_ub_binds(jax_device, case):
    run_case(jax_device, case, "plain", (16, qc.awkward_hidden(case)), ub_quantile=0.5)


def test_tensor_scale_saturates(jax_device):
    run_case(jax_device, ("tensor", "float8_e4m3", None), "bias", scale_factor=8.0)


def _same(a, b):
    if a is None or b is None:
        return a is None and b is None
    a, b = np.asarray(a), np.asarray(b)
    if a.dtype.itemsize == 1:
        a, b = a.view(np.uint8), b.view(np.uint8)
    return a.shape == b.shape and np.array_equal(a, b)


def test_vmap_per_batch_scale_and_amax(jax_device):
    """vmap over x and the tensor scale: each batch element gets its own scale, amax and y_t."""
    rng = rng_for("vmap")
    with jax.default_device(jax_device):
        xs = randn(rng, (3, 4, 64), jnp.bfloat16) * jnp.asarray([[[1.0]], [[3.0]], [[0.5]]], jnp.bfloat16)
        w = randn(rng, (64,), jnp.float32, 0.2, 1.0)
        scales = jnp.asarray([[10.0], [20.0], [40.0]], jnp.float32)

        def f(x, scale):
            return nj.rms_norm_quant(x, w, 1e-6, mode="tensor", scale=scale, transposed=True,
                                     return_amax=True)  # fmt: skip

        batched = jax.jit(jax.vmap(f))(xs, scales)
        assert batched.y.shape == (3, 4, 64) and batched.amax.shape == (3, 1)
        assert batched.y_t.shape == (3, 64, 4)
        for i in range(3):
            one = f(xs[i], scales[i])
            for field in ("y", "amax", "y_t"):
                assert _same(getattr(batched, field)[i], getattr(one, field)), (i, field)


@pytest.mark.parametrize("mode", ["token", "block", "mxfp8"])
def test_vmap_shared_weight_and_no_weight(jax_device, mode):
    """vmap with per-row scales: batched weight (one call per group) and no weight (one call)."""
    rng = rng_for("vmap", mode)
    with jax.default_device(jax_device):
        xs = randn(rng, (2, 3, 5, 128), jnp.float16)
        ws = randn(rng, (2, 128), jnp.float16, 0.2, 1.0)
        kw = dict(mode=mode, block=32 if mode == "block" else None, return_amax=True)
        batched = jax.vmap(lambda x, w: nj.rms_norm_quant(x, w, **kw))(xs, ws)
        unweighted = jax.vmap(jax.vmap(lambda x: nj.rms_norm_quant(x, **kw)))(xs)
        for i in range(2):
            one = nj.rms_norm_quant(xs[i], ws[i], **kw)
            for field in ("y", "scales", "amax"):
                assert _same(getattr(batched, field)[i], getattr(one, field)), (i, field)
            for j in range(3):
                one = nj.rms_norm_quant(xs[i, j], **kw)
                for field in ("y", "scales", "amax"):
                    assert _same(getattr(unweighted, field)[i, j], getattr(one, field)), field


def test_outputs_not_asked_for_are_none(jax_device):
    with jax.default_device(jax_device):
        x = jnp.ones((3, 64)) + jnp.arange(64.0)
        out = nj.rms_norm_quant(x, mode="tensor", scale=1.0)
        assert out.scales is None and out.amax is None and out.y_t is None and out.residual_out is None
        out = nj.rms_norm_quant(x, mode="token")
        assert out.scales.shape == (3, 1) and out.amax is None


def test_empty_rows():
    out = nj.rms_norm_quant(jnp.zeros((0, 64)), mode="token", return_amax=True)
    assert out.y.shape == (0, 64) and out.scales.shape == (0, 1) and float(out.amax[0]) == 0.0


ERRORS = {
    "tensor_without_scale": (dict(mode="tensor"), "scale pointer missing"),
    "hidden_not_multiple_of_block": (dict(mode="block"), "multiple of 128"),
    "bad_block": (dict(mode="block", block=48), "32, 64 or 128"),
    "int8_block": (dict(mode="block", block=32, out_dtype=jnp.int8), "int8"),
    "int8_mxfp8": (dict(mode="mxfp8", out_dtype=jnp.int8), "int8"),
    "scale_with_token": (dict(mode="token", scale=1.0), "scale is given"),
    "y_t_with_block": (dict(mode="block", block=32, transposed=True), "y_t"),
    "scale_ub_with_mxfp8": (dict(mode="mxfp8", scale_ub=1.0), "scale_ub"),
}


@pytest.mark.parametrize("name", list(ERRORS))
def test_c_api_errors(jax_device, name):
    kwargs, match = ERRORS[name]
    with jax.default_device(jax_device):
        x = jnp.ones((3, 96)) + jnp.arange(96.0)
        with pytest.raises(Exception, match=match):
            jax.block_until_ready(nj.rms_norm_quant(x, None, 1e-6, **kwargs))


def test_python_errors():
    x = jnp.ones((3, 64))
    with pytest.raises(ValueError, match="mode is 'channel'"):
        nj.rms_norm_quant(x, mode="channel")
    with pytest.raises(TypeError, match="out_dtype"):
        nj.rms_norm_quant(x, mode="token", out_dtype=jnp.float16)
    with pytest.raises(TypeError, match="scale is float16"):
        nj.rms_norm_quant(x, mode="tensor", scale=jnp.ones(1, jnp.float16))
    with pytest.raises(TypeError, match="x has dtype int32"):
        nj.rms_norm_quant(jnp.ones((3, 64), jnp.int32), mode="token")
