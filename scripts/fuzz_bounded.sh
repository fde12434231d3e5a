#!/usr/bin/env bash
# A bounded run of every libFuzzer target (fuzz/: the GGUF parser, the chat-template
# engine, vega serve's request path, the GBNF parser and matcher, the JSON Schema
# compiler, the reply splitter's tool calls) from its seeds: the CI test `fuzz_bounded_run`.
# Builds the targets with clang (libFuzzer + ASan + UBSan) in BUILD (default
# build-fuzz), then runs each for SECONDS (default 30). Exit 0: no finding; 1: a
# finding (its input is left in $WORK/<target>/ and named in the output); 77: no clang
# with libFuzzer here (the test is then reported as skipped).
#   scripts/fuzz_bounded.sh [SECONDS]     BUILD=dir WORK=dir CLANG=clang++-15
set -u
cd "$(dirname "$0")/.."
SECONDS_EACH=${1:-30}
BUILD=${BUILD:-build-fuzz}
mkdir -p "$BUILD" && BUILD=$(cd "$BUILD" && pwd)
WORK=${WORK:-$BUILD/fuzz-runs}
mkdir -p "$WORK" && WORK=$(cd "$WORK" && pwd)
CXX=${CLANG:-}
if [ -z "$CXX" ]; then
  for c in clang++-15 clang++-14 clang++; do command -v $c > /dev/null && { CXX=$c; break; }; done
fi
[ -n "$CXX" ] || { echo "fuzz_bounded: no clang++ here: skipped"; exit 77; }
CC=${CXX/clang++/clang}
# libFuzzer ships with the compiler's runtime; check it links before configuring.
probe=$(mktemp -d)
echo 'extern "C" int LLVMFuzzerTestOneInput(const unsigned char*, unsigned long) { return 0; }' > "$probe/p.cpp"
if ! $CXX -fsanitize=fuzzer "$probe/p.cpp" -o "$probe/p" 2> /dev/null; then
  rm -rf "$probe"; echo "fuzz_bounded: $CXX has no libFuzzer runtime: skipped"; exit 77
fi
rm -rf "$probe"
if ! grep -q "VEGA_FUZZ:BOOL=ON" "$BUILD/CMakeCache.txt" 2>/dev/null; then
  cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release -DVEGA_FUZZ=ON -DVEGA_TESTS=OFF -DVEGA_ASAN_TESTS=OFF \
        -DCMAKE_CXX_COMPILER="$CXX" -DCMAKE_C_COMPILER="$CC" > "$WORK/configure.log" 2>&1 \
    || { tail -20 "$WORK/configure.log"; exit 1; }
fi
cmake --build "$BUILD" --target vega_gguf_fuzz vega_gguf_fuzz_seeds vega_template_fuzz vega_http_fuzz vega_grammar_fuzz vega_schema_fuzz vega_tool_calls_fuzz > "$BUILD/fuzz-build.log" 2>&1 \
  || { grep -E "error|FAILED" "$BUILD/fuzz-build.log" | head -20; exit 1; }

rc=0
run() {  # run TARGET MAX_LEN SEED_DIR...
  local t=$1 len=$2; shift 2
  local dir=$WORK/$t
  rm -rf "$dir"; mkdir -p "$dir/corpus"
  (cd "$dir" && "$BUILD/fuzz/$t" corpus "$@" -max_len="$len" -timeout=20 -rss_limit_mb=2048 \
      -max_total_time="$SECONDS_EACH" -print_final_stats=1 > log.txt 2>&1)
  local r=$?
  local execs
  execs=$(grep -o "stat::number_of_executed_units: *[0-9]*" "$dir/log.txt" | grep -o "[0-9]*$")
  if [ $r -ne 0 ]; then
    echo "fuzz_bounded: $t: FINDING (exit $r); input and log in $dir"
    grep -E "ERROR|SUMMARY|==[0-9]+==" "$dir/log.txt" | head -5
    ls "$dir" | grep -E "^(crash|leak|oom|timeout)-" | head -3
    rc=1
  else
    echo "fuzz_bounded: $t: ${execs:-?} inputs in ${SECONDS_EACH} s, no finding"
  fi
}
mkdir -p "$WORK/gguf-seeds"
"$BUILD/fuzz/vega_gguf_fuzz_seeds" "$WORK/gguf-seeds" > /dev/null
run vega_gguf_fuzz 16384 "$WORK/gguf-seeds"
run vega_template_fuzz 8192 "$PWD/fuzz/seeds/template"
run vega_http_fuzz 8192 "$PWD/fuzz/seeds/http"
run vega_grammar_fuzz 4096 "$PWD/fuzz/seeds/grammar"
run vega_schema_fuzz 4096 "$PWD/fuzz/seeds/schema"
run vega_tool_calls_fuzz 2048 "$PWD/fuzz/seeds/tool_calls"
exit $rc
