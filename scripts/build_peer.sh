#!/usr/bin/env bash
# Builds llama.cpp targets for the side-by-side runs (peer_bench.sh, serve_peer_bench.sh)
# through the peers' build-llama.sh: unpacks the snapshot into $LLAMA_PEER_DIR (default
# /tmp/llama-peer) first, and gives it the scripts/ui-assets.cmake that llama-server's
# UI step runs (the snapshot leaves that folder out; this one embeds no UI assets).
#   PEERS=dir with build-llama.sh and the tarball; scripts/build_peer.sh TARGET...
set -eu
PEERS=${PEERS:-$PWD/.devdata/peers}
W=${LLAMA_PEER_DIR:-/tmp/llama-peer}
mkdir -p "$W"
[ -f "$W/CMakeLists.txt" ] || tar xzf "$PEERS/llama.cpp-2026-08.tgz" -C "$W"
if [ ! -f "$W/scripts/ui-assets.cmake" ]; then
  mkdir -p "$W/scripts"
  cat > "$W/scripts/ui-assets.cmake" <<'CM'
# An empty asset table (llama-ui-embed with no asset folder): the server runs without its web UI.
execute_process(COMMAND "${LLAMA_UI_EMBED}" "${UI_BINARY_DIR}/ui.cpp" "${UI_BINARY_DIR}/ui.h" RESULT_VARIABLE rc)
if(rc)
  message(FATAL_ERROR "llama-ui-embed failed: ${rc}")
endif()
CM
fi
LLAMA_PEER_DIR=$W bash "$PEERS/build-llama.sh" "$@"
