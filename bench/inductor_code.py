#!/usr/bin/env python3
"""Writes the Triton code that torch.compile generates for the Hugging Face LlamaRMSNorm
composite (the peer that bench/compare.py times), for given shapes, so that its kernels' shape
(loops, blocks) and cache hints can be read next to ours.

Usage: python3 bench/inductor_code.py --out DIR [--shapes 8192x8192,32768x8192]
Needs torch with CUDA. One file per shape: DIR/inductor_<rows>x<hidden>.py, every module that
the first call compiles (AOTAutograd compiles the backward's kernels with the forward's, for an
input that requires grad).
"""
import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import torch  # noqa: E402
from torch._inductor.utils import run_and_get_code  # noqa: E402

from compare import hf_composite  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--shapes", default="8192x8192,32768x8192,4096x1024")
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    torch._dynamo.config.cache_size_limit = 64
    for shape in args.shapes.split(","):
        rows, hidden = (int(v) for v in shape.split("x"))
        x = torch.randn(rows, hidden, device="cuda", dtype=torch.bfloat16, requires_grad=True)
        w = (1 + 0.1 * torch.randn(hidden, device="cuda")).to(torch.bfloat16).requires_grad_()
        f = torch.compile(hf_composite(1e-6), dynamic=False)
        _, code = run_and_get_code(f, x, w)
        path = os.path.join(args.out, f"inductor_{shape}.py")
        with open(path, "w") as fh:
            fh.write("\n\n# ----- next module -----\n\n".join(code))
        print(f"{path}: {len(code)} modules, {sum(len(c) for c in code)} characters")
        torch._dynamo.reset()
    return 0


if __name__ == "__main__":
    sys.exit(main())
