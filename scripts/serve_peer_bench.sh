#!/usr/bin/env bash
# vega serve against llama-server on the same GPU and the same GGUF file, in one run
# (the server issues' benchmark in docs/PERFORMANCE.md): streamed /v1/completions at 1,
# 4, 16 and 32 concurrent streams (scripts/serve_bench.py: aggregate generated tokens/s,
# per-stream t/s, time to first token), llama2-7b Q4_0 made by `vega synth`.
#   scripts/serve_peer_bench.sh [BUILD_DIR]   (a CUDA build of vega; default build-h200,
#   configured and built here when missing; vega serve needs no network libraries)
#   PEERS=dir with build-llama.sh and the llama.cpp tarball (default .devdata/peers);
#   LLAMA_TARGETS: what else to build with llama-server (e.g. for scripts/peer_bench.sh).
#   STREAMS=1,4,16,32 MAX_TOKENS=128 PARALLEL=32 CTX=1024: each slot's context (vega's -c
#   is per slot; llama-server's -c is split over its slots, so it gets CTX x PARALLEL);
#   PROMPT_WORDS=N: prompts of N words (time to first token of a long request; CTX must hold it);
#   MODEL=a GGUF instead of the synth file, DEVICE=cpu and
#   PEER=0 (vega alone) to try the script on a machine without a GPU.
# Logs and summary.txt go to $OUT (default ./serve_bench_out).
set -u
B=${1:-build-h200}
PEERS=${PEERS:-$PWD/.devdata/peers}
OUT=${OUT:-$PWD/serve_bench_out}
STREAMS=${STREAMS:-1,4,16,32} MAX_TOKENS=${MAX_TOKENS:-128} PARALLEL=${PARALLEL:-32} CTX=${CTX:-1024}
DEVICE=${DEVICE:-gpu} PEER=${PEER:-1}
mkdir -p "$OUT"
S=$OUT/summary.txt
log() { echo "=== $* ($(date +%T))" | tee -a "$S"; }
here=$(cd "$(dirname "$0")" && pwd)
. "$here/device_env.sh"

# Both servers answer /health with 200 once the model is loaded.
wait_health() {  # wait_health PORT PID
  for _ in $(seq 1 240); do
    kill -0 "$2" 2>/dev/null || return 1
    python3 -c "import urllib.request,sys; sys.exit(0 if urllib.request.urlopen('http://127.0.0.1:$1/health', timeout=2).status == 200 else 1)" \
      2>/dev/null && return 0
    sleep 0.5
  done
  return 1
}
bench() {  # bench LABEL PORT
  timeout 400 python3 "$here/serve_bench.py" --url "http://127.0.0.1:$2" --streams "$STREAMS" \
    --max-tokens "$MAX_TOKENS" --prompt-words "${PROMPT_WORDS:-0}" --label "$1" 2>&1 | tee -a "$S"
}

if [ ! -x "$B/vega" ]; then
  log "build vega (CUDA) in $B"
  cmake -S . -B "$B" -G Ninja -DCMAKE_BUILD_TYPE=Release -DVEGA_CUDA=ON -DVEGA_NET=OFF -DVEGA_TESTS=OFF -DVEGA_ASAN_TESTS=OFF \
    -DCMAKE_CUDA_COMPILER="${NVCC:-$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)}" > "$OUT/vega_configure.log" 2>&1 \
    || { tail -20 "$OUT/vega_configure.log" | tee -a "$S"; exit 1; }
  cmake --build "$B" -j"$(nproc)" --target vega > "$OUT/vega_build.log" 2>&1 \
    || { grep -E "error|FAILED" "$OUT/vega_build.log" | head -20 | tee -a "$S"; exit 1; }
fi
m=${MODEL:-/tmp/peer-llama2-7b-Q4_0.gguf}
log "model $m"
[ -f $m ] || timeout 300 "$B/vega" synth --shape llama2-7b --type Q4_0 -o $m > "$OUT/synth.log" 2>&1 \
  || { tail -3 "$OUT/synth.log" | tee -a "$S"; exit 1; }
L=${LLAMA_PEER_DIR:-/tmp/llama-peer}/b/bin
lb=
if [ "$PEER" = 1 ] && [ ! -x "$L/llama-server" ]; then
  (PEERS=$PEERS bash "$here/build_peer.sh" llama-server ${LLAMA_TARGETS:-} > "$OUT/llama_build.log" 2>&1
   echo "llama build rc=$?" >> "$OUT/llama_build.log") &
  lb=$!
fi

log "vega serve --parallel $PARALLEL -c $CTX"
"$B/vega" serve -m $m --device "$DEVICE" --parallel "$PARALLEL" -c "$CTX" --port 8090 > "$OUT/vega_serve.log" 2>&1 &
vp=$!
if wait_health 8090 $vp; then bench vega 8090; else log "vega serve did not come up"; tail -5 "$OUT/vega_serve.log" | tee -a "$S"; fi
kill $vp 2>/dev/null; wait $vp 2>/dev/null
grep -c "POST /v1/completions" "$OUT/vega_serve.log" | sed 's/^/vega request log lines: /' | tee -a "$S"

[ "$PEER" = 1 ] || { log "done"; exit 0; }
if [ -n "$lb" ]; then log "waiting for llama.cpp"; wait $lb; tail -1 "$OUT/llama_build.log" | tee -a "$S"; fi
log "llama-server --parallel $PARALLEL -c $((CTX * PARALLEL))"
"$L/llama-server" -m $m -ngl 99 -fa on --parallel "$PARALLEL" -c "$((CTX * PARALLEL))" --port 8091 > "$OUT/llama_server.log" 2>&1 &
lp=$!
if wait_health 8091 $lp; then bench llama-server 8091; else log "llama-server did not come up"; tail -5 "$OUT/llama_server.log" | tee -a "$S"; fi
kill $lp 2>/dev/null; wait $lp 2>/dev/null
log "done"
