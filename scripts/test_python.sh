#!/usr/bin/env bash
# Python tests: creates a virtual environment (${VENV:-.venv}) with torch, jax, flax and
# transformers from PyPI, builds and installs normkit into it, and runs pytest.
# The CUDA extension is built when a GPU is visible (nvidia-smi); CPU-only otherwise, since
# nothing CUDA could run (the C++ build already compiles every kernel).
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=${VENV:-.venv}
start=$SECONDS

# jax 0.11 needs Python >= 3.12: prefer one, from PATH or pyenv.
# (A pyenv shim may exist for a version that is not active: only an interpreter that runs counts.)
PY=""
for candidate in "$(pyenv root 2>/dev/null || echo /nonexistent)"/versions/3.12*/bin/python3.12 \
    python3.12 python3.13 python3; do
  if "$candidate" -c 'import sys; sys.exit(sys.version_info < (3, 12))' >/dev/null 2>&1; then
    PY=$(command -v "$candidate"); break
  fi
done
if [ -z "$PY" ]; then
  PY=python3
  echo "test_python: no Python >= 3.12 found; jax 0.11 needs one, so its install may fail"
fi
echo "test_python: using $PY ($("$PY" --version))"

stamp="$VENV/.normkit-deps-v1"
if [ ! -f "$stamp" ]; then
  # The environment takes ~2.6 GB (torch's wheel is a CUDA build): say so up front where the
  # disk has less, rather than leave pip's "No space left on device" unexplained.
  free_kb=$(df -Pk "$(dirname "$(realpath -m "$VENV")")" | awk 'NR == 2 {print $4}')
  if [ -n "$free_kb" ] && [ "$free_kb" -lt $((4 * 1024 * 1024)) ]; then
    echo "test_python: warning: $((free_kb / 1024)) MiB free where $VENV goes; its packages need ~3 GiB"
  fi
  "$PY" -m venv "$VENV"
  pip=("$VENV/bin/python" -m pip install -q --disable-pip-version-check)
  "${pip[@]}" --upgrade pip
  # The PyPI torch wheel is a CUDA build; on CPU it needs only these three of its nvidia
  # libraries (the rest resolve from the CUDA toolkit when present). If that import fails,
  # fall back to the full dependency set.
  "${pip[@]}" --no-deps torch==2.11.0 nvidia-cusparselt-cu13==0.8.0 nvidia-nvshmem-cu13==3.4.5 \
    'nvidia-cufile==1.15.1.6.*'
  "${pip[@]}" filelock 'typing-extensions>=4.10.0' 'setuptools<82' 'sympy>=1.13.3' \
    'networkx>=2.5.1' jinja2 'fsspec>=0.8.5'
  if ! "$VENV/bin/python" -c "import torch" >/dev/null 2>&1; then
    echo "test_python: slim torch does not import here; installing torch with all its dependencies"
    "${pip[@]}" torch==2.11.0
  fi
  "${pip[@]}" numpy pytest nanobind==3.1.0 scikit-build-core 'jax[cpu]==0.11.2' 'flax==0.12.*' \
    'transformers==5.*'
  touch "$stamp"
  echo "test_python: environment ready after $((SECONDS - start)) s"
fi

cuda_flag=(-C cmake.define.NK_ENABLE_CUDA=OFF)
if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; then cuda_flag=(); fi
"$VENV/bin/python" -m pip install -q --disable-pip-version-check --no-build-isolation --no-deps \
  "${cuda_flag[@]}" .
echo "test_python: normkit installed after $((SECONDS - start)) s"
"$VENV/bin/python" -m pytest tests/python -q -p no:cacheprovider -rs
