#!/usr/bin/env python3
"""Side by side: the median µs of several `normkit bench --json` runs of the same shapes (an A/B
of NK_TUNE_* knobs, or two builds), with each run's ratio to the first.

Usage: bench/ab.py A.json B.json [C.json ...]
Each run is labelled by its NK_TUNE_* knobs (recorded by normkit bench) or else its file name.
"""
import json
import os
import sys


def label(run, path):
    knobs = run.get("config", {}).get("tuning", {})
    if knobs:
        return " ".join(f"{k.removeprefix('NK_TUNE_')}={v}" for k, v in sorted(knobs.items()))
    return os.path.basename(path)


def medians(run):
    """{(rows, hidden, pass): median µs} of the shapes that were measured."""
    out = {}
    for shape in run["shapes"]:
        for name in ("fwd", "bwd"):
            timing = shape.get(name)
            if timing:
                out[(shape["rows"], shape["hidden"], name)] = timing["median_us"]
    return out


def main(paths):
    if len(paths) < 2:
        sys.exit(__doc__)
    runs = [json.load(open(p)) for p in paths]
    tables = [medians(r) for r in runs]
    for i, (run, path) in enumerate(zip(runs, paths)):
        print(f"{chr(ord('A') + i)}: {label(run, path)} ({run['device']}, {run['date_utc']}, "
              f"copy {run['copy']['gbps']:.0f} GB/s)")
    names = [chr(ord("A") + i) for i in range(len(runs))]
    header = "| shape | pass | " + " | ".join(f"{n} µs" for n in names)
    header += "".join(f" | {n}/A" for n in names[1:]) + " |"
    print()
    print(header)
    print("|" + "---|" * (2 + len(names) + len(names) - 1))
    for key in tables[0]:
        rows, hidden, name = key
        values = [t.get(key) for t in tables]
        cells = [f"{v:.2f}" if v is not None else "-" for v in values]
        ratios = [f"{v / values[0]:.2f}" if v is not None else "-" for v in values[1:]]
        print(f"| {rows}×{hidden} | {name} | " + " | ".join(cells + ratios) + " |")


if __name__ == "__main__":
    main(sys.argv[1:])
