#!/usr/bin/env bash
# Configures and builds normkit into ${BUILD_DIR:-build} (CUDA when nvcc is found).
# Extra CMake arguments may be passed, e.g. -DNK_CUDA_ARCHITECTURES=90 or -DNK_ENABLE_CUDA=OFF.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/deps.sh
BUILD_DIR=${BUILD_DIR:-build}
if [ -z "${CUDACXX:-}" ] && ! command -v nvcc >/dev/null && [ -x /usr/local/cuda/bin/nvcc ]; then
  export CUDACXX=/usr/local/cuda/bin/nvcc
fi
cmake -S . -B "$BUILD_DIR" -G Ninja "$@"
cmake --build "$BUILD_DIR" -j"$(nproc)"
