#!/usr/bin/env bash
# Issue 26's device work in the background, ordered for the fewest device seconds: every
# compile first and together (this tree with its tests, each A/B base's vega, llama.cpp),
# then the tests, then the benchmarks (nothing timed beside a compile), then the gfx906
# emulation build and its tests. State and logs in $W (default /tmp/types_run), resumable
# (finished steps are skipped).
#   start: setsid scripts/device_types_run.sh &      poll: scripts/device_types_run.sh poll SECONDS
# Knobs:
#   PARITY_FILTER / E2E_FILTER   the tests (default: the matmul, GEMM, embedding and block-op
#                                parity of every type; the quants references); EMU_PARITY_FILTER /
#                                EMU_E2E_FILTER the emulation build's (default: the same)
#   TYPES_BENCH="Q2_K ..."       scripts/types_bench.sh (vega vs llama.cpp on llama3-8b)
#   AB="base.tgz:TYPES ..."      scripts/dense_ab.sh of each base against this tree on AB_SHAPE
#                                (default llama3-8b) files of those types (comma-separated; the
#                                types bench's files are kept and reused), AB_TESTS (b1 pp512),
#                                AB_ROUNDS (2);
#   AB_LATE="base.tgz:TYPES ..." the same after the emulation build's runs (built at the start),
#                                AB_LATE_TESTS / AB_LATE_ROUNDS (default AB_TESTS / AB_ROUNDS)
#   SWEEP_TYPES / SWEEP_SHAPES   scripts/gpu_sweep.sh in both builds (empty: no sweep)
#   EMU=0                        no emulation build
W=${W:-/tmp/types_run}
export SYNTH_DIR=${SYNTH_DIR:-/tmp/synth}  # synth files, shared by types_bench.sh and dense_ab.sh
. "$(dirname "$0")/device_run_start.sh" 60 "$@"
export VEGA_TEST_DATA=${VEGA_TEST_DATA:-$PWD/.devdata/testdata}
PEERS=${PEERS:-$PWD/.devdata/peers}
L=${LLAMA_PEER_DIR:-/tmp/llama-peer}/b/bin
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader
NVCC=$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)
build() {  # build SRC DIR EMULATE TARGETS...
  local s=$1 b=$2 emu=$3; shift 3
  local tag=$(basename $b)
  [ -f $W/built.$tag ] && return 0
  log "build $b"
  cmake -S $s -B $b -G Ninja -DCMAKE_BUILD_TYPE=Release -DVEGA_CUDA=ON -DVEGA_ASAN_TESTS=OFF -DVEGA_NET=OFF \
    -DVEGA_GPU_EMULATE_GFX906=$emu -DCMAKE_CUDA_COMPILER=$NVCC > $W/configure.$tag.log 2>&1 \
    && cmake --build $b -j16 --target "$@" > $W/build.$tag.log 2>&1 && touch $W/built.$tag \
    || { grep -E "error|FAILED" $W/build.$tag.log | head -20; return 1; }
  log "built $b"
}
tests() {  # tests DIR TAG PARITY_FILTER E2E_FILTER
  local b=$1 tag=$2
  [ -f $W/tests.$tag.done ] && return 0
  log "parity ($tag): $3"
  timeout 500 $b/tests/gpu/vega_gpu_parity_tests --gtest_filter="$3" > $W/parity.$tag.log 2>&1; echo "rc=$?" >> $W/parity.$tag.log
  grep -E "^\[  (PASSED|FAILED)|Failure|Expected|which is|rc=" $W/parity.$tag.log | head -40
  log "end-to-end on the GPU ($tag): $4"
  VEGA_TEST_DEVICE=gpu timeout 400 $b/tests/vega_engine_tests --gtest_filter="$4" > $W/e2e.$tag.log 2>&1; echo "rc=$?" >> $W/e2e.$tag.log
  grep -E "^\[  (PASSED|FAILED)|^\[  FAILED|rc=" $W/e2e.$tag.log | head -30
  touch $W/tests.$tag.done
}
ab_run() {  # ab_run TESTS ROUNDS SPEC...: dense_ab.sh of each base against this tree
  local spec base label types tests=$1 rounds=$2
  shift 2
  for spec in "$@"; do
    base=${spec%%:*}; label=$(basename $base .tgz); types=${spec#*:}
    [ -f $W/ab.$label.done ] && continue
    log "A/B $label against this tree: ${types//,/ }"
    ln -sfn $PWD/build-h200 /tmp/dense_ab/build-tree  # dense_ab.sh's build of "."
    W=/tmp/dense_ab SHAPE=${AB_SHAPE:-llama3-8b} TESTS="$tests" ROUNDS=$rounds DROP=${DROP:-0} AB_TYPES="${types//,/ }" \
      bash scripts/dense_ab.sh $base . && touch $W/ab.$label.done
  done
}
sweep() {  # sweep DIR TAG
  [ -z "${SWEEP_TYPES:-}" ] || [ -f $W/sweep.$2.done ] && return 0
  log "synth sweep ($2): ${SWEEP_SHAPES:-1b llama3-8b qwen3moe-tiny} x $SWEEP_TYPES"
  SHAPES=${SWEEP_SHAPES:-1b llama3-8b qwen3moe-tiny} TYPES=$SWEEP_TYPES OUT=$W/sweep.$2 bash scripts/gpu_sweep.sh $1 | tail -40
  touch $W/sweep.$2.done
}
# 1. Every compile at once: llama.cpp, the A/B bases (vega only), this tree.
pids=()
if [ -n "${TYPES_BENCH:-}" ] && [ ! -x $L/llama-bench ]; then
  (PEERS=$PEERS bash scripts/build_peer.sh llama-bench > $W/llama_build.log 2>&1; echo "llama build rc=$?" >> $W/llama_build.log) &
  pids+=($!)
fi
for spec in ${AB:-} ${AB_LATE:-}; do
  base=${spec%%:*}; label=$(basename $base .tgz); src=/tmp/dense_ab/$label-src
  if [ ! -f $src/CMakeLists.txt ]; then mkdir -p $src && tar xzf $base -C $src; fi
  [ -e $src/.devdata ] || ln -s "$PWD/.devdata" $src/.devdata
  (build $src /tmp/dense_ab/build-$label OFF vega) &
  pids+=($!)
done
build . build-h200 OFF vega vega_gpu_parity_tests vega_engine_tests || { touch $W/finished; exit 1; }
for p in "${pids[@]}"; do wait $p; done
tail -1 $W/llama_build.log 2>/dev/null
# 2. Tests (normal build).
PARITY_FILTER=${PARITY_FILTER:-Parity.Matmul*:Parity.DotGemm*:Parity.EmbedEveryType:Parity.BlockOps*:MoeParity.*}
E2E_FILTER=${E2E_FILTER:-AllReferences/*iq4*:AllReferences/*q2_k*:AllReferences/*q3_k*:AllReferences/*mxfp4*}
tests build-h200 cuda "$PARITY_FILTER" "$E2E_FILTER"
# 3. Benchmarks.
if [ -n "${TYPES_BENCH:-}" ] && [ ! -f $W/types.done ]; then
  OUT=$W/types TYPES="$TYPES_BENCH" KEEP=${AB:+1} bash scripts/types_bench.sh build-h200 && touch $W/types.done
fi
ab_run "${AB_TESTS:-b1 pp512}" ${AB_ROUNDS:-2} ${AB:-}
# 4. Sweep (normal build), then the emulation build and its tests and sweep.
sweep build-h200 cuda
if [ "${EMU:-1}" = 1 ]; then
  build . build-h200-emu ON vega vega_gpu_parity_tests vega_engine_tests \
    && tests build-h200-emu emu "${EMU_PARITY_FILTER:-$PARITY_FILTER}" "${EMU_E2E_FILTER:-$E2E_FILTER}" \
    && sweep build-h200-emu emu
fi
# (The earlier files are not needed now: the late A/B's types may be large, e.g. F16.)
[ -n "${AB_LATE:-}" ] && rm -f $SYNTH_DIR/*.gguf
DROP=1 ab_run "${AB_LATE_TESTS:-${AB_TESTS:-b1 pp512}}" ${AB_LATE_ROUNDS:-${AB_ROUNDS:-2}} ${AB_LATE:-}
log "finished"
touch $W/finished
