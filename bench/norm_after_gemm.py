#!/usr/bin/env python3
"""What a norm's forward costs right after a GEMM, as a transformer layer runs it.

`normkit bench` and bench/compare.py time the norm right after an L2 flush, as PEERS.md does.
In a model the norm follows a GEMM (the attention output or the MLP's down projection): a
kernel that holds most of each SM's shared memory. Per shape and implementation this times,
with CUDA events around the norm alone, the norm after
  flush  an L2 flush (256 MiB zeroed), as the sweep does;
  gemm   the flush, then a GEMM on other tensors (the norm's x still in HBM only);
  into   the flush, then a GEMM that writes the norm's x (part of x then in L2, as in a model).
If normkit's `gemm` column exceeds its `flush` column by more than the peers' do, following a
GEMM costs normkit something the peers do not pay: an SM's switch between shared memory and L1
is one candidate (NK_TUNE_SMEM_CARVEOUT; docs/notes.md, thirty-fifth session). Each timing: 10
warm-up samples, then the median of --reps, every sample enqueued before one synchronize.

Usage: python bench/norm_after_gemm.py [--json out.json] [--reps 100] [--shapes 1x4096,...]
           [--impls normkit,torch_compile] [--settings flush] [--lead-us 300]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics

import torch

from compare import demote_l2, hf_composite, parse_shapes

DEFAULT_SHAPES = "1x4096,128x4096,4096x1024,8192x2048,4096x4096,8192x4096"
IMPLS = ["normkit", "torch_eager", "torch_compile"]
SETTINGS = ["flush", "gemm", "into"]
EPS = 1e-6
WARMUP = 10


def norm_fn(name: str, hidden: int):
    """The forward of implementation `name` as f(x, w) -> y."""
    if name == "normkit":
        import normkit.torch as nk

        return lambda x, w: nk.rms_norm(x, w, EPS)
    if name == "torch_eager":
        return lambda x, w: torch.nn.functional.rms_norm(x, (hidden,), w, EPS)
    if name == "torch_compile":
        torch._dynamo.reset()  # a kernel specialized to each shape, as bench/compare.py does
        return torch.compile(hf_composite(EPS), dynamic=False)
    raise ValueError(name)


def time_after(norm, x, w, before, flush, reps: int, lead_cycles: int = 0) -> float:
    """Median µs of norm(x, w) between CUDA events, each sample after flush and before()
    (x and w demoted before each flush, for every implementation alike).

    lead_cycles > 0 queues a GPU spin of that many cycles after the flush, so that the GPU
    stays behind the host even where one call's host time (torch.compile's guards and
    launcher) exceeds the flush's GPU time: otherwise the start event fires while the host is
    still launching, and the events time the host.
    """
    events = []
    for _ in range(WARMUP + reps):
        demote_l2((x, w))  # (normkit's evict-last x would outlive the flush)
        flush.zero_()
        if lead_cycles:
            torch.cuda._sleep(lead_cycles)
        before()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        norm(x, w)
        end.record()
        events.append((start, end))
    torch.cuda.synchronize()
    return statistics.median(s.elapsed_time(e) * 1e3 for s, e in events[WARMUP:])


def measure_shape(rows: int, hidden: int, reps: int, flush, impls=IMPLS,
                  settings=SETTINGS, lead_cycles: int = 0) -> dict:
    """{impl: {setting: µs}} for one shape; the GEMMs are (rows, hidden) @ (hidden, hidden)."""
    dev = flush.device
    g = torch.Generator(device=dev).manual_seed(rows * 65537 + hidden)
    x = torch.randn(rows, hidden, device=dev, dtype=torch.bfloat16, generator=g)
    w = 1 + 0.1 * torch.randn(hidden, device=dev, dtype=torch.bfloat16, generator=g)
    a = torch.randn(rows, hidden, device=dev, dtype=torch.bfloat16, generator=g)
    b = torch.randn(hidden, hidden, device=dev, dtype=torch.bfloat16, generator=g) / hidden**0.5
    other = torch.empty_like(x)
    before = {
        "flush": lambda: None,
        "gemm": lambda: torch.matmul(a, b, out=other),
        "into": lambda: torch.matmul(a, b, out=x),
    }
    result = {}
    for impl in impls:
        norm = norm_fn(impl, hidden)
        norm(x, w)  # (torch.compile compiles here)
        result[impl] = {s: time_after(norm, x, w, before[s], flush, reps, lead_cycles)
                        for s in settings}
    return result


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--json", help="write the results here")
    p.add_argument("--reps", type=int, default=100)
    p.add_argument("--shapes", default=DEFAULT_SHAPES, help="ROWSxHIDDEN items or shape sets")
    p.add_argument("--impls", default=",".join(IMPLS), help="of " + ",".join(IMPLS))
    p.add_argument("--settings", default=",".join(SETTINGS), help="of " + ",".join(SETTINGS))
    p.add_argument("--lead-us", type=float, default=0.0,
                   help="GPU spin after each flush, µs at 1.98 GHz (0: none; see time_after)")
    args = p.parse_args()
    impls, settings = args.impls.split(","), args.settings.split(",")
    tuned = " ".join(f"{k}={v}" for k, v in sorted(os.environ.items()) if k.startswith("NK_TUNE_"))
    flush = torch.empty(256 << 20, dtype=torch.uint8, device="cuda")
    carveout = os.environ.get("NK_TUNE_SMEM_CARVEOUT", "default")
    print(f"GPU {torch.cuda.get_device_name()}; tuning: {tuned or 'defaults'}; "
          f"median of {args.reps}; GPU lead {args.lead_us:g} µs; "
          f"µs of the norm after: {' / '.join(settings)}")
    print("| rows × hidden | " + " | ".join(impls) + " |")
    print("|---|" + "---|" * len(impls))
    rows_out = []
    for rows, hidden in parse_shapes(args.shapes):
        r = measure_shape(rows, hidden, args.reps, flush, impls, settings,
                          int(args.lead_us * 1980))
        rows_out.append({"rows": rows, "hidden": hidden, "us": r})
        cells = [" / ".join(f"{r[i][s]:.2f}" for s in settings) for i in impls]
        print(f"| {rows}×{hidden} | " + " | ".join(cells) + " |", flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"gpu": torch.cuda.get_device_name(), "smem_carveout": carveout,
                       "tuning": tuned, "reps": args.reps, "settings": settings,
                       "lead_us": args.lead_us,
                       "shapes": rows_out}, f, indent=1)


if __name__ == "__main__":
    main()
