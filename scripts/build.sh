#!/usr/bin/env bash
# Configures and builds normkit into ${BUILD_DIR:-build} (CUDA when nvcc is found).
# Extra CMake arguments may be passed, e.g. -DNK_CUDA_ARCHITECTURES=90. NK_ENABLE_CUDA=OFF in the
# environment builds the CPU backend alone.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/deps.sh
BUILD_DIR=${BUILD_DIR:-build}
if [ -z "${CUDACXX:-}" ] && ! command -v nvcc >/dev/null && [ -x /usr/local/cuda/bin/nvcc ]; then
  export CUDACXX=/usr/local/cuda/bin/nvcc
fi
# CUDA architectures: the GPU's own when one is visible; otherwise sm_90 only, enough to prove
# every kernel compiles (set NK_CUDA_ARCHITECTURES, e.g. "80;90", to build others).
if [ -z "${NK_CUDA_ARCHITECTURES:-}" ]; then
  NK_CUDA_ARCHITECTURES=90
  if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; then
    NK_CUDA_ARCHITECTURES=native
  fi
fi
cmake -S . -B "$BUILD_DIR" -G Ninja -DNK_CUDA_ARCHITECTURES="$NK_CUDA_ARCHITECTURES" \
  -DNK_ENABLE_CUDA="${NK_ENABLE_CUDA:-ON}" "$@"
cmake --build "$BUILD_DIR" -j"$(nproc)"
