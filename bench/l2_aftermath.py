#!/usr/bin/env python3
"""Does normkit's forward leave L2 in a state that slows the kernel after it?

normkit reads x through L2 as evict-last (NK_TUNE_EVICT_LAST_MIN_MIB): measured faster for the
norm itself, but those lines outlive the kernel at a priority that the next kernel's data
cannot displace first. This times what a transformer runs next, a GEMM y @ W, right after the
norm that produced y, with the norm done by normkit and by torch's F.rms_norm (normal loads),
and after no norm at all (L2 flushed only). Each sample: L2 flushed (256 MiB zeroed), the norm,
then CUDA events around the GEMM alone; median of --reps. Run it twice, with and without
NK_TUNE_EVICT_LAST_MIN_MIB=0 (read once per process), to compare normkit with itself.

Usage: python bench/l2_aftermath.py [--json out.json] [--reps 50]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics

import torch
import torch.nn.functional as F

# (rows, hidden, GEMM output columns): x and W of a few tens of MB, as one layer's tokens.
SHAPES = [(8192, 4096, 4096), (4096, 4096, 4096), (16384, 4096, 1024), (4096, 8192, 1024)]


def gemm_after(norm, x, w, weight, flush, reps):
    """Median µs of y @ weight timed alone, after flushing L2 and running norm(x, w)."""
    times = []
    for i in range(reps + 5):
        flush.zero_()
        y = norm(x, w) if norm else x
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        torch.matmul(y, weight)
        end.record()
        end.synchronize()
        if i >= 5:  # warm-up
            times.append(start.elapsed_time(end) * 1e3)
    return statistics.median(times)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--json", help="write the results here")
    p.add_argument("--reps", type=int, default=50)
    args = p.parse_args()
    import normkit.torch as nk

    dev = torch.device("cuda")
    flush = torch.empty(256 << 20, dtype=torch.uint8, device=dev)
    knob = os.environ.get("NK_TUNE_EVICT_LAST_MIN_MIB", "default")
    norms = {
        "none": None,
        "torch": lambda x, w: F.rms_norm(x, (x.shape[-1],), w, 1e-6),
        "normkit": lambda x, w: nk.rms_norm(x, w, 1e-6),
    }
    rows = []
    print(f"GPU {torch.cuda.get_device_name()}; NK_TUNE_EVICT_LAST_MIN_MIB={knob}")
    print("| rows × hidden → out | GEMM after flush µs | after torch norm µs | after normkit µs |")
    print("|---|---|---|---|")
    for m, n, k in SHAPES:
        g = torch.Generator(device=dev).manual_seed(0)
        x = torch.randn(m, n, device=dev, dtype=torch.bfloat16, generator=g)
        w = 1 + 0.1 * torch.randn(n, device=dev, dtype=torch.bfloat16, generator=g)
        weight = torch.randn(n, k, device=dev, dtype=torch.bfloat16, generator=g) / n**0.5
        us = {name: gemm_after(f, x, w, weight, flush, args.reps) for name, f in norms.items()}
        rows.append({"rows": m, "hidden": n, "out": k, "us": us})
        print(f"| {m}×{n} → {k} | {us['none']:.1f} | {us['torch']:.1f} | {us['normkit']:.1f} |")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"gpu": torch.cuda.get_device_name(), "evict_last_min_mib": knob,
                       "reps": args.reps, "shapes": rows}, f, indent=1)


if __name__ == "__main__":
    main()
