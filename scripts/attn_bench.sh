#!/usr/bin/env bash
# vega against llama.cpp on prompts at depth (issue 24's table), same GPU, same GGUF
# files, one run: llama2-7b Q4_0 and llama3-8b Q4_K_M (`vega synth`), then
#   vega bench -p 512,2048 -n 0 -d 0,8192 -c 10304   against  llama-bench -p 512,2048 -n 0 -d 0,8192 -fa 1
# and tg128 at depth 8192 (both engines), and with TILED_AB=1 the vega rows again with
# VEGA_GPU_TILED_ATTN=0 (the split kernel: the before).
#   scripts/attn_bench.sh [BUILD_DIR]   (default build-h200; llama.cpp from $LLAMA_PEER_DIR/b/bin)
# MODELS (default "llama2-7b:Q4_0 llama3-8b:Q4_K_M"), PP (default 512,2048), DEPTHS (default
# 0,8192), TG_DEPTH (default 8192; empty: no tg rows); vega's -c is the deepest depth + 2112.
# KV_TYPES (default f16): the KV cache types, each a pass over every row (q8_0: vega
# --kv-type q8_0 against llama-bench -ctk q8_0 -ctv q8_0). PP=none: tg rows only.
# ENV_AB="NAME=VALUE ...": the vega prompt rows again per setting (an A/B in the same run).
# Resumable: a model whose rows are in $OUT/done.* is skipped.
set -u
. "$(dirname "$0")/device_env.sh"
B=${1:-build-h200}
OUT=${OUT:-$PWD/attn_bench_out}
mkdir -p "$OUT"
S=$OUT/summary.txt
log() { echo "=== $* ($(date +%T))" | tee -a "$S"; }
vbench() { timeout 400 "$B/vega" bench --device gpu "$@" 2>&1 | grep -E "^\||rror" | cut -d'|' -f2,6- | tee -a "$S"; }
lbench() { timeout 400 "$L/llama-bench" -ngl 99 -fa 1 "$@" 2>&1 | grep -E "^\||rror" | tee -a "$S"; }
L=${LLAMA_PEER_DIR:-/tmp/llama-peer}/b/bin
DEPTHS=${DEPTHS:-0,8192}
TG_DEPTH=${TG_DEPTH-8192}
PP=${PP:-512,2048}
deepest=$(echo "$DEPTHS,${TG_DEPTH:-0}" | tr ',' '\n' | sort -n | tail -1)
CTX=$((deepest + 2112))
for kv in ${KV_TYPES:-f16}; do
for spec in ${MODELS:-llama2-7b:Q4_0 llama3-8b:Q4_K_M}; do
  shape=${spec%%:*} t=${spec##*:}
  [ -f "$OUT/done.$shape.$t.$kv" ] && continue
  vkv="--kv-type $kv" lkv="-ctk $kv -ctv $kv"
  mkdir -p ${SYNTH_DIR:-/tmp/synth}; m=${SYNTH_DIR:-/tmp/synth}/$shape-$t.gguf  # (shared with types_bench.sh, dense_ab.sh)
  [ -f $m ] || { log "synth $shape $t"; timeout 500 "$B/vega" synth --shape $shape --type $t -o $m > "$OUT/synth-$shape-$t.log" 2>&1 || { rm -f $m; continue; }; }
  if [ "$PP" != none ]; then
    log "$shape $t, $kv cache: vega pp $PP at depths $DEPTHS (-c $CTX)"
    vbench -m $m -c $CTX -r 2 -p $PP -n 0 -d $DEPTHS $vkv
    if [ "${TILED_AB:-0}" = 1 ]; then
      log "$shape $t, $kv cache: vega, split kernel for prompts (VEGA_GPU_TILED_ATTN=0)"
      VEGA_GPU_TILED_ATTN=0 vbench -m $m -c $CTX -r 1 -p $PP -n 0 -d $DEPTHS $vkv
    fi
    for e in ${ENV_AB:-}; do
      log "$shape $t, $kv cache: vega with $e"
      (export "$e"; vbench -m $m -c $CTX -r 2 -p $PP -n 0 -d $DEPTHS $vkv)
    done
    log "$shape $t, $kv cache: llama.cpp"
    lbench -m $m -r 2 -p $PP -n 0 -d $DEPTHS $lkv
  fi
  if [ -n "$TG_DEPTH" ]; then
    log "$shape $t, $kv cache: tg128 at depth $TG_DEPTH, vega then llama.cpp"
    vbench -m $m -c $CTX -r 2 -p 0 -n 128 -d $TG_DEPTH $vkv
    lbench -m $m -r 2 -p 0 -n 128 -d $TG_DEPTH $lkv
  fi
  touch "$OUT/done.$shape.$t.$kv"
done
done
