#!/usr/bin/env bash
# Installs what vega needs on Debian 12 (as root or through sudo), then
# configures and builds the default preset into ./build.
#   scripts/setup.sh            install + build
#   VEGA_SKIP_INSTALL=1 ...     build only
set -euo pipefail
cd "$(dirname "$0")/.."

packages=(
  build-essential cmake ninja-build pkg-config git
  libfmt-dev libpcre2-dev libcli11-dev nlohmann-json3-dev libgtest-dev
  # AMD GPU code: compiled for gfx906 and audited even without a GPU.
  hipcc libamdhip64-dev rocm-device-libs
)

if [ "${VEGA_SKIP_INSTALL:-0}" != 1 ]; then
  sudo=""
  if [ "$(id -u)" -ne 0 ]; then sudo="sudo"; fi
  missing=()
  for p in "${packages[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
  done
  if [ "${#missing[@]}" -gt 0 ]; then
    echo "setup: installing ${missing[*]}"
    $sudo apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
  fi
fi

cmake --preset default
cmake --build --preset default
echo "setup: built ./build/vega"
