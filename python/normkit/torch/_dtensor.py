"""DTensor sharding rules for normkit's ops (tensor and sequence parallelism).

A DTensor runs an op only if the op has a sharding strategy. These are normkit's, registered
with ``torch.distributed.tensor.experimental.register_sharding``:

- rows (any leading dimension of x) may be sharded: each rank normalizes its own rows, and
  y, residual_out, rstd, dx and the per-row scales keep that sharding;
- the hidden dimension may not (a row's sum of squares needs all of it): DTensor replicates it
  first;
- weight, bias and a per-tensor scale are replicated;
- dweight and dbias of sharded rows are ``Partial()`` sums, and a per-tensor amax a
  ``Partial("max")``: DTensor reduces them where they are used, as for its own ops;
- a transposed quantized output (y_t) is produced from replicated rows only.

Importing ``torch.distributed.tensor`` takes ~0.4 s, so the rules are registered on first
need: at ``normkit.torch`` import when it is already imported, when ``rms_norm`` or
``rms_norm_quant`` first sees a DTensor, or by ``register_dtensor_sharding()``.
"""

from __future__ import annotations

import sys

import torch

_registered = False


def _row_dims(x) -> range:
    """The dimensions of x that hold rows (every one but the last)."""
    return range(x.ndim - 1)


def _rms_norm_fwd_rule(x, weight, bias, residual, eps, zero_centered, out_dtype):
    from torch.distributed.tensor import Replicate, Shard

    rep = Replicate()

    def strategy(row):
        residual_out = row if residual is not None else rep  # an empty tensor without residual
        outputs = [row, residual_out, row]  # y, residual_out, rstd ([...] of x's rows)
        inputs = [row, rep if weight is not None else None, rep if bias is not None else None,
                  row if residual is not None else None, None, None, None]  # fmt: skip
        return outputs, inputs

    return [strategy(rep)] + [strategy(Shard(d)) for d in _row_dims(x)]


def _rms_norm_bwd_rule(dy, s, rstd, weight, dresidual_out, zero_centered, want_dweight,
                       want_dbias, param_dtype):  # fmt: skip
    from torch.distributed.tensor import Partial, Replicate, Shard

    rep = Replicate()

    def strategy(row, summed):
        outputs = [row, summed if want_dweight else rep, summed if want_dbias else rep]
        inputs = [row, row, row, rep if weight is not None else None,
                  row if dresidual_out is not None else None, None, None, None, None]  # fmt: skip
        return outputs, inputs

    return [strategy(rep, rep)] + [strategy(Shard(d), Partial()) for d in _row_dims(s)]


def _rms_norm_fwd_quant_rule(x, weight, bias, residual, scale, eps, zero_centered, mode,
                             out_dtype, scale_ub, block, want_amax, transposed):  # fmt: skip
    from torch.distributed.tensor import Partial, Replicate, Shard

    rep = Replicate()
    per_row_scales = mode != "tensor"  # token, block, mxfp8: scales [..., k] of x's rows

    def strategy(row, max_over_rows):
        outputs = [row, row if per_row_scales else rep, max_over_rows if want_amax else rep,
                   rep, row if residual is not None else rep]  # y, scales, amax, y_t, residual_out
        inputs = [row, rep if weight is not None else None, rep if bias is not None else None,
                  row if residual is not None else None, rep if scale is not None else None,
                  None, None, None, None, None, None, None, None]  # fmt: skip
        return outputs, inputs

    strategies = [strategy(rep, rep)]
    if not transposed:  # y_t's columns are the flattened rows: those come whole
        strategies += [strategy(Shard(d), Partial("max")) for d in _row_dims(x)]
    return strategies


def register_dtensor_sharding() -> None:
    """Registers normkit's DTensor sharding rules (see this module's docstring); idempotent.
    Raises ImportError where torch.distributed is unavailable."""
    global _registered
    if _registered:
        return
    from torch.distributed.tensor.experimental import register_sharding

    register_sharding(torch.ops.normkit.rms_norm_fwd.default)(_rms_norm_fwd_rule)
    register_sharding(torch.ops.normkit.rms_norm_bwd.default)(_rms_norm_bwd_rule)
    register_sharding(torch.ops.normkit.rms_norm_fwd_quant.default)(_rms_norm_fwd_quant_rule)
    _registered = True


def register_for(*tensors) -> None:
    """Registers the rules when one of tensors is a DTensor (whose module is then imported)."""
    if not _registered and any(type(t).__name__ == "DTensor" for t in tensors if t is not None):
        register_dtensor_sharding()


def register_if_imported() -> None:
    """Registers the rules when torch.distributed.tensor is already imported (no import cost)."""
    if "torch.distributed.tensor" in sys.modules:
        register_dtensor_sharding()
