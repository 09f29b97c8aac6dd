#!/usr/bin/env bash
# One call on the GPU machine: build for sm_90, run the C++ tests (CUDA ones included),
# `normkit check`, and `normkit bench`; logs and the JSON results go to $OUT (or ./device-out).
# Usage: bench/device.sh [steps...]   steps: build test check bench python sanitize (default: build test check bench)
set -uo pipefail
OUT=${OUT:-$PWD/device-out}
mkdir -p "$OUT"
BUILD=${BUILD:-build-device}
steps=("$@")
[ ${#steps[@]} -eq 0 ] && steps=(build test check bench)
status=0
run() {  # run NAME CMD...: tee output to $OUT/NAME.log, remember failures
  local name=$1; shift
  echo "=== $name: $*"
  local start=$SECONDS
  "$@" 2>&1 | tee "$OUT/$name.log"
  local rc=${PIPESTATUS[0]}
  echo "=== $name: exit $rc after $((SECONDS - start)) s"
  [ "$rc" -ne 0 ] && status=1
  return "$rc"
}
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader > "$OUT/gpu.txt" 2>&1
for step in "${steps[@]}"; do
  case $step in
    build)
      run configure cmake -S . -B "$BUILD" -G Ninja -DNK_CUDA_ARCHITECTURES=90 -DCMAKE_BUILD_TYPE=Release &&
      run build cmake --build "$BUILD" -j16 ;;
    test) run ctest ctest --test-dir "$BUILD" --output-on-failure -j4 ;;
    check) run check "$BUILD/tools/normkit" check ;;
    bench) run bench "$BUILD/tools/normkit" bench --explain --json "$OUT/bench.json" ;;
    python)
      run pip_install env CMAKE_ARGS="-DNK_CUDA_ARCHITECTURES=90" python3 -m pip install \
        --no-build-isolation --no-deps -v . &&
      run pytest env PYTHONUNBUFFERED=1 NK_REQUIRE_CUDA=1 python3 -m pytest tests/python -q -rs -p no:cacheprovider ;;
    sanitize)
      run sanitize compute-sanitizer --tool memcheck --error-exitcode 1 \
        "$BUILD/tools/normkit" check --quick --backend cuda ;;
    *) echo "unknown step $step"; status=1 ;;
  esac
done
exit $status
