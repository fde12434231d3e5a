#!/usr/bin/env bash
# Issue 27's tensor parallel on a machine with 2 or 4 GPUs, in the background, resumable
# (finished steps are skipped; state and logs in $W, default /tmp/tp_run):
#   1. build vega (CUDA) while llama.cpp builds; synth the bench files meanwhile;
#   1b. the all-reduce's own tests (PeerSum.*: peer sums against the host's rank-order
#      sum, op by op and from graphs, on one device named twice and on distinct ones);
#   2. stories260K greedy ids, one GPU against --devices 0,1 --split-mode tensor (decode
#      graphs with the peer sums in the o / down kernel's epilogue (the default), in one
#      kernel with the next block's input (VEGA_PEER_SUM_FUSE=1), as launches of their
#      own (VEGA_PEER_SUM_FUSE=0), NCCL's (VEGA_PEER_SUMS=0),
#      single-token and batch buckets), op by op (also beside a busy loop on every core:
#      tp_busy), and over 0,0 (one GPU, two ranks); ids that differ are checked by
#      scripts/ids_near_argmax.py (each a near-argmax of one GPU's logits, within IDS_TOL=0.1);
#   3. the end-to-end tests under tensor parallel over 0,1 (and with 4 GPUs, over 0,1,2,3
#      in both modes);
#   4. scripts/gpu_sweep.sh, tensor parallel over 0,1 (and with 4 GPUs, over 0,1,2,3 in
#      both modes): dense and mixture-of-experts shapes;
#   5. benchmarks side by side (BENCH=0: skip): vega one GPU, tensor parallel over 2 (and
#      4) GPUs with the default peer sums, those in the o / down epilogue (tags ending in e),
#      in the next input's kernel (tags ending in f), unfused ones (tags ending in u), NCCL's alone (tags ending in n),
#      the device threads spinning SPIN_US (default 20000) microseconds before they sleep (tags ending in s),
#      each decode graph replayed twice a step (oner, tp2r: the host gap is 2 t(1) - t(2) per token), the layer split
#      over 2; llama.cpp -sm none / layer / row (LLAMA_MODELS: which files); tg128, pp512 and
#      B=16 on llama3-8b Q4_K_M, a llama3-70b-shaped synth of $L70 blocks and a
#      qwen3moe-30b-a3b synth of $LMOE blocks; no bench starts before every synth has
#      ended (a synth takes every core, and the ranks' host threads would compete).
#   Knobs: CONFIG_TAGS="one tp2 ..." (which vega placements), IDS="one one1 tp ..." (which greedy runs), BENCH_MODELS, LLAMA_MODELS,
#   LLAMA_MODES, SYNTH70=0 / SYNTHQ=0 (no such file), E2E=0, SWEEP=0, PARITY_ALL=1 (PARITY_FILTER: which),
#   bench tags ending in v or v2 run with VEGA_TP_VOCAB_SPLIT=0 (device 0 computes every logit; tp2 / tp2v /
#   tp2_2 / tp2v2 alternate the vocabulary split's A/B),
#   TYPES_BENCH="IQ4_XS ..." (scripts/types_bench.sh on GPU 0 alone, at the end),
#   SHARES="2 4" (tg128 / B=16 of the 8B file's one-rank share, vega synth --tp-share N, on
#   GPU 0 alone, or on each of SHARE_GPUS="0 1" in turn: a rank's decode with free sums, the
#   ceiling of tensor parallel over N),
#   E2E1=1 (the end-to-end tests on GPU 0 alone), SWEEP_ONE=1 (every shape x type on the last GPU
#   alone, in the background, PROMPT=${SWEEP_ONE_PROMPT:-24}),
#   SWEEP1="shape:type ..." (scripts/gpu_sweep.sh on GPU 0 alone, PROMPT=${SWEEP1_PROMPT:-300}),
#   PEER_STRESS=N (PeerSum.* N times beside a busy loop on every core, with the eager kernel
#   loading the runtime asks for and with CUDA_MODULE_LOADING=LAZY, where the peer sums must
#   refuse: lazy loading trapped 5 of 5 such runs in the thirty-sixth session; and the
#   startup time of a small run under each).
#   start: setsid scripts/device_tp_run.sh &     poll: scripts/device_tp_run.sh poll SECONDS
W=${W:-/tmp/tp_run}
. "$(dirname "$0")/device_run_start.sh" 70 "$@"
export VEGA_TEST_DATA=${VEGA_TEST_DATA:-$PWD/.devdata/testdata}
PEERS=${PEERS:-$PWD/.devdata/peers}
L=${LLAMA_PEER_DIR:-/tmp/llama-peer}/b/bin
L70=${L70:-16} LMOE=${LMOE:-16}
NG=$(nvidia-smi -L | wc -l)
D2=0,1 D4=0,1,2,3
B=build-h200
[ -f $W/topo.done ] || { nvidia-smi --query-gpu=index,name,memory.total --format=csv,noheader; nvidia-smi topo -m; touch $W/topo.done; }
if [ -z "${VEGA_NCCL:-}" ]; then
  VEGA_NCCL=$(find /usr /opt $(python3 -c 'import site; print(" ".join(site.getsitepackages()))' 2>/dev/null) \
    -name 'libnccl.so*' 2>/dev/null | head -1)
  export VEGA_NCCL
fi
echo "VEGA_NCCL=$VEGA_NCCL GPUs=$NG"
if [ "${BENCH:-1}" = 1 ] && [ "${LLAMA:-1}" = 1 ] && [ ! -x $L/llama-bench ] && [ ! -f $W/llama.started ]; then
  touch $W/llama.started
  (PEERS=$PEERS bash scripts/build_peer.sh llama-bench llama-batched-bench > $W/llama_build.log 2>&1
   echo "llama build rc=$?" >> $W/llama_build.log) &
fi
if [ ! -f $W/built ]; then
  log "build"
  cmake -S . -B $B -G Ninja -DCMAKE_BUILD_TYPE=Release -DVEGA_CUDA=ON -DVEGA_ASAN_TESTS=OFF -DVEGA_NET=OFF \
    -DCMAKE_CUDA_COMPILER=$(command -v nvcc || echo /usr/local/cuda/bin/nvcc) > $W/configure.log 2>&1 \
    && cmake --build $B -j40 --target vega vega_gpu_parity_tests $([ "${E2E:-1}" = 1 ] && echo vega_engine_tests) \
       > $W/build.log 2>&1 && touch $W/built \
    || { grep -E "error|FAILED" $W/build.log | head -20; touch $W/finished; exit 1; }
fi
# SWEEP_ONE=1: every synth shape x type on the last GPU alone (scripts/gpu_sweep.sh,
# PROMPT=${SWEEP_ONE_PROMPT:-24}), in the background from here on; waited for at the end.
if [ "${SWEEP_ONE:-0}" = 1 ] && [ ! -f $W/sweep_one.started ]; then
  touch $W/sweep_one.started
  log "one-GPU sweep of every shape x type on GPU $((NG - 1)), in the background ($W/sweep_one)"
  (CUDA_VISIBLE_DEVICES=$((NG - 1)) PROMPT=${SWEEP_ONE_PROMPT:-24} OUT=$W/sweep_one bash scripts/gpu_sweep.sh $B > $W/sweep_one.log 2>&1
   echo "rc=$?" >> $W/sweep_one.log) &
fi
m8=/tmp/tp-llama3-8b-Q4_K_M.gguf m70=/tmp/tp-llama3-70b-${L70}L-Q4_K_M.gguf mq=/tmp/tp-qwen3moe-30b-${LMOE}L-Q4_K_M.gguf
if [ "${BENCH:-1}" = 1 ] && [ ! -f $W/synth.started ]; then
  touch $W/synth.started
  (timeout 900 $B/vega synth --shape llama3-8b --type Q4_K_M -o $m8 > $W/synth8.log 2>&1; echo "rc=$?" >> $W/synth8.log
   if [ "${SYNTH70:-1}" = 1 ]; then timeout 900 $B/vega synth --shape llama3-70b --type Q4_K_M --layers $L70 -o $m70 > $W/synth70.log 2>&1; fi
   echo "rc=$?" >> $W/synth70.log
   if [ "${SYNTHQ:-1}" = 1 ]; then timeout 900 $B/vega synth --shape qwen3moe-30b-a3b --type Q4_K_M --layers $LMOE -o $mq > $W/synthq.log 2>&1; fi
   echo "rc=$?" >> $W/synthq.log
   for n in ${SHARES:-}; do
     timeout 900 $B/vega synth --shape llama3-8b --type Q4_K_M --tp-share $n -o ${m8%.gguf}-share$n.gguf > $W/synth_share$n.log 2>&1
     echo "rc=$?" >> $W/synth_share$n.log
   done) &
fi
S=$VEGA_TEST_DATA/models/stories260K.gguf
if [ ! -f $W/peer.done ]; then
  log "PeerSum.* (the all-reduce against the host's sum)"
  timeout 180 $B/tests/gpu/vega_gpu_parity_tests --gtest_filter='PeerSum.*' 2>&1 | grep -E "^\[  |Failure|differ|rank|rror|exception|Expected|Which is" | head -40
  touch $W/peer.done
fi
# A busy loop on every host core (busy_start) until busy_stop: a loaded host, where the
# ranks' host threads launch late.
busy_start() { hogs=(); for i in $(seq "$(nproc)"); do (while :; do :; done) & hogs+=($!); done; }
busy_stop() { kill "${hogs[@]}" 2>/dev/null; wait "${hogs[@]}" 2>/dev/null; }
if [ "${PEER_STRESS:-0}" -gt 0 ] && [ ! -f $W/peer_stress.done ]; then
  log "PeerSum.* x $PEER_STRESS beside a busy loop on each of $(nproc) cores: the runtime's eager loading, then LAZY (peer sums refuse)"
  busy_start
  for mode in "" LAZY; do
    bad=0
    for i in $(seq "$PEER_STRESS"); do
      f=$W/peer_stress.${mode:-DEFAULT}.$i.log
      env ${mode:+CUDA_MODULE_LOADING=$mode} timeout 120 $B/tests/gpu/vega_gpu_parity_tests --gtest_filter='PeerSum.*:GpuRuntime.*' \
        > $f 2>&1 || { bad=$((bad + 1)); grep -E "FAILED  \]|exception" $f | head -3; }
    done
    echo "loading ${mode:-as the runtime sets it}: $bad of $PEER_STRESS runs failed; last run: $(grep -cE '^\[       OK' $f) ok, $(grep -cE '^\[  SKIPPED \]' $f) skipped"
  done
  busy_stop
  for mode in EAGER LAZY; do  # what eager loading costs at startup: a whole small run, 3 times
    TIMEFORMAT="$mode: %R s"
    for i in 1 2 3; do time (CUDA_MODULE_LOADING=$mode $B/vega run -m $S -n 4 --temp 0 --device 0 > /dev/null 2>&1); done
  done
  touch $W/peer_stress.done
fi
# Which environment lets the decode graphs with the NCCL sums run (VEGA_TRACE_GRAPHS says
# where a hang sits); the first that finishes is used for the rest, else op by op.
if [ ! -f $W/graph_env ]; then
  log "decode graphs under tensor parallel: which environment runs them"
  echo "VEGA_NCCL_GRAPHS=0" > $W/graph_env
  for e in ${GRAPH_ENVS:-"X=1"}; do
    env $e VEGA_TRACE_GRAPHS=1 timeout 25 $B/vega run -m $S -n 4 --temp 0 --ignore-eos --devices $D2 --split-mode tensor \
      -p "Once upon a time" > $W/graphs.out 2> $W/graphs.err
    rc=$?
    echo "$e: rc=$rc; $(grep -E 'graph|rror' $W/graphs.err | tail -3 | tr '\n' ' ')"
    [ $rc = 0 ] && { echo "$e" > $W/graph_env; break; }
  done
fi
GRAPH_ENV=$(cat $W/graph_env)
echo "decode graph environment: $GRAPH_ENV"
export $GRAPH_ENV
printf 'Once upon a time\nThe little dog\nLily and Ben\nA big red ball\nOne day\n' > $W/prompts.txt
run() {  # run TAG ENV... -- ARGS: stories260K greedy, ids to $W/TAG.ids (IDS="tag ...": only those)
  local tag=$1; shift
  [ -n "${IDS:-}" ] && [[ " $IDS " != *" $tag "* ]] && return 0
  local envs=(); while [ "$1" != -- ]; do envs+=("$1"); shift; done; shift
  env "${envs[@]}" timeout 60 $B/vega run -m $S -n 24 --temp 0 --ignore-eos --ids-out $W/$tag.ids "$@" > $W/$tag.out 2> $W/$tag.err
  echo "$tag: rc=$? $(grep -E 'all-reduce|rror|tensor parallel' $W/$tag.err | head -2 | tr '\n' ' ')"
}
if [ ! -f $W/ids.done ]; then
  log "decode paths: greedy ids against one GPU"
  run one X=1 -- --device 0 --prompts-file $W/prompts.txt --parallel 4
  run one1 X=1 -- --device 0 -p "Once upon a time"
  run tp1 X=1 -- --devices $D2 --split-mode tensor -p "Once upon a time"
  run tp X=1 -- --devices $D2 --split-mode tensor --prompts-file $W/prompts.txt --parallel 4
  run tp_opbyop VEGA_NCCL_GRAPHS=0 NCCL_GRAPH_MIXING_SUPPORT=1 -- --devices $D2 --split-mode tensor --prompts-file $W/prompts.txt --parallel 4
  run tp_nccl VEGA_PEER_SUMS=0 -- --devices $D2 --split-mode tensor --prompts-file $W/prompts.txt --parallel 4
  run tp_unfused VEGA_PEER_SUM_FUSE=0 -- --devices $D2 --split-mode tensor --prompts-file $W/prompts.txt --parallel 4
  run tp1_unfused VEGA_PEER_SUM_FUSE=0 -- --devices $D2 --split-mode tensor -p "Once upon a time"
  run tp_epi VEGA_PEER_SUM_FUSE=2 -- --devices $D2 --split-mode tensor --prompts-file $W/prompts.txt --parallel 4
  run tp1_epi VEGA_PEER_SUM_FUSE=2 -- --devices $D2 --split-mode tensor -p "Once upon a time"
  run tp_input VEGA_PEER_SUM_FUSE=1 -- --devices $D2 --split-mode tensor --prompts-file $W/prompts.txt --parallel 4
  run tp1_input VEGA_PEER_SUM_FUSE=1 -- --devices $D2 --split-mode tensor -p "Once upon a time"
  run tp_same X=1 -- --devices 0,0 --split-mode tensor --prompts-file $W/prompts.txt --parallel 4
  [ $NG -ge 4 ] && run tp4 X=1 -- --devices $D4 --split-mode tensor --prompts-file $W/prompts.txt --parallel 4
  # Every step op by op (no graph loads the kernels first) beside a busy loop on every core:
  # the case lazy kernel loading deadlocked (thirty-sixth session).
  if [ -z "${IDS:-}" ] || [[ " $IDS " == *" tp_busy "* ]]; then
    busy_start
    run tp_busy VEGA_GRAPHS=0 -- --devices $D2 --split-mode tensor --prompts-file $W/prompts.txt --parallel 4
    busy_stop
  fi
  for t in tp1 tp tp_opbyop tp_nccl tp_unfused tp1_unfused tp_epi tp1_epi tp_input tp1_input tp_same tp4 tp_busy; do
    [ -f $W/$t.ids ] || continue
    ref=one; case $t in tp1*) ref=one1;; esac
    [ -f $W/$ref.ids ] || { echo "$t: no $ref run to compare with (IDS)"; continue; }
    cmp -s $W/$t.ids $W/$ref.ids && { echo "$t ids == $ref"; continue; }
    # Differing ids: near-ties flipped by another summation order, or wrong tokens? Each
    # generated id against one GPU's teacher-forced logits (scripts/ids_near_argmax.py).
    echo "$t ids DIFFER from $ref ($(wc -l < $W/$t.ids 2>/dev/null) lines): $(python3 scripts/ids_near_argmax.py \
      $B/vega $S $W/$t.ids ${IDS_TOL:-0.1} --device 0 | tail -1)"
  done
  touch $W/ids.done
fi
if [ "${BENCH:-1}" = 1 ]; then
  vb() { timeout 300 $B/vega bench "$@" 2>&1 | grep -E "^\||rror|layer split|tensor parallel" | cut -d'|' -f4-; }
  log "waiting for the synth files (no bench runs beside a synth: it takes every core)"
  while ! grep -q rc= $W/synthq.log 2>/dev/null; do sleep 2; done
  for n in ${SHARES:-}; do while ! grep -q rc= $W/synth_share$n.log 2>/dev/null; do sleep 2; done; done
  for m in ${BENCH_MODELS:-$m8 $m70 $mq}; do
    n=$(basename $m .gguf) sl=$W/synth8.log
    [ $m = $mq ] && sl=$W/synthq.log
    [ $m = $m70 ] && sl=$W/synth70.log
    log "waiting for $n"
    while ! grep -q rc= $sl 2>/dev/null; do sleep 2; done
    tail -n 1 $sl
    for cfg in ${CONFIGS:-"one:--device 0" "tp2:--devices $D2 --split-mode tensor" \
               "tp2v:--devices $D2 --split-mode tensor" "tp2_2:--devices $D2 --split-mode tensor" \
               "tp2v2:--devices $D2 --split-mode tensor" "tp2e:--devices $D2 --split-mode tensor" \
               "tp2f:--devices $D2 --split-mode tensor" "tp2s:--devices $D2 --split-mode tensor" \
               "oner:--device 0" "tp2r:--devices $D2 --split-mode tensor" \
               "tp2u:--devices $D2 --split-mode tensor" \
               "tp2n:--devices $D2 --split-mode tensor" "tp4:--devices $D4 --split-mode tensor" \
               "tp4u:--devices $D4 --split-mode tensor" "tp4n:--devices $D4 --split-mode tensor" "layer2:--devices $D2"}; do
      tag=${cfg%%:*} opts=${cfg#*:} ev=X=1
      [ -n "${CONFIG_TAGS:-}" ] && [[ " $CONFIG_TAGS " != *" $tag "* ]] && continue
      case $tag in tp4*) [ $NG -lt 4 ] && continue;; esac
      case $tag in  # (tensor-parallel tags only: "one" ends in e too)
        tp*v|tp*v2) ev=VEGA_TP_VOCAB_SPLIT=0;; tp*n) ev=VEGA_PEER_SUMS=0;; tp*u) ev=VEGA_PEER_SUM_FUSE=0;;
        tp*f) ev=VEGA_PEER_SUM_FUSE=1;; tp*e) ev=VEGA_PEER_SUM_FUSE=2;; tp*s) ev=VEGA_LAUNCHER_SPIN_US=${SPIN_US:-20000};;
        oner|tp*r) ev=VEGA_STEP_REPLAYS=2;;
      esac
      [ -f $W/bench.$n.$tag ] && continue
      log "vega, $n: $tag ($ev $opts)"
      env $ev bash -c "$(declare -f vb); B=$B; vb -m $m $opts -r 3 -p 512 -n 128 -B 1; vb -m $m $opts -r 2 -p 0 -n 128 -d 128 -B 16"
      touch $W/bench.$n.$tag
    done
    if [ "${LLAMA:-1}" = 1 ] && [ ! -f $W/bench.$n.llama ] && [[ " ${LLAMA_MODELS:-$m8 $mq $m70} " == *" $m "* ]]; then
      while [ ! -x $L/llama-batched-bench ] && ! grep -q "llama build rc" $W/llama_build.log 2>/dev/null; do sleep 2; done
      for sm in ${LLAMA_MODES:-none layer row}; do
        log "llama-bench -sm $sm, $n"
        if [ $sm = row ]; then  # (verbose: why it does not load, where it does not)
          timeout 300 $L/llama-bench -m $m -p 512 -n 128 -r 3 -fa 1 -ngl 99 -sm $sm -v 2>&1 | grep -iE "^\||error|fail" | tail -8
          continue  # (B=16 in row mode: only if the file loads at all)
        fi
        timeout 300 $L/llama-bench -m $m -p 512 -n 128 -r 3 -fa 1 -ngl 99 -sm $sm 2>&1 | grep -E "^\||rror"
        log "llama-batched-bench -sm $sm, $n (B=16)"
        timeout 300 $L/llama-batched-bench -m $m -c 8192 -npp 128 -ntg 128 -npl 16 -fa 1 -ngl 99 -sm $sm 2>&1 | grep -E "^\||rror"
      done
      touch $W/bench.$n.llama
    fi
  done
  # One rank's share alone: its decode with free sums; on each GPU of SHARE_GPUS (default
  # 0): a tensor-parallel step waits for the slower rank, so each device's own speed counts.
  for n in ${SHARES:-}; do
    for g in ${SHARE_GPUS:-0}; do
      [ -f $W/bench.share$n.gpu$g ] && continue
      tail -n 1 $W/synth_share$n.log
      for f in $m8 ${m8%.gguf}-share$n.gguf; do
        [ $f = $m8 ] && [ -f $W/bench.share.whole.gpu$g ] && continue
        log "vega, GPU $g alone: $(basename $f)"
        CUDA_VISIBLE_DEVICES=$g vb -m $f --device 0 -r 3 -p 0 -n 128
        CUDA_VISIBLE_DEVICES=$g vb -m $f --device 0 -r 2 -p 0 -n 128 -d 128 -B 16
        [ $f = $m8 ] && touch $W/bench.share.whole.gpu$g
      done
      touch $W/bench.share$n.gpu$g
    done
  done
fi
E2EF=${E2E_FILTER:-AllReferences*:V1AndV3*:ParallelRun*:ParallelBench*:KvCacheQ8.*}
e2e() {  # e2e TAG DEVICES FILTER
  [ -f $W/e2e.$1.done ] && return 0
  log "end-to-end on the GPU, --devices '$2' ($1)"
  VEGA_TEST_DEVICE=gpu VEGA_TEST_DEVICES=$2 timeout 300 $B/tests/vega_engine_tests --gtest_filter="$3" > $W/e2e.$1.log 2>&1
  echo "rc=$?" >> $W/e2e.$1.log
  grep -E "^\[  (PASSED|FAILED|SKIPPED)|^\[  FAILED|rc=" $W/e2e.$1.log | head -20
  touch $W/e2e.$1.done
}
[ "${E2E1:-0}" = 1 ] && e2e one 0 "${E2E1_FILTER:-$E2EF}"
[ "${E2E:-1}" = 1 ] && e2e tp2 "$D2 --split-mode tensor" "$E2EF"
[ "${E2E:-1}" = 1 ] && [ $NG -ge 4 ] && e2e tp4 "$D4 --split-mode tensor" "${E2E4:-AllReferences*}"
[ "${E2E:-1}" = 1 ] && [ $NG -ge 4 ] && e2e layer4 "$D4" "${E2E4:-AllReferences*}"
sweep() {  # sweep TAG SPLIT: scripts/gpu_sweep.sh with the device run over SPLIT
  [ -f $W/sweep.$1.done ] && return 0
  log "sweep, --devices $2 (scripts/gpu_sweep.sh)"
  SPLIT="$2" SHAPES=${SWEEP_SHAPES:-qwen3moe-tiny qwen3moe-30b-a3b llama3-8b} \
    TYPES=${SWEEP_TYPES:-Q4_K_M} OUT=$W/sweep.$1 bash scripts/gpu_sweep.sh $B | tail -30
  touch $W/sweep.$1.done
}
if [ "${SWEEP:-1}" = 1 ]; then
  sweep tp2 "$D2 --split-mode tensor"
  if [ $NG -ge 4 ]; then sweep tp4 "$D4 --split-mode tensor"; sweep layer4 "$D4"; fi
fi
if [ "${PARITY_ALL:-0}" = 1 ] && [ ! -f $W/parity_all.done ]; then
  log "every GPU parity test on device 0 (Parity.*, MoeParity.*, PeerSum.*)"
  timeout 400 $B/tests/gpu/vega_gpu_parity_tests ${PARITY_FILTER:+--gtest_filter=$PARITY_FILTER} 2>&1 | grep -E "^\[  (PASSED|FAILED)|^\[  FAILED|tests ran" | head -30
  touch $W/parity_all.done
fi
# One-GPU sweep pairs (SWEEP1="llama3-8b:Q6_K qwen2-7b:Q4_0 ..."), GPU 0 alone.
for pair in ${SWEEP1:-}; do
  t=${pair//:/-}
  [ -f $W/sweep1.$t.done ] && continue
  log "one-GPU sweep, $pair, PROMPT=${SWEEP1_PROMPT:-300}"
  CUDA_VISIBLE_DEVICES=0 SHAPES=${pair%%:*} TYPES=${pair#*:} PROMPT=${SWEEP1_PROMPT:-300} OUT=$W/sweep1.$t \
    bash scripts/gpu_sweep.sh $B | tail -5
  touch $W/sweep1.$t.done
done
# One-GPU types table on the same build (issue 26's bars are an H200's: worth a step when a
# several-GPU H200 machine comes): TYPES_BENCH="IQ4_XS MXFP4" runs scripts/types_bench.sh
# with only GPU 0 visible (llama-bench would otherwise split over every GPU).
if [ -n "${TYPES_BENCH:-}" ] && [ ! -f $W/types.done ]; then
  log "types bench on GPU 0 alone: $TYPES_BENCH"
  CUDA_VISIBLE_DEVICES=0 TYPES="$TYPES_BENCH" OUT=$W/types PEERS=$PEERS bash scripts/types_bench.sh $B > $W/types.log 2>&1
  cat $W/types/summary.txt 2>/dev/null | tail -20
  touch $W/types.done
fi
log "done"
if [ -f $W/sweep_one.started ]; then
  log "waiting for the one-GPU sweep"
  while ! grep -q rc= $W/sweep_one.log 2>/dev/null; do sleep 5; done
  cat $W/sweep_one/sweep.txt; tail -1 $W/sweep_one.log
fi
touch $W/finished
