#!/usr/bin/env bash
# One-shot GPU check for a machine with an NVIDIA GPU (the H200 device runs):
# build with CUDA, run the GPU parity tests and the end-to-end reference tests
# on the GPU, the kernel probe, and vega bench on llama2-7b-shaped synthetic
# models. Logs go to $OUT (or ./gpu_check_out).
#   scripts/gpu_check.sh [all|test|bench|batch|tune|ab]   test data: $VEGA_TEST_DATA or .devdata/testdata
#   (PARITY_FILTER, E2E_FILTER: gtest filters for the two test binaries, e.g. when the
#   carried test data is a subset)
# tune: vega probe --kernels --tune (every compiled decode matvec shape) and
# tg128 for each shape of the plain (VEGA_GPU_MV), gate/up (VEGA_GPU_SWIGLU) and
# epilogue (VEGA_GPU_EPI) matvecs. ab: tg128 A/B between env settings (AB=...)
# and, with AB_CUDA_FLAGS, against a second build. batch (or BATCH=1 with another
# mode): vega bench -B 1..64 on llama2-7b Q4_0 with and without bucket graphs
# (VEGA_BATCH_GRAPHS), and B=1 at depth 0 and 4096 (DEPTH_TYPES).
set -u
MODE=${1:-all}
OUT=${OUT:-$PWD/gpu_check_out}
mkdir -p "$OUT"
export VEGA_TEST_DATA=${VEGA_TEST_DATA:-$PWD/.devdata/testdata}
# EMULATE=1: the gfx906 emulation build (VEGA_GPU_EMULATE_GFX906: gfx906's kernels,
# table and wave64 instructions on the NVIDIA GPU) in build-h200-emu; run it with
# "test" for issue 10's parity and end-to-end counts.
B=build-h200
[ "${EMULATE:-0}" = 1 ] && B=build-h200-emu
# Carried libraries (scripts/device_env.sh). After the tests, scripts/gpu_sweep.sh runs
# every synth shape x type (SWEEP=1).
. "$(dirname "$0")/device_env.sh"
J=$(nproc)
log() { echo "=== $* ($(date +%T))" | tee -a "$OUT/summary.txt"; }

log "configure + build"
nvidia-smi --query-gpu=name,memory.total,clocks.max.sm --format=csv | tee -a "$OUT/summary.txt"
TUNING=${TUNING:-OFF}; [ "$MODE" = tune ] && TUNING=ON
cmake -S . -B $B -G Ninja -DCMAKE_BUILD_TYPE=Release -DVEGA_CUDA=ON -DVEGA_ASAN_TESTS=OFF -DVEGA_GPU_TUNING=$TUNING -DVEGA_NET=${VEGA_NET:-OFF} -DVEGA_GPU_EMULATE_GFX906=$([ "${EMULATE:-0}" = 1 ] && echo ON || echo OFF) \
      -DCMAKE_CUDA_COMPILER=${NVCC:-$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)} > "$OUT/configure.log" 2>&1 \
  || { tail -30 "$OUT/configure.log"; exit 1; }
TARGETS="vega vega_gpu_parity_tests vega_engine_tests"
[ "$MODE" = tune ] || [ "$MODE" = ab ] && TARGETS="vega"
cmake --build $B -j"$J" --target $TARGETS > "$OUT/build.log" 2>&1 \
  || { grep -E "error|FAILED" "$OUT/build.log" | head -40; exit 1; }

synth() {  # synth TYPE -> /tmp/synth-7b-TYPE.gguf (kept between calls on a warm machine)
  local m=/tmp/synth-7b-$1.gguf
  [ -f $m ] || timeout 300 $B/vega synth --shape llama2-7b --type $1 -o $m > "$OUT/synth-$1.log" 2>&1 || { tail -5 "$OUT/synth-$1.log"; return 1; }
}
if [ "$MODE" = all ] || [ "$MODE" = test ]; then
  log "parity tests"
  timeout 300 $B/tests/gpu/vega_gpu_parity_tests ${PARITY_FILTER:+--gtest_filter=$PARITY_FILTER} > "$OUT/parity.log" 2>&1; echo "rc=$?" >> "$OUT/parity.log"
  grep -E "^\[  (PASSED|FAILED|SKIPPED) |Failure|Expected|which is|rc=" "$OUT/parity.log" | head -40 | tee -a "$OUT/summary.txt"
  log "end-to-end reference tests on the GPU"
  VEGA_TEST_DEVICE=gpu timeout 300 $B/tests/vega_engine_tests ${E2E_FILTER:+--gtest_filter=$E2E_FILTER} > "$OUT/e2e_gpu.log" 2>&1; echo "rc=$?" >> "$OUT/e2e_gpu.log"
  grep -E "^\[  (PASSED|FAILED|SKIPPED) |^\[  FAILED|rc=" "$OUT/e2e_gpu.log" | head -40 | tee -a "$OUT/summary.txt"
fi

if [ "${SWEEP:-0}" = 1 ]; then
  log "every synth shape x type, GPU vs CPU logits (scripts/gpu_sweep.sh)"
  OUT=$OUT/sweep scripts/gpu_sweep.sh $B | tee -a "$OUT/summary.txt"
fi

if [ "$MODE" = all ] || [ "$MODE" = bench ]; then
  log "probe"
  timeout 300 $B/vega probe --kernels > "$OUT/probe.log" 2>&1; cat "$OUT/probe.log" | tee -a "$OUT/summary.txt"
  for t in ${BENCH_TYPES:-Q4_0 Q8_0 Q4_K_M}; do
    m=/tmp/synth-7b-$t.gguf
    log "synth llama2-7b $t"
    synth $t || continue
    log "bench $t"
    timeout 300 $B/vega bench -m $m --device gpu -r ${REPS:-3} -p 512 -n 128 2>&1 | tee "$OUT/bench-$t.log" | tee -a "$OUT/summary.txt"
  done
fi
if [ "$MODE" = batch ] || [ "${BATCH:-0}" = 1 ]; then
  if synth Q4_0; then
    for g in 0 1; do
      log "batched decode, Q4_0, VEGA_BATCH_GRAPHS=$g"
      VEGA_BATCH_GRAPHS=$g timeout 300 $B/vega bench -m /tmp/synth-7b-Q4_0.gguf --device gpu -r ${REPS:-2} -p 0 -n 128 \
        -B ${BATCHES:-1,2,4,8,16,32,64} 2>&1 | tee "$OUT/batch-$g.log" | grep "^|" | tee -a "$OUT/summary.txt"
    done
  fi
  for t in ${DEPTH_TYPES:-Q4_0}; do
    synth $t || continue
    log "depth, $t"
    timeout 300 $B/vega bench -m /tmp/synth-7b-$t.gguf --device gpu -r ${REPS:-2} -p 0 -n 128 -B 1 -d 0,4096 2>&1 \
      | tee "$OUT/depth-$t.log" | grep "^|" | tee -a "$OUT/summary.txt"
  done
fi
if [ "$MODE" = tune ]; then
  if [ "${PROBE:-1}" = 1 ]; then
    log "probe, every decode shape"
    timeout 600 $B/vega probe --kernels --tune > "$OUT/probe-tune.log" 2>&1; cat "$OUT/probe-tune.log" >> "$OUT/summary.txt"
  fi
  # One role at a time (the others at the table's shape): tg128 t/s per shape.
  for t in ${BENCH_TYPES:-Q8_0 Q4_K_M Q4_0}; do
    synth $t || continue
    for role in ${ROLES:-SWIGLU EPI MV}; do
      for v in table ${SHAPES:-1,2 1,4 2,1 2,2 2,4 4,1 4,2}; do
        e=$v; [ $v = table ] && e=
        r=$(env VEGA_GPU_$role=$e timeout 120 $B/vega bench -m /tmp/synth-7b-$t.gguf --device gpu -r ${REPS:-2} -p 0 -n 128 2>&1 | tail -1)
        echo "$t $role=$v: $(echo "$r" | awk -F'|' '{print $7}')" | tee -a "$OUT/summary.txt"
      done
    done
  done
fi
# ab: tg128 per type under each setting of AB (space-separated; "base" = none,
# else ENV=VALUE[+ENV=VALUE...]), same build, same machine. With AB_CUDA_FLAGS, a
# second build ($B-ab, those nvcc flags, e.g. -DVEGA_MATVEC_ROTATE=0) runs the
# settings named "flags" (compile-time A/B).
if [ "$MODE" = ab ]; then
  if [ -n "${AB_CUDA_FLAGS:-}" ]; then
    log "second build: CMAKE_CUDA_FLAGS=$AB_CUDA_FLAGS"
    cmake -S . -B $B-ab -G Ninja -DCMAKE_BUILD_TYPE=Release -DVEGA_CUDA=ON -DVEGA_ASAN_TESTS=OFF -DVEGA_TESTS=OFF -DVEGA_NET=OFF \
          -DCMAKE_CUDA_FLAGS="$AB_CUDA_FLAGS" -DCMAKE_CUDA_COMPILER=${NVCC:-$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)} \
          > "$OUT/configure-ab.log" 2>&1 && cmake --build $B-ab -j"$J" --target vega > "$OUT/build-ab.log" 2>&1 \
      || { grep -E "error|FAILED" "$OUT/build-ab.log" "$OUT/configure-ab.log" | head -20; exit 1; }
  fi
  for t in ${BENCH_TYPES:-Q8_0 Q4_K_M Q4_0}; do
    synth $t || continue
    for setting in ${AB:-base}; do
      envs=$(echo "$setting" | tr '+' ' '); bin=$B/vega
      [ "$setting" = base ] && envs=
      [ "$setting" = flags ] && envs= && bin=$B-ab/vega
      r=$(env $envs timeout 120 $bin bench -m /tmp/synth-7b-$t.gguf --device gpu -r ${REPS:-2} -p 0 -n 128 2>&1 | tail -1)
      echo "$t $setting: $(echo "$r" | awk -F'|' '{print $7}')" | tee -a "$OUT/summary.txt"
    done
  done
fi
if [ "${PROFILE:-0}" = 1 ] && [ -f /tmp/synth-7b-Q4_0.gguf ]; then
  log "A/B: Q4_0 tg128 without programmatic dependent launch (VEGA_GPU_PDL=0)"
  VEGA_GPU_PDL=0 timeout 120 $B/vega bench -m /tmp/synth-7b-Q4_0.gguf --device gpu -r ${REPS:-3} -p 0 -n 128 2>&1 | tail -1 | tee -a "$OUT/summary.txt"
  log "A/B: Q4_0 tg128 without graphs (op by op)"
  timeout 120 $B/vega bench -m /tmp/synth-7b-Q4_0.gguf --device gpu -r 1 -p 0 -n 128 --no-graph 2>&1 | tail -1 | tee -a "$OUT/summary.txt"
  log "ncu: per-kernel times of one replayed token (Q4_0)"
  timeout 120 ncu --clock-control none --cache-control none --metrics gpu__time_duration.sum --csv --launch-count 1000 \
    $B/vega bench -m /tmp/synth-7b-Q4_0.gguf --device gpu -r 1 -p 0 -n 1 > "$OUT/ncu.csv" 2> "$OUT/ncu.err"
fi
log "done"
