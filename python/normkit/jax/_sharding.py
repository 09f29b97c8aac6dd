"""Sharding rules for normkit's FFI calls: rows stay where they are, the hidden axis is whole.

Under ``jit`` with operands sharded over a mesh, XLA's partitioner knows nothing of a custom
call and would gather every operand onto every device. Each call here is wrapped in
``custom_partitioning`` instead (a Shardy rule, and the same choice for GSPMD where
``jax_use_shardy_partitioner`` is off): it keeps the row (leading) axes' sharding and replicates
the hidden axis (a row's sum of squares needs all of it), so each device normalizes its own
rows with no communication. The backward's dweight and dbias are sums over rows: each device
sums its rows in float32 and a ``psum`` over the mesh axes that split the rows adds the
partials, rounded once to the parameter dtype. A hidden axis sharded by the caller is gathered
first (the partitioner inserts the all-gather). The quantized forward's per-tensor amax is a
max over the row shards; its transposed output y_t ([hidden, rows], rows flattened) keeps only
x's first axis split, so that each device's rows are one block of y_t's columns.

On one device, and inside ``shard_map`` (where every axis is manual), the wrapper lowers to the
plain call: same bits as without it. ``custom_partitioning`` has no vmap rule, so each wrapper
is also a ``custom_vmap`` whose rule batches the plain call (the FFI targets batch by
themselves, ``vmap_method="broadcast_all"``).
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
from jax.experimental.custom_partitioning import custom_partitioning
from jax.sharding import NamedSharding, PartitionSpec

from normkit.jax import _ffi

# Factors of the sharding rules (Shardy's einsum-like strings): "..." the row axes, "h" the
# hidden axis (the quantized forward names its row axes b0, b1, ... instead).
_ROWS = "... h"
_VECTOR = "h"
_RSTD = "..."


def _row_spec(sharding, rank: int) -> tuple:
    """The row axes' part of a sharding's spec (None where unsharded), or all None when the
    sharding is not a NamedSharding (then the rows are gathered: correct, just slower)."""
    spec = tuple(getattr(sharding, "spec", ()))
    spec = spec + (None,) * (rank - len(spec))
    return spec[: rank - 1]


def _mesh_axes(row_spec: tuple) -> tuple:
    """The mesh axis names that split the rows, in spec order."""
    axes = []
    for entry in row_spec:
        if entry is not None:
            axes.extend(entry if isinstance(entry, tuple) else (entry,))
    return tuple(axes)


def _spread(values, *present: bool) -> list:
    """values (those present, in order) spread over the slots of `present`, None in each slot
    that is not: optional operands from a call's arrays, optional results from its outputs."""
    it = iter(values)
    return [next(it) if p else None for p in present]


def _on_one_device(arrays) -> bool:
    """Concrete arrays on one device: an eager call with nothing to partition or batch, which
    the wrappers would only slow down (0.1-0.3 ms per call on this CPU)."""
    return all(not isinstance(a, jax.core.Tracer) and isinstance(a, jax.Array)
               and len(a.sharding.device_set) == 1 for a in arrays)  # fmt: skip


def _partitioned(plain, rule: str, choose, need_replication=("h",)):
    """plain(*arrays) under custom_partitioning with `rule` (the factors need_replication
    whole on every device) and a custom_vmap that batches plain itself.
    choose(mesh, arg_shapes) -> (arg_shardings, result_shardings, lower_fn)."""

    def partition(mesh, arg_shapes, result_shape):
        arg_shardings, result_shardings, lower_fn = choose(mesh, arg_shapes)
        return mesh, lower_fn, result_shardings, arg_shardings

    def infer_sharding_from_operands(mesh, arg_shapes, result_shape):
        return choose(mesh, arg_shapes)[1]  # (GSPMD, where Shardy is turned off)

    sharded = custom_partitioning(plain)
    try:
        sharded.def_partition(partition=partition, sharding_rule=rule,
                              infer_sharding_from_operands=infer_sharding_from_operands,
                              need_replication_factors=need_replication)
    except TypeError:  # a jax older than these rules (tested: 0.11): the plain call, unsharded
        return plain

    @jax.custom_batching.custom_vmap
    def call(*arrays):
        return sharded(*arrays)

    @call.def_vmap
    def _batched(axis_size, in_batched, *arrays):
        del axis_size
        out = jax.vmap(plain, in_axes=tuple(0 if b else None for b in in_batched))(*arrays)
        return out, jax.tree.map(lambda _: True, out)

    return lambda *arrays: plain(*arrays) if _on_one_device(arrays) else call(*arrays)


@functools.lru_cache(maxsize=256)
def _fwd(eps: float, zero_centered: bool, out_dtype, has_residual: bool, has_weight: bool,
         has_bias: bool):  # fmt: skip
    """The forward on present operands (x, [residual], [weight], [bias]) -> (y, [residual_out],
    rstd), partitioned by rows."""

    def plain(x, *rest):
        residual, weight, bias = _spread(rest, has_residual, has_weight, has_bias)
        y, residual_out, rstd = _ffi.fwd_call(x, weight, bias, residual, eps, zero_centered, out_dtype)
        return (y, residual_out, rstd) if has_residual else (y, rstd)

    operands = [_ROWS] + [_ROWS] * has_residual + [_VECTOR] * (has_weight + has_bias)
    results = [_ROWS] + [_ROWS] * has_residual + [_RSTD]
    rule = ", ".join(operands) + " -> " + ", ".join(results)

    def choose(mesh, arg_shapes):
        rank = len(arg_shapes[0].shape)
        rows = _row_spec(arg_shapes[0].sharding, rank)
        row = NamedSharding(mesh, PartitionSpec(*rows, None))
        vector = NamedSharding(mesh, PartitionSpec(None))
        args = [row] + [row] * has_residual + [vector] * (has_weight + has_bias)
        out = [row] + [row] * has_residual + [NamedSharding(mesh, PartitionSpec(*rows))]
        return tuple(args), tuple(out), plain

    return _partitioned(plain, rule, choose)


@functools.lru_cache(maxsize=256)
def _bwd(zero_centered: bool, want_dbias: bool, param_dtype, has_weight: bool,
         has_dresidual: bool, manual_sums: tuple):  # fmt: skip
    """The backward on present operands (dy, s, rstd, [weight], [dresidual_out]) -> (dx,
    [dweight], [dbias]), partitioned by rows: dweight and dbias summed over the row shards.
    manual_sums: per parameter gradient, the manual axes (inside shard_map) its rows vary over
    and its parameter does not, over which it is summed too."""

    def call_ffi(arrays, dtype):
        dy, s, rstd, *rest = arrays
        weight, dresidual_out = _spread(rest, has_weight, has_dresidual)
        dx, dweight, dbias = _ffi.bwd_call(
            dy, s, rstd, weight, dresidual_out, zero_centered, want_dbias, dtype
        )
        return (dx,) + ((dweight,) if has_weight else ()) + ((dbias,) if want_dbias else ())

    def summed(arrays, mesh_axes: tuple):
        """dweight and dbias as float32 partial sums over this device's rows, added over
        mesh_axes (and manual_sums), rounded once to param_dtype. float32 parameters give the
        same dx: the kernels compute in float32."""
        arrays = list(arrays)
        if has_weight:
            arrays[3] = arrays[3].astype(jnp.float32)
        dx, *sums = call_ffi(arrays, jnp.float32)
        sums = [jax.lax.psum(v, tuple(dict.fromkeys(mesh_axes + manual))) if mesh_axes + manual else v
                for v, manual in zip(sums, manual_sums)]  # fmt: skip
        return (dx, *(v.astype(param_dtype) for v in sums))

    def plain(*arrays):
        if any(manual_sums):
            return summed(arrays, ())
        return call_ffi(arrays, param_dtype)

    operands = [_ROWS, _ROWS, _RSTD] + [_VECTOR] * has_weight + [_ROWS] * has_dresidual
    results = [_ROWS] + [_VECTOR] * (has_weight + want_dbias)
    rule = ", ".join(operands) + " -> " + ", ".join(results)

    def choose(mesh, arg_shapes):
        rank = len(arg_shapes[0].shape)
        rows = _row_spec(arg_shapes[1].sharding, rank)  # s: x, or x + residual
        axes = _mesh_axes(rows)
        row = NamedSharding(mesh, PartitionSpec(*rows, None))
        vector = NamedSharding(mesh, PartitionSpec(None))
        rstd = NamedSharding(mesh, PartitionSpec(*rows))
        args = [row, row, rstd] + [vector] * has_weight + [row] * has_dresidual
        out = [row] + [vector] * (has_weight + want_dbias)
        if not axes:  # rows whole on every device: the plain call
            return tuple(args), tuple(out), plain
        return tuple(args), tuple(out), lambda *arrays: summed(arrays, axes)

    return _partitioned(plain, rule, choose)


@functools.lru_cache(maxsize=256)
def _fwd_quant(eps: float, zero_centered: bool, mode: str, out_dtype, scale_ub: float, block: int,
               want_amax: bool, transposed: bool, columns: int, scales_dtype, has_residual: bool,
               has_weight: bool, has_bias: bool, has_scale: bool, rank: int):  # fmt: skip
    """The quantized forward on present operands (x, [residual], [weight], [bias], [scale]) ->
    (y, [scales], [amax], [y_t], [residual_out]), partitioned by rows: amax is the max over the
    row shards; with y_t ([hidden, rows], rows flattened) only x's first axis stays split, so
    that each device's rows are one block of y_t's columns."""

    def plain(x, *rest):
        residual, weight, bias, scale = _spread(rest, has_residual, has_weight, has_bias, has_scale)
        y, scales, amax, y_t, residual_out = _ffi.fwd_quant_call(
            x, weight, bias, residual, scale, eps, zero_centered, mode, out_dtype, scale_ub,
            block, want_amax, transposed, _ffi.quant_scales_shape(x.shape, columns), scales_dtype,
        )  # fmt: skip
        present = ((y, True), (scales, bool(columns)), (amax, want_amax), (y_t, transposed),
                   (residual_out, has_residual))  # fmt: skip
        return tuple(a for a, kept in present if kept)

    def rule(rank: int) -> str:
        # Row axes named (b0 b1 ...) so that y_t's columns can be their product, in order.
        batch = " ".join(f"b{i}" for i in range(rank - 1))
        rows = f"{batch} h".strip()
        y_t = f"h ({batch})" if rank > 2 else (f"h {batch}" if rank == 2 else "h t")  # t: 1 row
        operands = [rows] * (1 + has_residual) + ["h"] * (has_weight + has_bias) + ["s"] * has_scale
        results = ([rows] + [f"{batch} c".strip()] * bool(columns) + ["k"] * want_amax
                   + [y_t] * transposed + [rows] * has_residual)  # fmt: skip
        return ", ".join(operands) + " -> " + ", ".join(results)

    def choose(mesh, arg_shapes):
        rows = _row_spec(arg_shapes[0].sharding, rank)
        if transposed and rows:
            rows = rows[:1] + (None,) * (len(rows) - 1)
        axes = _mesh_axes(rows)
        spec = lambda *s: NamedSharding(mesh, PartitionSpec(*s))
        row, whole = spec(*rows, None), spec(None)
        args = [row] + [row] * has_residual + [whole] * (has_weight + has_bias + has_scale)
        out = ([row] + [row] * bool(columns) + [whole] * want_amax
               + [spec(None, rows[0] if rows else None)] * transposed + [row] * has_residual)  # fmt: skip
        if not (axes and want_amax):
            return tuple(args), tuple(out), plain

        def lower_fn(*arrays):
            outs = list(plain(*arrays))
            where = 1 + bool(columns)  # amax's place among the results
            outs[where] = jax.lax.pmax(outs[where], axes)
            return tuple(outs)

        return tuple(args), tuple(out), lower_fn

    return _partitioned(plain, rule(rank), choose, need_replication=("h",) + ("c",) * bool(columns))


def fwd_call(x, weight, bias, residual, eps: float, zero_centered: bool, out_dtype):
    """_ffi.fwd_call's (y, residual_out, rstd), residual_out None without residual,
    partitioned by rows under a mesh."""
    present = [a for a in (residual, weight, bias) if a is not None]
    call = _fwd(eps, zero_centered, jnp.dtype(out_dtype), residual is not None, weight is not None,
                bias is not None)  # fmt: skip
    return tuple(_spread(call(x, *present), True, residual is not None, True))


def bwd_call(dy, s, rstd, weight, dresidual_out, zero_centered: bool, want_dbias: bool, param_dtype,
             bias_axes: tuple = ()):  # fmt: skip
    """_ffi.bwd_call's results (dweight None without weight, dbias None unless wanted),
    partitioned by rows under a mesh. Inside shard_map, dweight and dbias are summed over the
    manual axes the rows vary over and weight (bias: bias_axes) does not, as the gradient of a
    parameter shared by those devices must be."""
    rows = set(_ffi.varying_axes(dy, s, rstd, *(() if dresidual_out is None else (dresidual_out,))))
    manual_sums = ()
    if weight is not None:
        manual_sums += (tuple(sorted(rows - set(_ffi.varying_axes(weight)))),)
    if want_dbias:
        manual_sums += (tuple(sorted(rows - set(bias_axes))),)
    present = [a for a in (weight, dresidual_out) if a is not None]
    call = _bwd(zero_centered, want_dbias, jnp.dtype(param_dtype), weight is not None,
                dresidual_out is not None, manual_sums)  # fmt: skip
    dx, dweight, dbias = _spread(call(dy, s, rstd, *present), True, weight is not None, want_dbias)
    return dx, dweight, dbias


def fwd_quant_call(
    x, weight, bias, residual, scale, eps: float, zero_centered: bool, mode: str, out_dtype,
    scale_ub: float, block: int, want_amax: bool, transposed: bool, columns: int, scales_dtype,
):  # fmt: skip
    """_ffi.fwd_quant_call's (y, scales, amax, y_t, residual_out), the ones the call does not
    produce None, partitioned by rows under a mesh; columns: the row columns one scale covers
    (0: no scales)."""
    present = [a for a in (residual, weight, bias, scale) if a is not None]
    call = _fwd_quant(eps, zero_centered, mode, jnp.dtype(out_dtype), scale_ub, block, want_amax,
                      transposed, columns, jnp.dtype(scales_dtype), residual is not None,
                      weight is not None, bias is not None, scale is not None, x.ndim)  # fmt: skip
    return tuple(_spread(call(x, *present), True, bool(columns), want_amax, transposed,
                         residual is not None))  # fmt: skip
