#!/usr/bin/env bash
# Issue 29's grammar cost on an NVIDIA machine, in the background, resumable (finished
# steps are skipped; state and logs in $W, default /tmp/grammar_run):
#   1. the normal build (build-h200): the Scheduler tests on the GPU (a grammar's rows
#      from the device's candidates equal whole-row sampling);
#   2. scripts/grammar_serve_bench.sh: served decode with and without a json_schema at 1
#      and 16 streams, greedy and sampled, and the server's grammar counters.
#   start: setsid scripts/device_grammar_run.sh &     poll: scripts/device_grammar_run.sh poll SECONDS
W=${W:-/tmp/grammar_run}
. "$(dirname "$0")/device_run_start.sh" 80 "$@"
export VEGA_TEST_DATA=${VEGA_TEST_DATA:-$PWD/.devdata/testdata}
B=build-h200
nvidia-smi --query-gpu=name,memory.total,clocks.max.sm --format=csv,noheader
if [ ! -f $W/built ]; then
  log "build $B"
  cmake -S . -B $B -G Ninja -DCMAKE_BUILD_TYPE=Release -DVEGA_CUDA=ON -DVEGA_ASAN_TESTS=OFF -DVEGA_NET=OFF \
    -DCMAKE_CUDA_COMPILER=$(command -v nvcc || echo /usr/local/cuda/bin/nvcc) > $W/configure.log 2>&1 &&
    cmake --build $B -j16 --target vega vega_engine_tests > $W/build.log 2>&1 && touch $W/built ||
    { grep -E "error|FAILED" $W/build.log | head -20; touch $W/finished; exit 1; }
fi
if [ ! -f $W/tests.done ]; then
  log "Scheduler tests on the GPU"
  VEGA_TEST_DEVICE=gpu timeout 300 $B/tests/vega_engine_tests --gtest_filter='Scheduler.*:BatchedStep*' > $W/tests.log 2>&1
  echo "rc=$?" >> $W/tests.log
  grep -E "^\[  (PASSED|FAILED|SKIPPED)|^\[  FAILED|Failure|rc=" $W/tests.log | head -20
  touch $W/tests.done
fi
if [ ! -f $W/bench.done ]; then
  log "grammar serve bench"
  OUT=$W/bench timeout 1200 bash scripts/grammar_serve_bench.sh $B
  touch $W/bench.done
fi
log done
touch $W/finished
