#!/usr/bin/env python3
"""The quantized forward against torch.compile of the same composite (norm, then quantize).

For each shape and mode, torch.compile (default mode) of the Hugging Face RMSNorm composite
followed by the quantization rule of include/normkit/normkit.h (float32 math):
  tensor      q = clamp(y * scale, -qmax, qmax) -> float8_e4m3fn, and amax = max |y|
  transposed  tensor, plus q.t().contiguous()
  token       s = max(max_j |y| / qmax, FLT_MIN) per row, q = y * (1 / s)
  block       the same per 128 consecutive elements
  mxfp8       e = clamp(floor(log2(max |y| per 32)) - 8, -127, 127), q = y * 2^-e, e8m0 bytes
timed as bench/compare.py times (CUDA events around one call, L2 flushed before each, median),
with the copy bandwidth measured in the same process. normkit's own figures come from
`normkit bench --quant MODE --json F` run in the same device call; pass those files with
--normkit MODE=F to print the speedups.

Usage:  python bench/compare_quant.py --json compare_quant.json \
            --normkit tensor=bench_quant_tensor.json --normkit token=...
"""

from __future__ import annotations

import argparse
import datetime
import json
import sys

import torch
from compare import PEER_SHAPES, Timer, copy_bandwidth, device_name
from torch_device import resolve_device

E4M3_MAX = 448.0
FLT_MIN = torch.finfo(torch.float32).tiny
MODES = ["tensor", "transposed", "token", "block", "mxfp8"]


def normalized(x, w, eps):
    xf = x.float()
    return xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps) * w.float()


def saturate(t):
    return t.clamp(-E4M3_MAX, E4M3_MAX).to(torch.float8_e4m3fn)


def composite(mode, eps):
    """The eager composite of one mode: (x, w, scale) -> outputs."""

    def tensor(x, w, scale):
        y = normalized(x, w, eps)
        return saturate(y * scale), y.abs().amax()

    def transposed(x, w, scale):
        q, amax = tensor(x, w, scale)
        return q, q.t().contiguous(), amax

    def grouped(x, w, group):
        y = normalized(x, w, eps)
        g = y.view(y.shape[0], -1, group)
        s = (g.abs().amax(-1, keepdim=True) / E4M3_MAX).clamp(min=FLT_MIN)
        return saturate(g * s.reciprocal()).view_as(y), s.squeeze(-1)

    def mxfp8(x, w, scale):
        y = normalized(x, w, eps)
        g = y.view(y.shape[0], -1, 32)
        a = g.abs().amax(-1, keepdim=True)
        e = (torch.floor(torch.log2(a)) - 8).clamp(-127, 127)
        e = torch.where(a < FLT_MIN, torch.full_like(e, -127), e)
        q = saturate(g * torch.exp2(-e)).view_as(y)
        return q, (e + 127).to(torch.uint8).squeeze(-1)

    return {
        "tensor": tensor,
        "transposed": transposed,
        "token": lambda x, w, scale: grouped(x, w, x.shape[-1]),
        "block": lambda x, w, scale: grouped(x, w, 128),
        "mxfp8": mxfp8,
    }[mode]


def quant_bytes(mode, rows, hidden, x_size):
    """normkit bench --quant's byte count: x read, codes (and y_t) and scales written, weight."""
    mn = rows * hidden
    extra = {"tensor": 0, "transposed": mn, "token": rows * 4, "block": rows * hidden // 128 * 4,
             "mxfp8": rows * hidden // 32}[mode]
    return mn * (x_size + 1) + hidden * x_size + extra


def load_normkit(specs):
    """{mode: {(rows, hidden): median_us}} from normkit bench --json files."""
    out = {}
    for spec in specs:
        mode, _, path = spec.partition("=")
        with open(path) as f:
            report = json.load(f)
        out[mode] = {(s["rows"], s["hidden"]): s["fwd"]["median_us"]
                     for s in report["shapes"] if "fwd" in s and "median_us" in s.get("fwd", {})}
    return out


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--device", default="auto")
    parser.add_argument("--modes", default=",".join(MODES))
    parser.add_argument("--min-elements", type=int, default=16 << 20,
                        help="shapes of the PEERS.md sweep with at least this many elements")
    parser.add_argument("--normkit", action="append", default=[], metavar="MODE=JSON")
    parser.add_argument("--json")
    args = parser.parse_args(argv)
    device = resolve_device(args.device, parser)
    timer = Timer(device, reps=50)
    copy = copy_bandwidth(device, timer)
    normkit = load_normkit(args.normkit)
    modes = args.modes.split(",")
    shapes = [s for s in PEER_SHAPES if s[0] * s[1] >= args.min_elements]
    eps = 1e-6
    results = []
    print(f"device: {device_name(device)}; copy {copy['gbps']:.1f} GB/s; timing: {timer.events_method()}")
    print(f"{'mode':<11} {'shape':<11} {'compile us':>10} {'GB/s':>7} {'%copy':>6} {'normkit us':>10} {'%copy':>6} {'speedup':>7}")
    for rows, hidden in shapes:
        gen = torch.Generator(device=device).manual_seed(rows * 131 + hidden)
        x = (torch.rand(rows, hidden, generator=gen, device=device) * 4 - 2).to(torch.bfloat16)
        w = (1 + 0.2 * torch.rand(hidden, generator=gen, device=device) - 0.1).to(torch.bfloat16)
        scale = torch.ones((), device=device)
        for mode in modes:
            fn = torch.compile(composite(mode, eps))
            fn(x, w, scale)  # compile outside the timing
            us = timer.events(lambda: fn(x, w, scale))
            nbytes = quant_bytes(mode, rows, hidden, 2)
            gbps = nbytes / us / 1e3
            nk_us = normkit.get(mode, {}).get((rows, hidden))
            row = {"mode": mode, "rows": rows, "hidden": hidden, "bytes": nbytes,
                   "compile_us": us, "compile_percent_of_copy": 100 * gbps / copy["gbps"]}
            nk_cells = f"{'-':>10} {'-':>6} {'-':>7}"
            if nk_us:
                nk_pct = 100 * nbytes / nk_us / 1e3 / copy["gbps"]
                row.update(normkit_us=nk_us, normkit_percent_of_copy=nk_pct, speedup=us / nk_us)
                nk_cells = f"{nk_us:>10.1f} {nk_pct:>5.1f}% {us / nk_us:>6.2f}x"
            results.append(row)
            print(f"{mode:<11} {rows}x{hidden:<6} {us:>10.1f} {gbps:>7.0f} {row['compile_percent_of_copy']:>5.1f}% {nk_cells}",
                  flush=True)
            del fn
            torch._dynamo.reset()
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"tool": "bench/compare_quant.py", "device": device_name(device),
                       "date_utc": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
                       "command": " ".join(sys.argv), "copy": copy, "timing": timer.events_method(),
                       "x_dtype": "bf16", "y_dtype": "e4m3", "results": results}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
