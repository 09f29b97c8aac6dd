"""normkit.jax.rms_norm: outputs and gradients against the float64 reference, and the JAX
transformations it must survive: jit, grad (check_grads), vmap, lax.scan."""

from __future__ import annotations

import zlib

import nk_reference as ref
import numpy as np
import pytest

jax = pytest.importorskip("jax")
jnp = jax.numpy
# With jax installed, normkit.jax must import: an ImportError here means normkit was built
# without its JAX targets (see the message), which should fail the suite, not skip it.
import normkit.jax as nj
from jax.test_util import check_grads

DTYPES = {"float32": jnp.float32, "float16": jnp.float16, "bfloat16": jnp.bfloat16}


def f64(a):
    return np.asarray(jnp.asarray(a, jnp.float32), np.float64) if a is not None else None


def randn(rng, shape, dtype, scale=1.0, shift=0.0):
    return jnp.asarray(rng.standard_normal(shape) * scale + shift, dtype)


def jnp_rms_norm(x, w, eps=1e-6, bias=None, residual=None, zero_centered=False):
    """Plain jnp RMSNorm in float32, to compare transformed programs with."""
    s = x if residual is None else x + residual
    s32 = s.astype(jnp.float32)
    y = s32 * jax.lax.rsqrt(jnp.mean(s32 * s32, -1, keepdims=True) + eps)
    if w is not None:
        y = y * ((1 + w) if zero_centered else w)
    if bias is not None:
        y = y + bias
    return y


# weight dtype (None = no weight, "x" = x's), bias, residual, zero_centered, out_dtype ("x" = default)
CONFIGS = {
    "plain": ("x", False, False, False, "x"),
    "no_weight": (None, False, False, False, "x"),
    "fp32_weight": (jnp.float32, False, False, False, "x"),
    "bias": ("x", True, False, False, "x"),
    "residual": ("x", False, True, False, "x"),
    "gemma_residual_bias": ("x", True, True, True, "x"),
    "out_fp32": ("x", True, False, False, jnp.float32),
}


@pytest.mark.parametrize("dtype", list(DTYPES))
@pytest.mark.parametrize("config", list(CONFIGS))
def test_forward_backward(jax_device, dtype, config):
    wdt, has_bias, has_res, zc, odt = CONFIGS[config]
    dt = DTYPES[dtype]
    rng = np.random.default_rng(zlib.crc32(f"{dtype}-{config}".encode()))
    shape, eps = (2, 3, 71), 1e-5
    with jax.default_device(jax_device):
        x = randn(rng, shape, dt)
        weight = None
        if wdt is not None:
            weight = randn(rng, shape[-1:], dt if wdt == "x" else wdt, 0.3, 0.0 if zc else 1.0)
        pdt = weight.dtype if weight is not None else dt
        bias = randn(rng, shape[-1:], pdt, 0.5) if has_bias else None
        residual = randn(rng, shape, dt) if has_res else None
        out_dtype = None if odt == "x" else odt

        def f(x, weight, bias, residual):
            return nj.rms_norm(
                x, weight, eps, bias=bias, residual=residual, zero_centered=zc, out_dtype=out_dtype
            )

        out, vjp = jax.vjp(f, x, weight, bias, residual)
        y, residual_out = out if has_res else (out, None)
        ydt = jnp.dtype(out_dtype or dt)
        assert y.dtype == ydt and y.shape == shape
        assert list(y.devices()) == [jax_device]
        s = x
        if has_res:
            s = (np.asarray(x, np.float64) + np.asarray(residual, np.float64)).astype(jnp.dtype(dt))
            np.testing.assert_array_equal(np.asarray(residual_out), s)
        want, _, scale = ref.forward(f64(s), f64(weight), f64(bias), eps, zc)
        ref.assert_close(f64(y), want, scale, ydt.name, "y")

        dy = randn(rng, shape, ydt)
        dres = randn(rng, shape, dt) if has_res else None
        dx, dweight, dbias, dresidual = vjp((dy, dres) if has_res else dy)
        want = ref.backward(f64(dy), f64(s), f64(weight), eps, zc, f64(dres))
        ref.assert_close(f64(dx), *want["dx"], dtype, "dx")
        if has_res:
            ref.assert_close(f64(dresidual), *want["dx"], dtype, "dresidual")
        else:
            assert dresidual is None
        if weight is not None:
            assert dweight.dtype == weight.dtype
            ref.assert_close(f64(dweight), *want["dweight"], jnp.dtype(weight.dtype).name, "dweight")
        if bias is not None:
            ref.assert_close(f64(dbias), *want["dbias"], jnp.dtype(bias.dtype).name, "dbias")


@pytest.mark.parametrize("shape", [(1, 1), (3, 1), (1, 29), (3, 17389), (2, 65537), (29,)])
def test_awkward_shapes(jax_device, shape):
    rng = np.random.default_rng(sum(shape))
    with jax.default_device(jax_device):
        x = randn(rng, shape, jnp.bfloat16)
        w = randn(rng, shape[-1:], jnp.float32, 0.3, 1.0)
        y, vjp = jax.vjp(lambda x, w: nj.rms_norm(x, w), x, w)
        want, _, scale = ref.forward(f64(x), f64(w))
        ref.assert_close(f64(y), want, scale, "bfloat16", "y")
        dy = randn(rng, shape, jnp.bfloat16)
        dx, dw = vjp(dy)
        want = ref.backward(f64(dy), f64(x), f64(w))
        ref.assert_close(f64(dx), *want["dx"], "bfloat16", "dx")
        ref.assert_close(f64(dw), *want["dweight"], "float32", "dweight")


def test_jit_matches_eager(jax_device):
    rng = np.random.default_rng(0)
    with jax.default_device(jax_device):
        x, w, r = (
            randn(rng, (4, 64), jnp.bfloat16),
            randn(rng, (64,), jnp.bfloat16),
            randn(rng, (4, 64), jnp.bfloat16),
        )
        f = lambda x, w, r: nj.rms_norm(x, w, 1e-6, residual=r, zero_centered=True)
        for a, b in zip(jax.jit(f)(x, w, r), f(x, w, r)):
            np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
        g = jax.jit(jax.grad(lambda x, w, r: f(x, w, r)[0].astype(jnp.float32).sum(), (0, 1, 2)))(x, w, r)
        assert all(bool(jnp.all(jnp.isfinite(t.astype(jnp.float32)))) for t in g)


@pytest.mark.parametrize("with_extras", [False, True])
def test_check_grads(jax_device, with_extras):
    rng = np.random.default_rng(1)
    with jax.default_device(jax_device):
        x = randn(rng, (3, 16), jnp.float32)
        w = randn(rng, (16,), jnp.float32, 0.3, 1.0)
        if with_extras:
            b, r = randn(rng, (16,), jnp.float32), randn(rng, (3, 16), jnp.float32)
            f = lambda x, w, b, r: nj.rms_norm(x, w, 1e-6, bias=b, residual=r, zero_centered=True)
            args = (x, w, b, r)
        else:
            f, args = (lambda x, w: nj.rms_norm(x, w, 1e-6)), (x, w)
        # Reverse mode only: the op is a custom_vjp (no forward-mode rule).
        check_grads(f, args, order=1, modes=("rev",), atol=2e-2, rtol=2e-2, eps=1e-2)


def test_vmap(jax_device):
    rng = np.random.default_rng(2)
    B, M, H = 4, 5, 24
    with jax.default_device(jax_device):
        X, W, Bias = (
            randn(rng, (B, M, H), jnp.float32),
            randn(rng, (B, H), jnp.float32),
            randn(rng, (B, H), jnp.float32),
        )
        x, w, bias = X[0], W[0], Bias[0]
        R = randn(rng, (B, M, H), jnp.float32)
        cases = {
            "x batched": ((0, None, None), (X, w, bias)),
            "weight batched": ((None, 0, None), (x, W, bias)),
            "all batched": ((0, 0, 0), (X, W, Bias)),
            "batch axis 1": ((1, 0, None), (jnp.swapaxes(X, 0, 1), W, bias)),
        }
        for name, (axes, args) in cases.items():
            got = jax.vmap(lambda x, w, b: nj.rms_norm(x, w, bias=b), axes)(*args)
            want = jax.vmap(lambda x, w, b: jnp_rms_norm(x, w, bias=b), axes)(*args)
            np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5, err_msg=name)
        # Nested vmap, residual fused.
        got_y, got_r = jax.vmap(
            jax.vmap(lambda x, r, w: nj.rms_norm(x, w, residual=r), (0, 0, None)), (0, 0, 0)
        )(X, R, W)
        np.testing.assert_allclose(
            got_y,
            jax.vmap(jax.vmap(lambda x, r, w: jnp_rms_norm(x, w, residual=r), (0, 0, None)), (0, 0, 0))(
                X, R, W
            ),
            rtol=1e-5,
            atol=1e-5,
        )
        np.testing.assert_array_equal(got_r, X + R)


def test_grad_of_vmap_and_vmap_of_grad(jax_device):
    rng = np.random.default_rng(3)
    with jax.default_device(jax_device):
        X, w, W = (
            randn(rng, (4, 5, 24), jnp.float32),
            randn(rng, (24,), jnp.float32),
            randn(rng, (4, 24), jnp.float32),
        )
        probe = randn(rng, (5, 24), jnp.float32)

        def loss(norm):
            return lambda x, w: (norm(x, w) * probe).sum()

        ours, theirs = loss(lambda x, w: nj.rms_norm(x, w)), loss(lambda x, w: jnp_rms_norm(x, w))
        # Unbatched weight: per-example weight gradients are summed by JAX.
        g = jax.grad(lambda X, w: jax.vmap(ours, (0, None))(X, w).sum(), (0, 1))(X, w)
        e = jax.grad(lambda X, w: jax.vmap(theirs, (0, None))(X, w).sum(), (0, 1))(X, w)
        for a, b in zip(g, e):
            np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-5)
        g = jax.vmap(jax.grad(ours, (0, 1)))(X, W)
        e = jax.vmap(jax.grad(theirs, (0, 1)))(X, W)
        for a, b in zip(g, e):
            np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-5)


def test_inside_scan(jax_device):
    """A stack of layers under lax.scan: per-layer weights, residual stream carried."""
    rng = np.random.default_rng(4)
    L, M, H = 3, 6, 32
    with jax.default_device(jax_device):
        Ws, Ms = randn(rng, (L, H), jnp.float32, 0.2, 1.0), randn(rng, (L, H, H), jnp.float32, 0.2)
        x0 = randn(rng, (M, H), jnp.float32)

        def network(norm):
            def layer(carry, params):
                h, residual = carry
                w, m = params
                y, residual = norm(h, w, residual)
                return (y @ m, residual), None

            def run(x0, Ws, Ms):
                (h, residual), _ = jax.lax.scan(layer, (x0, jnp.zeros_like(x0)), (Ws, Ms))
                return (h * h).sum() + residual.sum()

            return run

        ours = network(lambda h, w, r: nj.rms_norm(h, w, 1e-6, residual=r))
        theirs = network(lambda h, w, r: (jnp_rms_norm(h, w, 1e-6, residual=r), h + r))
        np.testing.assert_allclose(jax.jit(ours)(x0, Ws, Ms), theirs(x0, Ws, Ms), rtol=1e-5)
        g = jax.jit(jax.grad(ours, (0, 1, 2)))(x0, Ws, Ms)
        e = jax.grad(theirs, (0, 1, 2))(x0, Ws, Ms)
        for a, b in zip(g, e):
            np.testing.assert_allclose(a, b, rtol=2e-5, atol=2e-5)


def test_empty_rows():
    x = jnp.zeros((0, 8), jnp.float32)
    assert nj.rms_norm(x, jnp.ones(8)).shape == (0, 8)


def test_errors():
    x = jnp.ones((2, 8), jnp.float32)
    with pytest.raises(ValueError, match="weight has shape"):
        nj.rms_norm(x, jnp.ones(7))
    with pytest.raises(ValueError, match="residual"):
        nj.rms_norm(x, jnp.ones(8), residual=x.astype(jnp.bfloat16))
    with pytest.raises(TypeError, match="int32"):
        nj.rms_norm(x.astype(jnp.int32), None)
    with pytest.raises(TypeError, match="bias has dtype"):
        nj.rms_norm(x, jnp.ones(8), bias=jnp.ones(8, jnp.bfloat16))


def test_float16_subnormal_inputs(jax_device):
    """XLA runs CPU computations with flush-to-zero; float16 subnormals must still be read exactly."""
    row = np.array([3e-5, -1e-6, 2.0, 6e-8, -4e-5, 1.0, 5e-7, -0.5] * 4, np.float16)
    assert np.any((row != 0) & (np.abs(row) < np.finfo(np.float16).tiny)), "no subnormals in the test row"
    with jax.default_device(jax_device):
        x = jnp.asarray(np.stack([row, -row]))
        y = jax.jit(lambda x: nj.rms_norm(x, None, 1e-6, out_dtype=jnp.float32))(x)
        want, _, scale = ref.forward(f64(x), eps=1e-6)
        ref.assert_close(f64(y), want, scale, "float32", "y")
