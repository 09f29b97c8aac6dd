#!/usr/bin/env bash
# Builds normkit and runs the main job: `normkit bench` (on the GPU if there is one, else the CPU).
# Arguments go to `normkit bench` (see `normkit bench --help`).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/build.sh >&2
exec "${BUILD_DIR:-build}/tools/normkit" bench "$@"
