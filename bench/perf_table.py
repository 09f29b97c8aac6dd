#!/usr/bin/env python3
"""Markdown table of a `normkit bench --json` run against the goals of the performance issue.

Goal per shape (bf16, H100), as the issue's table has it: the faster of the best peer in
../shared/PEERS.md and 1.03 x floor + 4.5 us (forward) or 1.10 x floor + 6.5 us (backward), floor
= bytes / 3018 GB/s (the issue's copy bandwidth, not the run's); a result within 1% of a goal
set by a peer counts as met. The "% copy" columns use the copy bandwidth of the same run. A run
with `--same-size-copy` adds, per pass, the time of a copy of the same bytes timed the same way,
and whether that copy itself would meet the goal. A pass the run did not time shows "–"; one
that `normkit bench` flagged as unsteady says so beside its median.
Usage: bench/perf_table.py RESULT.json
"""
import json
import sys

ISSUE_COPY_GBPS = 3018.0  # the copy bandwidth the issue's goals were computed with

# Best peer per shape from PEERS.md (bf16, microseconds): (forward, backward).
BEST_PEER = {
    (29, 17389): (12.8, 34.9), (256, 65536): (39.8, 74.0), (1024, 32768): (51.3, 131.3),
    (2048, 16384): (50.7, 127.8), (4096, 1024): (11.3, 35.9), (4096, 12288): (72.0, 194.4),
    (8192, 2048): (28.1, 87.8), (8192, 4096): (50.9, 128.9), (8192, 8192): (94.1, 240.9),
    (16384, 4096): (95.1, 249.7), (1, 4096): (5.2, 52.7), (128, 4096): (6.7, 46.7),
    (4096, 4096): (29.2, 96.3), (32768, 8192): (358.1, 689.0), (16384, 7168): (159.4, 394.2),
}


def goal(floor_us, peer_us, scale, fixed):
    return min(peer_us, scale * floor_us + fixed)


def pass_cells(r, peer_us, scale, fixed, copies):
    """The table cells of one pass (r: its JSON entry, or None when not timed)."""
    if r is None:
        return ["–"] * (6 if copies else 4)
    # (steady: false, normkit bench's flag of a median far above the fastest call: a disturbed
    # figure; absent from runs before 2026-11-27 20:40)
    unsteady = " (unsteady: min {:.1f})".format(r["min_us"]) if r.get("steady") is False else ""
    cells = [f"{r['median_us']:.1f}{unsteady}", f"{r['percent_of_copy']:.0f}%"]
    g = None
    if peer_us is not None:
        g = goal(r["bytes"] / ISSUE_COPY_GBPS / 1e3, peer_us, scale, fixed)
        t = r["median_us"]
        met = t <= g or (g == peer_us and t <= 1.01 * peer_us)
        cells += [f"{g:.1f}", "yes" if met else f"no (+{t - g:.1f})"]
    else:
        cells += ["–", "–"]
    if copies:
        c = r.get("same_size_copy_us")
        cells.append("–" if c is None else f"{c:.1f}")
        cells.append("–" if c is None or g is None else ("yes" if c <= g else f"no (+{c - g:.1f})"))
    return cells


def main(path):
    run = json.load(open(path))
    copies = bool(run["config"].get("same_size_copy"))
    print(f"Device: {run['device']}; date {run['date_utc']}; copy {run['copy']['gbps']:.0f} GB/s; "
          f"command `{run['command']}`\n")
    columns = ["µs", "% copy", "goal", "met"] + (["copy µs", "copy meets goal"] if copies else [])
    header = ["rows × hidden"] + [f"{d} {c}" for d in ("fwd", "bwd") for c in columns]
    print("| " + " | ".join(header) + " |")
    print("|" + "---|" * len(header))
    for s in run["shapes"]:
        key = (s["rows"], s["hidden"])
        peer = BEST_PEER.get(key)
        cells = [f"{key[0]}×{key[1]}"]
        if "error" in s or "skipped" in s:
            print("| " + " | ".join(cells + [s.get("error") or s.get("skipped")]) + " |")
            continue
        for direction, index, scale, fixed in (("fwd", 0, 1.03, 4.5), ("bwd", 1, 1.10, 6.5)):
            cells += pass_cells(s.get(direction), peer[index] if peer else None, scale, fixed,
                                copies)
        print("| " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main(sys.argv[1])
