"""Cases and checks shared by the quantized-forward tests of normkit.torch and normkit.jax.

A case is (mode, code dtype name, block); each has a hidden size its blocks need and a hidden
size that is awkward for it (a multiple of its block but of no larger block). The check runs
the float64 reference of nk_quant_reference on the exact inputs the kernel saw and judges every
output the call returned.
"""

from __future__ import annotations

import nk_quant_reference as qref
import nk_reference as ref
import numpy as np

# (mode, y code dtype name, block or None)
MODE_CASES = [
    ("tensor", "float8_e4m3", None),
    ("tensor", "float8_e5m2", None),
    ("tensor", "int8", None),
    ("token", "float8_e4m3", None),
    ("token", "float8_e5m2", None),
    ("token", "int8", None),
    ("block", "float8_e4m3", 32),
    ("block", "float8_e5m2", 64),
    ("block", "float8_e4m3", 128),
    ("block", "float8_e5m2", None),  # default block: 128
    ("mxfp8", "float8_e4m3", None),
    ("mxfp8", "float8_e5m2", None),
]


def case_id(case) -> str:
    mode, name, block = case
    return f"{mode}{block or ''}-{name.replace('float8_', '')}"


def awkward_hidden(case) -> int:
    """A hidden size the mode accepts that is no multiple of any larger block."""
    mode, _, block = case
    if mode in ("tensor", "token"):
        return 71
    return {32: 96, 64: 192, 128: 384, None: 384 if mode == "block" else 160}[block]


# Forward options: (weight, bias, residual, zero_centered)
CONFIGS = {
    "plain": (True, False, False, False),
    "no_weight": (False, False, False, False),
    "bias": (True, True, False, False),
    "residual": (True, False, True, False),
    "gemma_residual": (True, False, True, True),
}


def v_of(s, weight, bias, eps, zero_centered):
    """Float64 v of the forward for the normalized input s ([..., hidden] float64 arrays)."""
    v, _, _ = ref.forward(s, weight, bias, eps, zero_centered)
    return v


def tensor_scale(v, name: str, factor: float) -> np.float32:
    """A per-tensor scale mapping the tensor's amax to factor * qmax (factor > 1 saturates)."""
    return np.float32(factor * qref.QMAX[name] / max(float(np.abs(v).max()), 1e-30))


def check(case, v, *, y_values, y_bytes, scales=None, amax=None, y_t_bytes=None, scale=None,
          scale_ub=0.0, what=""):  # fmt: skip
    """Every output of one call against the reference; returns the comparison.

    y_values: float64 values of y's codes as the framework converts them; y_bytes / y_t_bytes:
    the raw bytes of y ([..., hidden]) and y_t ([hidden, rows]) as uint8 arrays.
    """
    mode, name, block = case
    hidden = v.shape[-1]
    r = qref.reference(v, mode, name, scale=scale, scale_ub=scale_ub, block=block)
    c = qref.assert_quant_matches(
        r, qref.code_values(y_values, name), scales=scales, amax=amax,
        v_tol=qref.v_tolerance(hidden), what=what,
    )  # fmt: skip
    if y_t_bytes is not None:
        want = np.asarray(y_bytes).reshape(-1, hidden).T
        assert np.array_equal(np.asarray(y_t_bytes), want), f"{what}: y_t is not y transposed"
    return c
