#!/usr/bin/env bash
# Issue 26's table: vega against llama.cpp per weight type, same GPU, same files:
# `vega synth --shape llama3-8b --type T` for each T in TYPES, then tg128 and pp512
# with vega bench and llama-bench (-fa 1, all layers on the GPU), interleaved per type.
#   scripts/types_bench.sh [BUILD_DIR]       (default build-h200, a CUDA build of vega)
#   TYPES="Q2_K Q3_K IQ4_NL IQ4_XS MXFP4 Q4_0 Q4_K_M"  SHAPE=llama3-8b  REPS=3
#   PEERS=dir with build-llama.sh and the llama.cpp tarball (default .devdata/peers)
# llama.cpp builds first if $LLAMA_PEER_DIR has no llama-bench (~3 min; the synth files
# are made meanwhile, nothing is timed beside the build). Synth files are kept in /tmp
# and deleted after their type's benches (disk) unless KEEP=1. Summary in $OUT/summary.txt.
set -u
. "$(dirname "$0")/device_env.sh"
B=${1:-build-h200}
PEERS=${PEERS:-$PWD/.devdata/peers}
OUT=${OUT:-$PWD/types_bench_out}
TYPES=${TYPES:-Q2_K Q3_K IQ4_NL IQ4_XS MXFP4 Q4_0 Q4_K_M}
SHAPE=${SHAPE:-llama3-8b}
REPS=${REPS:-3}
SYNTH_DIR=${SYNTH_DIR:-/tmp}  # the synth files: $SYNTH_DIR/$SHAPE-$T.gguf, kept with KEEP=1
mkdir -p $SYNTH_DIR
L=${LLAMA_PEER_DIR:-/tmp/llama-peer}/b/bin
mkdir -p "$OUT"
S=$OUT/summary.txt
log() { echo "=== $* ($(date +%T))" | tee -a "$S"; }
lb=
if [ ! -x $L/llama-bench ]; then
  (PEERS=$PEERS bash "$(dirname "$0")/build_peer.sh" llama-bench > "$OUT/llama_build.log" 2>&1
   echo "llama build rc=$?" >> "$OUT/llama_build.log") &
  lb=$!
fi
nvidia-smi --query-gpu=name --format=csv,noheader | tee -a "$S"
first=1
for t in $TYPES; do
  m=$SYNTH_DIR/$SHAPE-$t.gguf
  [ -f $m ] || timeout 400 "$B/vega" synth --shape $SHAPE --type $t -o $m > "$OUT/synth-$t.log" 2>&1 \
    || { log "$t: synth FAILED: $(tail -1 "$OUT/synth-$t.log")"; continue; }
  if [ $first = 1 ] && [ -n "$lb" ]; then log "waiting for llama.cpp"; wait $lb; tail -1 "$OUT/llama_build.log" | tee -a "$S"; fi
  first=0
  log "$SHAPE $t: vega"
  timeout 300 "$B/vega" bench -m $m --device gpu -r $REPS -p 512 -n 128 2>&1 | grep -E "^\||rror" | tee -a "$S"
  log "$SHAPE $t: llama.cpp"
  timeout 300 $L/llama-bench -m $m -p 512 -n 128 -r $REPS -fa 1 -ngl 99 2>&1 | grep -E "^\||rror|failed" | tee -a "$S"
  [ "${KEEP:-0}" = 1 ] || rm -f $m
done
log "done"
