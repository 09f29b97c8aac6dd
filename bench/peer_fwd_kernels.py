#!/usr/bin/env python3
"""Runs the torch.compile forward of the Hugging Face RMSNorm composite (the peer that
bench/compare.py times) once per shape between cudaProfilerStart and cudaProfilerStop, after
warm-up and Inductor's autotuning, so that `ncu --profile-from-start off` profiles exactly that
call's kernels and none of the compilation's.

Usage: ncu --profile-from-start off [sections] python3 bench/peer_fwd_kernels.py 131072x128,...
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import torch  # noqa: E402

from compare import hf_composite  # noqa: E402


def main() -> int:
    shapes = sys.argv[1] if len(sys.argv) > 1 else "131072x128,65536x256"
    cudart = torch.cuda.cudart()
    for shape in shapes.split(","):
        rows, hidden = (int(v) for v in shape.split("x"))
        x = torch.randn(rows, hidden, device="cuda", dtype=torch.bfloat16)
        w = (1 + 0.1 * torch.randn(hidden, device="cuda")).to(torch.bfloat16)
        f = torch.compile(hf_composite(1e-6), dynamic=False)
        for _ in range(5):  # compile, autotune, warm up
            f(x, w)
        torch.cuda.synchronize()
        cudart.cudaProfilerStart()
        f(x, w)
        torch.cuda.synchronize()
        cudart.cudaProfilerStop()
        print(f"{shape}: profiled one call", flush=True)
        torch._dynamo.reset()
    return 0


if __name__ == "__main__":
    sys.exit(main())
