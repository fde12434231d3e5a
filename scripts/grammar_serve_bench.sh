#!/usr/bin/env bash
# The cost of a json_schema (grammar-constrained sampling, issue 29) in served decode:
# vega serve on a `vega synth` model (llama3-8b Q4_K_M: a 128k vocabulary), then
# scripts/serve_bench.py at 1 and 16 streams without and with response_format json_schema,
# same server, greedy and then sampled (temperature 1, top-k 40). Aggregate tokens/s per
# row; a constrained request may end before --max-tokens when its JSON is complete. After
# each constrained pass: the server's grammar counters (tokens, rows that took whole
# logits, engine seconds), cumulative.
#   scripts/grammar_serve_bench.sh [BUILD_DIR]   (default build-h200; DEVICE=gpu, SHAPE, TYPE,
#   STREAMS=1,16, MAX_TOKENS=128, OUT=grammar_bench_out)
set -u
. "$(dirname "$0")/device_env.sh"
B=${1:-build-h200}
OUT=${OUT:-$PWD/grammar_bench_out}
mkdir -p "$OUT"
SHAPE=${SHAPE:-llama3-8b} TYPE=${TYPE:-Q4_K_M} DEVICE=${DEVICE:-gpu}
m=/tmp/grammar-$SHAPE-$TYPE.gguf
[ -f $m ] || timeout 500 "$B/vega" synth --shape $SHAPE --type $TYPE -o $m > "$OUT/synth.log" 2>&1 || exit 1
port=18093
"$B/vega" serve -m $m --device $DEVICE --port $port -c 1024 --parallel 16 > "$OUT/serve.log" 2>&1 &
pid=$!
trap 'kill $pid 2>/dev/null' EXIT
for i in $(seq 1 120); do curl -sf localhost:$port/health > /dev/null 2>&1 && break; sleep 1; done
S='{"type":"object","properties":{"name":{"type":"string"},"age":{"type":"integer"},"tags":{"type":"array","items":{"type":"string"}}},"required":["name","age","tags"]}'
here=$(dirname "$0")
# The engine's grammar counters (/metrics) after each constrained pass, and their share.
grammar_metrics() {
  curl -s localhost:$port/metrics | grep -E '^vega_(grammar|generated_tokens|decode_steps)' | tee "$OUT/metrics-$1.txt"
}
for mode in greedy sample; do
  args=""
  [ $mode = sample ] && args="--temperature 1 --top-k 40"
  python3 $here/serve_bench.py --url http://127.0.0.1:$port --streams ${STREAMS:-1,16} --max-tokens ${MAX_TOKENS:-128} \
    --label "no schema, $mode" $args | tee "$OUT/plain-$mode.txt"
  python3 $here/serve_bench.py --url http://127.0.0.1:$port --streams ${STREAMS:-1,16} --max-tokens ${MAX_TOKENS:-128} \
    --label "json_schema, $mode" --json-schema "$S" $args | tee "$OUT/schema-$mode.txt"
  grammar_metrics $mode
done
grep -E "POST" "$OUT/serve.log" | tail -3
