"""Float64 reference of the quantized forward and the comparison rule, in NumPy.

The reference applies the rules of ``nk_quant_mode`` (include/normkit/normkit.h) to the float64
v of ``nk_reference.forward``: group maxima and scales from v, t = v * multiplier, and Q(t) from
the formats' definitions. The comparison is the C++ one (src/reference/quant_reference.h,
QuantComparison), restated:

- a code is exact when its value equals Q(t) (+0 == -0);
- a boundary mismatch when it lies between Q(t - delta) and Q(t + delta), delta bounding the
  backend's float32 error in t (its error in v, plus 3 roundings in a dynamic multiplier);
  those where the float64 t is within 8 float32 ulps of a rounding midpoint are counted as
  ties and always accepted, the others at most 4 + elements / 1000 per call;
- wrong otherwise (NaN, Inf, int8 -128, unwritten poison included).

Float32 scales must be within their float32 error of the float64 ones; an e8m0 byte must be
the reference's, or one off where the block amax is within its float32 error of the power of
two between the two exponents (that block's codes are then judged with the backend's
exponent); amax within the float32 error of v.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

QMAX = {"float8_e4m3": 448.0, "float8_e5m2": 57344.0, "int8": 127.0}
# (explicit mantissa bits, exponent of the smallest normal, MX emax) per FP8 format.
_FP8 = {"float8_e4m3": (3, -6, 8), "float8_e5m2": (2, -14, 15)}
FLT_MIN = 2.0**-126
ULP32 = 2.0**-24  # float32 unit roundoff
TIE_WIDTH = 8 * ULP32


def _ilogb(a):
    """floor(log2 a) for a > 0, exactly (frexp, not log2, which may round up below 2^k)."""
    return np.frexp(a)[1] - 1


def quantize(t, name: str) -> np.ndarray:
    """Q(t): round to nearest even in `name` and saturate to [-qmax, qmax]; NaN stays NaN for
    FP8 and becomes 0 for int8."""
    t = np.asarray(t, np.float64)
    qmax = QMAX[name]
    a = np.abs(t)
    if name == "int8":
        q = np.where(np.isnan(t), 0.0, np.rint(t))  # rint: ties to even
    else:
        mant, emin, _ = _FP8[name]
        exponent = np.maximum(_ilogb(np.where(a > 0, a, 1.0)), emin)
        step = np.exp2((exponent - mant).astype(np.float64))
        # a / step is exact (a power of two); a carry into the next binade stays on the grid.
        q = np.where(a == 0, t, np.copysign(np.rint(a / step) * step, t))
    return np.where(a >= qmax, np.copysign(qmax, t), q)


def v_tolerance(hidden: int) -> float:
    """Relative bound on the float32 v (the C++ tolerance_for(NK_FLOAT32, ..., hidden))."""
    return 1.125 * 2.0**-24 + 2.0**-24 * (1024.0 + 16.0 * np.sqrt(max(hidden, 1)))


def scale_columns(mode: str, block, hidden: int) -> int:
    """Columns one scale covers: hidden (tensor: one group per row; token) or the block."""
    if mode in ("tensor", "token"):
        return hidden
    return 32 if mode == "mxfp8" else (block or 128)


@dataclass
class QuantRef:
    """The float64 quantized forward of one call. Group arrays are [rows, hidden / columns]."""

    mode: str
    name: str  # y's code dtype: "float8_e4m3", "float8_e5m2" or "int8"
    columns: int
    v: np.ndarray  # [rows, hidden] unquantized float64 output
    group_amax: np.ndarray
    multiplier: np.ndarray  # tensor: scale; token/block: 1 / scale; mxfp8: 2^-e
    scales: np.ndarray  # token/block: the float64 scale; mxfp8: 2^e; tensor: scale
    exponents: np.ndarray | None  # mxfp8: e per block (byte e + 127)
    amax: float

    @property
    def t(self) -> np.ndarray:
        return self.v * np.repeat(self.multiplier, self.columns, axis=1)

    @property
    def q(self) -> np.ndarray:
        """The values of the expected codes, [rows, hidden]."""
        return quantize(self.t, self.name)


def reference(v, mode: str, name: str, *, scale=None, scale_ub=0.0, block=None) -> QuantRef:
    """Quantizes the float64 v ([..., hidden]) as `mode` would, into `name` codes."""
    hidden = v.shape[-1]
    v = np.asarray(v, np.float64).reshape(-1, hidden)
    rows = v.shape[0]
    columns = scale_columns(mode, block, hidden)
    assert hidden % columns == 0, "the reference needs hidden to be a multiple of the block"
    group_amax = np.abs(v).reshape(rows, hidden // columns, columns).max(axis=-1)
    qmax = QMAX[name]
    exponents = None
    if mode == "tensor":
        scales = np.full_like(group_amax, float(scale))
        multiplier = scales
    elif mode == "mxfp8":
        emax = _FP8[name][2]
        exponents = np.where(
            group_amax > 0, np.clip(_ilogb(np.where(group_amax > 0, group_amax, 1.0)) - emax, -127, 127), -127
        )
        scales = np.exp2(exponents.astype(np.float64))
        multiplier = np.exp2(-exponents.astype(np.float64))
    else:
        ub = float(scale_ub) if scale_ub else np.inf
        scales = np.maximum(np.minimum(group_amax / qmax, ub), FLT_MIN)
        multiplier = 1.0 / scales
    return QuantRef(mode, name, columns, v, group_amax, multiplier, scales, exponents,
                    float(group_amax.max()))  # fmt: skip


def _index(i) -> list:
    return [int(k) for k in i]


def code_values(values, name: str) -> np.ndarray:
    """Float64 values of a backend's codes, with NaN for codes Q never produces (NaN, Inf,
    int8 -128): they then compare as wrong. `values` are the codes converted by the framework."""
    values = np.asarray(values, np.float64)
    bad = ~np.isfinite(values)
    if name == "int8":
        bad |= values == -128
    return np.where(bad, np.nan, values)


@dataclass
class QuantComparison:
    elements: int = 0
    exact: int = 0
    ties: int = 0
    boundary: int = 0
    wrong: int = 0
    boundary_limit: int = 0
    scales_wrong: int = 0
    scale_boundary: int = 0
    amax_error: float = 0.0  # |actual - expected| / allowed (<= 1 passes); 0 when not given
    first_problem: str = ""

    @property
    def passed(self) -> bool:
        return (
            self.wrong == 0
            and self.boundary <= self.boundary_limit
            and self.scales_wrong == 0
            and self.amax_error <= 1.0
        )

    def describe(self) -> str:
        return (
            f"{'ok' if self.passed else 'MISMATCH'}: {self.elements} codes: {self.exact} exact, "
            f"{self.ties} at ties, {self.boundary} boundary (limit {self.boundary_limit}), "
            f"{self.wrong} wrong; {self.scales_wrong} scales wrong, {self.scale_boundary} e8m0 "
            f"boundary; amax error {self.amax_error:.3g} of allowed"
            + (f"; first: {self.first_problem}" if self.first_problem else "")
        )


def compare(ref: QuantRef, y_values, *, scales=None, amax=None, v_tol: float) -> QuantComparison:
    """Judges a backend's outputs: `y_values` the float64 values of its codes (code_values),
    `scales` its scales (float32 values, or e8m0 bytes for mxfp8; ignored for tensor), `amax`
    its amax (None: not checked). v_tol is v_tolerance(hidden)."""
    c = QuantComparison()
    v = ref.v
    rows, hidden = v.shape
    qmax = QMAX[ref.name]
    floor = 1e-2 * max(np.sqrt(np.mean(v * v)), 1e-30)

    def v_error(x):
        return v_tol * (np.abs(x) + floor)

    multiplier = ref.multiplier.copy()
    scale_error = v_error(ref.group_amax) / qmax + 3.0 * ULP32 * ref.scales
    if ref.mode == "mxfp8":
        byte = np.asarray(scales).reshape(ref.exponents.shape).astype(np.int64)
        e_act = byte - 127
        emax = _FP8[ref.name][2]
        boundary = np.exp2(np.maximum(ref.exponents, e_act).astype(np.float64) + emax)
        one_off = (byte != 255) & (np.abs(e_act - ref.exponents) == 1)
        one_off &= np.abs(ref.group_amax - boundary) <= v_error(ref.group_amax)
        wrong = (e_act != ref.exponents) & ~one_off
        c.scale_boundary = int(one_off.sum())
        c.scales_wrong = int(wrong.sum())
        multiplier = np.where(one_off, np.exp2(-e_act.astype(np.float64)), multiplier)
        if wrong.any():
            g = np.unravel_index(np.argmax(wrong), wrong.shape)
            c.first_problem = (
                f"scale byte {_index(g)} is {int(byte[g])}; expected {int(ref.exponents[g]) + 127}"
            )
    elif ref.mode in ("token", "block"):
        s = np.asarray(scales, np.float64).reshape(ref.scales.shape)
        err = np.abs(s - ref.scales) / scale_error
        wrong = ~(err <= 1.0)
        c.scales_wrong = int(wrong.sum())
        if wrong.any():
            g = np.unravel_index(np.argmax(wrong), wrong.shape)
            c.first_problem = f"scale {_index(g)} is {float(s[g])!r}; expected {float(ref.scales[g])!r}"

    if ref.mode in ("token", "block"):
        multiplier_error = scale_error / ref.scales + 2.0 * ULP32
    else:
        multiplier_error = np.full_like(multiplier, ULP32)
    m = np.repeat(multiplier, ref.columns, axis=1)
    m_err = np.repeat(multiplier_error, ref.columns, axis=1)
    t = v * m
    expected = quantize(t, ref.name)
    got = np.asarray(y_values, np.float64).reshape(rows, hidden)
    exact = got == expected
    delta = np.abs(m) * v_error(v) + np.abs(t) * m_err
    with np.errstate(invalid="ignore"):
        within = (got >= quantize(t - delta, ref.name)) & (got <= quantize(t + delta, ref.name))
    within &= ~exact
    near = np.abs(t) * TIE_WIDTH
    tie = quantize(t - near, ref.name) != quantize(t + near, ref.name)
    wrong = ~exact & ~within
    c.elements = got.size
    c.exact = int(exact.sum())
    c.ties = int((within & tie).sum())
    c.boundary = int((within & ~tie).sum())
    c.wrong = int(wrong.sum())
    c.boundary_limit = 4 + c.elements // 1000
    if wrong.any() and not c.first_problem:
        i = np.unravel_index(np.argmax(wrong), wrong.shape)
        c.first_problem = (
            f"y{_index(i)} = {float(got[i])!r}; expected {float(expected[i])!r} "
            f"(v {float(v[i])!r} * {float(m[i])!r} = {float(t[i])!r})"
        )
    if c.boundary > c.boundary_limit and not c.first_problem:
        c.first_problem = "too many boundary mismatches"
    if amax is not None:
        a = float(np.asarray(amax, np.float64).reshape(-1)[0])
        err = abs(a - ref.amax) / v_error(ref.amax)
        c.amax_error = float("inf") if np.isnan(err) else float(err)
        if c.amax_error > 1.0 and not c.first_problem:
            c.first_problem = f"amax is {a!r}; expected {ref.amax!r}"
    return c


def assert_quant_matches(ref: QuantRef, y_values, *, scales=None, amax=None, v_tol: float, what=""):
    """compare() and fail with its description unless it passed."""
    c = compare(ref, y_values, scales=scales, amax=amax, v_tol=v_tol)
    assert c.passed, f"{what}: {c.describe()}"
    return c
