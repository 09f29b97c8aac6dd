#!/usr/bin/env python3
"""Host time per call of normkit.torch.rms_norm's autograd, next to torch's own and a no-op.

For tiny shapes the kernels take next to nothing, so what is left is Python, dispatcher,
allocator and C API overhead: the time the host spends before it can issue the next call.
Per shape and dtype, microseconds per call (median of --repeats runs of --calls calls each,
no synchronization in between, gc off while timing) of:

  fwd   y = f(x, w) with x and w requiring grad (builds the autograd node)
  bwd   torch.autograd.grad(y, (x, w), dy, retain_graph=True)

for f = normkit.torch.rms_norm ("normkit"), torch.nn.functional.rms_norm ("torch"), and an
autograd.Function that allocates y and whose backward hands back dy and a ready tensor for w
("noop": what autograd itself costs). "c api" is normkit's backward without autograd
(_eager.op_bwd: argument checks, allocations and the raw-pointer C API call).

Usage:  python bench/host_overhead.py [--device cpu|cuda] [--shapes 1x8,4x64] [--dtypes bf16,fp32]
"""

import argparse
import gc
import statistics
import time

import torch

import normkit.torch as nk
from normkit.torch import _eager

DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}
EPS = 1e-6


class _Noop(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, w, w_grad):
        ctx.w_grad = w_grad  # made beforehand, so that the backward allocates nothing
        return torch.empty_like(x)

    @staticmethod
    def backward(ctx, dy):
        return dy, ctx.w_grad, None


def host_us(fn, calls, repeats, sync):
    """Median over repeats of the host microseconds per call."""
    fn()
    sync()
    runs = []
    gc.disable()
    try:
        for _ in range(repeats):
            t0 = time.perf_counter()
            for _ in range(calls):
                fn()
            runs.append((time.perf_counter() - t0) / calls)
            sync()
    finally:
        gc.enable()
    return 1e6 * statistics.median(runs)


def bench_case(rows, hidden, dtype, device, timer):
    """[(path, fwd us or None, bwd us)] for one shape and dtype."""
    x = torch.randn(rows, hidden, device=device, dtype=dtype).requires_grad_(True)
    w = (1 + 0.1 * torch.randn(hidden, device=device)).to(dtype).requires_grad_(True)
    dy = torch.randn(rows, hidden, device=device, dtype=dtype)
    w_grad = torch.zeros_like(w)
    paths = {
        "normkit": lambda: nk.rms_norm(x, w, EPS),
        "torch": lambda: torch.nn.functional.rms_norm(x, (hidden,), w, EPS),
        "noop": lambda: _Noop.apply(x, w, w_grad),
    }
    out = []
    for name, f in paths.items():
        y = f()
        out.append((name, timer(f), timer(lambda y=y: torch.autograd.grad(y, (x, w), dy, retain_graph=True))))
    y = nk.rms_norm(x, w, EPS)  # (held: its node frees the saved tensors when it goes)
    s, rstd, weight = y.grad_fn.saved_tensors
    out.append(
        ("c api", None, timer(lambda: _eager.op_bwd(dy, s, rstd, weight, None, False, True, False, dtype)))
    )
    return out


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--device", default="cpu", choices=("cpu", "cuda"))
    p.add_argument("--shapes", default="1x8,4x64")
    p.add_argument("--dtypes", default="bf16,fp32")
    p.add_argument("--calls", type=int, default=2000)
    p.add_argument("--repeats", type=int, default=15)
    args = p.parse_args()
    sync = torch.cuda.synchronize if args.device == "cuda" else (lambda: None)

    def timer(fn):
        return host_us(fn, args.calls, args.repeats, sync)

    print(
        f"torch {torch.__version__}, device {args.device}, {torch.get_num_threads()} threads; "
        f"host us/call, median of {args.repeats} x {args.calls} calls"
    )
    print(f"{'shape':>10} {'dtype':>5} {'path':>8} {'fwd':>8} {'bwd':>8}")
    for item in args.shapes.split(","):
        rows, hidden = (int(v) for v in item.split("x"))
        for dname in args.dtypes.split(","):
            for name, fwd, bwd in bench_case(rows, hidden, DTYPES[dname], args.device, timer):
                fwd = "" if fwd is None else f"{fwd:.2f}"
                print(f"{item:>10} {dname:>5} {name:>8} {fwd:>8} {bwd:8.2f}", flush=True)


if __name__ == "__main__":
    main()
