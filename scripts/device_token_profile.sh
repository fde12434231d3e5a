#!/usr/bin/env bash
# Where a decode token's time goes, per kernel, on an NVIDIA GPU: ncu times every kernel
# of `vega bench -p 0 -n 16` (each kernel alone: no overlap between kernels, so the sum
# is above the replayed step) with the DRAM bytes it read, then
# scripts/token_profile.py sums them by kernel and prints us per token and GB/s. Also
# the plain tg128 of each file (the replayed step, with the overlap). Resumable
# background run like device_types_run.sh.
#   start: setsid scripts/device_token_profile.sh &      poll: scripts/device_token_profile.sh poll SECONDS
#   PROFILE_TYPES="IQ4_XS IQ4_NL Q4_0"  SHAPE=llama3-8b  W=/tmp/token_profile
#   SHARES="1 2": also each type's one-rank share of 2 (vega synth --tp-share 2: a tensor-
#   parallel rank's decode with free sums), 1 being the whole model (the default)
W=${W:-/tmp/token_profile}
. "$(dirname "$0")/device_run_start.sh" 80 "$@"
SHAPE=${SHAPE:-llama3-8b}
SYNTH_DIR=${SYNTH_DIR:-/tmp/synth}
mkdir -p $SYNTH_DIR
B=build-h200
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader
if [ ! -f $W/built ]; then
  log "build $B"
  cmake -S . -B $B -G Ninja -DCMAKE_BUILD_TYPE=Release -DVEGA_CUDA=ON -DVEGA_ASAN_TESTS=OFF -DVEGA_NET=OFF -DVEGA_TESTS=OFF \
    -DCMAKE_CUDA_COMPILER=$(command -v nvcc || echo /usr/local/cuda/bin/nvcc) > $W/configure.log 2>&1 \
    && cmake --build $B -j16 --target vega > $W/build.log 2>&1 && touch $W/built \
    || { grep -E "error|FAILED" $W/build.log | head -20; touch $W/finished; exit 1; }
fi
NCU=$(command -v ncu || ls /usr/local/cuda/bin/ncu 2>/dev/null)
[ -n "$NCU" ] || { log "no ncu on this machine"; touch $W/finished; exit 1; }
# Every file first (the quantizer takes every core; nothing is timed beside it).
file_of() { [ "$2" = 1 ] && echo $SYNTH_DIR/$SHAPE-$1.gguf || echo $SYNTH_DIR/$SHAPE-$1-share$2.gguf; }
for t in ${PROFILE_TYPES:-IQ4_XS IQ4_NL Q4_0}; do
  for n in ${SHARES:-1}; do
    m=$(file_of $t $n)
    [ -f $m ] && continue
    log "synth $SHAPE $t (share of $n)"
    timeout 400 $B/vega synth --shape $SHAPE --type $t $([ $n = 1 ] || echo --tp-share $n) -o $m > $W/synth-$t-$n.log 2>&1
  done
done
for t in ${PROFILE_TYPES:-IQ4_XS IQ4_NL Q4_0}; do
  for n in ${SHARES:-1}; do
    m=$(file_of $t $n) tag=$t-$n
    [ -f $W/done.$tag ] && continue
    log "$SHAPE $t, share of $n: tg128 (replayed)"
    timeout 200 $B/vega bench -m $m --device gpu -r 3 -p 0 -n 128 2>&1 | grep -E "^\|.*tg" | awk -F'|' '{ print $7, $8 }'
    log "$SHAPE $t, share of $n: ncu, every kernel of bench -p 0 -n 16"
    timeout 400 $NCU --clock-control none --cache-control none --csv \
      --metrics gpu__time_duration.sum,dram__bytes_read.sum \
      $B/vega bench -m $m --device gpu -r 1 -p 0 -n 16 > $W/ncu-$tag.csv 2> $W/ncu-$tag.err
    python3 scripts/token_profile.py $W/ncu-$tag.csv
    touch $W/done.$tag
  done
done
log "finished"
touch $W/finished
