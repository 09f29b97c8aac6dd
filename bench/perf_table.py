#!/usr/bin/env python3
"""Markdown table of a `normkit bench --json` run against the goals of the performance issue.

Goal per shape (bf16, H100), as the issue's table has it: the faster of the best peer in
../shared/PEERS.md and 1.03 x floor + 4.5 us (forward) or 1.10 x floor + 6.5 us (backward), floor
= bytes / 3018 GB/s (the issue's copy bandwidth, not the run's); a result within 1% of a goal
set by a peer counts as met. The "% copy" columns use the copy bandwidth of the same run.
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


def main(path):
    run = json.load(open(path))
    print(f"Device: {run['device']}; date {run['date_utc']}; copy {run['copy']['gbps']:.0f} GB/s; "
          f"command `{run['command']}`\n")
    print("| rows × hidden | fwd µs | fwd % copy | fwd goal | met | bwd µs | bwd % copy | bwd goal | met |")
    print("|---|---|---|---|---|---|---|---|---|")
    for s in run["shapes"]:
        key = (s["rows"], s["hidden"])
        peer = BEST_PEER.get(key)
        cells = [f"{key[0]}×{key[1]}"]
        for direction, index, scale, fixed in (("fwd", 0, 1.03, 4.5), ("bwd", 1, 1.10, 6.5)):
            r = s[direction]
            cells += [f"{r['median_us']:.1f}", f"{r['percent_of_copy']:.0f}%"]
            if peer:
                g = goal(r["bytes"] / ISSUE_COPY_GBPS / 1e3, peer[index], scale, fixed)
                t = r["median_us"]
                met = t <= g or (g == peer[index] and t <= 1.01 * peer[index])
                cells += [f"{g:.1f}", "yes" if met else f"no (+{r['median_us'] - g:.1f})"]
            else:
                cells += ["–", "–"]
        print("| " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main(sys.argv[1])
