# -*- coding: utf-8 -*-
# Copyright (c) vllm_pd.ascend contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""A bounded load generator for an OpenAI-style completions endpoint (a PD proxy).

A fixed count of requests, sent at fixed intervals (``rate``) or by a fixed number of closed-loop
workers (``concurrency``), each streamed so that TTFT, ITL and TPOT are measured the way
``vllm bench serve`` measures them (observability-bench.md §A1): TTFT is the time to the first
chunk with text, ITL the gaps between chunks, TPOT (latency - TTFT) / (tokens - 1). A streamed
chunk counts as one output token, as vLLM streams one token per chunk.

Stdlib only: it runs on the controller, in a test or on a managed host. It never retries: a
request that fails is counted as failed, which is what a client would see.
"""

from __future__ import absolute_import, division, print_function
__metaclass__ = type

import http.client
import json
import threading
import time
import urllib.parse

from ansible_collections.vllm_pd.ascend.plugins.module_utils.common.releases import runtime
from ansible_collections.vllm_pd.ascend.plugins.module_utils.common.secrets import auth_headers

# what it sends and reads: vLLM's OpenAI completion protocol, the release table's facts (the same in every supported
# release; tests/contract asserts each against every release's source)
_UP = runtime(None)
REQUEST = _UP["completion_request"]
ANSWER = _UP["completion_answer"]
_DATA = _UP["completion_stream"]["data"].encode()
_DONE = _UP["completion_stream"]["done"].encode()

MAX_ERRORS = 20
METRICS = ("ttft_ms", "tpot_ms", "itl_ms", "e2el_ms")


class LoadSpec:
    """What to send. ``url``: ``http://HOST:PORT`` of the proxy; ``rate``: requests per second at
    fixed intervals, or None for ``concurrency`` closed-loop workers; ``concurrency`` with a rate
    caps the requests in flight (as ``--max-concurrency``); ``guard``: a callable(host) that raises
    to refuse the address before any connection (the lab passes its route guard); ``api_key``: sent as
    ``Authorization: Bearer`` (vLLM with VLLM_API_KEY answers 401 under /v1 without it)."""

    def __init__(self, url, model=None, prompt="The cache moved from prefill to decode", max_tokens=16,
                 rate=5.0, count=100, concurrency=None, timeout=30.0, stream=True,
                 endpoint=None, guard=None, api_key=None):
        parsed = urllib.parse.urlsplit(url)
        if parsed.scheme != "http" or not parsed.hostname:
            raise ValueError(f"url must be http://HOST:PORT, got {url!r}")
        if count < 1:
            raise ValueError(f"count must be >= 1, got {count}")
        if rate is None and not concurrency:
            raise ValueError("give a rate (requests/s) or a concurrency (closed-loop workers)")
        if rate is not None and rate <= 0:
            raise ValueError(f"rate must be > 0, got {rate}")
        self.host, self.port = parsed.hostname, parsed.port or 80
        self.model, self.prompt, self.max_tokens = model, prompt, int(max_tokens)
        self.rate, self.count, self.concurrency = rate, int(count), concurrency
        # the proxy's completions route unless told (the release table's)
        self.endpoint = endpoint or _UP["proxy_completions_route"]
        self.timeout, self.stream, self.guard = float(timeout), bool(stream), guard
        self.headers = {"Content-Type": "application/json"}
        self.headers.update(auth_headers(api_key))

    def body(self):
        body = {REQUEST["prompt"]: self.prompt, REQUEST["max_tokens"]: self.max_tokens, REQUEST["temperature"]: 0,
                REQUEST["ignore_eos"]: True, REQUEST["stream"]: self.stream}
        if self.model:
            body[REQUEST["model"]] = self.model
        return json.dumps(body).encode()


def percentile(values, p):
    """Linear interpolation between closest ranks (numpy's default, which vllm bench serve uses)."""
    if not values:
        return None
    ordered = sorted(values)
    rank = (len(ordered) - 1) * p / 100.0
    low = int(rank)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (rank - low)


def summary(values):
    if not values:
        return {"n": 0, "mean": None, "p50": None, "p90": None, "p99": None, "min": None, "max": None}
    return {"n": len(values), "mean": sum(values) / len(values), "p50": percentile(values, 50),
            "p90": percentile(values, 90), "p99": percentile(values, 99), "min": min(values), "max": max(values)}


def summarize(records, duration_s):
    """The result of a run from its per-request records (dicts from ``send_one``)."""
    ok = [r for r in records if r["error"] is None]
    samples = {m: [] for m in METRICS}
    for r in ok:
        samples["e2el_ms"].append(r["latency_ms"])
        if r["ttft_ms"] is not None:
            samples["ttft_ms"].append(r["ttft_ms"])
        samples["itl_ms"].extend(r["itl_ms"])
        if r["ttft_ms"] is not None and r["output_tokens"] > 1:
            samples["tpot_ms"].append((r["latency_ms"] - r["ttft_ms"]) / (r["output_tokens"] - 1))
    tokens = sum(r["output_tokens"] for r in ok)
    out = {"completed": len(ok), "failed": len(records) - len(ok),
           "errors": [r["error"] for r in records if r["error"] is not None][:MAX_ERRORS],
           "duration_s": duration_s, "total_output_tokens": tokens,
           "request_throughput": len(ok) / duration_s if duration_s > 0 else 0.0,
           "output_throughput": tokens / duration_s if duration_s > 0 else 0.0,
           "samples": samples}
    out.update((m, summary(samples[m])) for m in METRICS)
    return out


# vllm-ascend 0.23's example proxy answers a failed decode call with HTTP 200 and an empty body (it calls D
# inside its streaming response, after the status went out; upstream-compat.md part 1 #5): a failure.
EMPTY_200 = ("HTTP 200 with an empty body: the proxy's call to the decode instance failed after it had sent the "
             "status (vllm-ascend's example proxy answers so; its journal names the decode error)")


def _stream_chunks(response):
    """Yield the text of each SSE ``data:`` event until ``[DONE]``; raise on an error event."""
    seen = False
    for raw in response:
        seen = seen or bool(raw.strip())
        line = raw.strip()
        if not line.startswith(_DATA):
            continue
        data = line[len(_DATA):].strip()
        if data == _DONE:
            return
        event = json.loads(data)
        if ANSWER["error"] in event:
            raise RuntimeError(f"error event: {json.dumps(event[ANSWER['error']])[:200]}")
        yield "".join(c.get(ANSWER["text"]) or (c.get(ANSWER["delta"]) or {}).get(ANSWER["content"]) or ""
                      for c in event.get(ANSWER["choices"], []))
    raise RuntimeError("stream ended without [DONE]" if seen else EMPTY_200)


def send_one(spec, clock=time.monotonic):
    """One request; a dict with latency_ms, ttft_ms, itl_ms (list), output_tokens and error (None when
    it succeeded)."""
    start = clock()
    rec = {"start": start, "latency_ms": None, "ttft_ms": None, "itl_ms": [], "output_tokens": 0, "error": None}
    conn = http.client.HTTPConnection(spec.host, spec.port, timeout=spec.timeout)
    try:
        conn.request("POST", spec.endpoint, body=spec.body(), headers=spec.headers)
        response = conn.getresponse()
        if response.status != 200:
            raise RuntimeError(f"HTTP {response.status}: {response.read(300).decode('utf-8', 'replace').strip()}")
        if spec.stream:
            last = None
            for text in _stream_chunks(response):
                if not text:
                    continue
                now = clock()
                if last is None:
                    rec["ttft_ms"] = (now - start) * 1000.0
                else:
                    rec["itl_ms"].append((now - last) * 1000.0)
                last = now
                rec["output_tokens"] += 1
        else:
            body = response.read()
            if not body.strip():
                raise RuntimeError(EMPTY_200)
            reply = json.loads(body)
            rec["output_tokens"] = int((reply.get(ANSWER["usage"]) or {}).get(ANSWER["completion_tokens"]) or 0)
        rec["latency_ms"] = (clock() - start) * 1000.0
    except (OSError, ValueError, RuntimeError, http.client.HTTPException) as e:
        rec["error"] = f"{type(e).__name__}: {e}"
    finally:
        conn.close()
    return rec


class Background:
    """Runs ``spec`` in threads; ``stop_and_wait()`` stops sending (requests in flight finish) and
    returns the result. ``wait()`` returns it once all ``count`` requests are done."""

    def __init__(self, spec):
        self.spec = spec
        self.stop_event = threading.Event()
        self._records = []
        self._lock = threading.Lock()
        self._threads = []
        self._runner = None
        self._started = self._ended = None

    def start(self):
        if self.spec.guard is not None:
            self.spec.guard(self.spec.host)
        self._started = time.monotonic()
        self._runner = threading.Thread(target=self._run, name="loadgen", daemon=True)
        self._runner.start()
        return self

    def _record(self):
        rec = send_one(self.spec)
        with self._lock:
            self._records.append(rec)

    def _run(self):
        spec = self.spec
        if spec.rate is None:
            self._closed_loop()
        else:
            slots = threading.BoundedSemaphore(spec.concurrency) if spec.concurrency else None
            for i in range(spec.count):
                if self.stop_event.wait(max(0.0, self._started + i / spec.rate - time.monotonic())):
                    break
                if slots is not None:
                    slots.acquire()
                thread = threading.Thread(target=self._bounded, args=(slots,), daemon=True)
                thread.start()
                self._threads.append(thread)
        for thread in self._threads:
            thread.join()
        self._ended = time.monotonic()

    def _bounded(self, slots):
        try:
            self._record()
        finally:
            if slots is not None:
                slots.release()

    def _closed_loop(self):
        left = [self.spec.count]

        def worker():
            while not self.stop_event.is_set():
                with self._lock:
                    if left[0] == 0:
                        return
                    left[0] -= 1
                self._record()

        self._threads = [threading.Thread(target=worker, daemon=True) for _unused in range(self.spec.concurrency)]
        for thread in self._threads:
            thread.start()

    def wait(self):
        self._runner.join()
        with self._lock:
            records = sorted(self._records, key=lambda r: r["start"])
        return summarize(records, self._ended - self._started)

    def stop_and_wait(self):
        self.stop_event.set()
        return self.wait()


def run(spec, stop=None):
    """Send the whole load and return its result; ``stop`` (a threading.Event) ends it early."""
    bg = Background(spec)
    if stop is not None:
        bg.stop_event = stop
    return bg.start().wait()
