#!/usr/bin/env python3
"""Side by side: the median µs of several `normkit bench --json` runs of the same shapes (an A/B
of NK_TUNE_* knobs, or two builds), with each run's ratio to the first.

Usage: bench/ab.py A.json B.json [C.json ...]
Each run is labelled by its NK_TUNE_* knobs (recorded by normkit bench) or else its file name.

       bench/ab.py --pool [--build NAME] RUN.json [RUN.json ...] [--build NAME RUN.json ...]
pools repeated runs by their knobs (runs without knobs: "defaults"), in the order each set first
appears: per shape and pass, each set's median of its runs' medians with their range, its ratio
to the first set, and "apart" where the ranges do not overlap. `--build NAME` labels the runs
after it as another build's (two builds' runs with the same knobs are then two sets).
"""
import json
import os
import statistics
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


def pooled(args):
    """The runs named in `args` grouped by their build (`--build NAME` before them) and knobs:
    [(label, [medians(run), ...])], in order."""
    groups = {}
    build = ""
    args = iter(args)
    for path in args:
        if path == "--build":
            build = next(args, None)
            if not build:
                sys.exit("ab.py --pool: --build needs a name")
            continue
        run = json.load(open(path))
        knobs = run.get("config", {}).get("tuning", {})
        name = label(run, path) if knobs else "defaults"
        if build:
            name = f"[{build}] {name}"
        groups.setdefault(name, []).append(medians(run))
    return list(groups.items())


def main_pool(paths):
    groups = pooled(paths)
    if len(groups) < 2:
        sys.exit("ab.py --pool: the runs hold a single set of knobs and build; nothing to compare")
    names = [chr(ord("A") + i) for i in range(len(groups))]
    for name, (group, tables) in zip(names, groups):
        print(f"{name}: {group} ({len(tables)} runs)")
    header = "| shape | pass | " + " | ".join(f"{n} µs [range]" for n in names)
    header += "".join(f" | {n}/A" for n in names[1:]) + " |"
    print()
    print(header)
    print("|" + "---|" * (2 + len(names) + len(names) - 1))
    for key in groups[0][1][0]:
        rows, hidden, name = key
        spans = []
        for _, tables in groups:
            values = [t[key] for t in tables if key in t]
            spans.append((statistics.median(values), min(values), max(values)) if values else None)
        cells = ["-" if span is None else f"{span[0]:.2f} [{span[1]:.2f}-{span[2]:.2f}]"
                 for span in spans]
        ratios = []
        for span in spans[1:]:
            if span is None or spans[0] is None:
                ratios.append("-")
                continue
            apart = span[2] < spans[0][1] or span[1] > spans[0][2]
            ratios.append(f"{span[0] / spans[0][0]:.3f}" + (" apart" if apart else ""))
        print(f"| {rows}×{hidden} | {name} | " + " | ".join(cells + ratios) + " |")


def main(paths):
    if paths[:1] == ["--pool"]:
        return main_pool(paths[1:])
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
