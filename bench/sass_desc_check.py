#!/usr/bin/env python3
"""Checks compiled CUDA objects for memory descriptors read from uniform registers that nothing
in the function writes.

Why: ptxas of CUDA 13.0 compiled a kernel (a pipelined quantized forward held at a 64-register
bound with spills, twenty-fifth session, docs/notes.md) whose cache-hinted cp.async in its row
loop read its L2 policy as `desc[UR1]` and its shared address offset from UR0, registers no
instruction of the kernel set. On the H100 it stopped with "illegal instruction" from a CTA's
second row on. The GPU tests only catch such code where a test reaches it; this reads every
function's SASS instead.

A flagged instruction names a descriptor register (desc[URn]) that is odd (64-bit pairs are
even) or never the destination of a uniform-register instruction of the same function.

Usage: bench/sass_desc_check.py OBJECT.o ... (cuobjdump from PATH, $CUOBJDUMP, or
/usr/local/cuda/bin). Exit status 1 if anything is flagged, 2 if cuobjdump is missing.
"""
import os
import re
import shutil
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor

FUNCTION = re.compile(r"^\s+Function : (\S+)")
INSTRUCTION = re.compile(r"^\s+/\*[0-9a-f]{4,}\*/\s+(?:@!?U?P\w+\s+)?([A-Z0-9_.]+)\s*(.*?)\s*;")
DESCRIPTOR = re.compile(r"desc\[UR(\d+)\]")
UNIFORM = re.compile(r"UR(\d+)")
# Opcodes that write a uniform register as their first operand.
WRITES_UNIFORM = ("U", "R2UR", "S2UR", "REDUX", "VOTEU", "LDCU")


def cuobjdump():
    found = os.environ.get("CUOBJDUMP") or shutil.which("cuobjdump")
    if not found and os.path.exists("/usr/local/cuda/bin/cuobjdump"):
        found = "/usr/local/cuda/bin/cuobjdump"
    return found


def flagged_in(function, instructions):
    """(function, opcode, operands) of each descriptor read of an unset or odd register."""
    written = set()
    for opcode, operands in instructions:
        first = UNIFORM.fullmatch(operands.split(",")[0].strip())
        if first and opcode.startswith(WRITES_UNIFORM):
            n = int(first.group(1))
            written.add(n)
            if ".64" in opcode:
                written.add(n + 1)
    out = []
    for opcode, operands in instructions:
        for n in map(int, DESCRIPTOR.findall(operands)):
            if n % 2 or n not in written:
                out.append((function, opcode, operands))
    return out


def scan(tool, path):
    """(functions read, flagged instructions) of one object file."""
    run = subprocess.run([tool, "-sass", path], capture_output=True, text=True)
    if run.returncode != 0:
        if "does not contain device code" in run.stderr:
            return 0, []
        raise SystemExit(f"sass_desc_check: cuobjdump -sass {path}: {run.stderr.strip()}")
    sass = run.stdout
    functions, flagged = 0, []
    name, instructions = None, []
    for line in sass.splitlines() + ["\tFunction : (end)"]:  # (a sentinel closes the last one)
        start = FUNCTION.match(line)
        if start:
            if name:
                flagged += flagged_in(name, instructions)
            name, instructions = start.group(1), []
            functions += 1
            continue
        m = INSTRUCTION.match(line)
        if m and name:
            instructions.append((m.group(1), m.group(2)))
    return functions - 1, flagged


def main(paths):
    tool = cuobjdump()
    if not tool:
        print("sass_desc_check: no cuobjdump (PATH, $CUOBJDUMP or /usr/local/cuda/bin)",
              file=sys.stderr)
        return 2
    total, bad = 0, 0
    # cuobjdump takes most of the time (~12 s for a 10 MB object): one per core at once.
    with ThreadPoolExecutor(max_workers=os.cpu_count() or 1) as pool:
        results = list(pool.map(lambda path: scan(tool, path), paths))
    for path, (functions, flagged) in zip(paths, results):
        total += functions
        for function, opcode, operands in flagged:
            print(f"{path}: {function}: {opcode} {operands}")
        bad += len(flagged)
    print(f"sass_desc_check: {total} functions in {len(paths)} objects, "
          f"{bad} descriptor reads of unset or odd uniform registers", file=sys.stderr)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
