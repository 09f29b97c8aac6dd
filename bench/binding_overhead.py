#!/usr/bin/env python3
"""Host time per call of normkit.torch next to the bare C API call: what the binding costs.

Columns (microseconds of host time per call, best of --repeats):
  C API       normkit._C.rms_norm_fwd_ptr / rms_norm_bwd_ptr on preallocated outputs with the
              addresses computed once: the C API call itself plus a minimal nanobind call
  _C dlpack   normkit._C.rms_norm_fwd / rms_norm_bwd on preallocated outputs (DLPack import)
  custom op   torch.ops.normkit.rms_norm_fwd (+ its autograd): the path torch.compile uses
  eager       normkit.torch.rms_norm: the eager fast path (python/normkit/torch/_eager.py)
  torch       torch.nn.functional.rms_norm, for scale (no residual or bias there)
and the overhead of the custom op and of the eager path over the C API column.

Rows: forward with nothing requiring grad; forward with x and weight requiring grad (the
autograd graph is built and dropped); forward + backward (torch.autograd.grad of y with a given
dy, for x and weight), each without and with a fused residual; the backward alone
(autograd.grad on a retained graph, as bench/compare.py times a backward; the custom op column
calls torch.ops.normkit.rms_norm_bwd directly, as a compiled graph does). A backward includes what
torch's autograd engine costs for any custom function; the row "autograd alone" times an
autograd.Function that does nothing, run the same way, as that floor.

Quantized forward rows (--quant, on by default): per-tensor fp8 e4m3 with amax (a float32 scale
on the device), and per-token fp8 e4m3. Their columns: C API = _C.rms_norm_fwd_quant_ptr (when
the build has it), _C dlpack = _C.rms_norm_fwd_quant, custom op =
torch.ops.normkit.rms_norm_fwd_quant, eager = normkit.torch.rms_norm_quant (its eager fast
path, which skips the custom op, unless normkit.torch._eager.enabled is False).

Timing: each callable runs --iters times in a loop between two clock reads; on CUDA the loop is
not synchronized (so the figure is host time, not kernel time: keep --iters below the launch
queue depth) and the device is synchronized between repeats. Callables are interleaved within
each repeat so they see the same machine load. Use a tiny shape (the default 1 x 64) so the
kernel itself costs next to nothing.

Usage:  python bench/binding_overhead.py                  # auto: cuda when torch sees a GPU
        python bench/binding_overhead.py --device cpu --hidden 4096 --dtype float32
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from torch_device import resolve_device  # noqa: E402

import normkit.torch as nt  # noqa: E402
from normkit import _C  # noqa: E402

NK_DTYPE = {torch.float32: 0, torch.float16: 1, torch.bfloat16: 2}
EPS = 1e-6


def stream_of(device):
    return torch.cuda.current_stream(device).cuda_stream if device.type == "cuda" else 0


def make_inputs(device, dtype, rows, hidden):
    gen = torch.Generator().manual_seed(0)

    def randn(*shape, grad=False):
        t = torch.randn(*shape, generator=gen).to(device, dtype)
        return t.requires_grad_(grad)

    return {
        "x": randn(rows, hidden),
        "w": randn(hidden),
        "r": randn(rows, hidden),
        "xg": randn(rows, hidden, grad=True),
        "wg": randn(hidden, grad=True),
        "rg": randn(rows, hidden, grad=True),
        "dy": randn(rows, hidden),
    }


def raw_calls(device, dtype, rows, hidden, t):
    """Closures over _C's pointer entry points with everything allocated up front."""
    backend = 1 if device.type == "cuda" else 0
    stream = stream_of(device)
    code = NK_DTYPE[dtype]

    def empty(*shape, dt=dtype):
        return torch.empty(*shape, dtype=dt, device=device)

    y, ro, dx, dw = empty(rows, hidden), empty(rows, hidden), empty(rows, hidden), empty(hidden)
    rstd = empty(rows, dt=torch.float32)
    ws_bytes = _C.rms_norm_bwd_workspace_size_ptr(backend, rows, hidden, True, False)
    ws = empty(max(ws_bytes, 1), dt=torch.uint8)
    x, w, r, dy = (t[k].data_ptr() for k in ("x", "w", "r", "dy"))
    y_p, ro_p, rstd_p, dx_p, dw_p, ws_p = (a.data_ptr() for a in (y, ro, rstd, dx, dw, ws))
    fwd, bwd = _C.rms_norm_fwd_ptr, _C.rms_norm_bwd_ptr

    def f(res, want_rstd):
        fwd(backend, stream, rows, hidden, x, code, 0, r if res else 0, 0, ro_p if res else 0,
            w, 0, code, y_p, code, rstd_p if want_rstd else 0, EPS, False)

    def b(res):
        bwd(backend, stream, rows, hidden, dy, code, 0, ro_p if res else x, code, 0, rstd_p, w,
            code, False, dy if res else 0, 0, dx_p, dw_p, 0, ws_p, ws_bytes)

    # The closures hold addresses only: keep the outputs alive as long as they are.
    f.outputs = b.outputs = (y, ro, dx, dw, ws, rstd)
    f(True, True)  # fill residual_out and rstd once, so the backward reads real values
    dl_kw = {"weight": t["w"], "rstd": rstd, "eps": EPS, "stream": stream}
    return {
        "fwd": (lambda: f(False, False)),
        "fwd_res": (lambda: f(True, False)),
        "fwd_grad": (lambda: f(False, True)),
        "fwd_grad_res": (lambda: f(True, True)),
        "fwd_bwd": (lambda: (f(False, True), b(False))),
        "fwd_bwd_res": (lambda: (f(True, True), b(True))),
        "bwd": (lambda: b(False)),
        "dlpack_fwd": (lambda: _C.rms_norm_fwd(t["x"], y, **dl_kw)),
        "dlpack_fwd_res": (
            lambda: _C.rms_norm_fwd(t["x"], y, residual=t["r"], residual_out=ro, **dl_kw)
        ),
    }


class NoOp(torch.autograd.Function):
    """The autograd floor: a Function with one output that computes nothing."""

    @staticmethod
    def forward(ctx, x, w):
        return torch.empty_like(x)

    @staticmethod
    def backward(ctx, dy):
        return dy, None


def quant_cases(device, dtype, rows, hidden, t):
    """Per-tensor e4m3 + amax and per-token e4m3: the raw call, DLPack, the op, rms_norm_quant."""
    backend = 1 if device.type == "cuda" else 0
    stream = stream_of(device)
    code = NK_DTYPE[dtype]
    x, w = t["x"], t["w"]
    e4m3 = torch.float8_e4m3fn
    scale = torch.tensor([8.0], device=device)
    y = torch.empty(rows, hidden, dtype=torch.uint8, device=device)
    amax = torch.empty(1, dtype=torch.float32, device=device)
    scales = torch.empty(rows, dtype=torch.float32, device=device)
    op = torch.ops.normkit.rms_norm_fwd_quant
    ptr = getattr(_C, "rms_norm_fwd_quant_ptr", None)
    out = []
    for name, mode, mode_code, extra in (
        ("quant tensor e4m3 + amax", "tensor", 1, dict(scale=scale, amax=amax)),
        ("quant token e4m3", "token", 2, dict(scales=scales)),
    ):
        fns = {}
        if ptr is not None:
            x_p, w_p, y_p = x.data_ptr(), w.data_ptr(), y.data_ptr()
            s_p = scale.data_ptr() if mode == "tensor" else 0
            a_p = amax.data_ptr() if mode == "tensor" else 0
            sc_p = scales.data_ptr() if mode == "token" else 0

            def raw(mode_code=mode_code, s_p=s_p, a_p=a_p, sc_p=sc_p, x_p=x_p, w_p=w_p, y_p=y_p):
                ptr(backend, stream, rows, hidden, x_p, code, 0, 0, 0, 0, w_p, 0, code, y_p, 3,
                    mode_code, s_p, 0.0, sc_p, a_p, 0, 0, EPS, False)

            fns["C API"] = raw
        fns["_C dlpack"] = (lambda extra=extra, mode=mode: _C.rms_norm_fwd_quant(
            x, y, y_dtype="float8_e4m3", mode=mode, weight=w, eps=EPS, stream=stream, **extra))
        want_amax = mode == "tensor"
        sc = scale if mode == "tensor" else None
        fns["custom op"] = (lambda mode=mode, sc=sc, want_amax=want_amax: op(
            x, w, None, None, sc, EPS, False, mode, e4m3, 0.0, 0, want_amax, False))
        fns["eager"] = (lambda mode=mode, sc=sc, want_amax=want_amax: nt.rms_norm_quant(
            x, w, EPS, mode=mode, scale=sc, return_amax=want_amax))
        out.append((name, fns))
    return out


def cases(device, dtype, rows, hidden, quant=True):
    t = make_inputs(device, dtype, rows, hidden)
    raw = raw_calls(device, dtype, rows, hidden, t)
    op = torch.ops.normkit.rms_norm_fwd
    x, w, r, xg, wg, rg, dy = (t[k] for k in ("x", "w", "r", "xg", "wg", "rg", "dy"))
    grad = torch.autograd.grad
    tf = torch.nn.functional.rms_norm
    shape = (hidden,)

    def op_res(a, b, c):
        return op(a, b, None, c, EPS, False, None)[:2]

    # "backward alone": graphs built once and retained (as bench/compare.py times a backward);
    # the op row is the backward op by itself, as a compiled graph calls it.
    bwd_op = torch.ops.normkit.rms_norm_bwd
    rstd = op(x, w, None, None, EPS, False, None)[2]
    y_eager = nt.rms_norm(xg, wg, EPS)
    y_torch = tf(xg, shape, wg, EPS)

    return [
        ("forward", {
            "C API": raw["fwd"], "_C dlpack": raw["dlpack_fwd"],
            "custom op": lambda: op(x, w, None, None, EPS, False, None),
            "eager": lambda: nt.rms_norm(x, w, EPS),
            "torch": lambda: tf(x, shape, w, EPS)}),
        ("forward, residual", {
            "C API": raw["fwd_res"], "_C dlpack": raw["dlpack_fwd_res"],
            "custom op": lambda: op_res(x, w, r),
            "eager": lambda: nt.rms_norm(x, w, EPS, residual=r)}),
        ("forward (requires grad)", {
            "C API": raw["fwd_grad"],
            "custom op": lambda: op(xg, wg, None, None, EPS, False, None),
            "eager": lambda: nt.rms_norm(xg, wg, EPS),
            "torch": lambda: tf(xg, shape, wg, EPS)}),
        ("forward (requires grad), residual", {
            "C API": raw["fwd_grad_res"],
            "custom op": lambda: op_res(xg, wg, rg),
            "eager": lambda: nt.rms_norm(xg, wg, EPS, residual=rg)}),
        ("forward + backward", {
            "C API": raw["fwd_bwd"],
            "custom op": lambda: grad(op(xg, wg, None, None, EPS, False, None)[0], (xg, wg), dy),
            "eager": lambda: grad(nt.rms_norm(xg, wg, EPS), (xg, wg), dy),
            "torch": lambda: grad(tf(xg, shape, wg, EPS), (xg, wg), dy)}),
        ("forward + backward, residual", {
            "C API": raw["fwd_bwd_res"],
            "custom op": lambda: grad(op_res(xg, wg, rg), (xg, wg, rg), (dy, dy)),
            "eager": lambda: grad(nt.rms_norm(xg, wg, EPS, residual=rg), (xg, wg, rg), (dy, dy))}),
        ("backward alone", {
            "C API": raw["bwd"],
            "custom op": lambda: bwd_op(dy, x, rstd, w, None, False, True, False, dtype),
            "eager": lambda: grad(y_eager, (xg, wg), dy, retain_graph=True),
            "torch": lambda: grad(y_torch, (xg, wg), dy, retain_graph=True)}),
        ("autograd alone (no-op Function)", {
            "eager": lambda: grad(NoOp.apply(xg, wg), (xg,), dy)}),
    ] + (quant_cases(device, dtype, rows, hidden, t) if quant else [])


def time_case(fns, device, iters, repeats, warmup):
    """Best per-call host time (us) of each callable, interleaved within each repeat."""
    sync = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)
    for fn in fns.values():
        for _ in range(warmup):
            fn()
    sync()
    best = dict.fromkeys(fns, float("inf"))
    clock = time.perf_counter
    for _ in range(repeats):
        for name, fn in fns.items():
            t0 = clock()
            for _ in range(iters):
                fn()
            t1 = clock()
            sync()
            best[name] = min(best[name], (t1 - t0) / iters * 1e6)
    return best


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--device", default="auto", help="auto, cpu, cuda or cuda:N")
    p.add_argument("--rows", type=int, default=1)
    p.add_argument("--hidden", type=int, default=64)
    p.add_argument("--dtype", default="bfloat16", choices=["float32", "float16", "bfloat16"])
    p.add_argument("--iters", type=int, default=200, help="calls per timed loop")
    p.add_argument("--repeats", type=int, default=50, help="timed loops per callable (best is kept)")
    p.add_argument("--warmup", type=int, default=50)
    p.add_argument("--no-quant", dest="quant", action="store_false",
                   help="leave out the quantized forward rows")
    p.add_argument("--only-quant", action="store_true", help="the quantized forward rows only")
    p.add_argument("--dlpack", action="store_true",
                   help="the custom ops' implementations take their DLPack call "
                   "(normkit.torch._ops.raw_pointer_calls = False): the raw-pointer calls' before")
    args = p.parse_args()
    device = resolve_device(args.device, p)
    dtype = getattr(torch, args.dtype)
    if args.dlpack:
        from normkit.torch import _ops

        _ops.raw_pointer_calls = False
    torch.set_num_threads(1)  # a tiny shape: torch's CPU ops stay on the calling thread anyway

    where = torch.cuda.get_device_name(device) if device.type == "cuda" else "CPU"
    print(f"normkit binding overhead: {where}, torch {torch.__version__}, normkit {_C.version()}")
    print(f"x [{args.rows}, {args.hidden}] {args.dtype}, weight {args.dtype}; host us per call, "
          f"best of {args.repeats} x {args.iters} calls"
          + ("; the ops' DLPack calls (--dlpack)" if args.dlpack else ""))
    if device.type == "cpu" and "NK_CPU_THREADS" not in os.environ:
        print("note: without NK_CPU_THREADS the CPU backend asks the OS for the CPU count on "
              "every call (a few syscalls), in every column alike")
    cols = ["C API", "_C dlpack", "custom op", "eager", "torch"]
    print(f"{'case':36s}" + "".join(f"{c:>11s}" for c in cols) + f"{'op - C':>9s}{'eager - C':>11s}")
    all_cases = cases(device, dtype, args.rows, args.hidden, args.quant or args.only_quant)
    if args.only_quant:
        all_cases = [c for c in all_cases if c[0].startswith("quant")]
    for name, fns in all_cases:
        t = time_case(fns, device, args.iters, args.repeats, args.warmup)
        cells = "".join(f"{t[c]:11.2f}" if c in t else f"{'':11s}" for c in cols)
        over = ""
        if "C API" in t and "custom op" in t:
            over = f"{t['custom op'] - t['C API']:9.2f}{t['eager'] - t['C API']:11.2f}"
        print(f"{name:36s}{cells}{over}", flush=True)


if __name__ == "__main__":
    main()
