#!/usr/bin/env bash
# Issue 27's layer split on a machine with several GPUs, in the background, resumable
# (finished steps are skipped; state and logs in $W, default /tmp/split_run):
#   1. build vega (CUDA) while llama.cpp builds;
#   2. the end-to-end tests with the model split over $DEVS (default 0,1) and over
#      0,0 (one GPU twice), then on one GPU (the regression check);
#   3. scripts/gpu_sweep.sh with SPLIT=$DEVS (every shape x type: split vs CPU and
#      split vs one GPU);
#   4. benchmarks, side by side: vega one GPU / --devices $DEVS, llama.cpp -sm none /
#      layer / row, tg128, pp512 and B=16 on llama3-8b Q4_K_M and a llama3-70b-shaped
#      synth of $L70 layers (BENCH=0: skip).
# Tensor parallel has its own run: scripts/device_tp_run.sh. LLAMA=0 skips llama.cpp.
#   start: setsid scripts/device_split_run.sh &     poll: scripts/device_split_run.sh poll SECONDS
W=${W:-/tmp/split_run}
. "$(dirname "$0")/device_run_start.sh" 60 "$@"
export VEGA_TEST_DATA=${VEGA_TEST_DATA:-$PWD/.devdata/testdata}
PEERS=${PEERS:-$PWD/.devdata/peers}
L=${LLAMA_PEER_DIR:-/tmp/llama-peer}/b/bin
DEVS=${DEVS:-0,1}
L70=${L70:-16}
B=build-h200
[ -f $W/topo.done ] || { nvidia-smi --query-gpu=index,name,memory.total --format=csv,noheader; nvidia-smi topo -m; touch $W/topo.done; }
if [ "${BENCH:-1}" = 1 ] && [ "${LLAMA:-1}" = 1 ] && [ ! -x $L/llama-bench ]; then
  (PEERS=$PEERS bash scripts/build_peer.sh llama-bench llama-batched-bench > $W/llama_build.log 2>&1
   echo "llama build rc=$?" >> $W/llama_build.log) &
fi
if [ ! -f $W/built ]; then
  log "build"
  cmake -S . -B $B -G Ninja -DCMAKE_BUILD_TYPE=Release -DVEGA_CUDA=ON -DVEGA_ASAN_TESTS=OFF -DVEGA_NET=OFF \
    -DCMAKE_CUDA_COMPILER=$(command -v nvcc || echo /usr/local/cuda/bin/nvcc) > $W/configure.log 2>&1 \
    && cmake --build $B -j24 --target vega vega_engine_tests > $W/build.log 2>&1 && touch $W/built \
    || { grep -E "error|FAILED" $W/build.log | head -20; touch $W/finished; exit 1; }
fi
# The benchmark files, made on the CPU while the tests run.
m8=/tmp/split-llama3-8b-Q4_K_M.gguf m70=/tmp/split-llama3-70b-${L70}L-Q4_K_M.gguf
if [ "${BENCH:-1}" = 1 ] && [ ! -f $W/synth.started ]; then
  touch $W/synth.started
  (timeout 900 $B/vega synth --shape llama3-8b --type Q4_K_M -o $m8 > $W/synth8.log 2>&1; echo "rc=$?" >> $W/synth8.log
   timeout 900 $B/vega synth --shape llama3-70b --type Q4_K_M --layers $L70 -o $m70 > $W/synth70.log 2>&1
   echo "rc=$?" >> $W/synth70.log) &
fi
E2E=${E2E_FILTER:-AllReferences*:V1AndV3*:ParallelRun*:ParallelBench*:Cli.*:KvCacheQ8.*:Perplexity.*}
e2e() {  # e2e TAG DEVICES FILTER
  [ -f $W/e2e.$1.done ] && return 0
  log "end-to-end on the GPU, --devices '$2' ($1)"
  VEGA_TEST_DEVICE=gpu VEGA_TEST_DEVICES=$2 timeout 400 $B/tests/vega_engine_tests --gtest_filter="$3" > $W/e2e.$1.log 2>&1
  echo "rc=$?" >> $W/e2e.$1.log
  grep -E "^\[  (PASSED|FAILED|SKIPPED)|^\[  FAILED|rc=" $W/e2e.$1.log | head -20
  touch $W/e2e.$1.done
}
e2e split "$DEVS" "$E2E"
e2e same0 "0,0" "$E2E"
e2e one "" "${E2E_ONE:--*llama_f32*:*qwen3_f32*:*qwen3moe_f32*:Cli.Tokenize*:ToolCalls.*:GrammarConstraint.TrieMask}"
if [ "${SWEEP:-1}" = 1 ] && [ ! -f $W/sweep.done ]; then
  log "sweep, split over $DEVS (scripts/gpu_sweep.sh)"
  SPLIT=$DEVS SHAPES=${SWEEP_SHAPES:-1b llama3-8b qwen2-7b qwen3moe-tiny qwen3moe-30b-a3b} \
    TYPES=${SWEEP_TYPES:-Q4_0 Q4_K_M} OUT=$W/sweep bash scripts/gpu_sweep.sh $B | tail -30
  touch $W/sweep.done
fi
if [ "${BENCH:-1}" = 1 ]; then
  log "waiting for the synth files and llama.cpp"
  while ! grep -q rc= $W/synth70.log 2>/dev/null; do sleep 2; done
  [ "${LLAMA:-1}" = 1 ] && while [ ! -x $L/llama-batched-bench ] && ! grep -q "llama build rc" $W/llama_build.log 2>/dev/null; do sleep 2; done
  tail -n 1 $W/synth8.log $W/synth70.log $W/llama_build.log 2>/dev/null
  vb() { timeout 300 $B/vega bench "$@" 2>&1 | grep -E "^\||rror|layer split|tensor parallel" | cut -d'|' -f4-; }
  for m in $m8 $m70; do
    n=$(basename $m .gguf)
    if [ ! -f $W/bench.$n.vega ]; then
      log "vega, $n: one GPU, then --devices $DEVS"
      vb -m $m --device 0 -r 3 -p 512 -n 128 -B 1
      vb -m $m --devices $DEVS -r 3 -p 512 -n 128 -B 1
      vb -m $m --device 0 -r 2 -p 0 -n 128 -d 128 -B 16
      vb -m $m --devices $DEVS -r 2 -p 0 -n 128 -d 128 -B 16
      touch $W/bench.$n.vega
    fi
    if [ "${LLAMA:-1}" = 1 ] && [ ! -f $W/bench.$n.llama ]; then
      for sm in none layer row; do
        log "llama-bench -sm $sm, $n"
        timeout 300 $L/llama-bench -m $m -p 512 -n 128 -r 3 -fa 1 -ngl 99 -sm $sm 2>&1 | grep -E "^\||rror"
        log "llama-batched-bench -sm $sm, $n (B=16)"
        timeout 300 $L/llama-batched-bench -m $m -c 8192 -npp 128 -ntg 128 -npl 16 -fa 1 -ngl 99 -sm $sm 2>&1 | grep -E "^\||rror"
      done
      touch $W/bench.$n.llama
    fi
  done
fi
log "done"
touch $W/finished
