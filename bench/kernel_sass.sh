#!/usr/bin/env bash
# kernel_sass.sh HEADER KERNEL [NVCC ARGS...]: compile one instantiation of a kernel template for
# sm_90 on this machine (no GPU needed) and print what ptxas and the SASS say about it: registers,
# spills, and its instruction count in all and up to its first EXIT. The listing is left in
# $SASS_DIR (default /tmp/kernel_sass) as <name>.sass, to read or to diff against another tree's.
#
#   bench/kernel_sass.sh cuda/rms_norm_fwd_quant_kernels.cuh \
#     'rms_norm_fwd_quant_registers_exact_small<__nv_bfloat16, __nv_bfloat16, 3, 8, false, true, true>'
#
# One kernel compiles in seconds, where the library's translation units take minutes each.
# SRC=dir takes the sources from another tree (a `git worktree` of an older commit, say; give
# each tree its own SASS_DIR to diff the two listings). PARAMS names the kernel's parameter list
# (default FwdParams; e.g. 'BwdParams'). nvdisasm comes from the PyPI wheel nvidia-cuda-nvdisasm
# (downloaded once into $SASS_DIR).
set -euo pipefail
if [ $# -lt 2 ]; then
  awk 'NR == 1 { next } !/^#/ { exit } { sub(/^# ?/, ""); print }' "$0"  # the comment above
  exit 2
fi
header=$1 kernel=$2
shift 2
root=$(cd "$(dirname "$0")/.." && pwd)
src=${SRC:-$root}
out=${SASS_DIR:-/tmp/kernel_sass}
mkdir -p "$out"

nvdisasm=$(command -v nvdisasm || true)
if [ -z "$nvdisasm" ]; then
  nvdisasm=$(find "$out/nvdisasm" -name nvdisasm -type f 2>/dev/null | head -1 || true)
fi
if [ -z "$nvdisasm" ]; then
  python3 -m pip download --quiet --no-deps -d "$out/wheel" nvidia-cuda-nvdisasm
  python3 -m zipfile -e "$out"/wheel/nvidia_cuda_nvdisasm-*.whl "$out/nvdisasm"
  nvdisasm=$(find "$out/nvdisasm" -name nvdisasm -type f | head -1)
  chmod +x "$nvdisasm"
fi

name=$(printf '%s' "$kernel" | tr -c 'A-Za-z0-9_' '_' | cut -c1-120)
cat > "$out/$name.cu" <<EOF
#include "$header"
namespace normkit::cuda {
template __global__ void $kernel(${PARAMS:-FwdParams});
}
EOF
nvcc -std=c++17 -arch=sm_90 -cubin -O3 --expt-relaxed-constexpr -DNK_WITH_CUDA=1 \
  -I"$src/include" -I"$src/src" -Xptxas -v "$@" "$out/$name.cu" -o "$out/$name.cubin" \
  2> "$out/$name.ptxas"
grep -E 'registers|spill' "$out/$name.ptxas" | sed 's/^ptxas info *: *//; s/^ *//'
# (instruction lines only: nvdisasm marks each with its address, /*0a10*/)
"$nvdisasm" -c "$out/$name.cubin" | grep -E '/\*[0-9a-f]{4,}\*/' |
  sed 's@/\*[0-9a-f]*\*/@@g; s/ *;.*//; s/^[[:space:]]*//' > "$out/$name.sass"
awk '{ n++; if (!exit_at && /EXIT/) exit_at = n }
     END { printf "%d instructions, the first EXIT at %d\n", n, exit_at }' "$out/$name.sass"
echo "SASS: $out/$name.sass"
