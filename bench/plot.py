#!/usr/bin/env python3
"""Plot achieved bandwidth against hidden size from benchmark JSON files.

Reads any number of files written by `normkit bench --json FILE` (tools/bench_report.cpp) and
by `bench/compare.py --json FILE`, and writes one PNG with two panels, forward and backward:
GB/s (bytes as each tool counts them: x, y / dy, dx and the weight vectors) against hidden size
on a log axis, one series per implementation, marker area growing with the row count, and each
file's measured copy bandwidth as a dashed horizontal line.

Usage:  python bench/plot.py bench.json compare.json -o bandwidth.png
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys

import matplotlib

matplotlib.use("Agg")  # no display on a benchmark machine
import matplotlib.pyplot as plt  # noqa: E402

DIRECTIONS = (("fwd", "forward"), ("bwd", "backward (dx and dweight)"))
MARKERS = "os^Dv<>phX*"


class Series:
    """One implementation's points: direction -> [(hidden, rows, gbps)]."""

    def __init__(self, label: str, is_normkit: bool):
        self.label = label
        self.is_normkit = is_normkit
        self.points = {"fwd": [], "bwd": []}


def _gbps(entry):
    """The GB/s of a measured entry, or None (missing, failed, or not a number)."""
    if not isinstance(entry, dict) or "error" in entry:
        return None
    v = entry.get("gbps")
    return v if isinstance(v, (int, float)) and math.isfinite(v) and v > 0 else None


def _label(base, name):
    return f"{base} ({name})" if name else base


def load_normkit_bench(doc, name):
    s = Series(_label("normkit", name), True)
    for row in doc.get("shapes", []):
        for d, _ in DIRECTIONS:
            g = _gbps(row.get(d))
            if g is not None:
                s.points[d].append((row["hidden"], row["rows"], g))
    return [s]


def load_compare(doc, name):
    labels = doc.get("impls", {})
    series = {}
    for row in doc.get("shapes", []):
        for d, _ in DIRECTIONS:
            for impl, entry in row.get(d, {}).get("impls", {}).items():
                g = _gbps(entry)
                if g is None:
                    continue
                if impl not in series:
                    series[impl] = Series(_label(labels.get(impl, impl), name), impl.startswith("normkit"))
                series[impl].points[d].append((row["hidden"], row["rows"], g))
    return list(series.values())


def load(path, tag):
    """(series, copy GB/s or None, device) of one file; tag (the file's name or "") ends the labels."""
    try:
        with open(path) as f:
            doc = json.load(f)
    except json.JSONDecodeError as e:
        raise ValueError(f"{path}: not JSON ({e})") from None
    name = tag
    tool = doc.get("tool")
    if tool == "normkit bench":
        series = load_normkit_bench(doc, name)
    elif tool == "bench/compare.py":
        series = load_compare(doc, name)
    else:
        raise ValueError(f"{path}: not a `normkit bench --json` or bench/compare.py file (tool={tool!r})")
    copy = doc.get("copy", {}).get("gbps")
    return series, copy, doc.get("device", "?")


def marker_size(rows: int) -> float:
    return 12 + 6 * math.log2(max(rows, 1))  # 1 row: 12, 32768 rows: 102 (points^2)


def plot(files, out, title=None):
    # With several files each label says which file it comes from.
    tags = [os.path.splitext(os.path.basename(p))[0] if len(files) > 1 else "" for p in files]
    loaded = [(path, *load(path, tag)) for path, tag in zip(files, tags)]
    fig, axes = plt.subplots(1, 2, figsize=(15, 6), sharey=True)
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    all_series = [s for _, series, _, _ in loaded for s in series]
    if not any(s.points["fwd"] or s.points["bwd"] for s in all_series):
        raise ValueError("no measured points in " + ", ".join(files))
    for ax, (d, direction) in zip(axes, DIRECTIONS):
        for k, s in enumerate(all_series):
            pts = s.points[d]
            if not pts:
                continue
            ax.scatter([p[0] for p in pts], [p[2] for p in pts], s=[marker_size(p[1]) for p in pts],
                       marker=MARKERS[k % len(MARKERS)], color=colors[k % len(colors)],
                       alpha=0.9 if s.is_normkit else 0.6, edgecolors="black" if s.is_normkit else "none",
                       linewidths=0.6, label=s.label, zorder=3 if s.is_normkit else 2)
        for j, ((_, _, copy, _), tag) in enumerate(zip(loaded, tags)):
            if copy:
                ax.axhline(copy, color="gray", linestyle=("--", ":", "-.")[j % 3], linewidth=1,
                           label=_label(f"copy {copy:.0f} GB/s", tag), zorder=1)
        ax.set_xscale("log", base=2)
        ax.set_xlabel("hidden size (log scale)")
        ax.set_title(direction)
        ax.grid(True, which="both", alpha=0.3)
        ax.set_ylim(bottom=0)
    axes[0].set_ylabel("achieved GB/s (bytes read + written / median time)")
    # By the GPU's name alone: the tools word the details after it differently.
    devices = sorted({dev.split(" (")[0] for _, _, _, dev in loaded})
    fig.suptitle(title or "RMSNorm bandwidth: " + "; ".join(devices) + "  (marker area grows with rows)",
                 fontsize=10)
    handles, labels = axes[0].get_legend_handles_labels()
    h2, l2 = axes[1].get_legend_handles_labels()
    for h, label in zip(h2, l2):  # a series may have backward points only
        if label not in labels:
            handles.append(h)
            labels.append(label)
    fig.legend(handles, labels, loc="lower center", ncol=min(3, len(labels)), fontsize=8, markerscale=0.7)
    fig.tight_layout(rect=(0, 0.04 + 0.035 * math.ceil(len(labels) / 3), 1, 0.96))
    fig.savefig(out, dpi=120)
    plt.close(fig)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description="Plot GB/s against hidden size from benchmark JSON files.")
    p.add_argument("files", nargs="+", help="JSON from `normkit bench --json` and/or bench/compare.py --json")
    p.add_argument("-o", "--out", default="bandwidth.png", help="PNG to write (default bandwidth.png)")
    p.add_argument("--title", help="figure title (default: the devices)")
    args = p.parse_args(argv)
    try:
        plot(args.files, args.out, args.title)
    except (OSError, ValueError, KeyError) as e:
        print(f"plot: {e}", file=sys.stderr)
        return 1
    print(f"plot: wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
