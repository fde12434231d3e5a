#!/usr/bin/env bash
# vega against llama.cpp on the same GPU and the same GGUF files, in one run (the
# issue tables of docs/PERFORMANCE.md): batched decode (vega bench -B, llama-batched-bench)
# and decode at depth (vega bench -d, llama-bench -d) on llama2-7b Q4_0 and llama3-8b
# Q4_K_M made by `vega synth`, plus vega's B=1 tg128 for Q8_0 and Q4_K_M.
#   scripts/peer_bench.sh [BUILD_DIR]     (default build-h200, a CUDA build of vega)
#   PEERS=dir with build-llama.sh and the llama.cpp tarball (a copy of ../shared/peers,
#   carried to the device machine; default .devdata/peers)
# llama.cpp builds in the background (~3 min on 16 cores) while the synth files are
# made; every bench waits for that build to end, since a 16-core compile beside them
# measurably slows vega's batched decode (B=16 3575 +- 441 t/s against 4017 alone,
# 2026-11-23). Logs and summary.txt go to $OUT (default ./peer_bench_out).
set -u
. "$(dirname "$0")/device_env.sh"
B=${1:-build-h200}
PEERS=${PEERS:-$PWD/.devdata/peers}
OUT=${OUT:-$PWD/peer_bench_out}
mkdir -p "$OUT"
S=$OUT/summary.txt
log() { echo "=== $* ($(date +%T))" | tee -a "$S"; }
vbench() { timeout 200 "$B/vega" bench --device gpu "$@" 2>&1 | grep -E "^\||rror" | cut -d'|' -f6- | tee -a "$S"; }

q40=/tmp/peer-llama2-7b-Q4_0.gguf l3=/tmp/peer-llama3-8b-Q4_K_M.gguf
(PEERS=$PEERS bash "$(dirname "$0")/build_peer.sh" llama-bench llama-batched-bench ${LLAMA_EXTRA:-} > "$OUT/llama_build.log" 2>&1
 echo "llama build rc=$?" >> "$OUT/llama_build.log") &
lb=$!
log "synth"
[ -f $q40 ] || timeout 300 "$B/vega" synth --shape llama2-7b --type Q4_0 -o $q40 > "$OUT/synth.log" 2>&1
[ -f $l3 ] || timeout 300 "$B/vega" synth --shape llama3-8b --type Q4_K_M -o $l3 >> "$OUT/synth.log" 2>&1
for t in ${B1_TYPES-Q8_0 Q4_K_M}; do
  m=/tmp/peer-llama2-7b-$t.gguf
  [ -f $m ] || timeout 300 "$B/vega" synth --shape llama2-7b --type $t -o $m >> "$OUT/synth.log" 2>&1
done
log "waiting for llama.cpp"
wait $lb
tail -1 "$OUT/llama_build.log" | tee -a "$S"

log "vega batched, llama2-7b Q4_0 (cache at 128 first, as llama-batched-bench's 128-token prompts)"
vbench -m $q40 -r 2 -p 0 -n 128 -d 128 -B 1,2,4,8,16,32,64
log "vega depth, llama2-7b Q4_0"
vbench -m $q40 -r 2 -p 512 -n 128 -d 0,4096
log "vega depth, llama3-8b Q4_K_M"
vbench -m $l3 -r 2 -p 0 -n 128 -d 0,4096

L=${LLAMA_PEER_DIR:-/tmp/llama-peer}/b/bin
log "llama-batched-bench, llama2-7b Q4_0"
timeout 200 $L/llama-batched-bench -m $q40 -c 20000 -npp 128 -ntg 128 -npl 1,2,4,8,16,32,64 -fa 1 -ngl 99 2>&1 \
  | grep -E "^\|" | tee -a "$S"
for m in $q40 $l3; do
  log "llama-bench depth, $(basename $m)"
  timeout 150 $L/llama-bench -m $m -p 0 -n 128 -d 0,4096 -fa 1 -ngl 99 2>&1 | grep -E "^\|" | tee -a "$S"
done

for t in ${B1_TYPES-Q8_0 Q4_K_M}; do
  m=/tmp/peer-llama2-7b-$t.gguf
  log "vega B=1 tg128, llama2-7b $t"
  vbench -m $m -r 2 -p 0 -n 128
done
log "done"
