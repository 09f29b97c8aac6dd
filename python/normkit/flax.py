"""normkit for Flax: ``RMSNorm``, parameter-compatible with ``flax.nnx.RMSNorm``."""

from __future__ import annotations

import jax.numpy as jnp
from flax import nnx

from normkit.jax import rms_norm
from normkit.jax._ffi import SUPPORTED_DTYPES


def _last_axis_only(axes) -> bool:
    return axes == -1 or tuple(axes) == (-1,) if not isinstance(axes, int) else axes == -1


class RMSNorm(nnx.RMSNorm):
    """``flax.nnx.RMSNorm`` computed by normkit.

    A subclass: the constructor, the ``scale`` parameter, its initialization and the module
    state are flax's, so checkpoints move between the two unchanged. The output dtype follows
    flax (``dtype``, or the promoted dtype of the input and ``scale``). Calls normkit cannot
    serve (a mask, reduction or feature axes other than the last, ``axis_name``, or dtypes other
    than float32/float16/bfloat16) go to flax's implementation.
    """

    def __call__(self, x, mask=None):
        scale = self.scale[...] if self.scale is not None else None
        dtype = (
            jnp.dtype(self.dtype)
            if self.dtype is not None
            else (jnp.result_type(x, scale) if scale is not None else jnp.asarray(x).dtype)
        )
        if (
            mask is not None
            or self.axis_name is not None
            or not _last_axis_only(self.reduction_axes)
            or not _last_axis_only(self.feature_axes)
            or dtype not in SUPPORTED_DTYPES
            or jnp.asarray(x).dtype not in SUPPORTED_DTYPES
            or (scale is not None and scale.dtype not in SUPPORTED_DTYPES)
        ):
            return super().__call__(x, mask)
        if self.dtype is not None:
            # flax casts input and scale to `dtype` before normalizing; do the same.
            x = jnp.asarray(x, dtype)
            scale = None if scale is None else jnp.asarray(scale, dtype)
        return rms_norm(x, scale, self.epsilon, out_dtype=dtype)


__all__ = ["RMSNorm"]
