#!/usr/bin/env bash
# One device session's MoE work in the background (the device runs at most 10 minutes
# per call), ordered to spend the fewest device seconds: llama.cpp builds from the
# start while vega builds and its tests run and the synth files are written; the
# benchmarks start once the compile is over (it would slow them). Then
# scripts/moe_bench.sh (every MoE type side by side) and the dense regression rows.
# State and logs in $W (default /tmp/moe_run), resumable (finished steps are skipped).
#   start: setsid scripts/device_moe_run.sh &      poll: scripts/device_moe_run.sh poll SECONDS
# (poll archives $W into the call's $OUT as run.tgz every 10 s, so a call cut short still returns logs).
# Test data: $VEGA_TEST_DATA or .devdata/testdata. TYPES (default Q4_0 Q4_K_M Q8_0), E2E_FILTER.
W=${W:-/tmp/moe_run}
. "$(dirname "$0")/device_run_start.sh" 80 "$@"
export VEGA_TEST_DATA=${VEGA_TEST_DATA:-$PWD/.devdata/testdata}
B=build-h200
PEERS=${PEERS:-$PWD/.devdata/peers}
L=${LLAMA_PEER_DIR:-/tmp/llama-peer}/b/bin
if [ ! -x $L/llama-batched-bench ]; then
  (PEERS=$PEERS bash scripts/build_peer.sh llama-bench llama-batched-bench > $W/llama_build.log 2>&1
   echo "llama build rc=$?" >> $W/llama_build.log) &
  lb=$!
else
  lb=
fi
log "build vega"
if [ ! -f $W/built ]; then
  cmake -S . -B $B -G Ninja -DCMAKE_BUILD_TYPE=Release -DVEGA_CUDA=ON -DVEGA_ASAN_TESTS=OFF -DVEGA_NET=OFF \
    -DCMAKE_CUDA_COMPILER=$(command -v nvcc || echo /usr/local/cuda/bin/nvcc) > $W/configure.log 2>&1 \
    && cmake --build $B -j16 --target vega vega_gpu_parity_tests vega_engine_tests > $W/build.log 2>&1 && touch $W/built \
    || { grep -E "error|FAILED" $W/build.log | head -20; touch $W/finished; exit 1; }
fi
log "parity tests (every op; MoE in MoeParity.*)"
[ -f $W/parity.done ] || { timeout 300 $B/tests/gpu/vega_gpu_parity_tests ${PARITY_FILTER:+--gtest_filter=$PARITY_FILTER} \
  > $W/parity.log 2>&1; touch $W/parity.done; }
grep -E "^\[  (PASSED|FAILED)|Failure|Failed|chose|^\[ +OK|^\[ +RUN" $W/parity.log | grep -v "RUN\|OK" | head -20
log "end-to-end on the GPU"
[ -f $W/e2e.done ] || { VEGA_TEST_DEVICE=gpu timeout 300 $B/tests/vega_engine_tests \
  --gtest_filter="${E2E_FILTER:-AllReferences/*qwen3*:AllReferences/*q4_k_m*:ParallelRun.*}" > $W/e2e.log 2>&1; touch $W/e2e.done; }
grep -E "^\[  (PASSED|FAILED)|NMSE|differing|Failure" $W/e2e.log | head -30
# The first files while the peer compiles (writing them is I/O and one core per tensor row block).
for t in ${PRESYNTH-Q4_0 Q4_K_M}; do
  m=/tmp/moe-30b-$t.gguf
  [ -f $W/bench/done.$t ] || [ -f $m ] || { log "synth qwen3moe-30b-a3b $t"; timeout 600 $B/vega synth --shape qwen3moe-30b-a3b --type $t -o $m > $W/synth-$t.log 2>&1 || rm -f $m; }
done
q40=/tmp/peer-llama2-7b-Q4_0.gguf
[ -f $q40 ] || timeout 300 $B/vega synth --shape llama2-7b --type Q4_0 -o $q40 > $W/synth-dense.log 2>&1
if [ -n "$lb" ]; then log "waiting for llama.cpp"; wait $lb; fi
tail -1 $W/llama_build.log
OUT=$W/bench TYPES=${TYPES:-Q4_0 Q4_K_M Q8_0} bash scripts/moe_bench.sh $B
touch $W/finished
