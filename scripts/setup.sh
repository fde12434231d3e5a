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
  # vega pull / -hf: HTTP through libcurl, sha256 through OpenSSL; the tests' loopback server.
  libcurl4-openssl-dev libssl-dev libcpp-httplib-dev
  # AMD GPU code: compiled for gfx906 and audited even without a GPU.
  hipcc libamdhip64-dev rocm-device-libs
  # The JSON Schema compiler is checked against the language-agnostic test suite.
  json-schema-test-suite
)

# The server test drives vega serve with the official openai npm client (Node.js).
command -v npm >/dev/null 2>&1 || packages+=(nodejs npm)

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

# tests/server/openai_client.cjs: the openai npm package (v4 runs on Debian's Node 18), in build/npm.
OPENAI_NPM=openai@4.104.0
if [ "$(cat build/npm/.installed 2>/dev/null)" != "$OPENAI_NPM" ]; then
  echo "setup: npm install $OPENAI_NPM (for the server test)"
  npm install --prefix build/npm --no-audit --no-fund --loglevel=error "$OPENAI_NPM"
  echo "$OPENAI_NPM" > build/npm/.installed
fi
