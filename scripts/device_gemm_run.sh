#!/usr/bin/env bash
# Issue 25 on an NVIDIA machine, in the background, resumable (finished steps are
# skipped; state and logs in $W, default /tmp/gemm_run):
#   1. the normal build (build-h200): parity of the dot4 GEMM with the dp4a path forced
#      (Parity.DotGemm*), and the other matmul parity tests (the tensor-core path);
#   2. vega probe (every study; --kernels: the GEMM and matvec rates) and vega bench
#      pp512 on llama2-7b-shaped synth files, dp4a GEMM (VEGA_GPU_GEMM_ROWS=9) against
#      the default (tensor cores), $TYPES;
#   3. (EMU=1) the gfx906 emulation build (build-h200-emu): its parity tests, the
#      end-to-end references and the synth sweep with prompts on the GEMM
#      (VEGA_GPU_GEMM_ROWS=9: every prompt of 9 rows or more).
#   4. (ab) the default path against $BASE (a `git archive` tarball in .devdata, built in
#      build-base): tg128 and pp512 on llama2-7b Q4_0, alternating, 3 rounds.
# STEPS picks steps (default "parity bench emu").
#   start: setsid scripts/device_gemm_run.sh &     poll: scripts/device_gemm_run.sh poll SECONDS
W=${W:-/tmp/gemm_run}
. "$(dirname "$0")/device_run_start.sh" 80 "$@"
export VEGA_TEST_DATA=${VEGA_TEST_DATA:-$PWD/.devdata/testdata}
STEPS=${STEPS:-parity bench emu}
TYPES=${TYPES:-Q4_0 Q8_0 Q4_K_M}
want() { case " $STEPS " in *" $1 "*) return 0 ;; esac; return 1; }
build() {  # build DIR EMULATE TARGETS...
  local b=$1 emu=$2; shift 2
  [ -f $W/built.$b ] && return 0
  log "build $b (emulation $emu)"
  cmake -S . -B $b -G Ninja -DCMAKE_BUILD_TYPE=Release -DVEGA_CUDA=ON -DVEGA_ASAN_TESTS=OFF -DVEGA_NET=OFF \
    -DVEGA_GPU_EMULATE_GFX906=$emu -DCMAKE_CUDA_COMPILER=$(command -v nvcc || echo /usr/local/cuda/bin/nvcc) \
    > $W/configure.$b.log 2>&1 && cmake --build $b -j16 --target "$@" > $W/build.$b.log 2>&1 && touch $W/built.$b \
    || { grep -E "error|FAILED" $W/build.$b.log | head -20; touch $W/finished; exit 1; }
}
nvidia-smi --query-gpu=name,memory.total,clocks.max.sm --format=csv,noheader
B=build-h200 E=build-h200-emu
build $B OFF vega vega_gpu_parity_tests vega_engine_tests
if want parity && [ ! -f $W/parity.done ]; then
  log "parity, normal build (dp4a GEMM forced in Parity.DotGemm*)"
  timeout 500 $B/tests/gpu/vega_gpu_parity_tests --gtest_filter="${PARITY_FILTER:-Parity.DotGemm*:Parity.Matmul*}" > $W/parity.log 2>&1
  echo "rc=$?" >> $W/parity.log
  grep -E "^\[  (PASSED|FAILED|SKIPPED|  OK) |Failure|Expected|which is|rc=" $W/parity.log | head -40
  touch $W/parity.done
fi
if want bench && [ ! -f $W/bench.done ]; then
  log "vega probe"
  timeout 300 $B/vega probe --kernels > $W/probe.md 2> $W/probe.err; echo "rc=$?" >> $W/probe.err
  timeout 300 $B/vega probe --json > $W/probe.json 2>> $W/probe.err
  cat $W/probe.md; tail -3 $W/probe.err
  for t in $TYPES; do
    m=/tmp/gemm-7b-$t.gguf
    [ -f $m ] || timeout 600 $B/vega synth --shape llama2-7b --type $t -o $m > $W/synth-$t.log 2>&1
    for mode in default dp4a; do
      env=; [ $mode = dp4a ] && env="VEGA_GPU_GEMM_ROWS=9"
      log "bench $t $mode"
      env $env timeout 300 $B/vega bench -m $m -p 512,2048 -n 0 -r 3 2>&1 | grep -E "^\||t/s|error" | tail -6
    done
  done
  touch $W/bench.done
fi
if want emu; then
  build $E ON vega vega_gpu_parity_tests vega_engine_tests
  if [ ! -f $W/emu_parity.done ]; then
    log "parity, gfx906 emulation build (the GEMM from the table's 48 rows; DotGemm from 9)"
    timeout 900 $E/tests/gpu/vega_gpu_parity_tests --gtest_filter="${EMU_PARITY_FILTER:-Parity.DotGemm*:Parity.Matmul*:Parity.BlockOps*}" > $W/emu_parity.log 2>&1
    echo "rc=$?" >> $W/emu_parity.log
    grep -E "^\[  (PASSED|FAILED|SKIPPED) |Failure|Expected|which is|rc=" $W/emu_parity.log | head -40
    touch $W/emu_parity.done
  fi
  if [ ! -f $W/emu_e2e.done ]; then
    log "end-to-end references, emulation build, prompts on the GEMM (VEGA_GPU_GEMM_ROWS=9)"
    VEGA_GPU_GEMM_ROWS=9 VEGA_TEST_DEVICE=gpu timeout 900 $E/tests/vega_engine_tests \
      --gtest_filter="${E2E_FILTER:-AllReferences*:V1AndV3*:KvCacheQ8.*:Perplexity.*}" > $W/emu_e2e.log 2>&1
    echo "rc=$?" >> $W/emu_e2e.log
    grep -E "^\[  (PASSED|FAILED|SKIPPED)|^\[  FAILED|rc=" $W/emu_e2e.log | head -30
    touch $W/emu_e2e.done
  fi
  if [ ! -f $W/emu_sweep.done ]; then
    log "sweep, emulation build, prompts on the GEMM"
    VEGA_GPU_GEMM_ROWS=9 SHAPES=${SWEEP_SHAPES:-1b llama2-7b llama3-8b qwen2-7b} OUT=$W/sweep bash scripts/gpu_sweep.sh $E | tail -20
    touch $W/emu_sweep.done
  fi
fi
if want ab && [ ! -f $W/ab.done ]; then
  BASE=${BASE:-.devdata/base-d375a2f.tgz}
  if [ ! -f $W/built.base ]; then
    log "build the base ($BASE)"
    rm -rf /tmp/base-src && mkdir -p /tmp/base-src && tar xzf $BASE -C /tmp/base-src
    (cd /tmp/base-src && cmake -S . -B build-base -G Ninja -DCMAKE_BUILD_TYPE=Release -DVEGA_CUDA=ON -DVEGA_ASAN_TESTS=OFF \
       -DVEGA_NET=OFF -DCMAKE_CUDA_COMPILER=$(command -v nvcc || echo /usr/local/cuda/bin/nvcc) > $W/configure.base.log 2>&1 \
       && cmake --build build-base -j16 --target vega > $W/build.base.log 2>&1) && touch $W/built.base \
       || { grep -E "error|FAILED" $W/build.base.log | head; }
  fi
  m=/tmp/gemm-7b-Q4_0.gguf
  [ -f $m ] || timeout 600 $B/vega synth --shape llama2-7b --type Q4_0 -o $m > $W/synth-Q4_0.log 2>&1
  for round in 1 2 3; do
    for v in new base; do
      bin=$B/vega; [ $v = base ] && bin=/tmp/base-src/build-base/vega
      log "ab round $round: $v"
      timeout 300 $bin bench -m $m -p 512 -n 128 -r 3 2>&1 | grep -E "^\| llama" | sed "s/^/$v: /"
    done
  done
  touch $W/ab.done
fi
log "done"
touch $W/finished
