"""normkit.flax.RMSNorm against flax.nnx.RMSNorm: the same parameters, state and outputs."""

from __future__ import annotations

import numpy as np
import pytest

jax = pytest.importorskip("jax")
jnp = jax.numpy
nnx = pytest.importorskip("flax.nnx")
import normkit.flax as nf  # must import where jax and flax do (see test_jax.py)


def state_summary(module):
    return jax.tree_util.tree_map(lambda a: (a.shape, a.dtype), nnx.state(module, nnx.Param))


@pytest.mark.parametrize(
    "kwargs",
    [{}, {"epsilon": 1e-5}, {"param_dtype": jnp.bfloat16}, {"use_scale": False}, {"dtype": jnp.bfloat16}],
)
def test_same_parameters(kwargs):
    ours = nf.RMSNorm(48, rngs=nnx.Rngs(0), **kwargs)
    theirs = nnx.RMSNorm(48, rngs=nnx.Rngs(0), **kwargs)
    assert isinstance(ours, nnx.RMSNorm)
    assert state_summary(ours) == state_summary(theirs)
    for a, b in zip(jax.tree_util.tree_leaves(nnx.state(ours)), jax.tree_util.tree_leaves(nnx.state(theirs))):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))


# (x dtype, param_dtype, dtype)
DTYPE_CASES = [
    (jnp.float32, jnp.float32, None),
    (jnp.bfloat16, jnp.float32, None),  # promoted: float32 output
    (jnp.bfloat16, jnp.bfloat16, None),
    (jnp.float32, jnp.float32, jnp.bfloat16),  # cast to bfloat16 first
    (jnp.float16, jnp.float32, jnp.float16),
]


@pytest.mark.parametrize("x_dtype,param_dtype,dtype", DTYPE_CASES)
def test_outputs_and_grads_match_flax(jax_device, x_dtype, param_dtype, dtype):
    with jax.default_device(jax_device):
        theirs = nnx.RMSNorm(40, rngs=nnx.Rngs(0), param_dtype=param_dtype, dtype=dtype, epsilon=1e-5)
        theirs.scale[...] = (1 + 0.3 * jax.random.normal(jax.random.key(1), (40,))).astype(param_dtype)
        ours = nf.RMSNorm(40, rngs=nnx.Rngs(0), param_dtype=param_dtype, dtype=dtype, epsilon=1e-5)
        nnx.update(ours, nnx.state(theirs))  # a checkpoint moves across unchanged
        x = jax.random.normal(jax.random.key(2), (3, 7, 40)).astype(x_dtype)
        y_ours, y_theirs = ours(x), theirs(x)
        assert y_ours.dtype == y_theirs.dtype and y_ours.shape == y_theirs.shape
        # Both compute in float32; flax may round intermediates where normkit rounds once.
        tol = 1e-5 if y_ours.dtype == jnp.float32 else 2e-2
        np.testing.assert_allclose(
            np.asarray(y_ours, np.float32), np.asarray(y_theirs, np.float32), rtol=tol, atol=tol
        )

        def loss(model, x):
            return (model(x).astype(jnp.float32) * jnp.cos(x.astype(jnp.float32))).sum()

        g_ours = nnx.grad(loss)(ours, x)
        g_theirs = nnx.grad(loss)(theirs, x)
        a, b = np.asarray(g_ours["scale"][...], np.float32), np.asarray(g_theirs["scale"][...], np.float32)
        np.testing.assert_allclose(a, b, rtol=5e-2 if tol > 1e-5 else 1e-4, atol=5e-2 if tol > 1e-5 else 1e-4)


def test_jit_and_no_scale():
    ours = nf.RMSNorm(16, use_scale=False, rngs=nnx.Rngs(0))
    theirs = nnx.RMSNorm(16, use_scale=False, rngs=nnx.Rngs(0))
    x = jax.random.normal(jax.random.key(3), (5, 16))
    np.testing.assert_allclose(nnx.jit(lambda m, x: m(x))(ours, x), theirs(x), rtol=1e-5, atol=1e-5)


def test_mask_falls_back_to_flax():
    ours = nf.RMSNorm(16, rngs=nnx.Rngs(0))
    theirs = nnx.RMSNorm(16, rngs=nnx.Rngs(0))
    x = jax.random.normal(jax.random.key(4), (5, 16))
    mask = jnp.arange(16)[None, :].repeat(5, 0) < 9
    np.testing.assert_allclose(ours(x, mask=mask), theirs(x, mask=mask), rtol=1e-6, atol=1e-6)
