#!/usr/bin/env bash
# Where a decode token's time goes, per kernel, on an NVIDIA GPU: ncu times every kernel
# of `vega bench -p 0 -n 16` (each kernel alone: no overlap between kernels, so the sum
# is above the replayed step) with the DRAM bytes it read, then
# scripts/token_profile.py sums them by kernel and prints us per token and GB/s. Also
# the plain tg128 of each file (the replayed step, with the overlap). Resumable
# background run like device_types_run.sh.
#   start: setsid scripts/device_token_profile.sh &      poll: scripts/device_token_profile.sh poll SECONDS
#   PROFILE_TYPES="IQ4_XS IQ4_NL Q4_0"  SHAPE=llama3-8b  W=/tmp/token_profile
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
for t in ${PROFILE_TYPES:-IQ4_XS IQ4_NL Q4_0}; do
  m=$SYNTH_DIR/$SHAPE-$t.gguf
  [ -f $m ] || { log "synth $SHAPE $t"; timeout 400 $B/vega synth --shape $SHAPE --type $t -o $m > $W/synth-$t.log 2>&1; }
done
for t in ${PROFILE_TYPES:-IQ4_XS IQ4_NL Q4_0}; do
  m=$SYNTH_DIR/$SHAPE-$t.gguf
  [ -f $W/done.$t ] && continue
  log "$SHAPE $t: tg128 (replayed)"
  timeout 200 $B/vega bench -m $m --device gpu -r 3 -p 0 -n 128 2>&1 | grep -E "^\|.*tg" | awk -F'|' '{ print $7, $8 }'
  log "$SHAPE $t: ncu, every kernel of bench -p 0 -n 16"
  timeout 400 $NCU --clock-control none --cache-control none --csv \
    --metrics gpu__time_duration.sum,dram__bytes_read.sum \
    $B/vega bench -m $m --device gpu -r 1 -p 0 -n 16 > $W/ncu-$t.csv 2> $W/ncu-$t.err
  python3 scripts/token_profile.py $W/ncu-$t.csv
  touch $W/done.$t
done
log "finished"
touch $W/finished
