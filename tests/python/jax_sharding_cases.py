"""normkit.jax.rms_norm on sharded operands: run by test_jax_sharding.py in a process of its own,
with four CPU devices (XLA's host device count is fixed when jax starts, so it cannot change
inside the pytest process). Writes one JSON object to OUT.json: each case's name -> "ok" or
the traceback of what failed.

Usage: python tests/python/jax_sharding_cases.py OUT.json shardy|gspmd
(the partitioner: Shardy, JAX's default, or GSPMD, still chosen with
jax_use_shardy_partitioner=False)
"""

from __future__ import annotations

import os

os.environ["XLA_FLAGS"] = os.environ.get("XLA_FLAGS", "") + " --xla_force_host_platform_device_count=4"
os.environ["JAX_PLATFORMS"] = "cpu"

import json
import sys

import jax
import jax.numpy as jnp
import nk_reference as ref
import normkit.jax as nj
import numpy as np
from child_cases import run_all
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P

EPS = 1e-5


def f64(a):
    return None if a is None else np.asarray(jnp.asarray(a, jnp.float32), np.float64)


def randn(rng, shape, dtype, scale=1.0, shift=0.0):
    return jnp.asarray(rng.standard_normal(shape) * scale + shift, dtype)


def inputs(seed, shape=(8, 6, 96), dtype=jnp.bfloat16, param_dtype=jnp.bfloat16):
    """x, weight, bias, residual, dy, dresidual_out: random, never zeros."""
    rng = np.random.default_rng(seed)
    hidden = shape[-1]
    return (randn(rng, shape, dtype), randn(rng, (hidden,), param_dtype, 0.3, 1.0),
            randn(rng, (hidden,), param_dtype, 0.5), randn(rng, shape, dtype),
            randn(rng, shape, dtype), randn(rng, shape, dtype))  # fmt: skip


def norm_and_vjp(x, weight, bias, residual, zero_centered=False, out_dtype=None):
    """(y, residual_out), and the vjp's (dx, dweight, dbias, dresidual) for (dy, dres)."""

    def f(x, weight, bias, residual):
        return nj.rms_norm(x, weight, EPS, bias=bias, residual=residual,
                           zero_centered=zero_centered, out_dtype=out_dtype)  # fmt: skip

    return jax.vjp(f, x, weight, bias, residual)


def run_norm(x, weight, bias, residual, dy, dres, zero_centered=False, out_dtype=None):
    """One jitted program: the forward's outputs and the backward's gradients."""

    @jax.jit
    def program(x, weight, bias, residual, dy, dres):
        out, vjp = norm_and_vjp(x, weight, bias, residual, zero_centered, out_dtype)
        return out, vjp((dy, dres))

    return program, program(x, weight, bias, residual, dy, dres)


def hlo(program, *args) -> str:
    return program.lower(*args).compile().as_text()


def check_against_reference(outs, x, weight, bias, residual, dy, dres, zero_centered=False):
    (y, residual_out), (dx, dweight, dbias, dresidual) = outs
    s = residual_out
    np.testing.assert_array_equal(
        np.asarray(s, np.float32),
        np.asarray((f64(x) + f64(residual)).astype(jnp.dtype(x.dtype)), np.float32),
    )
    want, _, scale = ref.forward(f64(s), f64(weight), f64(bias), EPS, zero_centered)
    ref.assert_close(f64(y), want, scale, jnp.dtype(y.dtype).name, "y")
    want = ref.backward(f64(dy), f64(s), f64(weight), EPS, zero_centered, f64(dres))
    ref.assert_close(f64(dx), *want["dx"], jnp.dtype(x.dtype).name, "dx")
    ref.assert_close(f64(dresidual), *want["dx"], jnp.dtype(x.dtype).name, "dresidual")
    ref.assert_close(f64(dweight), *want["dweight"], jnp.dtype(weight.dtype).name, "dweight")
    ref.assert_close(f64(dbias), *want["dbias"], jnp.dtype(bias.dtype).name, "dbias")


def spec_of(a) -> tuple:
    spec = tuple(a.sharding.spec)
    return spec + (None,) * (a.ndim - len(spec))


def case_rows_over_one_axis():
    """Rows split over 4 devices: no gather, an all-reduce for dweight/dbias only, the outputs
    keep the rows' sharding, every value within the float64 reference's tolerance, and y, dx
    the same bits as on one device."""
    mesh = jax.make_mesh((4,), ("d",))
    x, w, b, r, dy, dres = inputs(1)
    rows = NamedSharding(mesh, P("d"))
    xs, rs, dys, dress = (jax.device_put(a, rows) for a in (x, r, dy, dres))
    program, outs = run_norm(xs, w, b, rs, dys, dress)
    text = hlo(program, xs, w, b, rs, dys, dress)
    assert "all-gather" not in text, "an operand was gathered"
    assert "all-reduce" in text, "dweight and dbias were not summed over the row shards"
    (y, residual_out), (dx, dweight, dbias, dresidual) = outs
    for name, a in (("y", y), ("residual_out", residual_out), ("dx", dx), ("dresidual", dresidual)):
        assert spec_of(a) == ("d", None, None), f"{name} sharded as {a.sharding.spec}"
    for name, a in (("dweight", dweight), ("dbias", dbias)):
        assert a.sharding.is_fully_replicated, f"{name} sharded as {a.sharding.spec}"
    check_against_reference(outs, x, w, b, r, dy, dres)
    _, one = run_norm(x, w, b, r, dy, dres)
    for name, a, c in (("y", y, one[0][0]), ("dx", dx, one[1][0])):
        np.testing.assert_array_equal(np.asarray(a, np.float32), np.asarray(c, np.float32),
                                      err_msg=name)  # fmt: skip


def case_rows_over_two_axes():
    """Two row axes over a 2x2 mesh, float32 parameters, zero-centered weight, float32 y."""
    mesh = jax.make_mesh((2, 2), ("a", "b"))
    x, w, b, r, dy, dres = inputs(2, param_dtype=jnp.float32)
    w = w - 1  # zero-centered: the weight's offset from 1
    dy = dy.astype(jnp.float32)
    rows = NamedSharding(mesh, P("a", "b"))
    xs, rs, dys, dress = (jax.device_put(a, rows) for a in (x, r, dy, dres))
    program, outs = run_norm(xs, w, b, rs, dys, dress, True, jnp.float32)
    assert "all-gather" not in hlo(program, xs, w, b, rs, dys, dress)
    assert spec_of(outs[0][0]) == ("a", "b", None)
    check_against_reference(outs, x, w, b, r, dy, dres, True)


def case_hidden_sharded():
    """A hidden axis split by the caller is gathered (a row needs all of it): correct values."""
    mesh = jax.make_mesh((4,), ("d",))
    x, w, b, r, dy, dres = inputs(3)
    hidden = NamedSharding(mesh, P(None, None, "d"))
    xs, rs, dys, dress = (jax.device_put(a, hidden) for a in (x, r, dy, dres))
    ws, bs = (jax.device_put(a, NamedSharding(mesh, P("d"))) for a in (w, b))
    _, outs = run_norm(xs, ws, bs, rs, dys, dress)
    check_against_reference(outs, x, w, b, r, dy, dres)


def case_rows_and_hidden_sharded():
    """Rows over one axis and the hidden axis over another: the rows stay split."""
    mesh = jax.make_mesh((2, 2), ("r", "h"))
    x, w, b, r, dy, dres = inputs(4)
    both = NamedSharding(mesh, P("r", None, "h"))
    xs, rs, dys, dress = (jax.device_put(a, both) for a in (x, r, dy, dres))
    _, outs = run_norm(xs, w, b, rs, dys, dress)
    assert spec_of(outs[0][0])[0] == "r", f"y sharded as {outs[0][0].sharding.spec}"
    check_against_reference(outs, x, w, b, r, dy, dres)


def case_no_weight_no_residual():
    """The plain call without parameters or residual: forward and dx only."""
    mesh = jax.make_mesh((4,), ("d",))
    x, _, _, _, dy, _ = inputs(5, shape=(16, 40), dtype=jnp.float16)
    rows = NamedSharding(mesh, P("d"))
    xs, dys = jax.device_put(x, rows), jax.device_put(dy, rows)

    @jax.jit
    def program(x, dy):
        y, vjp = jax.vjp(lambda x: nj.rms_norm(x, None, EPS), x)
        return y, vjp(dy)[0]

    y, dx = program(xs, dys)
    assert "all-" not in hlo(program, xs, dys), "a collective where none is needed"
    want, _, scale = ref.forward(f64(x), None, None, EPS)
    ref.assert_close(f64(y), want, scale, "float16", "y")
    want = ref.backward(f64(dy), f64(x), None, EPS)
    ref.assert_close(f64(dx), *want["dx"], "float16", "dx")


def case_inside_shard_map():
    """Inside shard_map each device calls the kernels on its block; the weight's and the bias's
    gradients come out summed over the devices (invariant, as the parameters are), as jnp's
    would."""
    mesh = jax.make_mesh((4,), ("d",))
    x, w, b, r, dy, dres = inputs(6, shape=(16, 96))

    def block(x, w, b, r, dy, dres):
        out, vjp = norm_and_vjp(x, w, b, r)
        return out, vjp((dy, dres))

    row, rep = P("d"), P()
    program = jax.jit(jax.shard_map(block, mesh=mesh, in_specs=(row, rep, rep, row, row, row),
                                    out_specs=((row, row), (row, rep, rep, row))))  # fmt: skip
    rows = NamedSharding(mesh, row)
    xs, rs, dys, dress = (jax.device_put(a, rows) for a in (x, r, dy, dres))
    check_against_reference(program(xs, w, b, rs, dys, dress), x, w, b, r, dy, dres)


def case_same_bits_twice():
    """Deterministic: the same sharded program twice gives the same bits."""
    mesh = jax.make_mesh((4,), ("d",))
    x, w, b, r, dy, dres = inputs(7)
    rows = NamedSharding(mesh, P("d"))
    args = (jax.device_put(x, rows), w, b, jax.device_put(r, rows), jax.device_put(dy, rows),
            jax.device_put(dres, rows))  # fmt: skip
    program, first = run_norm(*args)
    second = program(*args)
    for a, c in zip(jax.tree.leaves(first), jax.tree.leaves(second)):
        np.testing.assert_array_equal(np.asarray(a, np.float32), np.asarray(c, np.float32))


def case_vmap_under_mesh():
    """vmap over a batch of weights with sharded x still batches (the plain call's rule)."""
    mesh = jax.make_mesh((4,), ("d",))
    x, w, _, _, _, _ = inputs(8, shape=(8, 64))
    ws = jnp.stack([w, w * 2])
    xs = jax.device_put(x, NamedSharding(mesh, P("d")))
    y = jax.jit(jax.vmap(lambda w: nj.rms_norm(xs, w, EPS)))(ws)
    assert y.shape == (2, 8, 64)
    for i in range(2):
        want, _, scale = ref.forward(f64(x), f64(ws[i]), None, EPS)
        ref.assert_close(f64(y[i]), want, scale, "bfloat16", f"y[{i}]")


def case_flax_module():
    """normkit.flax.RMSNorm under jit on rows split over 4 devices: y keeps the rows' sharding,
    the same bits as on one device."""
    from flax import nnx
    from normkit.flax import RMSNorm

    mesh = jax.make_mesh((4,), ("d",))
    x, *_ = inputs(9, shape=(8, 96))
    norm = RMSNorm(96, rngs=nnx.Rngs(0))
    program = jax.jit(lambda x: norm(x))
    xs = jax.device_put(x, NamedSharding(mesh, P("d")))
    y = program(xs)
    assert "all-gather" not in hlo(program, xs)
    assert spec_of(y)[0] == "d", f"y sharded as {y.sharding.spec}"
    np.testing.assert_array_equal(np.asarray(y, np.float32), np.asarray(program(x), np.float32))


def quant_same_as_one_device(x_sharding, shape, seed, **kwargs):
    """rms_norm_quant on x (and residual) placed by x_sharding, against the same call on one
    device: every output the same bits (the modes are row-local; amax is a max). Returns the
    sharded output and the compiled program's HLO."""
    x, w, b, r, _, _ = inputs(seed, shape=shape)
    xs, rs = jax.device_put(x, x_sharding), jax.device_put(r, x_sharding)
    program = jax.jit(lambda x, w, b, r: nj.rms_norm_quant(x, w, EPS, bias=b, residual=r, **kwargs))
    got, want = program(xs, w, b, rs), program(x, w, b, r)
    for name in got._fields:
        a, c = getattr(got, name), getattr(want, name)
        assert (a is None) == (c is None), name
        if a is not None:
            np.testing.assert_array_equal(np.asarray(a.astype(jnp.float32)),
                                          np.asarray(c.astype(jnp.float32)), err_msg=name)  # fmt: skip
    return got, hlo(program, xs, w, b, rs)


def case_quant_token_rows():
    """Per-token FP8 and INT8 with a residual, rows over 4 devices: no gather, no collective,
    y, scales and residual_out split by rows."""
    mesh = jax.make_mesh((4,), ("d",))
    for out_dtype in (jnp.float8_e4m3fn, jnp.int8):
        got, text = quant_same_as_one_device(NamedSharding(mesh, P("d")), (8, 6, 96), 11,
                                             mode="token", out_dtype=out_dtype)  # fmt: skip
        assert "all-" not in text, "a collective where none is needed"
        for name in ("y", "scales", "residual_out"):
            assert spec_of(getattr(got, name))[0] == "d", name


def case_quant_tensor_amax_transposed():
    """Per-tensor e4m3 with amax and y_t, rows over 4 devices: amax is the max over the
    shards (one all-reduce), y_t's columns split as x's rows, no gather."""
    mesh = jax.make_mesh((4,), ("d",))
    got, text = quant_same_as_one_device(NamedSharding(mesh, P("d")), (64, 96), 12, mode="tensor",
                                         scale=jnp.float32(24.0), return_amax=True,
                                         transposed=True)  # fmt: skip
    assert "all-gather" not in text and "all-reduce" in text
    assert spec_of(got.y_t) == (None, "d"), f"y_t sharded as {got.y_t.sharding.spec}"


def case_quant_transposed_two_row_axes():
    """y_t of x split over two row axes: only the first stays split (each device's rows must be
    one block of y_t's columns); the same bits as on one device."""
    mesh = jax.make_mesh((2, 2), ("a", "b"))
    got, _ = quant_same_as_one_device(NamedSharding(mesh, P("a", "b")), (4, 8, 96), 13,
                                      mode="tensor", scale=jnp.float32(8.0), transposed=True)  # fmt: skip
    assert spec_of(got.y_t) == (None, "a"), f"y_t sharded as {got.y_t.sharding.spec}"


def case_quant_mxfp8_two_axes():
    """MXFP8 blocks over a 2x2 mesh of row axes: scales split as the rows."""
    mesh = jax.make_mesh((2, 2), ("a", "b"))
    got, text = quant_same_as_one_device(NamedSharding(mesh, P("a", "b")), (4, 8, 96), 14,
                                         mode="mxfp8")  # fmt: skip
    assert "all-gather" not in text
    assert spec_of(got.scales)[:2] == ("a", "b")


CASES = {name[len("case_"):]: fn for name, fn in sorted(globals().items()) if name.startswith("case_")}


def main(out_path: str, partitioner: str) -> None:
    assert jax.device_count() == 4, f"expected 4 CPU devices, got {jax.devices()}"
    assert partitioner in ("shardy", "gspmd"), partitioner
    jax.config.update("jax_use_shardy_partitioner", partitioner == "shardy")
    with open(out_path, "w") as f:
        json.dump(run_all(CASES), f, indent=1)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
