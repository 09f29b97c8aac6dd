#!/usr/bin/env bash
# A/B of two builds of libnormkit.so on the CPU backend, in host time per call
# (bench/cpu_call_times.cpp): `bench/cpu_ab.sh OLD_LIB_DIR NEW_LIB_DIR [ROUNDS]`. The builds
# alternate call by call (this machine is shared, so its speed drifts), ROUNDS times (default
# 3) over bf16 shapes from one row to 16M elements, forward and backward; then a table of each
# side's medians and the ratio of the best medians (new / old). SHAPES overrides the shapes
# ("ROWSxHIDDEN ..."), PASSES the passes (default "fwd bwd"; also fwd_residual). CPU timings: they say nothing of the GPU.
set -euo pipefail
cd "$(dirname "$0")/.."
old=${1:?old library dir}
new=${2:?new library dir}
rounds=${3:-3}
shapes=${SHAPES:-"1x4096 4x4096 16x4096 64x4096 128x4096 512x4096 4096x1024 4096x4096"}
passes=${PASSES:-"fwd bwd"}
bin=$(mktemp -d)/cpu_call_times
# RUNPATH (not RPATH): LD_LIBRARY_PATH picks the build.
g++ -O2 -std=c++17 -Iinclude bench/cpu_call_times.cpp -L"$new" -lnormkit \
  -Wl,--enable-new-dtags,-rpath,"$new" -o "$bin"
raw=$(mktemp)
for round in $(seq "$rounds"); do
  for shape in $shapes; do
    for pass in $passes; do
      for side in old new; do
        dir=$old; [ "$side" = new ] && dir=$new
        echo "$round $side $(LD_LIBRARY_PATH=$dir "$bin" "${shape%x*}" "${shape#*x}" "$pass")"
      done
    done
  done
done > "$raw"
cat "$raw"
python3 - "$raw" <<'EOF'
import collections, re, sys
medians = collections.defaultdict(list)
for line in open(sys.argv[1]):
    m = re.match(r"\d+ (old|new) (\d+)x(\d+) (\w+) median ([\d.]+)", line)
    if m:
        medians[(int(m[2]), int(m[3]), m[4], m[1])].append(float(m[5]))
print(f"\n{'shape':>10} pass {'old median us':>24} {'new median us':>24}  new/old (best)")
for rows, hidden, pass_ in sorted({k[:3] for k in medians}, key=lambda k: (k[0] * k[1], k[2])):
    o, n = medians[(rows, hidden, pass_, "old")], medians[(rows, hidden, pass_, "new")]
    print(f"{rows}x{hidden:<5} {pass_}  {' '.join(f'{v:7.1f}' for v in o):>24} "
          f"{' '.join(f'{v:7.1f}' for v in n):>24}  {min(n) / min(o):.2f}")
EOF
