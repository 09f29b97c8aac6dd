"""normkit.torch.RMSNorm: a drop-in for torch.nn.RMSNorm."""

from __future__ import annotations

import torch

from normkit.torch._ops import SUPPORTED_DTYPES
from normkit.torch.functional import rms_norm


class RMSNorm(torch.nn.RMSNorm):
    """``torch.nn.RMSNorm`` computed by normkit.

    A subclass, so the constructor, parameters, ``state_dict`` keys, ``repr`` and
    ``isinstance(m, torch.nn.RMSNorm)`` are those of torch; only ``forward`` differs. Inputs
    normkit cannot take (float64, for instance) go to torch's implementation.
    """

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        shape = self.normalized_shape
        weight = self.weight
        # The common case first, with as few tensor queries as possible (host time per call).
        if len(shape) == 1 and x.ndim >= 1 and x.shape[-1] == shape[0]:
            if x.dtype in SUPPORTED_DTYPES and (weight is None or weight.dtype in SUPPORTED_DTYPES):
                return rms_norm(x, weight, self.eps)
            return super().forward(x)
        shape = tuple(shape)
        k = len(shape)
        if x.dim() < k or tuple(x.shape[x.dim() - k :]) != shape:
            raise RuntimeError(
                f"normkit RMSNorm: expected input with trailing shape {shape}, got {tuple(x.shape)}"
            )
        if x.dtype not in SUPPORTED_DTYPES or (weight is not None and weight.dtype not in SUPPORTED_DTYPES):
            return super().forward(x)
        if k == 1:
            return rms_norm(x, weight, self.eps)
        # Several normalized dims: normalize them as one flattened row.
        flat = x.flatten(x.dim() - k)
        y = rms_norm(flat, None if weight is None else weight.flatten(), self.eps)
        return y.unflatten(-1, shape)
