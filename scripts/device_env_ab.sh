#!/usr/bin/env bash
# Decode A/B between environment settings of one build, and optionally against an older
# commit, on several shapes and types, same call: tg128 per (file, setting), ROUNDS
# rounds alternating. Resumable background run (like device_types_run.sh): builds this
# tree (vega + the GPU parity tests) and each base at once, runs PARITY_FILTER, makes
# every synth file, then benches.
#   start: setsid scripts/device_env_ab.sh &      poll: scripts/device_env_ab.sh poll SECONDS
#   FILES="llama3-8b:Q4_0 llama3-8b:Q4_K_M:2"      shape:type pairs, or shape:type:N for one
#                                                  tensor-parallel rank's share of N (synth --tp-share N);
#                                                  a suffix @L keeps L blocks (synth --layers L): llama3-70b:Q4_K_M@16
#   PLACE="--devices 0,1 --split-mode tensor"      where every bench and ids run goes (default --device gpu)
#   SETTINGS="base VEGA_GPU_FUSE=0 A=1+B=2"        "base" = none; '+' joins variables
#   BASES=".devdata/ab-C.tgz ..."                  older commits, run with no setting
#   TREE_TARGETS="vega_engine_tests"                more targets of this tree's build
#   PARITY_FILTER=... (PARITY_ENV="A=1 B=2": its settings)  ROUNDS=2  TESTS="-p 0 -n 128"  CHECK_IDS=1 (greedy ids of every binary)
W=${W:-/tmp/env_ab}
. "$(dirname "$0")/device_run_start.sh" 80 "$@"
SYNTH_DIR=${SYNTH_DIR:-/tmp/synth}
mkdir -p $SYNTH_DIR
NVCC=$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader
build() {  # build SRC DIR TESTS(ON/OFF) TARGETS...
  local s=$1 b=$2 t=$3; shift 3
  [ -f $W/built.$(basename $b) ] && return 0
  cmake -S $s -B $b -G Ninja -DCMAKE_BUILD_TYPE=Release -DVEGA_CUDA=ON -DVEGA_ASAN_TESTS=OFF -DVEGA_NET=OFF -DVEGA_TESTS=$t \
    -DCMAKE_CUDA_COMPILER=$NVCC > $W/configure.$(basename $b).log 2>&1 \
    && cmake --build $b -j16 --target "$@" > $W/build.$(basename $b).log 2>&1 && touch $W/built.$(basename $b) \
    || { grep -E "error|FAILED" $W/build.$(basename $b).log | head -20; return 1; }
  log "built $b"
}
pids=()
bins=("tree:build-h200/vega")
for base in ${BASES:-}; do
  label=$(basename $base .tgz); src=/tmp/env_ab_src/$label
  if [ ! -f $src/CMakeLists.txt ]; then mkdir -p $src && tar xzf $base -C $src; fi
  [ -e $src/.devdata ] || ln -s "$PWD/.devdata" $src/.devdata
  (build $src /tmp/env_ab_src/build-$label OFF vega) &
  pids+=($!)
  bins+=("$label:/tmp/env_ab_src/build-$label/vega")
done
build . build-h200 ON vega vega_gpu_parity_tests ${TREE_TARGETS:-} || { touch $W/finished; exit 1; }
for p in "${pids[@]}"; do wait $p; done
if [ -n "${PARITY_FILTER:-}" ] && [ ! -f $W/parity.done ]; then
  log "parity: $PARITY_FILTER"
  env ${PARITY_ENV:-} timeout 300 build-h200/tests/gpu/vega_gpu_parity_tests --gtest_filter="$PARITY_FILTER" > $W/parity.log 2>&1; echo "rc=$?" >> $W/parity.log
  grep -E "^\[  (PASSED|FAILED)|Failure|Expected|which is|rc=" $W/parity.log | head -30
  touch $W/parity.done
fi
# parse_file shape:type[:N][@L]: its shape, type, share count (N: one rank's share of N, else
# empty), blocks kept (L, else empty) and synth file in f_shape, f_type, f_share, f_layers, f_model.
parse_file() {
  local x=$1; f_layers=
  [ "${x#*@}" != "$x" ] && f_layers=${x#*@} && x=${x%@*}
  f_shape=${x%%:*}; local r=${x#*:}; f_type=${r%%:*}; f_share=
  [ "$f_type" != "$r" ] && f_share=${r#*:}
  f_model=$SYNTH_DIR/$f_shape-$f_type${f_share:+-share$f_share}${f_layers:+-${f_layers}L}.gguf
}
place=${PLACE:---device gpu}
file_of() { parse_file "$1"; echo "$f_model"; }
for f in ${FILES:-llama3-8b:Q4_0}; do
  parse_file $f
  [ -f $f_model ] || { log "synth $f"; timeout 400 build-h200/vega synth --shape $f_shape --type $f_type ${f_share:+--tp-share $f_share} ${f_layers:+--layers $f_layers} -o $f_model > $W/synth.log 2>&1 || tail -2 $W/synth.log; }
done
# Greedy ids of every binary on every file (CHECK_IDS=1): a base that is a tuning variant
# must decode the same tokens as the tree (random weights: a broken kernel changes them).
if [ "${CHECK_IDS:-0}" = 1 ] && [ ! -f $W/ids.done ]; then
  for f in ${FILES:-llama3-8b:Q4_0}; do
    m=$(file_of $f)
    for lb in "${bins[@]}"; do
      h=$(timeout 120 ${lb#*:} run -m $m $place -p "The quick brown fox" -n 48 --temp 0 2>/dev/null | md5sum | cut -c1-12)
      echo "ids $f ${lb%%:*}: $h"
    done
  done
  touch $W/ids.done
fi
bench_row() {  # bench_row VEGA MODEL: each result row's test and t/s cells, on one line
  timeout 200 $1 bench -m $2 $place -r 2 ${TESTS:--p 0 -n 128} 2>&1 | grep -E "^\|.*(tg|pp)[0-9]" | awk -F'|' '{ print $7, $8 }' | tr '\n' ' '
}
bench_tree() {  # bench_tree ROUND FILE MODEL: every setting of this tree
  local s envs
  for s in ${SETTINGS:-base}; do
    [ -f "$W/done.$1.$2.$s" ] && continue
    envs=$(echo "$s" | tr '+' ' '); [ "$s" = base ] && envs=
    echo "round $1 $2 tree $s: $(for v in $envs; do export "$v"; done; bench_row build-h200/vega $3)"
    touch "$W/done.$1.$2.$s"
  done
}
bench_bases() {  # bench_bases ROUND FILE MODEL: every base binary
  local lb
  for lb in "${bins[@]:1}"; do
    [ -f "$W/done.$1.$2.${lb%%:*}" ] && continue
    echo "round $1 $2 ${lb%%:*}: $(bench_row ${lb#*:} $3)"
    touch "$W/done.$1.$2.${lb%%:*}"
  done
}
# Odd rounds run this tree first, even rounds the bases first (a slow drift of the
# machine then shows as a difference between rounds, not between binaries).
for i in $(seq ${ROUNDS:-2}); do
  for f in ${FILES:-llama3-8b:Q4_0}; do
    m=$(file_of $f)
    if [ $((i % 2)) = 1 ]; then bench_tree $i $f $m; bench_bases $i $f $m
    else bench_bases $i $f $m; bench_tree $i $f $m; fi
  done
done
log "finished"
touch $W/finished
