#!/usr/bin/env bash
# Tensor parallel on two GPUs, short: which decode paths run with NCCL (op by op, the
# default; single-token and batch-size bucket graphs with VEGA_NCCL_GRAPHS=1: these hung on
# 2 x H100 on 2026-11-26), a sweep case against the CPU, and vega's
# bench of one GPU against tensor parallel on llama3-8b Q4_K_M. Every command has a short
# timeout (a hang shows as rc=124). Resumable; state in $W (default /tmp/tp_diag).
#   start: setsid scripts/device_tp_diag.sh &     poll: scripts/device_tp_diag.sh poll SECONDS
W=${W:-/tmp/tp_diag}
[ "${1:-}" = poll ] && exec bash "$(dirname "$0")/device_poll.sh" "$W" "${2:-500}" 80
set -u
mkdir -p $W
exec >> $W/log.txt 2>&1
. scripts/device_env.sh
export VEGA_TEST_DATA=${VEGA_TEST_DATA:-$PWD/.devdata/testdata}
export VEGA_NCCL=${VEGA_NCCL:-$(ls /usr/lib/x86_64-linux-gnu/libnccl.so.2 2>/dev/null)}
B=build-h200
log() { echo "=== $* ($(date +%T))"; }
if [ ! -f $W/built ]; then
  log "build"
  cmake -S . -B $B -G Ninja -DCMAKE_BUILD_TYPE=Release -DVEGA_CUDA=ON -DVEGA_ASAN_TESTS=OFF -DVEGA_NET=OFF \
    -DCMAKE_CUDA_COMPILER=$(command -v nvcc || echo /usr/local/cuda/bin/nvcc) > $W/configure.log 2>&1 \
    && cmake --build $B -j30 --target vega > $W/build.log 2>&1 && touch $W/built \
    || { grep -E "error|FAILED" $W/build.log | head -20; touch $W/finished; exit 1; }
fi
m8=/tmp/tp-llama3-8b-Q4_K_M.gguf
[ -f $W/synth.started ] || { touch $W/synth.started
  (timeout 300 $B/vega synth --shape llama3-8b --type Q4_K_M -o $m8 > $W/synth8.log 2>&1; echo "rc=$?" >> $W/synth8.log) & }
S=$VEGA_TEST_DATA/models/stories260K.gguf
printf 'Once upon a time\nThe little dog\nLily and Ben\nA big red ball\nOne day\n' > $W/prompts.txt
run() {  # run TAG ENV... -- ARGS: stories260K greedy, ids to $W/TAG.ids
  local tag=$1; shift
  local envs=(); while [ "$1" != -- ]; do envs+=("$1"); shift; done; shift
  env "${envs[@]}" timeout 40 $B/vega run -m $S -n 24 --temp 0 --ignore-eos --ids-out $W/$tag.ids "$@" > $W/$tag.out 2> $W/$tag.err
  echo "$tag: rc=$? $(grep -E 'all-reduce|rror' $W/$tag.err | head -2 | tr '\n' ' ')"
}
if [ ! -f $W/diag.done ]; then
  log "decode paths"
  run one X=1 -- --device 0 --prompts-file $W/prompts.txt --parallel 4
  run tp1 VEGA_NCCL_GRAPHS=1 -- --devices 0,1 --split-mode tensor -p "Once upon a time"
  run one1 X=1 -- --device 0 -p "Once upon a time"
  run tp_nograph X=1 -- --devices 0,1 --split-mode tensor --prompts-file $W/prompts.txt --parallel 4
  run tp_nobatchgraph VEGA_NCCL_GRAPHS=1 VEGA_BATCH_GRAPHS=0 -- --devices 0,1 --split-mode tensor --prompts-file $W/prompts.txt --parallel 4
  run tp VEGA_NCCL_GRAPHS=1 NCCL_DEBUG=WARN -- --devices 0,1 --split-mode tensor --prompts-file $W/prompts.txt --parallel 4
  run layer X=1 -- --devices 0,1 --prompts-file $W/prompts.txt --parallel 4
  for t in tp1 tp_nograph tp_nobatchgraph tp layer; do
    ref=one; [ $t = tp1 ] && ref=one1
    cmp -s $W/$t.ids $W/$ref.ids && echo "$t ids == $ref" || echo "$t ids DIFFER from $ref ($(wc -l < $W/$t.ids 2>/dev/null) lines)"
  done
  touch $W/diag.done
fi
if [ ! -f $W/sweep.done ]; then
  log "sweep 1b Q4_0, tensor parallel vs CPU and vs one GPU"
  SPLIT="0,1 --split-mode tensor" SHAPES="1b qwen2-7b" TYPES="Q4_K_M" OUT=$W/sweep timeout 150 bash scripts/gpu_sweep.sh $B | tail -5
  touch $W/sweep.done
fi
log "bench"
while ! grep -q rc= $W/synth8.log 2>/dev/null; do sleep 2; done
vb() { timeout 60 $B/vega bench -m $m8 "$@" 2>&1 | grep -E "^\| [^-m]|rror|all-reduce" | cut -d'|' -f5-; }
g=${GOOD_ENV:-X=1}
vb --device 0 -r 3 -p 512 -n 128
env $g bash -c "$(declare -f vb); m8=$m8 B=$B; vb --devices 0,1 --split-mode tensor -r 3 -p 512 -n 128"
vb --device 0 -r 2 -p 0 -n 128 -d 128 -B 16
env VEGA_BATCH_GRAPHS=0 bash -c "$(declare -f vb); m8=$m8 B=$B; vb --devices 0,1 --split-mode tensor -r 2 -p 0 -n 128 -d 128 -B 16"
env X=1 bash -c "$(declare -f vb); m8=$m8 B=$B; vb --devices 0,1 --split-mode tensor -r 2 -p 0 -n 128"
log "done"
touch $W/finished
