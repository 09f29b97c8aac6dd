"""Float64 reference for RMSNorm forward and backward, and the tolerance the tests allow.

Everything here is NumPy float64. Inputs are the exact values the kernel saw (already rounded to
their dtypes); with a residual, pass s = round_to_x_dtype(x + residual), which is what the
kernel normalizes.

Tolerance: the kernels compute in float32 and round once to the output dtype, so an element may
be off by up to `ULPS` units in the last place of its output dtype (rounding, with slack for
float32 reductions seen through a coarse output dtype) plus a float32 compute error relative to
the size of the terms that produced it (`scale`), which matters where terms cancel.
"""

from __future__ import annotations

import numpy as np

ULPS = 2
F32_COMPUTE_REL = 1e-5  # float32 arithmetic over up to ~65K-element reductions

# (explicit mantissa bits, smallest normal exponent) per output dtype name.
_FORMATS = {"float32": (23, -126), "float16": (10, -14), "bfloat16": (7, -126)}


def ulp(values: np.ndarray, dtype_name: str) -> np.ndarray:
    """Spacing of `dtype_name` numbers at |values| (subnormal spacing below the normal range)."""
    mant, emin = _FORMATS[dtype_name]
    mag = np.maximum(np.abs(values), 2.0**emin)
    return np.exp2(np.floor(np.log2(mag)) - mant)


def tolerance(ref: np.ndarray, scale: np.ndarray, dtype_name: str) -> np.ndarray:
    return ULPS * ulp(ref, dtype_name) + F32_COMPUTE_REL * np.abs(scale)


def assert_close(actual, ref, scale, dtype_name: str, what: str) -> None:
    actual = np.asarray(actual, dtype=np.float64)
    ref = np.asarray(ref, dtype=np.float64)
    assert actual.shape == ref.shape, f"{what}: shape {actual.shape}, expected {ref.shape}"
    assert np.all(np.isfinite(actual)), f"{what}: non-finite values (unwritten or overflow)"
    tol = tolerance(ref, np.broadcast_to(scale, ref.shape), dtype_name)
    err = np.abs(actual - ref)
    bad = err > tol
    if bad.any():
        i = np.unravel_index(np.argmax(err - tol), err.shape)
        raise AssertionError(
            f"{what} ({dtype_name}): {int(bad.sum())} of {bad.size} elements out of tolerance; "
            f"worst at {i}: got {actual[i]!r}, expected {ref[i]!r}, tolerance {tol[i]:.3g}"
        )


def effective_weight(weight, hidden: int, zero_centered: bool) -> np.ndarray:
    w = np.ones(hidden) if weight is None else np.asarray(weight, np.float64)
    return (1.0 + w) if (zero_centered and weight is not None) else w


def forward(s, weight=None, bias=None, eps=1e-6, zero_centered=False):
    """(y, rstd, scale): y over the last axis of s, and the magnitude of its terms."""
    s = np.asarray(s, np.float64)
    hidden = s.shape[-1]
    rstd = 1.0 / np.sqrt(np.mean(s * s, axis=-1, keepdims=True) + eps)
    w = effective_weight(weight, hidden, zero_centered)
    scaled = s * rstd * w
    y, scale = scaled, np.abs(scaled)
    if bias is not None:
        b = np.asarray(bias, np.float64)
        y = scaled + b
        scale = scale + np.abs(b)
    return y, rstd[..., 0], scale


def backward(dy, s, weight=None, eps=1e-6, zero_centered=False, dresidual_out=None):
    """dx, dweight, dbias of forward(), each with the magnitude of its terms, as a dict of
    name -> (value, scale). Leading axes of s are rows."""
    s = np.asarray(s, np.float64)
    dy = np.asarray(dy, np.float64)
    hidden = s.shape[-1]
    s2 = s.reshape(-1, hidden)
    dy2 = dy.reshape(-1, hidden)
    rstd = 1.0 / np.sqrt(np.mean(s2 * s2, axis=1, keepdims=True) + eps)
    xhat = s2 * rstd
    w = effective_weight(weight, hidden, zero_centered)
    g = dy2 * w
    mean_gx = np.mean(g * xhat, axis=1, keepdims=True)
    dx = rstd * (g - xhat * mean_gx)
    dx_scale = rstd * (np.abs(g) + np.abs(xhat) * np.mean(np.abs(g * xhat), axis=1, keepdims=True))
    if dresidual_out is not None:
        dr = np.asarray(dresidual_out, np.float64).reshape(-1, hidden)
        dx = dx + dr
        dx_scale = dx_scale + np.abs(dr)
    return {
        "dx": (dx.reshape(s.shape), dx_scale.reshape(s.shape)),
        "dweight": ((dy2 * xhat).sum(0), np.abs(dy2 * xhat).sum(0)),
        "dbias": (dy2.sum(0), np.abs(dy2).sum(0)),
    }
