#!/usr/bin/env python3
"""Soak test of a running `vega serve` (the server issue's "64 streams for 10 minutes
with random disconnects and a hostile request every second"). Standard library only,
so it runs on the GPU machines too.

  serve_soak.py --url http://127.0.0.1:8095 --pid SERVER_PID --gpu \\
      --streams 64 --seconds 600 --json-out soak.json

--streams worker threads send /v1/completions and /v1/chat/completions requests, streamed
or not, over raw sockets, until --seconds have passed. Every request asks for exactly
N tokens (ignore_eos, temperature 1, a random seed; N drawn from --max-tokens LO..HI).
A --disconnect-rate fraction is abandoned on purpose: right after sending (before any
byte comes back), or part way (a stream after a random number of events or a random
time, a non-streamed request after a random wait; both a random part of the time a
request of that size has been taking), closed or reset. Non-streamed requests that are
not abandoned reuse a kept-alive connection. Every other request must come back 200 and
complete: a non-streamed body is JSON with one choice, finish_reason "length" and
usage.completion_tokens == N; a stream's events parse, it ends with data: [DONE] and
(with stream_options.include_usage) its usage chunk says N. A 503 (queue full) is
counted, not a failure.

Every --hostile-every seconds a hostile request goes out, in rotation (deep JSON in
messages and in a tool's parameters, invalid UTF-8, temperature 1e999, trickled
headers, a trickled body, a 40 KB header, a garbage request line, three pipelined
GETs, a half-closed request, an HTTP/1.0 stream, OPTIONS, GET on a POST endpoint, 50
empty connections); each is checked against its expected answer and /health must
answer 200 right after it.

A monitor samples every --sample-every seconds: the server's RSS (/proc/PID/status,
with --pid), GPU memory (nvidia-smi, with --gpu) and /metrics. At the end, after the
workers stop and a 5 s settle: no busy slot, nothing queued, no HTTP request in flight
but the /metrics one; the request counters agree with what the clients saw; RSS and
GPU memory stay flat (the max of the last third of the samples after --warmup against
the max of the first third: RSS may grow 10% + 50 MiB, GPU memory 64 MiB).

Prints a summary, writes everything to --json-out, exits 0 on pass and 1 on any
failure. It only talks to --url (meant for a server on loopback that serves nothing
else meanwhile: the counter checks assume so).
"""
import argparse
import json
import os
import random
import shutil
import socket
import subprocess
import sys
import threading
import time
import urllib.parse

MiB = 1024 * 1024


class Truncated(Exception):
    """The server closed the connection before the answer was complete."""


class Timeout(Exception):
    pass


# --------------------------------------------------------------------------- HTTP

def http_request(method, path, body=b"", version="HTTP/1.1", headers=None, host="127.0.0.1"):
    if isinstance(body, str):
        body = body.encode()
    h = [f"{method} {path} {version}", f"Host: {host}"]
    if body or method == "POST":
        h.append("Content-Type: application/json")
        h.append(f"Content-Length: {len(body)}")
    for k, v in (headers or {}).items():
        h.append(f"{k}: {v}")
    return ("\r\n".join(h) + "\r\n\r\n").encode() + body


class Conn:
    """One TCP connection with a receive buffer; reads end at a deadline (monotonic)."""

    def __init__(self, host, port, timeout=10.0):
        self.sock = socket.create_connection((host, port), timeout=timeout)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.buf = bytearray()
        self.eof = False
        self.received = 0  # bytes received on this connection, all answers

    def send(self, data):
        self.sock.sendall(data)

    def close(self):
        try:
            self.sock.close()
        except OSError:
            pass

    def abort(self):
        """Close with a reset (SO_LINGER 0), as a client that dies would."""
        try:
            self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")
        except OSError:
            pass
        self.close()

    def fill(self, deadline):
        """Reads more; False at the end of the stream."""
        if self.eof:
            return False
        rem = deadline - time.monotonic()
        if rem <= 0:
            raise Timeout("no answer in time")
        self.sock.settimeout(rem)
        try:
            d = self.sock.recv(65536)
        except socket.timeout:
            raise Timeout("no answer in time") from None
        if not d:
            self.eof = True
            return False
        self.buf += d
        self.received += len(d)
        return True

    def take(self, n):
        out = bytes(self.buf[:n])
        del self.buf[:n]
        return out

    def read_until(self, sep, deadline, limit=1 << 20):
        while True:
            i = self.buf.find(sep)
            if i >= 0:
                return self.take(i + len(sep))
            if len(self.buf) > limit:
                raise Truncated(f"no {sep!r} in {limit} bytes")
            if not self.fill(deadline):
                raise Truncated(f"connection closed before {sep!r} ({len(self.buf)} bytes pending)")

    def read_exact(self, n, deadline):
        while len(self.buf) < n:
            if not self.fill(deadline):
                raise Truncated(f"connection closed after {len(self.buf)} of {n} bytes")
        return self.take(n)

    def read_head(self, deadline):
        """(version, status, headers with lowercase names)."""
        head = self.read_until(b"\r\n\r\n", deadline).decode("latin-1")
        lines = head.split("\r\n")
        parts = lines[0].split(" ", 2)
        if len(parts) < 2 or not parts[0].startswith("HTTP/") or not parts[1].isdigit():
            raise Truncated(f"bad status line {lines[0][:80]!r}")
        headers = {}
        for ln in lines[1:]:
            if ":" in ln:
                k, v = ln.split(":", 1)
                headers[k.strip().lower()] = v.strip()
        return parts[0], int(parts[1]), headers

    def body_pieces(self, status, headers, deadline, head_request=False):
        """Yields the body as it arrives (content-length, chunked or until close)."""
        if head_request or status in (204, 304) or 100 <= status < 200:
            return
        if "chunked" in headers.get("transfer-encoding", "").lower():
            while True:
                line = self.read_until(b"\r\n", deadline).decode("latin-1").strip()
                try:
                    n = int(line.split(";")[0], 16)
                except ValueError:
                    raise Truncated(f"bad chunk size line {line[:40]!r}") from None
                if n == 0:
                    while self.read_until(b"\r\n", deadline) != b"\r\n":  # trailers
                        pass
                    return
                data = self.read_exact(n, deadline)
                if self.read_exact(2, deadline) != b"\r\n":
                    raise Truncated("chunk not followed by CRLF")
                yield data
        elif "content-length" in headers:
            n = int(headers["content-length"])
            while n > 0:
                if not self.buf and not self.fill(deadline):
                    raise Truncated(f"connection closed with {n} body bytes missing")
                d = self.take(min(n, len(self.buf)))
                n -= len(d)
                yield d
        else:  # close-delimited (HTTP/1.0)
            while True:
                if self.buf:
                    yield self.take(len(self.buf))
                if not self.fill(deadline):
                    return

    def read_response(self, deadline, head_request=False):
        version, status, headers = self.read_head(deadline)
        body = b"".join(self.body_pieces(status, headers, deadline, head_request))
        return version, status, headers, body

    def closed_within(self, seconds):
        """True when the server closes the connection (reading and keeping what comes)."""
        deadline = time.monotonic() + seconds
        try:
            while self.fill(deadline):
                pass
            return True
        except Timeout:
            return False
        except OSError:
            return True


# --------------------------------------------------------------------------- state

class Stats:
    def __init__(self, max_details=20):
        self.lock = threading.Lock()
        self.c = {}
        self.failures = []
        self.failure_kinds = {}
        self.max_details = max_details
        self.sec_per_token = None  # an average over completed requests (for the midway cuts)

    def timed(self, seconds, tokens):
        with self.lock:
            x = seconds / max(1, tokens)
            self.sec_per_token = x if self.sec_per_token is None else 0.9 * self.sec_per_token + 0.1 * x

    def add(self, key, n=1):
        with self.lock:
            self.c[key] = self.c.get(key, 0) + n

    def get(self, key):
        with self.lock:
            return self.c.get(key, 0)

    def fail(self, kind, detail, **ctx):
        with self.lock:
            self.c["failures"] = self.c.get("failures", 0) + 1
            self.failure_kinds[kind] = self.failure_kinds.get(kind, 0) + 1
            if len(self.failures) < self.max_details:
                self.failures.append({"t": round(time.monotonic() - T0, 2), "kind": kind, "detail": str(detail)[:500], **ctx})


T0 = time.monotonic()


# --------------------------------------------------------------------------- requests

WORDS = ("once upon a time there was a little girl named lily who loved to play in the park with her "
         "dog and one day she found a big red ball under a tree near the river where a happy frog sang").split()
STARTS = ["Once upon a time", "One day, a little boy", "Tom and Sue went to the park", "There was a big tree",
          "The cat saw a bird", "Lily had a red ball"]


def random_prompt(rng):
    return rng.choice(STARTS) + " " + " ".join(rng.choice(WORDS) for _ in range(rng.randint(0, 40)))


def random_messages(rng):
    msgs = []
    if rng.random() < 0.5:
        msgs.append({"role": "system", "content": "You tell short stories."})
    for _ in range(rng.randint(0, 2)):  # history: chat clients re-send it (prefix cache)
        msgs.append({"role": "user", "content": random_prompt(rng)})
        msgs.append({"role": "assistant", "content": random_prompt(rng)})
    msgs.append({"role": "user", "content": random_prompt(rng)})
    return msgs


def parse_sse(text):
    """Events of an SSE body: a list of data strings (comments dropped)."""
    out = []
    for block in text.split("\n\n"):
        data = [ln[5:].lstrip(" ") if ln.startswith("data:") else None for ln in block.split("\n")]
        data = [d for d in data if d is not None]
        if data:
            out.append("\n".join(data))
    return out


def check_completion_json(body, chat, max_tokens):
    """'' when a non-streamed answer is complete and right, else what is wrong."""
    try:
        j = json.loads(body)
    except ValueError as e:
        return f"body is not JSON ({e}): {body[:200]!r}"
    ch = j.get("choices")
    if not isinstance(ch, list) or len(ch) != 1:
        return f"choices: {str(ch)[:200]}"
    c = ch[0]
    if chat and not isinstance((c.get("message") or {}).get("content"), str):
        return f"no message.content: {str(c)[:200]}"
    if not chat and not isinstance(c.get("text"), str):
        return f"no text: {str(c)[:200]}"
    if c.get("finish_reason") != "length":
        return f"finish_reason {c.get('finish_reason')!r} (ignore_eos: expected 'length')"
    u = j.get("usage") or {}
    if u.get("completion_tokens") != max_tokens:
        return f"usage.completion_tokens {u.get('completion_tokens')} != max_tokens {max_tokens}"
    if not u.get("prompt_tokens") or u.get("total_tokens") != u["prompt_tokens"] + max_tokens:
        return f"usage {u}"
    return ""


def check_stream(events, chat, max_tokens, include_usage):
    """(error or '', content chunks) for the data events of a whole stream."""
    if not events or events[-1] != "[DONE]":
        return f"does not end with [DONE] (last event {events[-1][:100] if events else None!r})", 0
    if events.count("[DONE]") != 1:
        return "[DONE] more than once", 0
    finish, usage, content, ids = [], [], 0, set()
    for i, e in enumerate(events[:-1]):
        try:
            j = json.loads(e)
        except ValueError as ex:
            return f"event {i} is not JSON ({ex}): {e[:100]!r}", 0
        if "error" in j:
            return f"error event: {e[:300]}", 0
        ids.add(j.get("id"))
        if j.get("usage"):
            usage.append(j["usage"])
            if j.get("choices"):
                return f"usage chunk with choices: {e[:200]}", 0
            continue
        ch = j.get("choices") or []
        if len(ch) != 1:
            return f"event {i}: choices {str(ch)[:200]}", 0
        c = ch[0]
        if c.get("finish_reason") is not None:
            finish.append(c["finish_reason"])
        elif chat and "content" in (c.get("delta") or {}) or not chat and "text" in c:
            content += 1
        elif not (chat and i == 0):
            return f"event {i} without content: {e[:200]}", 0
        if finish and c.get("finish_reason") is None:
            return "content after finish_reason", 0
    if len(ids) != 1:
        return f"{len(ids)} different ids", 0
    if finish != ["length"]:
        return f"finish_reasons {finish} (ignore_eos: expected ['length'])", 0
    if include_usage:
        if len(usage) != 1:
            return f"{len(usage)} usage chunks", 0
        if usage[0].get("completion_tokens") != max_tokens:
            return f"usage.completion_tokens {usage[0].get('completion_tokens')} != max_tokens {max_tokens}", 0
    elif usage:
        return "a usage chunk nobody asked for", 0
    if content > max_tokens:
        return f"{content} content chunks for {max_tokens} tokens", 0
    return "", content


class Worker:
    def __init__(self, i, a, host, port, stats, deadline, stop):
        self.i, self.a, self.host, self.port = i, a, host, port
        self.stats, self.deadline, self.stop = stats, deadline, stop
        self.rng = random.Random((a.seed << 16) ^ i)
        self.keep = None  # a kept-alive connection for non-streamed requests

    def run(self):
        n = 0
        while time.monotonic() < self.deadline and not self.stop.is_set() and n < self.a.max_requests_per_stream:
            n += 1
            try:
                self.one()
            except Exception as e:  # noqa: BLE001 - a bug here is a failure, not a dead thread
                self.stats.fail("client_exception", repr(e), worker=self.i)
            if self.stats.get("failures") >= self.a.max_failures:
                self.stop.set()
        if self.keep:
            self.keep.close()

    def one(self):
        a, rng, st = self.a, self.rng, self.stats
        chat = rng.random() < 0.5
        stream = rng.random() < 0.5
        max_tokens = rng.randint(a.min_tokens, a.max_tokens_hi)
        include_usage = stream and rng.random() < 0.8
        body = {"max_tokens": max_tokens, "temperature": 1, "seed": rng.randrange(1 << 31), "ignore_eos": True,
                "stream": stream}
        if chat:
            body["messages"] = random_messages(rng)
        else:
            body["prompt"] = random_prompt(rng)
        if include_usage:
            body["stream_options"] = {"include_usage": True}
        path = "/v1/chat/completions" if chat else "/v1/completions"
        abandon = None
        if rng.random() < a.disconnect_rate:
            abandon = "after_send" if rng.random() < 1 / 3 else "midway"
        ctx = {"worker": self.i, "path": path, "stream": stream, "max_tokens": max_tokens}
        if abandon:
            ctx["abandon"] = abandon
        req = http_request("POST", path, json.dumps(body), host=self.host)
        st.add("sent")
        st.add("sent_stream" if stream else "sent_whole")
        deadline = time.monotonic() + a.request_timeout
        t_start = self.t_start = time.monotonic()

        reuse = not stream and not abandon and self.keep is not None
        for attempt in (0, 1):
            if reuse and attempt == 0:
                c = self.keep
                st.add("keepalive_reused")
            else:
                if self.keep:
                    self.keep.close()
                    self.keep = None
                try:
                    c = Conn(self.host, self.port, timeout=10)
                except OSError as e:
                    st.fail("connect", repr(e), **ctx)
                    time.sleep(0.5)  # a dead server: do not spin
                    return
            r0 = c.received
            try:
                c.send(req)
                if abandon == "after_send":
                    time.sleep(rng.uniform(0, 0.02))
                    c.abort() if rng.random() < 0.5 else c.close()
                    st.add("abandoned")
                    st.add("abandoned_after_send")
                    return
                if abandon == "midway" and not stream:
                    cut = time.monotonic() + self.cut_delay(max_tokens)
                    try:
                        version, status, headers, raw = c.read_response(min(deadline, cut))
                    except Timeout:
                        if time.monotonic() >= deadline:
                            raise
                        c.abort() if rng.random() < 0.5 else c.close()
                        st.add("abandoned")
                        st.add("abandoned_whole_midway")
                        return
                    st.add("abandon_too_late")  # the answer came first: check it as any other
                    self.finish_whole(c, status, headers, raw, chat, max_tokens, ctx, keep=False)
                    return
                version, status, headers = c.read_head(deadline)
            except (Truncated, ConnectionError) as e:
                if reuse and attempt == 0 and c.received == r0 and not c.buf:
                    # A kept-alive connection the server closed meanwhile: once more on a new one.
                    st.add("keepalive_retries")
                    self.keep.close()
                    self.keep = None
                    continue
                c.close()
                st.fail("truncated" if isinstance(e, Truncated) else "connection_error", repr(e), **ctx)
                return
            except Timeout as e:
                c.close()
                st.fail("timeout", f"no answer head in {a.request_timeout} s: {e}", **ctx)
                return
            except OSError as e:
                c.close()
                st.fail("connection_error", repr(e), **ctx)
                return
            break

        try:
            if status == 503:
                raw = b"".join(c.body_pieces(status, headers, deadline))
                c.close()
                self.keep = None
                st.add("busy_503")
                time.sleep(rng.uniform(0.2, 1.0))  # Retry-After: 1
                return
            if status != 200:
                raw = b"".join(c.body_pieces(status, headers, time.monotonic() + 5))
                c.close()
                self.keep = None
                st.fail("status", f"HTTP {status}: {raw[:300]!r}", **ctx)
                return
            if not stream:
                raw = b"".join(c.body_pieces(status, headers, deadline))
                self.finish_whole(c, status, headers, raw, chat, max_tokens, ctx, keep=True)
                return
            # A stream: SSE over chunked coding, one per connection.
            if not headers.get("content-type", "").startswith("text/event-stream"):
                c.close()
                st.fail("stream_headers", f"content-type {headers.get('content-type')!r}", **ctx)
                return
            if "chunked" not in headers.get("transfer-encoding", ""):
                c.close()
                st.fail("stream_headers", f"HTTP/1.1 stream without chunked coding: {headers}", **ctx)
                return
            # Cut after a random number of events or a random time, whichever comes first
            # (a fast server sends several tokens in one event).
            cut_after = rng.randint(0, max(1, max_tokens // 4)) if abandon == "midway" else None
            cut_time = time.monotonic() + self.cut_delay(max_tokens) if cut_after is not None else 0
            text, n_events = "", 0
            pending = b""
            for piece in c.body_pieces(status, headers, deadline):
                pending += piece
                # count complete events as they come (for the cut)
                while b"\n\n" in pending:
                    ev, pending = pending.split(b"\n\n", 1)
                    text += ev.decode("utf-8", "replace") + "\n\n"
                    if ev.startswith(b"data:"):
                        n_events += 1
                if cut_after is not None and (n_events >= cut_after or time.monotonic() >= cut_time):
                    c.abort() if rng.random() < 0.5 else c.close()
                    st.add("abandoned")
                    st.add("abandoned_stream_midway")
                    return
            text += pending.decode("utf-8", "replace")
            c.close()
            if cut_after is not None:
                st.add("abandon_too_late")
            err, content = check_stream(parse_sse(text), chat, max_tokens, include_usage)
            if err:
                st.fail("bad_stream", err, **ctx)
                return
            st.timed(time.monotonic() - t_start, max_tokens)
            st.add("ok")
            st.add("ok_stream")
            st.add("tokens", max_tokens)
        except Truncated as e:
            c.close()
            self.keep = None
            st.fail("truncated", repr(e), **ctx)
        except Timeout as e:
            c.close()
            self.keep = None
            st.fail("timeout", f"answer not complete in {a.request_timeout} s: {e}", **ctx)
        except OSError as e:
            c.close()
            self.keep = None
            st.fail("connection_error", repr(e), **ctx)

    def cut_delay(self, max_tokens):
        """When to abandon a request midway: a random part of the time one of its size took
        lately, or up to --abandon-wait seconds before any was timed."""
        spt = self.stats.sec_per_token
        if spt is None:
            return self.rng.uniform(0.05, self.a.abandon_wait)
        return self.rng.uniform(0.02, 0.9) * spt * max_tokens

    def finish_whole(self, c, status, headers, raw, chat, max_tokens, ctx, keep):
        st = self.stats
        closing = headers.get("connection", "").lower() == "close"
        if keep and not closing:
            self.keep = c
        else:
            c.close()
            if self.keep is c:
                self.keep = None
        if status == 503:
            st.add("busy_503")
            return
        if status != 200:
            st.fail("status", f"HTTP {status}: {raw[:300]!r}", **ctx)
            return
        err = check_completion_json(raw, chat, max_tokens)
        if err:
            st.fail("bad_body", err, **ctx)
            return
        st.timed(time.monotonic() - self.t_start, max_tokens)
        st.add("ok")
        st.add("ok_whole")
        st.add("tokens", max_tokens)


# --------------------------------------------------------------------------- hostile

def nested(depth, inner="1"):
    return "[" * depth + inner + "]" * depth


class Hostile:
    """The hostile cases: each returns '' when the server answered as it should (or
    'busy' for a 503 on a request that generates), else what went wrong."""

    def __init__(self, host, port, rng):
        self.host, self.port, self.rng = host, port, rng
        self.json400 = 0  # completion requests answered 400 (they count in vega_requests_total)
        self.gen200 = 0  # completion requests answered 200 (likewise)
        self.lock = threading.Lock()

    def conn(self):
        return Conn(self.host, self.port, timeout=10)

    def roundtrip(self, raw, seconds=30):
        c = self.conn()
        try:
            c.send(raw)
            return c.read_response(time.monotonic() + seconds)
        finally:
            c.close()

    def expect_400_json(self, path, body, why):
        _, status, _, b = self.roundtrip(http_request("POST", path, body, host=self.host))
        if status != 400:
            return f"{why}: HTTP {status} (expected 400): {b[:200]!r}"
        with self.lock:
            self.json400 += 1
        return ""

    def nested_messages(self):
        err = self.expect_400_json("/v1/chat/completions", '{"messages":' + nested(100000) + "}", "100000-deep messages")
        return err

    def nested_tool_params(self):
        body = ('{"max_tokens":2,"messages":[{"role":"user","content":"hi"}],"tools":[{"type":"function","function":'
                '{"name":"f","parameters":{"type":"object","properties":{"a":' + nested(100000) + "}}}}]}")
        return self.expect_400_json("/v1/chat/completions", body, "100000-deep tool parameters")

    def invalid_utf8(self):
        return self.expect_400_json("/v1/completions", b'{"prompt":"\xff\xfe abc","max_tokens":2}', "invalid UTF-8")

    def temperature_inf(self):
        return self.expect_400_json("/v1/completions", '{"prompt":"x","max_tokens":2,"temperature":1e999}', "temperature 1e999")

    def trickle_headers(self):
        c = self.conn()
        try:
            c.send(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\n")
            end = time.monotonic() + 3
            i = 0
            while time.monotonic() < end:
                time.sleep(0.2)
                try:
                    c.send(f"X-Slow-{i}: 1\r\n".encode())
                except OSError:
                    break  # the server gave up on us first (408): fine
                i += 1
        finally:
            c.abort()
        return ""

    def trickle_body(self):
        c = self.conn()
        try:
            c.send(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{")
            end = time.monotonic() + 3
            while time.monotonic() < end:
                time.sleep(0.2)
                try:
                    c.send(b" ")
                except OSError:
                    break
        finally:
            c.abort()
        return ""

    def big_header(self):
        _, status, _, b = self.roundtrip(http_request("GET", "/health", headers={"X-Big": "a" * 40000}, host=self.host))
        return "" if status == 431 else f"40 KB header: HTTP {status} (expected 431)"

    def garbage_line(self):
        _, status, _, b = self.roundtrip(b"HELLO\r\n\r\n")
        return "" if status == 400 else f"garbage request line: HTTP {status} (expected 400)"

    def pipelined(self):
        c = self.conn()
        try:
            g = http_request("GET", "/health", host=self.host)
            c.send(g + g + http_request("GET", "/health", headers={"Connection": "close"}, host=self.host))
            deadline = time.monotonic() + 30
            got = []
            for _ in range(3):
                _, status, _, b = c.read_response(deadline)
                got.append((status, b))
            bad = [s for s, b in got if s != 200 or b'"ok"' not in b]
            if bad:
                return f"pipelined /health x3: statuses {[s for s, _ in got]}"
            if not c.closed_within(5) or c.buf:
                return "pipelined: no close after Connection: close, or extra bytes"
            return ""
        finally:
            c.close()

    def gen_body(self, n, stream):
        return json.dumps({"prompt": "Once upon a time", "max_tokens": n, "temperature": 1, "seed": self.rng.randrange(1 << 31),
                           "ignore_eos": True, "stream": stream})

    def half_closed(self):
        n = 8
        c = self.conn()
        try:
            c.send(http_request("POST", "/v1/completions", self.gen_body(n, False), host=self.host))
            c.sock.shutdown(socket.SHUT_WR)
            _, status, headers, b = c.read_response(time.monotonic() + 120)
        finally:
            c.close()
        if status == 503:
            return "busy"
        if status != 200:
            return f"half-closed request: HTTP {status}: {b[:200]!r}"
        err = check_completion_json(b, False, n)
        if err:
            return "half-closed request: " + err
        with self.lock:
            self.gen200 += 1
        return ""

    def http10_stream(self):
        n = 8
        c = self.conn()
        try:
            c.send(http_request("POST", "/v1/completions", self.gen_body(n, True), version="HTTP/1.0", host=self.host))
            version, status, headers, b = c.read_response(time.monotonic() + 120)
        finally:
            c.close()
        if status == 503:
            return "busy"
        if status != 200:
            return f"HTTP/1.0 stream: HTTP {status}: {b[:200]!r}"
        if "transfer-encoding" in headers or "content-length" in headers:
            return f"HTTP/1.0 stream is not close-delimited: {headers}"
        if not b.endswith(b"data: [DONE]\n\n"):
            return f"HTTP/1.0 stream does not end with [DONE]: ...{b[-200:]!r}"
        err, _ = check_stream(parse_sse(b.decode("utf-8", "replace")), False, n, False)
        if err:
            return "HTTP/1.0 stream: " + err
        with self.lock:
            self.gen200 += 1
        return ""

    def options(self):
        _, status, headers, _ = self.roundtrip(http_request("OPTIONS", "/v1/models", host=self.host))
        if status != 204 or headers.get("allow") != "GET, HEAD, OPTIONS":
            return f"OPTIONS /v1/models: HTTP {status}, Allow {headers.get('allow')!r} (expected 204, 'GET, HEAD, OPTIONS')"
        return ""

    def get_on_post(self):
        _, status, headers, _ = self.roundtrip(http_request("GET", "/v1/completions", host=self.host))
        if status != 405 or headers.get("allow") != "POST, OPTIONS":
            return f"GET /v1/completions: HTTP {status}, Allow {headers.get('allow')!r} (expected 405, 'POST, OPTIONS')"
        return ""

    def empty_connections(self):
        conns = []
        try:
            for _ in range(50):
                conns.append(self.conn())
        finally:
            for i, c in enumerate(conns):
                c.abort() if i % 2 else c.close()
        return ""

    CASES = ["nested_messages", "trickle_headers", "invalid_utf8", "pipelined", "temperature_inf", "trickle_body",
             "big_header", "half_closed", "garbage_line", "http10_stream", "nested_tool_params", "options",
             "get_on_post", "empty_connections"]

    def health(self):
        try:
            _, status, _, b = self.roundtrip(http_request("GET", "/health", host=self.host), seconds=10)
            return status == 200 and b'"ok"' in b
        except Exception:  # noqa: BLE001
            return False


def hostile_loop(a, host, port, stats, hostile_stats, deadline, stop):
    h = Hostile(host, port, random.Random(a.seed ^ 0x5EED))
    sem = threading.Semaphore(a.hostile_concurrency)
    threads = []
    i = 0
    next_t = time.monotonic()

    def one(name):
        try:
            try:
                err = getattr(h, name)()
            except Exception as e:  # noqa: BLE001 - a closed socket or a timeout is a wrong answer
                err = f"{name}: {e!r}"
            rec = hostile_stats.setdefault(name, {"sent": 0, "ok": 0, "busy": 0, "failed": 0})
            with stats.lock:
                rec["sent"] += 1
            if err == "busy":
                with stats.lock:
                    rec["busy"] += 1
                stats.add("hostile_busy_503")
            elif err:
                with stats.lock:
                    rec["failed"] += 1
                stats.fail("hostile", err, case=name)
            else:
                with stats.lock:
                    rec["ok"] += 1
                stats.add("hostile_ok")
            stats.add("hostile_sent")
            if not h.health():
                stats.fail("health_after_hostile", f"/health did not answer 200 right after {name}", case=name)
        finally:
            sem.release()

    while time.monotonic() < deadline and not stop.is_set():
        now = time.monotonic()
        if now < next_t:
            time.sleep(min(next_t - now, 0.2))
            continue
        next_t += a.hostile_every
        name = Hostile.CASES[i % len(Hostile.CASES)]
        if not sem.acquire(blocking=False):
            stats.add("hostile_skipped")  # the earlier ones are still running
            continue
        i += 1
        t = threading.Thread(target=one, args=(name,), daemon=True)
        t.start()
        threads.append(t)
        threads = [x for x in threads if x.is_alive()]
    for t in threads:
        t.join(a.request_timeout + 20)
    return h


# --------------------------------------------------------------------------- monitor

def rss_mib(pid):
    try:
        with open(f"/proc/{pid}/status") as f:
            for ln in f:
                if ln.startswith("VmRSS:"):
                    return int(ln.split()[1]) / 1024.0
    except OSError:
        return None
    return None


def gpu_mib(pid):
    """(memory.used summed over GPUs, the server process's own use or None)."""
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=memory.used", "--format=csv,noheader,nounits"],
                             capture_output=True, text=True, timeout=20).stdout
        total = sum(float(x) for x in out.split() if x.strip())
    except (OSError, subprocess.SubprocessError, ValueError):
        return None, None
    own = None
    if pid:
        try:
            out = subprocess.run(["nvidia-smi", "--query-compute-apps=pid,used_memory", "--format=csv,noheader,nounits"],
                                 capture_output=True, text=True, timeout=20).stdout
            for ln in out.splitlines():
                p = [x.strip() for x in ln.split(",")]
                if len(p) == 2 and p[0] == str(pid):
                    own = (own or 0) + float(p[1])
        except (OSError, subprocess.SubprocessError, ValueError):
            pass
    return total, own


def get_metrics(host, port, timeout=10):
    """{'name': value, ('vega_requests_total', endpoint, status): value}."""
    c = Conn(host, port, timeout=timeout)
    try:
        c.send(http_request("GET", "/metrics", headers={"Connection": "close"}, host=host))
        _, status, _, body = c.read_response(time.monotonic() + timeout)
    finally:
        c.close()
    if status != 200:
        raise RuntimeError(f"/metrics: HTTP {status}")
    m = {}
    for ln in body.decode().splitlines():
        if not ln or ln.startswith("#"):
            continue
        name, _, val = ln.rpartition(" ")
        if name.startswith("vega_requests_total{"):
            labels = dict(kv.split("=", 1) for kv in name[len("vega_requests_total{"):-1].split(","))
            m[("vega_requests_total", labels["endpoint"].strip('"'), int(labels["status"].strip('"')))] = float(val)
        else:
            m[name] = float(val)
    return m


def by_status(m):
    out = {}
    for k, v in m.items():
        if isinstance(k, tuple):
            out[k[2]] = out.get(k[2], 0) + v
    return out


GAUGES = ["vega_slots_busy", "vega_slots_total", "vega_queue_size", "vega_http_requests_in_flight",
          "vega_requests_cancelled_total", "vega_generated_tokens_total"]


def sample(a, host, port, stats, gpu_on):
    s = {"t": round(time.monotonic() - T0, 1)}
    if a.pid:
        s["rss_mib"] = rss_mib(a.pid)
        if s["rss_mib"] is None:
            stats.fail("server_gone", f"/proc/{a.pid}/status is gone: the server exited")
    if gpu_on:
        s["gpu_mib"], s["gpu_proc_mib"] = gpu_mib(a.pid)
    try:
        m = get_metrics(host, port)
        for g in GAUGES:
            s[g] = m.get(g)
        s["requests_by_status"] = {str(k): v for k, v in sorted(by_status(m).items())}
        if m.get("vega_slots_busy", 0) > m.get("vega_slots_total", 0):
            stats.fail("slots", f"slots_busy {m.get('vega_slots_busy')} > slots_total {m.get('vega_slots_total')}")
    except Exception as e:  # noqa: BLE001
        stats.fail("metrics", f"/metrics failed: {e!r}")
    return s


def monitor_loop(a, host, port, stats, samples, gpu_on, stop_monitor):
    while not stop_monitor.wait(a.sample_every):
        s = sample(a, host, port, stats, gpu_on)
        samples.append(s)
        if not a.quiet:
            print(f"[{s['t']:7.1f}s] ok {stats.get('ok')} abandoned {stats.get('abandoned')} 503 {stats.get('busy_503')} "
                  f"failures {stats.get('failures')} hostile {stats.get('hostile_sent')} | rss {fmt(s.get('rss_mib'))} MiB "
                  f"gpu {fmt(s.get('gpu_mib'))} MiB | slots busy {fmt(s.get('vega_slots_busy'), 0)} "
                  f"queue {fmt(s.get('vega_queue_size'), 0)} in flight {fmt(s.get('vega_http_requests_in_flight'), 0)}",
                  flush=True)


def fmt(v, nd=1):
    return "-" if v is None else f"{v:.{nd}f}"


def flatness(samples, key, start_t, end_t):
    """Max of the last third of the samples in [start_t, end_t] against the max of the first."""
    pts = [(s["t"], s[key]) for s in samples if s.get(key) is not None and start_t <= s["t"] <= end_t]
    if len(pts) < 3:
        return {"samples": len(pts), "enough": False}
    k = max(1, len(pts) // 3)
    first = max(v for _, v in pts[:k])
    last = max(v for _, v in pts[-k:])
    allv = [v for _, v in pts]
    return {"samples": len(pts), "enough": True, "first_third_max": first, "last_third_max": last,
            "growth_mib": last - first, "growth_pct": 100.0 * (last - first) / first if first else 0.0,
            "min": min(allv), "max": max(allv), "first": pts[0][1], "last": pts[-1][1]}


# --------------------------------------------------------------------------- main

def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--url", default="http://127.0.0.1:8080")
    ap.add_argument("--pid", type=int, default=0, help="the server's pid, for its RSS (/proc/PID/status)")
    ap.add_argument("--streams", type=int, default=64)
    ap.add_argument("--seconds", type=float, default=600)
    ap.add_argument("--max-tokens", default="64..256", help="LO..HI: each request asks for a random count in it (or N)")
    ap.add_argument("--disconnect-rate", type=float, default=0.1, help="fraction of requests abandoned on purpose")
    ap.add_argument("--abandon-wait", type=float, default=3.0,
                    help="a request abandoned midway is dropped after up to this many seconds until one was timed "
                         "(then after a random part of the time one of its size takes)")
    ap.add_argument("--hostile-every", type=float, default=1.0, help="seconds between hostile requests (0: none)")
    ap.add_argument("--hostile-concurrency", type=int, default=8, help="hostile requests running at once, at most")
    ap.add_argument("--request-timeout", type=float, default=120)
    ap.add_argument("--sample-every", type=float, default=10)
    ap.add_argument("--warmup", type=float, default=-1, help="seconds before memory counts (default: a sixth of the run, at most 60)")
    ap.add_argument("--settle", type=float, default=5)
    ap.add_argument("--rss-growth-pct", type=float, default=10)
    ap.add_argument("--rss-growth-mib", type=float, default=50)
    ap.add_argument("--gpu-growth-mib", type=float, default=64)
    ap.add_argument("--gpu", action="store_true", help="sample GPU memory with nvidia-smi")
    ap.add_argument("--max-requests-per-stream", type=int, default=100000)
    ap.add_argument("--max-failures", type=int, default=1000, help="stop early after this many failures")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--json-out", default="")
    ap.add_argument("--quiet", action="store_true", help="no progress lines")
    a = ap.parse_args()

    u = urllib.parse.urlparse(a.url)
    host, port = u.hostname or "127.0.0.1", u.port or 80
    lo, _, hi = a.max_tokens.partition("..")
    a.min_tokens, a.max_tokens_hi = int(lo), int(hi or lo)
    if not 1 <= a.min_tokens <= a.max_tokens_hi:
        ap.error("--max-tokens: LO..HI with 1 <= LO <= HI")
    if a.warmup < 0:
        a.warmup = min(60.0, a.seconds / 6)
    gpu_on = a.gpu and shutil.which("nvidia-smi") is not None
    if a.gpu and not gpu_on:
        print("serve_soak: --gpu but no nvidia-smi: GPU memory not sampled", file=sys.stderr)

    global T0
    T0 = time.monotonic()
    stats = Stats()
    checks = []

    def check(name, ok, detail=""):
        checks.append({"check": name, "ok": bool(ok), "detail": detail})

    try:
        m0 = get_metrics(host, port)
    except Exception as e:  # noqa: BLE001
        print(f"serve_soak: the server at {a.url} does not answer /metrics: {e!r}", file=sys.stderr)
        return 1
    samples = [sample(a, host, port, stats, gpu_on)]

    deadline = time.monotonic() + a.seconds
    stop = threading.Event()
    stop_monitor = threading.Event()
    mon = threading.Thread(target=monitor_loop, args=(a, host, port, stats, samples, gpu_on, stop_monitor), daemon=True)
    mon.start()
    workers = [threading.Thread(target=Worker(i, a, host, port, stats, deadline, stop).run, daemon=True)
               for i in range(a.streams)]
    for t in workers:
        t.start()
    hostile_stats = {}
    h = None
    if a.hostile_every > 0:
        h = hostile_loop(a, host, port, stats, hostile_stats, deadline, stop)
    for t in workers:
        t.join(max(1.0, deadline - time.monotonic()) + a.request_timeout + 30)
    hung = sum(t.is_alive() for t in workers)
    if hung:
        stats.fail("hung_worker", f"{hung} workers still busy {a.request_timeout + 30:.0f} s after the end")
    load_end = time.monotonic() - T0
    stop_monitor.set()
    mon.join(60)

    # Settle, then the end state.
    time.sleep(a.settle)
    final = sample(a, host, port, stats, gpu_on)
    final["after_settle"] = True
    samples.append(final)
    try:
        m1 = get_metrics(host, port)
    except Exception as e:  # noqa: BLE001
        m1 = None
        stats.fail("metrics", f"/metrics after the run: {e!r}")

    check("/metrics answers after the run", m1 is not None)
    if m1 is not None:
        check("slots_busy == 0", m1.get("vega_slots_busy") == 0, f"vega_slots_busy {m1.get('vega_slots_busy')}")
        check("queue_size == 0", m1.get("vega_queue_size") == 0, f"vega_queue_size {m1.get('vega_queue_size')}")
        check("http_requests_in_flight <= 1 (the /metrics request)", (m1.get("vega_http_requests_in_flight") or 0) <= 1,
              f"vega_http_requests_in_flight {m1.get('vega_http_requests_in_flight')}")
        s0, s1 = by_status(m0), by_status(m1)
        d = {k: s1.get(k, 0) - s0.get(k, 0) for k in sorted(set(s0) | set(s1))}
        d = {k: v for k, v in d.items() if v}
        d_cancel = m1.get("vega_requests_cancelled_total", 0) - m0.get("vega_requests_cancelled_total", 0)
        d_tokens = m1.get("vega_generated_tokens_total", 0) - m0.get("vega_generated_tokens_total", 0)
        ok = stats.get("ok")
        gen200 = h.gen200 if h else 0
        json400 = h.json400 if h else 0
        abandoned = stats.get("abandoned")
        check("server statuses only 200/400/499/503", set(d) <= {200, 400, 499, 503}, f"deltas by status {d}")
        check("200s >= requests the clients saw complete", d.get(200, 0) >= ok + gen200,
              f"server 200 {d.get(200, 0):.0f}, clients {ok} + hostile {gen200}")
        check("200s <= completed + abandoned", d.get(200, 0) <= ok + gen200 + abandoned,
              f"server 200 {d.get(200, 0):.0f}, clients {ok} + hostile {gen200} + abandoned {abandoned}")
        check("499s (cancelled) <= abandoned", d.get(499, 0) <= abandoned, f"server 499 {d.get(499, 0):.0f}, abandoned {abandoned}")
        check("vega_requests_cancelled_total == 499s", d_cancel == d.get(499, 0), f"cancelled {d_cancel:.0f}, 499 {d.get(499, 0):.0f}")
        check("400s == hostile JSON requests", d.get(400, 0) == json400, f"server 400 {d.get(400, 0):.0f}, hostile {json400}")
        seen503 = stats.get("busy_503") + stats.get("hostile_busy_503")
        check("503s: those the clients saw, and at most the abandoned ones more", seen503 <= d.get(503, 0) <= seen503 + abandoned,
              f"server 503 {d.get(503, 0):.0f}, clients {seen503}, abandoned {abandoned}")
        check("generated tokens >= the completed requests'", d_tokens >= stats.get("tokens"),
              f"server {d_tokens:.0f}, completed requests {stats.get('tokens')}")
    else:
        d, d_cancel, d_tokens = {}, 0, 0

    mem = {}
    if a.pid:
        mem["rss"] = f = flatness(samples, "rss_mib", a.warmup, load_end)
        if f["enough"]:
            lim = a.rss_growth_pct / 100 * f["first_third_max"] + a.rss_growth_mib
            check("RSS flat", f["growth_mib"] <= lim, f"grew {f['growth_mib']:.1f} MiB ({f['growth_pct']:.1f}%), limit {lim:.1f} MiB")
        else:
            check("RSS flat (not enough samples after the warm-up: skipped)", True, f"{f['samples']} samples")
    if gpu_on:
        mem["gpu"] = f = flatness(samples, "gpu_mib", a.warmup, load_end)
        if f["enough"]:
            check("GPU memory flat", f["growth_mib"] <= a.gpu_growth_mib,
                  f"grew {f['growth_mib']:.1f} MiB ({f['growth_pct']:.2f}%), limit {a.gpu_growth_mib:.0f} MiB")
        else:
            check("GPU memory flat (not enough samples after the warm-up: skipped)", True, f"{f['samples']} samples")
        mem["gpu_proc"] = flatness(samples, "gpu_proc_mib", a.warmup, load_end)
    check("no request failures", stats.get("failures") == 0,
          f"{stats.get('failures')} failures: {stats.failure_kinds}" if stats.get("failures") else "")
    check("some requests completed", stats.get("ok") > 0, f"{stats.get('ok')} completed")

    passed = all(c["ok"] for c in checks)
    c = dict(stats.c)
    summary = {
        "pass": passed, "url": a.url, "seconds": round(load_end, 1),
        "config": {k: v for k, v in vars(a).items() if k != "json_out"},
        "counts": c, "failure_kinds": stats.failure_kinds, "failures": stats.failures,
        "hostile": hostile_stats, "checks": checks, "memory": mem,
        "server_deltas": {"requests_by_status": {str(k): v for k, v in d.items()}, "cancelled": d_cancel,
                          "generated_tokens": d_tokens},
        "final_metrics": {k: v for k, v in (m1 or {}).items() if not isinstance(k, tuple)},
        "samples": samples,
    }

    print(f"\n=== serve_soak {a.url}: {a.streams} streams, {load_end:.0f} s, max_tokens {a.min_tokens}..{a.max_tokens_hi}, "
          f"disconnect rate {a.disconnect_rate}, hostile every {a.hostile_every} s")
    print(f"requests: sent {c.get('sent', 0)}, completed {c.get('ok', 0)} ({c.get('ok_stream', 0)} streamed, "
          f"{c.get('ok_whole', 0)} whole), abandoned {c.get('abandoned', 0)} (after send {c.get('abandoned_after_send', 0)}, "
          f"stream midway {c.get('abandoned_stream_midway', 0)}, whole midway {c.get('abandoned_whole_midway', 0)}; "
          f"answer came first {c.get('abandon_too_late', 0)}), 503 {c.get('busy_503', 0)}, "
          f"failures {c.get('failures', 0)}, tokens {c.get('tokens', 0)} ({c.get('tokens', 0) / max(load_end, 1e-9):.0f}/s)")
    print(f"hostile: sent {c.get('hostile_sent', 0)}, ok {c.get('hostile_ok', 0)}, 503 {c.get('hostile_busy_503', 0)}, "
          f"skipped {c.get('hostile_skipped', 0)}; " + ", ".join(f"{k} {v['ok']}/{v['sent']}" for k, v in sorted(hostile_stats.items())))
    for key, label in (("rss", "RSS"), ("gpu", "GPU memory"), ("gpu_proc", "GPU memory (server process)")):
        f = mem.get(key)
        if f and f.get("enough"):
            print(f"{label} MiB: first {f['first']:.1f}, last {f['last']:.1f}, min {f['min']:.1f}, max {f['max']:.1f}; "
                  f"last third vs first third (after {a.warmup:.0f} s): {f['growth_mib']:+.1f} MiB ({f['growth_pct']:+.2f}%)")
    if m1 is not None:
        print(f"final /metrics: slots busy {m1.get('vega_slots_busy'):.0f}/{m1.get('vega_slots_total'):.0f}, "
              f"queue {m1.get('vega_queue_size'):.0f}, in flight {m1.get('vega_http_requests_in_flight'):.0f}, "
              f"cancelled +{d_cancel:.0f}, by status +{ {k: int(v) for k, v in d.items()} }, generated tokens +{d_tokens:.0f}")
    for ch in checks:
        print(f"  [{'ok' if ch['ok'] else 'FAIL'}] {ch['check']}{': ' + ch['detail'] if ch['detail'] else ''}")
    for f in stats.failures:
        print(f"  failure: {json.dumps(f)}")
    print("PASS" if passed else "FAIL", flush=True)
    if a.json_out:
        with open(a.json_out, "w") as fo:
            json.dump(summary, fo, indent=1)
    return 0 if passed else 1


if __name__ == "__main__":
    sys.exit(main())
