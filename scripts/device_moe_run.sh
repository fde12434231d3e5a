#!/usr/bin/env bash
# One device session's MoE work, resumable and in the background (the device runs
# at most 10 minutes per call): build vega (CUDA) with the parity tests, the MoE
# parity tests, then scripts/moe_bench.sh. State and logs in $W (default /tmp/moe_run);
# each call copies them to its $OUT. Start: `setsid scripts/device_moe_run.sh &`;
# poll: `scripts/device_moe_run.sh poll SECONDS`.
W=${W:-/tmp/moe_run}
if [ "${1:-}" = poll ]; then
  for _ in $(seq 1 "${2:-500}"); do [ -f $W/finished ] && break; sleep 1; done
  cp -r $W/. "${OUT:-.}/" 2>/dev/null; cat $W/log.txt 2>/dev/null | tail -60; exit 0
fi
set -u
mkdir -p $W
exec > $W/log.txt 2>&1
. scripts/device_env.sh
B=build-h200
echo "=== build $(date +%T)"
if [ ! -f $W/built ]; then
  cmake -S . -B $B -G Ninja -DCMAKE_BUILD_TYPE=Release -DVEGA_CUDA=ON -DVEGA_ASAN_TESTS=OFF -DVEGA_NET=OFF \
    -DCMAKE_CUDA_COMPILER=$(command -v nvcc || echo /usr/local/cuda/bin/nvcc) > $W/configure.log 2>&1 \
    && cmake --build $B -j16 --target vega vega_gpu_parity_tests > $W/build.log 2>&1 && touch $W/built \
    || { grep -E "error|FAILED" $W/build.log | head -20; touch $W/finished; exit 1; }
fi
echo "=== MoE parity $(date +%T)"
[ -f $W/parity.done ] || { timeout 200 $B/tests/gpu/vega_gpu_parity_tests --gtest_filter="${PARITY_FILTER:-MoeParity*}" > $W/parity.log 2>&1; touch $W/parity.done; }
grep -E "^\[  (PASSED|FAILED)|Failure|Failed|chose" $W/parity.log | head -20
OUT=$W/bench bash scripts/moe_bench.sh $B
touch $W/finished
