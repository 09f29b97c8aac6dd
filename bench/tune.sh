#!/usr/bin/env bash
# Tuning sweep on the GPU machine: times the forward and the backward under each value of the
# launch-configuration knobs (NK_TUNE_*, read by src/cuda/vector_width.h), and optionally
# profiles one shape with Nsight Compute (NCU_SHAPE). Results go to $OUT (or ./device-out).
# Usage: bench/tune.sh [SHAPES]
#   FWD_CTAS="2 4 6"   NK_TUNE_FWD_CTAS_PER_SM values (forward only)
#   BWD_CTAS="1 2 3"   NK_TUNE_BWD_CTAS_PER_SM values, each with BWD_ITEMS="0 2 4"
#   CONFIGS="A=1 B=2;A=3"  any knob settings, separated by ';' (both passes; PASS=--fwd-only
#                      or --bwd-only for one)
set -uo pipefail
OUT=${OUT:-$PWD/device-out}
mkdir -p "$OUT"
BUILD=${BUILD:-build-device}
SHAPES=${1:-4096x1024,8192x2048,4096x4096,16384x4096,8192x8192,16384x7168,32768x8192,128x4096}
tool=$BUILD/tools/normkit
if [ ! -x "$tool" ]; then  # bench/device.sh build leaves it there
  cmake -S . -B "$BUILD" -G Ninja -DNK_CUDA_ARCHITECTURES=90 -DCMAKE_BUILD_TYPE=Release \
    -DNK_BUILD_TESTS=OFF >/dev/null && cmake --build "$BUILD" -j16 --target normkit_tool >/dev/null ||
    exit 1
fi
sweep() {  # sweep PASS-OPTION KNOB VALUES [EXTRA-ENV...]
  local pass=$1 knob=$2 values=$3; shift 3
  for v in $values; do
    echo "=== $* $knob=$v ($pass)"
    env "$@" "$knob=$v" "$tool" bench "$pass" --reps 30 --explain --shapes "$SHAPES" 2>/dev/null |
      grep -E '^ *[0-9]+x[0-9]+ |(fwd|bwd):'
  done
}
{
  [ -n "${FWD_CTAS:-}" ] && sweep --fwd-only NK_TUNE_FWD_CTAS_PER_SM "$FWD_CTAS"
  if [ -n "${CONFIGS:-}" ]; then
    IFS=';' read -ra configs <<< "$CONFIGS"
    for cfg in "${configs[@]}"; do
      echo "=== $cfg ${PASS:-}"
      # shellcheck disable=SC2086  # cfg and PASS are word lists
      env $cfg "$tool" bench ${PASS:-} --reps 30 --explain --shapes "$SHAPES" 2>/dev/null |
        grep -E '^ *[0-9]+x[0-9]+ |(fwd|bwd):'
    done
  fi
  if [ -n "${BWD_CTAS:-}" ]; then
    for items in ${BWD_ITEMS:-0}; do
      sweep --bwd-only NK_TUNE_BWD_CTAS_PER_SM "$BWD_CTAS" NK_TUNE_BWD_ITEMS="$items"
    done
  fi
} 2>&1 | tee "$OUT/tune.txt"
if [ -n "${NCU_SHAPE:-}" ] && command -v ncu >/dev/null; then
  # WarpStateStats with all details lists the stall reasons (barrier, long scoreboard, ...).
  ncu --kernel-name regex:'rms_norm|reduce_partials' --launch-skip "${NCU_SKIP:-4}" --launch-count 2 \
    --section SpeedOfLight --section LaunchStats --section Occupancy --section WarpStateStats \
    --print-details all "$tool" bench --reps 3 --shapes "$NCU_SHAPE" ${NCU_PASS:-} \
    > "$OUT/ncu.txt" 2>&1
  grep -iE '  void|Duration|DRAM Throughput|Registers Per|Achieved Occupancy|Warp Cycles Per Issued|stall' \
    "$OUT/ncu.txt" | head -80
fi
