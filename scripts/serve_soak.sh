#!/usr/bin/env bash
# Soak test of vega serve on the GPU (the server issue's "64 streams for 10 minutes with
# random disconnects and a hostile request every second"): starts vega serve on
# llama2-7b Q4_0 made by `vega synth`, runs scripts/serve_soak.py against it (RSS of the
# server, GPU memory with nvidia-smi, /metrics), stops the server with SIGTERM and
# checks that it exits 0.
#   scripts/serve_soak.sh [BUILD_DIR] [MODEL]
#   BUILD_DIR: a CUDA build of vega (default build-h200; configured and built here when
#   it has no vega). MODEL: default /tmp/peer-llama2-7b-Q4_0.gguf, synthesized if missing.
#   STREAMS=64 DURATION=600 (seconds) MAX_TOKENS=64..256 DISCONNECT=0.1 HOSTILE_EVERY=1 PARALLEL=64
#   CTX=1024: each slot's context (-c is per slot: 64 x 1024 tokens of llama2-7b's f16 KV
#   cache are 32 GiB); PORT=8095; DEVICE=gpu (cpu to try the script without a GPU, with
#   MODEL= a small GGUF); SOAK_ARGS: more serve_soak.py arguments.
# Logs, soak.json and summary.txt go to $OUT (default ./serve_soak_out). Exit status 0
# when the soak passed and the server exited 0 on SIGTERM.
set -u
B=${1:-build-h200}
m=${2:-${MODEL:-/tmp/peer-llama2-7b-Q4_0.gguf}}
OUT=${OUT:-$PWD/serve_soak_out}
STREAMS=${STREAMS:-64} DURATION=${DURATION:-600} MAX_TOKENS=${MAX_TOKENS:-64..256} DISCONNECT=${DISCONNECT:-0.1}
HOSTILE_EVERY=${HOSTILE_EVERY:-1} PARALLEL=${PARALLEL:-64} CTX=${CTX:-1024} PORT=${PORT:-8095} DEVICE=${DEVICE:-gpu}
mkdir -p "$OUT"
S=$OUT/summary.txt
: > "$S"
log() { echo "=== $* ($(date +%T))" | tee -a "$S"; }
here=$(cd "$(dirname "$0")" && pwd)
. "$here/device_env.sh"

if [ ! -x "$B/vega" ]; then
  log "build vega (CUDA) in $B"
  cmake -S . -B "$B" -G Ninja -DCMAKE_BUILD_TYPE=Release -DVEGA_CUDA=ON -DVEGA_ASAN_TESTS=OFF -DVEGA_TESTS=OFF \
    -DVEGA_NET=${VEGA_NET:-OFF} -DCMAKE_CUDA_COMPILER="${NVCC:-$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)}" \
    > "$OUT/configure.log" 2>&1 || { tail -20 "$OUT/configure.log" | tee -a "$S"; exit 1; }
  cmake --build "$B" -j"$(nproc)" --target vega > "$OUT/build.log" 2>&1 \
    || { grep -E "error|FAILED" "$OUT/build.log" | head -20 | tee -a "$S"; exit 1; }
fi
if [ ! -f "$m" ]; then
  log "synthesize $m"
  timeout 300 "$B/vega" synth --shape llama2-7b --type Q4_0 -o "$m" > "$OUT/synth.log" 2>&1 \
    || { tail -3 "$OUT/synth.log" | tee -a "$S"; exit 1; }
fi
command -v nvidia-smi > /dev/null && nvidia-smi --query-gpu=name,memory.total,memory.used --format=csv | tee -a "$S"

log "vega serve -m $m --device $DEVICE --parallel $PARALLEL -c $CTX --port $PORT"
"$B/vega" serve -m "$m" --device "$DEVICE" --parallel "$PARALLEL" -c "$CTX" --port "$PORT" > "$OUT/vega_serve.log" 2>&1 &
vp=$!
up=0
for _ in $(seq 1 600); do  # a 7B model on a cold disk can take a while
  kill -0 $vp 2>/dev/null || break
  if python3 -c "import urllib.request,sys; sys.exit(0 if urllib.request.urlopen('http://127.0.0.1:$PORT/health', timeout=2).status == 200 else 1)" 2>/dev/null; then
    up=1; break
  fi
  sleep 0.5
done
if [ $up != 1 ]; then
  log "vega serve did not come up"
  tail -20 "$OUT/vega_serve.log" | tee -a "$S"
  kill $vp 2>/dev/null; wait $vp 2>/dev/null
  exit 1
fi
grep -m1 "listening on" "$OUT/vega_serve.log" | tee -a "$S"

log "serve_soak.py: $STREAMS streams, $DURATION s"
gpu=; command -v nvidia-smi > /dev/null && [ "$DEVICE" != cpu ] && gpu=--gpu
# The soak ends by itself after DURATION (+ up to a request timeout and the settle).
timeout $((DURATION + 400)) python3 "$here/serve_soak.py" --url "http://127.0.0.1:$PORT" --pid $vp $gpu \
  --streams "$STREAMS" --seconds "$DURATION" --max-tokens "$MAX_TOKENS" --disconnect-rate "$DISCONNECT" \
  --hostile-every "$HOSTILE_EVERY" --json-out "$OUT/soak.json" ${SOAK_ARGS:-} > "$OUT/soak.log" 2>&1
soak_rc=$?
sed -n '/^=== serve_soak/,$p' "$OUT/soak.log" | tee -a "$S"
[ $soak_rc = 0 ] || tail -5 "$OUT/soak.log" | grep -v "^PASS\|^FAIL" | tee -a "$S"

log "SIGTERM to vega serve"
if kill -0 $vp 2>/dev/null; then
  kill -TERM $vp
  for _ in $(seq 1 60); do kill -0 $vp 2>/dev/null || break; sleep 0.5; done
  if kill -0 $vp 2>/dev/null; then
    log "vega serve still running 30 s after SIGTERM: SIGKILL"
    kill -KILL $vp
  fi
  wait $vp; serve_rc=$?
else
  wait $vp; serve_rc=$?
  log "vega serve had already exited"
fi
echo "vega serve exit status $serve_rc" | tee -a "$S"
tail -3 "$OUT/vega_serve.log" | tee -a "$S"
grep -c "POST /v1/" "$OUT/vega_serve.log" | sed 's/^/request log lines: /' | tee -a "$S"

if [ $soak_rc = 0 ] && [ $serve_rc = 0 ]; then result=PASS; else result=FAIL; fi
log "result: $result (soak exit $soak_rc, server exit $serve_rc); $OUT/soak.json"
[ $result = PASS ]
