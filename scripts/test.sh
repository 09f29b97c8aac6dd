#!/usr/bin/env bash
# Builds normkit and runs every test: the C++ suite (ctest) and the Python suite (pytest, in a
# virtual environment under ${VENV:-.venv} that this script creates). CUDA tests run where a GPU
# is present and are reported as skipped, with the reason, where none is.
set -euo pipefail
cd "$(dirname "$0")/.."
start=$SECONDS
scripts/build.sh
ctest --test-dir "${BUILD_DIR:-build}" --output-on-failure -j"$(nproc)"
echo "test.sh: C++ tests done after $((SECONDS - start)) s"
scripts/test_python.sh
echo "test.sh: all tests done after $((SECONDS - start)) s"
