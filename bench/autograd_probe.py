#!/usr/bin/env python3
"""Where normkit.torch's autograd backward spends its time, against the registered op called
directly: per shape, the do_bench time of each (as bench/compare.py times them), the host time
per call (no synchronization in between), and the kernels one autograd backward launches
(torch.profiler, CUDA time per kernel).

Usage:  python bench/autograd_probe.py --shapes 16384x1152,8192x2304,2048x128
"""
import argparse
import time

import torch
from triton.testing import do_bench

import normkit.torch as nk


def host_us(fn, calls=200):
    fn()
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(calls):
        fn()
    host = (time.perf_counter() - t0) / calls
    torch.cuda.synchronize()
    return 1e6 * host


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--shapes", default="16384x1152,8192x2304,16384x896,2048x128,8192x5120")
    args = p.parse_args()
    for item in args.shapes.split(","):
        rows, hidden = (int(v) for v in item.split("x"))
        x = torch.randn(rows, hidden, device="cuda", dtype=torch.bfloat16)
        w = (1 + 0.1 * torch.randn(hidden, device="cuda")).to(torch.bfloat16)
        dy = torch.randn_like(x)
        xg = x.clone().requires_grad_(True)
        wg = w.clone().requires_grad_(True)
        y = nk.rms_norm(xg, wg, 1e-6)
        _, _, rstd = torch.ops.normkit.rms_norm_fwd(x, w, None, None, 1e-6, False, None)

        def autograd():
            return torch.autograd.grad(y, (xg, wg), dy, retain_graph=True)

        def op():
            return torch.ops.normkit.rms_norm_bwd(dy, x, rstd, w, None, False, True, False, w.dtype)

        def eager_graph():
            return torch.autograd.grad(ye, (xg, wg), dy, retain_graph=True)

        ye = torch.nn.functional.rms_norm(xg, (hidden,), wg, 1e-6)
        a_dx, a_dw = autograd()
        o_dx, o_dw, _ = op()
        same = torch.equal(a_dx, o_dx) and torch.equal(a_dw, o_dw)
        line = [f"{item}: same bits {same}"]
        for name, fn in (("autograd", autograd), ("op", op), ("eager autograd", eager_graph)):
            line.append(f"{name} do_bench {1e3 * do_bench(fn, warmup=25, rep=100, return_mode='median'):.1f} us"
                        ","
                        f" host {host_us(fn):.1f} us/call")
        print("; ".join(line), flush=True)
        with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU,
                                                torch.profiler.ProfilerActivity.CUDA]) as prof:
            for _ in range(3):
                autograd()
            torch.cuda.synchronize()
        print(prof.key_averages().table(sort_by="cuda_time_total", row_limit=12), flush=True)


if __name__ == "__main__":
    main()
