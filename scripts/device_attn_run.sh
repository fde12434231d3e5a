#!/usr/bin/env bash
# One device session's prompt-attention work (issue 24) in the background, ordered to
# spend the fewest device seconds: llama.cpp builds while vega builds and its tests
# run (normal build, then the gfx906 emulation build); the benchmarks
# (scripts/attn_bench.sh) start once every compile is over. State and logs in $W
# (default /tmp/attn_run), resumable (finished steps are skipped).
#   start: setsid scripts/device_attn_run.sh &      poll: scripts/device_attn_run.sh poll SECONDS
# (poll archives $W into the call's $OUT as run.tgz every 10 s, so a call cut short still returns logs).
# PARITY_FILTER, E2E_FILTER, E2E=0 (no end-to-end tests, nor their build), EMU=0 (skip the emulation build), BENCH=0 (tests only),
# PPL=1 (vega perplexity -c 2048 on the GPU and the CPU), MOE="Q8_0 ..." (then
# scripts/moe_bench.sh on qwen3moe-30b-a3b in those types; DENSE=1 adds llama2-7b Q4_0 tg128
# and B=16), SWEEP=1 (scripts/gpu_sweep.sh: every synth shape x type, GPU vs CPU),
# ATTN_BLOCKS_AB="4 16" (tg128 @ d8192 on llama2-7b Q4_0 per VEGA_GPU_ATTN_BLOCKS value),
# SWEEP_SHAPES / SWEEP_TYPES (the sweep's SHAPES / TYPES), SWEEP_AB=1 (the sweep again with
# VEGA_GPU_TILED_ATTN=0), KV_TYPES="f16 q8_0" (attn_bench.sh's KV cache types), ATTN=0 (no
# attn_bench.sh), TYPES_BENCH="Q2_K ..." (scripts/types_bench.sh), AB_BASE=.devdata/ab-C.tgz
# (scripts/dense_ab.sh of that commit against this tree: AB_TESTS, AB_TYPES, AB_SHAPE; its build
# starts in the background once this tree's is done), PARITY_ENV="NAME=VALUE" with
# PARITY_ENV_FILTER (the parity tests again under that setting), SYNTH="shape:type ..." (made in
# the background into $SYNTH_DIR, default /tmp/synth, while the tests run; the bench scripts use them),
# ATTN_ENV_AB (attn_bench.sh's ENV_AB), ATTN_Q8_TG=1 (tg rows with a q8_0 cache, both engines).
W=${W:-/tmp/attn_run}
. "$(dirname "$0")/device_run_start.sh" 60 "$@"
export VEGA_TEST_DATA=${VEGA_TEST_DATA:-$PWD/.devdata/testdata}
export SYNTH_DIR=${SYNTH_DIR:-/tmp/synth}  # the synth files of every bench script below
PEERS=${PEERS:-$PWD/.devdata/peers}
L=${LLAMA_PEER_DIR:-/tmp/llama-peer}/b/bin
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader
if [ "${BENCH:-1}" = 1 ] && [ ! -x $L/llama-bench ]; then
  (PEERS=$PEERS bash scripts/build_peer.sh llama-bench llama-batched-bench > $W/llama_build.log 2>&1
   echo "llama build rc=$?" >> $W/llama_build.log) &
  lb=$!
else
  lb=
fi
build() {  # build DIR EMULATE TARGETS...
  local b=$1 emu=$2; shift 2
  [ -f $W/built.$b ] && return 0
  log "build $b"
  cmake -S . -B $b -G Ninja -DCMAKE_BUILD_TYPE=Release -DVEGA_CUDA=ON -DVEGA_ASAN_TESTS=OFF -DVEGA_NET=OFF \
    -DVEGA_GPU_EMULATE_GFX906=$emu -DCMAKE_CUDA_COMPILER=$(command -v nvcc || echo /usr/local/cuda/bin/nvcc) \
    > $W/configure.$b.log 2>&1 && cmake --build $b -j16 --target "$@" > $W/build.$b.log 2>&1 && touch $W/built.$b \
    || { grep -E "error|FAILED" $W/build.$b.log | head -20; return 1; }
}
tests() {  # tests DIR TAG PARITY_FILTER E2E_FILTER
  local b=$1 tag=$2
  [ -f $W/tests.$tag.done ] && return 0
  log "parity ($tag): $3"
  timeout 400 $b/tests/gpu/vega_gpu_parity_tests --gtest_filter="$3" > $W/parity.$tag.log 2>&1; echo "rc=$?" >> $W/parity.$tag.log
  grep -E "^\[  (PASSED|FAILED)|Failure|Expected|which is|nmse|rc=" $W/parity.$tag.log | head -60
  if [ "${E2E:-1}" = 0 ]; then touch $W/tests.$tag.done; return 0; fi
  log "end-to-end on the GPU ($tag): $4"
  VEGA_TEST_DEVICE=gpu timeout 400 $b/tests/vega_engine_tests --gtest_filter="$4" > $W/e2e.$tag.log 2>&1; echo "rc=$?" >> $W/e2e.$tag.log
  grep -E "^\[  (PASSED|FAILED)|^\[  FAILED|rc=" $W/e2e.$tag.log | head -30
  touch $W/tests.$tag.done
}
e2e_target=vega_engine_tests; [ "${E2E:-1}" = 0 ] && e2e_target=
build build-h200 OFF vega vega_gpu_parity_tests $e2e_target || { touch $W/finished; exit 1; }
bg=
if [ -n "${AB_BASE:-}" ]; then  # the A/B base's build (dense_ab.sh's paths) beside the tests
  (W=$W/ab AB_BUILD_ONLY=1 bash scripts/dense_ab.sh $AB_BASE > $W/ab_build.log 2>&1) &
  bg="$bg $!"
fi
if [ -n "${SYNTH:-}" ]; then
  (mkdir -p $SYNTH_DIR; for spec in $SYNTH; do
     f=$SYNTH_DIR/${spec%%:*}-${spec##*:}.gguf
     [ -f $f ] || build-h200/vega synth --shape ${spec%%:*} --type ${spec##*:} -o $f > /dev/null 2>&1 || rm -f $f
   done; ls -la $SYNTH_DIR > $W/synth.log) &
  bg="$bg $!"
fi
if [ -n "${PARITY_ENV:-}" ] && [ ! -f $W/parity_env.done ]; then
  log "parity with $PARITY_ENV: ${PARITY_ENV_FILTER:-PromptAttention.*}"
  env "$PARITY_ENV" timeout 400 build-h200/tests/gpu/vega_gpu_parity_tests --gtest_filter="${PARITY_ENV_FILTER:-PromptAttention.*}" \
    > $W/parity_env.log 2>&1; echo "rc=$?" >> $W/parity_env.log
  grep -E "^\[  (PASSED|FAILED)|Failure|rc=" $W/parity_env.log | head -30
  touch $W/parity_env.done
fi
tests build-h200 cuda "${PARITY_FILTER:-PromptAttention.*:Parity.*}" \
  "${E2E_FILTER:--*llama_f32*:*qwen3_f32*:*qwen3moe_f32*:Cli.Tokenize*:ToolCalls.*}"
if [ "${PPL:-0}" = 1 ] && [ ! -f $W/ppl.done ]; then
  log "perplexity -c 2048, GPU then CPU, f16 and q8_0 KV caches"
  for m in stories260K synth-llama-q4_0; do
    for kv in f16 q8_0; do
      for dev in gpu cpu; do
        echo "$m $dev $kv: $(timeout 300 build-h200/vega perplexity -m $VEGA_TEST_DATA/models/$m.gguf -f $VEGA_TEST_DATA/text/wp200k.txt \
          -c 2048 --chunks 16 --device $dev --kv-type $kv 2>&1 | grep -E "Final|rror")"
      done
    done
  done
  touch $W/ppl.done
fi
if [ "${SWEEP:-0}" = 1 ] && [ ! -f $W/sweep.done ]; then
  log "every synth shape x type, GPU vs CPU (scripts/gpu_sweep.sh)"
  SHAPES=${SWEEP_SHAPES:-1b llama2-7b llama3-8b qwen2-7b qwen3moe-tiny qwen3moe-30b-a3b} TYPES=${SWEEP_TYPES:-Q4_0 Q8_0 Q4_K_M Q6_K} \
    OUT=$W/sweep bash scripts/gpu_sweep.sh build-h200 | tail -30
  if [ "${SWEEP_AB:-0}" = 1 ]; then
    log "the same with prompts through the split kernel (VEGA_GPU_TILED_ATTN=0)"
    VEGA_GPU_TILED_ATTN=0 SHAPES=${SWEEP_SHAPES:-1b llama2-7b llama3-8b qwen2-7b qwen3moe-tiny qwen3moe-30b-a3b} \
      TYPES=${SWEEP_TYPES:-Q4_0 Q8_0 Q4_K_M Q6_K} OUT=$W/sweep_split bash scripts/gpu_sweep.sh build-h200 | tail -30
  fi
  touch $W/sweep.done
fi
if [ "${EMU:-1}" = 1 ]; then
  build build-h200-emu ON vega_gpu_parity_tests vega_engine_tests \
    && tests build-h200-emu emu "${EMU_PARITY_FILTER:-PromptAttention.*:Parity.KvStoreAndAttention:Parity.RopeStoreIntoQ8Cache:Parity.*Block*}" \
             "${EMU_E2E_FILTER:-AllReferences/*llama*:AllReferences/*qwen3_q8*:ParallelRun.*:KvCacheQ8.*}"
fi
if [ "${BENCH:-1}" = 1 ]; then
  if [ -n "$lb" ]; then log "waiting for llama.cpp"; wait $lb; fi
  if [ -n "$bg" ]; then log "waiting for the A/B build and the synth files"; wait $bg; tail -3 $W/ab_build.log 2>/dev/null; fi
  tail -1 $W/llama_build.log 2>/dev/null
  [ "${ATTN:-1}" = 1 ] && OUT=$W/bench TILED_AB=${TILED_AB:-0} KV_TYPES=${KV_TYPES:-f16} ENV_AB="${ATTN_ENV_AB:-}" \
    bash scripts/attn_bench.sh build-h200
  [ "${ATTN_Q8_TG:-0}" = 1 ] && OUT=$W/bench_q8 KV_TYPES=q8_0 PP=none bash scripts/attn_bench.sh build-h200
  [ -n "${TYPES_BENCH:-}" ] && OUT=$W/types TYPES="$TYPES_BENCH" KEEP=1 bash scripts/types_bench.sh build-h200
  [ -n "${AB_BASE:-}" ] && W=$W/ab TESTS="${AB_TESTS:-b1 pp512}" AB_TYPES="${AB_TYPES:-Q4_0 Q4_K_M Q8_0}" \
    SHAPE=${AB_SHAPE:-llama2-7b} TREE_VEGA=$PWD/build-h200/vega bash scripts/dense_ab.sh $AB_BASE .
  if [ -n "${ATTN_BLOCKS_AB:-}" ]; then
    m=$SYNTH_DIR/llama2-7b-Q4_0.gguf; mkdir -p $SYNTH_DIR
    [ -f $m ] || build-h200/vega synth --shape llama2-7b --type Q4_0 -o $m > /dev/null 2>&1
    for nb in ${ATTN_BLOCKS_AB}; do
      log "tg128 @ d8192, VEGA_GPU_ATTN_BLOCKS=$nb"
      VEGA_GPU_ATTN_BLOCKS=$nb timeout 200 build-h200/vega bench -m $m --device gpu -c 10304 -r 2 -p 0 -n 128 -d 8192 2>&1 | grep -E "tg128|rror"
    done
  fi
  [ -n "${MOE:-}" ] && OUT=$W/moe TYPES="$MOE" DENSE=${DENSE:-0} bash scripts/moe_bench.sh build-h200
fi
touch $W/finished
