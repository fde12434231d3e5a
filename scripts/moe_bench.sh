#!/usr/bin/env bash
# vega against llama.cpp on a mixture of experts (issue 23's table), same GPU, same
# GGUF files, one run: `vega synth --shape qwen3moe-30b-a3b` in each of $TYPES, then
#   vega bench -p 512 -n 128            against  llama-bench -p 512 -n 128 -fa 1
#   vega bench -p 0 -n 128 -d 128 -B 16 against  llama-batched-bench -npp 128 -ntg 128 -npl 16 -fa 1
# and, first, the dense llama2-7b Q4_0 tg128 / B=16 rows that must not regress.
#   scripts/moe_bench.sh [BUILD_DIR]     (default build-h200, a CUDA build of vega)
# The 30B files are 16-32 GB each: one type at a time, deleted after its rows (the
# device disk is 64 GB). llama.cpp builds in the background while the first file is
# made; the benches wait for it (a 16-core compile beside them slows them). Resumable:
# a type whose rows are in $OUT/done.<type> is skipped. Logs, summary.txt in $OUT.
# PROFILE=1 (every type) or PROFILE="Q4_0 ...": per-kernel ncu times of decode and a prompt (ncu-*.csv).
set -u
. "$(dirname "$0")/device_env.sh"
B=${1:-build-h200}
PEERS=${PEERS:-$PWD/.devdata/peers}
OUT=${OUT:-$PWD/moe_bench_out}
TYPES=${TYPES:-Q4_0 Q8_0 Q4_K_M}
mkdir -p "$OUT"
S=$OUT/summary.txt
log() { echo "=== $* ($(date +%T))" | tee -a "$S"; }
vbench() { timeout 300 "$B/vega" bench --device gpu "$@" 2>&1 | grep -E "^\||rror" | cut -d'|' -f2,6- | tee -a "$S"; }
L=${LLAMA_PEER_DIR:-/tmp/llama-peer}/b/bin

if [ ! -x $L/llama-batched-bench ]; then
  (PEERS=$PEERS bash "$(dirname "$0")/build_peer.sh" llama-bench llama-batched-bench > "$OUT/llama_build.log" 2>&1
   echo "llama build rc=$?" >> "$OUT/llama_build.log") &
  lb=$!
else
  lb=
fi
if [ "${DENSE:-1}" = 1 ] && [ ! -f "$OUT/done.dense" ]; then
  q40=/tmp/peer-llama2-7b-Q4_0.gguf
  [ -f $q40 ] || timeout 300 "$B/vega" synth --shape llama2-7b --type Q4_0 -o $q40 > "$OUT/synth-dense.log" 2>&1
  log "dense regression: vega llama2-7b Q4_0 tg128, B=16"
  vbench -m $q40 -r 2 -p 0 -n 128
  vbench -m $q40 -r 2 -p 0 -n 128 -d 128 -B 16
  touch "$OUT/done.dense"
fi
for t in $TYPES; do
  [ -f "$OUT/done.$t" ] && continue
  m=/tmp/moe-30b-$t.gguf
  log "synth qwen3moe-30b-a3b $t"
  [ -f $m ] || timeout 600 "$B/vega" synth --shape qwen3moe-30b-a3b --type $t -o $m > "$OUT/synth-$t.log" 2>&1 \
    || { tail -3 "$OUT/synth-$t.log" | tee -a "$S"; rm -f $m; continue; }
  ls -la $m | tee -a "$S"
  if [ -n "$lb" ]; then log "waiting for llama.cpp"; wait $lb; lb=; tail -1 "$OUT/llama_build.log" | tee -a "$S"; fi
  log "vega $t: pp512, tg128"
  vbench -m $m -r 2 -p 512 -n 128
  log "vega $t: B=16 after a 128-token cache (as llama-batched-bench)"
  vbench -m $m -r 2 -p 0 -n 128 -d 128 -B 1,16
  log "llama-bench $t"
  timeout 300 $L/llama-bench -m $m -p 512 -n 128 -fa 1 -ngl 99 -r 2 2>&1 | grep -E "^\||rror" | tee -a "$S"
  log "llama-batched-bench $t"
  timeout 300 $L/llama-batched-bench -m $m -c 8192 -npp 128 -ntg 128 -npl 1,16 -fa 1 -ngl 99 2>&1 | grep -E "^\||rror" \
    | tee -a "$S"
  if case " ${PROFILE:-} " in *" $t "* | *" 1 "*) true ;; *) false ;; esac && command -v ncu > /dev/null; then
    # Per-kernel times (scripts/token_profile.py sums them): a decode step, then a 512-row prompt.
    log "ncu $t: decode (tg, one sequence) and a 512-row prompt"
    timeout 200 ncu --clock-control none --cache-control none --metrics gpu__time_duration.sum --csv --launch-count 3000 \
      "$B/vega" bench -m $m --device gpu -r 1 -p 0 -n 1 > "$OUT/ncu-tg-$t.csv" 2> "$OUT/ncu-tg-$t.err"
    timeout 200 ncu --clock-control none --cache-control none --metrics gpu__time_duration.sum --csv --launch-count 3000 \
      "$B/vega" bench -m $m --device gpu -r 1 -p 512 -n 0 > "$OUT/ncu-pp-$t.csv" 2> "$OUT/ncu-pp-$t.err"
    for k in tg pp; do
      echo "ncu $k $t (two runs: warm-up and timed)" | tee -a "$S"
      python3 "$(dirname "$0")/token_profile.py" "$OUT/ncu-$k-$t.csv" --top 14 2>&1 | tee -a "$S"
    done
  fi
  touch "$OUT/done.$t"
  rm -f $m
done
log "done"
