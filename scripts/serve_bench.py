#!/usr/bin/env python3
"""Load generator for an OpenAI-compatible server (vega serve, llama-server): N
concurrent streams of streamed /v1/completions requests; reports aggregate generated
tokens/s, per-stream tokens/s and time to first token (median, p90). Standard
library only, so it runs on the GPU machines too.

  serve_bench.py --url http://127.0.0.1:8080 --streams 1,4,16 --requests 32 --max-tokens 128

Each request asks for exactly --max-tokens tokens (ignore_eos, as llama.cpp's server also
accepts) with a different prompt; tokens are counted from the usage the server reports
(stream_options.include_usage), or from the number of content chunks when it sends none.
--prompt-words N makes each prompt N words long (a long-context request: time to first
token is then the prompt's speed); the prompt token count the server reports is printed.
--json-schema SCHEMA (JSON text) adds response_format json_schema to every request: the
grammar-constrained path (a request may then end before --max-tokens, when its JSON is
complete; tokens/s counts what was generated).
"""
import argparse
import http.client
import json
import statistics
import sys
import threading
import time
import urllib.parse


WORDS = ("the", "river", "bent", "north", "past", "old", "stone", "houses", "where", "children", "played", "until",
         "evening", "light", "faded", "over", "quiet", "hills", "and", "fields")


def make_prompt(i, n_words):
    """Request i's prompt: distinct from its first words on (no shared cached prefix)."""
    head = f"Request {i}: once upon a time, in a land far away,"
    if n_words <= 0:
        return head
    return head + " " + " ".join(WORDS[(i * 7 + k * k) % len(WORDS)] for k in range(n_words))


SCHEMA = None  # --json-schema, parsed
SAMPLING = {"temperature": 0}  # --temperature / --top-k


def one_request(url, prompt, max_tokens, timeout):
    u = urllib.parse.urlparse(url)
    conn = http.client.HTTPConnection(u.hostname, u.port or 80, timeout=timeout)
    req = {"prompt": prompt, "max_tokens": max_tokens, "stream": True,
           "ignore_eos": True, "stream_options": {"include_usage": True}, **SAMPLING}
    if SCHEMA is not None:
        req["response_format"] = {"type": "json_schema", "json_schema": {"name": "bench", "schema": SCHEMA}}
    body = json.dumps(req)
    t0 = time.perf_counter()
    conn.request("POST", "/v1/completions", body, {"Content-Type": "application/json"})
    resp = conn.getresponse()
    if resp.status != 200:
        raise RuntimeError(f"HTTP {resp.status}: {resp.read()[:200]!r}")
    ttft, chunks, usage = None, 0, None
    for raw in resp:
        line = raw.decode("utf-8", "replace").strip()
        if not line.startswith("data: "):
            continue
        data = line[6:]
        if data == "[DONE]":
            break
        ev = json.loads(data)
        if ev.get("usage"):
            usage = ev["usage"]
        for ch in ev.get("choices", []):
            if ch.get("text"):
                chunks += 1
                if ttft is None:
                    ttft = time.perf_counter() - t0
    conn.close()
    n = usage["completion_tokens"] if usage else chunks
    n_prompt = usage.get("prompt_tokens", 0) if usage else 0
    return ttft if ttft is not None else time.perf_counter() - t0, n, time.perf_counter() - t0, n_prompt


def run_level(url, streams, n_requests, max_tokens, timeout, prompt_words=0):
    lock = threading.Lock()
    next_i = [0]
    results, errors = [], []

    def worker():
        while True:
            with lock:
                i = next_i[0]
                next_i[0] += 1
            if i >= n_requests:
                return
            try:
                r = one_request(url, make_prompt(i, prompt_words), max_tokens, timeout)
                with lock:
                    results.append(r)
            except Exception as e:  # noqa: BLE001 - reported below
                with lock:
                    errors.append(str(e))

    t0 = time.perf_counter()
    threads = [threading.Thread(target=worker) for _ in range(streams)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.perf_counter() - t0
    tokens = sum(r[1] for r in results)
    ttfts = sorted(r[0] for r in results)
    per_stream = [r[1] / max(r[2] - r[0], 1e-9) for r in results if r[1] > 1]
    return {
        "streams": streams, "requests": len(results), "errors": len(errors), "tokens": tokens, "seconds": wall,
        "aggregate_tps": tokens / wall if wall > 0 else 0.0,
        "per_stream_tps": statistics.median(per_stream) if per_stream else 0.0,
        "ttft_median_ms": 1000 * statistics.median(ttfts) if ttfts else 0.0,
        "ttft_p90_ms": 1000 * ttfts[min(len(ttfts) - 1, int(0.9 * len(ttfts)))] if ttfts else 0.0,
        "first_error": errors[0] if errors else "",
        "prompt_tokens": statistics.median([r[3] for r in results]) if results else 0,
    }


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--url", default="http://127.0.0.1:8080")
    ap.add_argument("--streams", default="1,4,16", help="concurrency levels, comma separated")
    ap.add_argument("--requests", type=int, default=0, help="requests per level (default: 2 x streams, at least 4)")
    ap.add_argument("--max-tokens", type=int, default=128)
    ap.add_argument("--timeout", type=float, default=600)
    ap.add_argument("--label", default="server")
    ap.add_argument("--prompt-words", type=int, default=0, help="words per prompt (long-context requests)")
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--json-schema", default=None, help="JSON Schema text: every request constrained by it")
    ap.add_argument("--temperature", type=float, default=0, help="0: greedy (default)")
    ap.add_argument("--top-k", type=int, default=None, help="top_k for temperature > 0 (server default otherwise)")
    a = ap.parse_args()
    global SCHEMA
    SAMPLING["temperature"] = a.temperature
    if a.top_k is not None:
        SAMPLING["top_k"] = a.top_k
    SCHEMA = json.loads(a.json_schema) if a.json_schema else None
    rows = []
    for s in [int(x) for x in a.streams.split(",") if x]:
        n = a.requests or max(4, 2 * s)
        rows.append(run_level(a.url, s, n, a.max_tokens, a.timeout, a.prompt_words))
    if a.json:
        print(json.dumps({"label": a.label, "max_tokens": a.max_tokens, "levels": rows}, indent=2))
    else:
        print(f"| {a.label} | streams | requests | prompt tokens | aggregate t/s | per-stream t/s | TTFT median ms | "
              f"TTFT p90 ms | errors |")
        print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
        for r in rows:
            print(f"| | {r['streams']} | {r['requests']} | {r['prompt_tokens']:.0f} | {r['aggregate_tps']:.1f} | "
                  f"{r['per_stream_tps']:.1f} | {r['ttft_median_ms']:.1f} | {r['ttft_p90_ms']:.1f} | {r['errors']} |")
    bad = [r for r in rows if r["errors"]]
    for r in bad:
        print(f"streams {r['streams']}: {r['errors']} errors, first: {r['first_error']}", file=sys.stderr)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
