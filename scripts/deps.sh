#!/usr/bin/env bash
# Installs the system packages normkit builds with (Debian/Ubuntu), only those missing.
set -euo pipefail
need=()
for pkg in cmake ninja-build g++ libgtest-dev libcli11-dev python3-venv; do
  dpkg -s "$pkg" >/dev/null 2>&1 || need+=("$pkg")
done
if [ ${#need[@]} -gt 0 ]; then
  echo "deps: installing ${need[*]}"
  SUDO=""
  [ "$(id -u)" -ne 0 ] && SUDO=sudo
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${need[@]}"
fi
