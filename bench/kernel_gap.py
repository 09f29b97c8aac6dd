#!/usr/bin/env python3
"""Where torch.compile's forward gains on normkit's at small shapes, kernel by kernel.

bench/norm_after_gemm.py (thirty-sixth session) timed torch.compile's Triton forward of the HF
composite 0.4-1.2 µs faster than normkit's at 1×4096, 128×4096 and 4096×1024 in one process
(events around one call after a 256 MiB flush). This runs the same loop (flush, norm) for
each implementation inside a cudaProfilerStart/Stop range, so that
  ncu --profile-from-start off --cache-control none --clock-control none ...
reports every kernel launched in it (the flush's fill kernels too) with the L2 state and clocks
that the events saw: whether the gap lies in the kernels' own durations, their grids and
registers, or between the events and the kernels.

Usage: python bench/kernel_gap.py [--shapes 1x4096,...] [--impls normkit,torch_compile]
                                  [--reps 20]
"""

from __future__ import annotations

import argparse

import torch

from compare import demote_l2, parse_shapes
from norm_after_gemm import norm_fn

DEFAULT_SHAPES = "1x4096,128x4096,4096x1024"
WARMUP = 10


def profile_loop(norm, x, w, flush, reps: int) -> None:
    """reps × (flush, norm) inside the profiler range; warm-up (and compiling) outside it."""
    for _ in range(WARMUP):
        demote_l2((x, w))  # (normkit's evict-last x would outlive the flush)
        flush.zero_()
        norm(x, w)
    torch.cuda.synchronize()
    torch.cuda.profiler.start()
    for _ in range(reps):
        demote_l2((x, w))
        flush.zero_()
        norm(x, w)
    torch.cuda.synchronize()
    torch.cuda.profiler.stop()


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--shapes", default=DEFAULT_SHAPES, help="ROWSxHIDDEN items or shape sets")
    p.add_argument("--impls", default="normkit,torch_compile")
    p.add_argument("--reps", type=int, default=20)
    args = p.parse_args()
    flush = torch.empty(256 << 20, dtype=torch.uint8, device="cuda")
    for rows, hidden in parse_shapes(args.shapes):
        g = torch.Generator(device="cuda").manual_seed(rows * 65537 + hidden)
        x = torch.randn(rows, hidden, device="cuda", dtype=torch.bfloat16, generator=g)
        w = 1 + 0.1 * torch.randn(hidden, device="cuda", dtype=torch.bfloat16, generator=g)
        for impl in args.impls.split(","):
            # (ncu prints its table at exit, in launch order: these lines name the ranges)
            print(f"range {rows}x{hidden} {impl}: {args.reps} x (flush, norm)", flush=True)
            profile_loop(norm_fn(impl, hidden), x, w, flush, args.reps)


if __name__ == "__main__":
    main()
