#!/usr/bin/env bash
# Runs the same GPU eval (gpu_sweep.sh's 24-token prompt + 16 decode steps) N times per
# setting and prints the logits' md5: one hash per setting means the GPU path is
# deterministic. Settings: default, VEGA_GPU_TILED_ATTN=0, VEGA_GPU_MOE_MMA=0.
#   scripts/gpu_determinism.sh [BUILD_DIR]   SHAPES, TYPES, N (default 4), LAYERS (default 4)
set -u
B=${1:-build-h200}
N=${N:-4}
for shape in ${SHAPES:-qwen3moe-tiny qwen3moe-30b-a3b}; do
  for type in ${TYPES:-Q6_K Q4_0}; do
    m=/tmp/det-$shape-$type.gguf
    [ -f $m ] || "$B/vega" synth --shape $shape --type $type --layers ${LAYERS:-4} -o $m > /dev/null 2>&1 || { echo "$shape $type: synth failed"; continue; }
    n_vocab=$("$B/vega" inspect "$m" 2>/dev/null | awk '/\.vocab_size / { print $NF; exit }')
    awk -v n="$n_vocab" 'BEGIN { srand(7); m = (n < 32000 ? n : 32000) - 4; s = "1";
      for (i = 0; i < 23; ++i) s = s " " int(3 + rand() * m); print s;
      s = ""; for (i = 0; i < 16; ++i) s = s (i ? " " : "") int(3 + rand() * m); print s }' > /tmp/det-tokens.txt
    for env in "" "VEGA_GPU_TILED_ATTN=0" "VEGA_GPU_MOE_MMA=0"; do
      hashes=$(for i in $(seq 1 $N); do
        env $env "$B/vega" eval -m $m --device gpu -c 64 --tokens-file /tmp/det-tokens.txt --logits-out /tmp/det.f32 > /dev/null 2>&1
        md5sum < /tmp/det.f32 | cut -c1-8; done | sort | uniq -c | tr '\n' ' ')
      echo "$shape $type ${env:-default}: $hashes"
    done
  done
done
