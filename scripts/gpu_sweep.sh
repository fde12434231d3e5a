#!/usr/bin/env bash
# Every `vega synth` shape x type on the GPU: a 24-token prompt (PROMPT tokens: a longer
# one takes the prompt paths of real chats, such as the tensor-core matmul's 4 row groups
# from about 500 rows on a 7B shape) plus 16 decode steps
# (vega eval) on the GPU and on the CPU, same file; the worst row's NMSE must stay
# under the end-to-end tests' bound for quantized models (5e-3). Catches crashes and
# wrong results that only one shape or type shows (a Q4_0 llama3-8b once read 20 MB
# past its token embedding). Re-run it for every GPU change.
#   scripts/gpu_sweep.sh [BUILD_DIR]     (default build-h200; needs a CUDA or HIP build)
#   SHAPES="1b llama2-7b llama3-8b qwen2-7b qwen3moe-tiny qwen3moe-30b-a3b"
#   TYPES="Q4_0 Q8_0 Q4_K_M Q6_K" DEVICE=gpu BOUND=5e-3
#   LAYERS=4 (synth --layers: every matrix and the vocabulary at full size, fewer blocks;
#   0 = the whole model; a shape with fewer blocks keeps its own)
#   SPLIT=0,1 (the device run is a layer split over --devices $SPLIT; it is also compared
#   with the same file on one device, $DEVICE, under the same bound: "split vs one")
# The mixtures of experts: qwen3moe-tiny (8 experts, 2 used; its 128-long expert rows
# take the Q4_K_M fallbacks Q5_0/Q8_0 and llama.cpp's 8-expert Q8_0 attn_k/attn_v) and
# qwen3moe-30b-a3b (128 experts, 8 used, head_dim 128 != n_embd/n_head; at LAYERS=4,
# 1.4 GB of Q4_0 experts).
# Routing: a mixture of experts turns rounding into large differences (near ties of the
# router logits pick another expert; with sharp routers, as vega synth's of standard
# deviation ~10, the chosen experts' weights move by about the logits' error). So the GPU
# run records its router logits, experts and weights (vega eval --routes-out) and the CPU
# run replays them (--routes-in, model/route_trace.h). Checked: the router logits (NMSE
# under BOUND), the GPU's routing kernel (the CPU's rule applied to the GPU's logits gives
# its experts exactly and its weights within 1e-4), and the model's logits along that one
# path (worst row under BOUND). How often and how far the GPU's experts differ from the
# CPU's own top k is printed.
# One line per case on stdout and in $OUT/sweep.txt; exit 1 when any case failed.
set -u
B=${1:-build-h200}
OUT=${OUT:-$PWD/gpu_sweep_out}
mkdir -p "$OUT"
# Scratch (models, logits, routes) in a directory of this run's own: two sweeps at once
# (say a normal and an emulation build on two GPUs) must not read each other's files.
S=$(mktemp -d "${TMPDIR:-/tmp}/gpu_sweep.XXXXXX")
trap 'rm -rf "$S"' EXIT
SHAPES=${SHAPES:-1b llama2-7b llama3-8b qwen2-7b qwen3moe-tiny qwen3moe-30b-a3b}
TYPES=${TYPES:-Q4_0 Q8_0 Q4_K_M Q6_K}
DEVICE=${DEVICE:-gpu}
BOUND=${BOUND:-5e-3}
LAYERS=${LAYERS:-4}
PROMPT=${PROMPT:-24}
CTX=$((PROMPT + 40))
layers_opt=; [ "$LAYERS" != 0 ] && layers_opt="--layers $LAYERS"
T=$(nproc)
here=$(cd "$(dirname "$0")" && pwd)
# tokens N_VOCAB: line 1 the prompt (PROMPT ids), line 2 the 16 decode steps; fixed seed.
tokens() {
  awk -v n="$1" -v p="$PROMPT" 'BEGIN { srand(7); m = (n < 32000 ? n : 32000) - 4; s = "1";
                         for (i = 0; i < p - 1; ++i) s = s " " int(3 + rand() * m); print s;
                         s = ""; for (i = 0; i < 16; ++i) s = s (i ? " " : "") int(3 + rand() * m); print s }'
}
fail=0
for shape in $SHAPES; do
  for type in $TYPES; do
    m=$S/$shape-$type.gguf
    name="$shape $type"
    if ! timeout 600 "$B/vega" synth --shape "$shape" --type "$type" $layers_opt -o "$m" > "$OUT/synth.log" 2>&1; then
      echo "$name: synth FAILED: $(tail -1 "$OUT/synth.log")" | tee -a "$OUT/sweep.txt"; fail=1; continue
    fi
    n_vocab=$("$B/vega" inspect "$m" 2>/dev/null | awk '/\.vocab_size / { print $NF; exit }')
    if [ -z "$n_vocab" ]; then
      echo "$name: no vocab_size in the file" | tee -a "$OUT/sweep.txt"; fail=1; rm -f "$m"; continue
    fi
    tokens "$n_vocab" > "$OUT/tokens.txt"
    dev_log="$OUT/$shape-$type-$DEVICE.log"
    dev_opts="--device $DEVICE"; [ -n "${SPLIT:-}" ] && dev_opts="--devices $SPLIT"
    if ! timeout 600 "$B/vega" eval -m "$m" $dev_opts -c "$CTX" --tokens-file "$OUT/tokens.txt" \
         --logits-out $S/dev.f32 --routes-out $S/routes.txt > "$dev_log" 2>&1; then
      if [ -n "${SPLIT:-}" ] && grep -q "cannot be split\|must divide\|to divide by" "$dev_log"; then
        # (a split that refuses a shape by name is right: its heads or block columns do not divide)
        echo "$name: skipped, the split refuses it: $(tail -1 "$dev_log")" | tee -a "$OUT/sweep.txt"; rm -f "$m"; continue
      fi
      echo "$name: $DEVICE eval FAILED: $(tail -1 "$dev_log")" | tee -a "$OUT/sweep.txt"; fail=1; rm -f "$m"; continue
    fi
    if ! timeout 900 "$B/vega" eval -m "$m" --device cpu -t "$T" -c "$CTX" --tokens-file "$OUT/tokens.txt" \
         --logits-out $S/cpu.f32 --routes-in $S/routes.txt > "$OUT/$shape-$type-cpu.log" 2>&1; then
      echo "$name: cpu eval FAILED: $(tail -1 "$OUT/$shape-$type-cpu.log")" | tee -a "$OUT/sweep.txt"; fail=1; rm -f "$m"; continue
    fi
    r=$(python3 "$here/logits_nmse.py" $S/dev.f32 $S/cpu.f32 "$n_vocab" "$BOUND") || fail=1
    routes=$(python3 "$here/route_check.py" "$OUT/$shape-$type-cpu.log" "$BOUND") || fail=1
    [ -n "$routes" ] && r="$r; $routes"
    if [ -n "${SPLIT:-}" ]; then  # the split against one device (the same kernels: routes as well)
      if timeout 600 "$B/vega" eval -m "$m" --device "$DEVICE" -c "$CTX" --tokens-file "$OUT/tokens.txt" \
           --logits-out $S/one.f32 > "$OUT/$shape-$type-one.log" 2>&1; then
        one=$(python3 "$here/logits_nmse.py" $S/dev.f32 $S/one.f32 "$n_vocab" "$BOUND") || fail=1
        r="$r; split vs one: $one"
      else
        r="$r; one-device eval FAILED: $(tail -1 "$OUT/$shape-$type-one.log")"; fail=1
      fi
    fi
    echo "$name: $r" | tee -a "$OUT/sweep.txt"
    rm -f "$m"
  done
done
exit $fail
