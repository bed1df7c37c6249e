# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The load generator against a streaming completions server on 127.0.0.1 (nothing else is reached)."""
from __future__ import absolute_import, division, print_function
__metaclass__ = type

import json
import socket
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from ansible_collections.vllm_pd.ascend.plugins.module_utils.verify import loadgen as L


class Server:
    """Streams ``tokens`` chunks ``token_delay`` s apart after ``first_delay`` s; every ``fail_every``-th
    request (1-based) gets HTTP 500; counts requests in flight at once. With ``gate`` the first request is
    answered only once ``gate`` requests are in flight (or after 10 s): overlap by design, not by timing."""

    def __init__(self, tokens=4, first_delay=0.05, token_delay=0.02, fail_every=0, break_stream=False, empty_200=False,
                 gate=0):
        self.empty_200, self.gate = empty_200, gate
        self.tokens, self.first_delay, self.token_delay = tokens, first_delay, token_delay
        self.fail_every, self.break_stream = fail_every, break_stream
        self.seen, self.in_flight, self.max_in_flight = 0, 0, 0
        self.bodies = []
        self.lock = threading.Lock()
        self.arrived = threading.Condition(self.lock)
        outer = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):
                pass

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                with outer.lock:
                    outer.seen += 1
                    n = outer.seen
                    outer.bodies.append(body)
                    outer.in_flight += 1
                    outer.max_in_flight = max(outer.max_in_flight, outer.in_flight)
                    outer.arrived.notify_all()
                    if n == 1 and outer.gate:
                        outer.arrived.wait_for(lambda: outer.in_flight >= outer.gate, 10)
                self.counted = True
                try:
                    outer.answer(self, n, body)
                finally:
                    outer.finished(self)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def finished(self, h):
        """The request no longer counts as in flight: called before its last bytes go out, since the client may
        send its next request the moment it has them (before this handler thread runs again)."""
        with self.lock:
            if h.counted:
                h.counted = False
                self.in_flight -= 1

    def answer(self, h, n, body):
        if self.empty_200:   # vllm-ascend 0.23's example proxy when its decode call fails
            h.send_response(200)
            h.send_header("Content-Length", "0")
            h.end_headers()
            return
        if self.fail_every and n % self.fail_every == 0:
            payload = b'{"error": "Internal server error"}'
            h.send_response(500)
            h.send_header("Content-Length", str(len(payload)))
            h.end_headers()
            h.wfile.write(payload)
            return
        h.send_response(200)
        h.send_header("Content-Type", "text/event-stream")
        h.send_header("Connection", "close")
        h.end_headers()
        time.sleep(self.first_delay)
        for i in range(self.tokens):
            if i:
                time.sleep(self.token_delay)
            h.wfile.write(b"data: " + json.dumps({"choices": [{"text": f" w{i}"}]}).encode() + b"\n\n")
            h.wfile.flush()
        self.finished(h)
        if not self.break_stream:
            h.wfile.write(b"data: [DONE]\n\n")
        h.wfile.flush()

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def server(request):
    s = Server(**getattr(request, "param", {}))
    yield s
    s.close()


def test_percentile_interpolates_like_numpy():
    assert L.percentile([1, 2, 3, 4], 50) == 2.5
    assert L.percentile([10, 20, 30, 40, 50], 90) == pytest.approx(46.0)
    assert L.percentile([7], 99) == 7
    assert L.percentile([], 99) is None
    assert L.summary([])["n"] == 0


def test_counts_tokens_and_measures_ttft_itl_tpot(server):
    result = L.run(L.LoadSpec(server.url, rate=50, count=6, max_tokens=4))
    assert (result["completed"], result["failed"], result["errors"]) == (6, 0, [])
    assert result["total_output_tokens"] == 24
    assert server.bodies[0]["stream"] is True and server.bodies[0]["max_tokens"] == 4
    assert "model" not in server.bodies[0]
    # the server writes the first chunk 50 ms after the request and the last 3 x 20 ms later: a client can read
    # them no earlier (a busy client may read chunks back to back, so the gaps between them have no lower bound;
    # the arithmetic of the gaps is test_times_each_chunk_by_its_clock's)
    assert result["ttft_ms"]["min"] >= 45
    assert result["itl_ms"]["n"] == 6 * 3 and result["tpot_ms"]["n"] == 6
    assert result["e2el_ms"]["min"] >= 105
    assert len(result["samples"]["e2el_ms"]) == 6
    assert result["output_throughput"] == pytest.approx(24 / result["duration_s"])


def test_times_each_chunk_by_its_clock(server):
    # start, the four chunks, the end of the stream (seconds of the clock send_one is given)
    ticks = iter([10.0, 10.05, 10.07, 10.1, 10.12, 10.13])
    rec = L.send_one(L.LoadSpec(server.url, count=1, max_tokens=4), clock=lambda: next(ticks))
    assert rec["error"] is None and rec["output_tokens"] == 4
    assert rec["ttft_ms"] == pytest.approx(50.0)
    assert rec["itl_ms"] == pytest.approx([20.0, 30.0, 20.0])
    assert rec["latency_ms"] == pytest.approx(130.0)
    result = L.summarize([rec], 1.0)
    assert result["tpot_ms"]["mean"] == pytest.approx((130.0 - 50.0) / 3)


@pytest.mark.parametrize("server", [{"fail_every": 3}], indirect=True)
def test_http_errors_are_failed_requests_with_their_text(server):
    result = L.run(L.LoadSpec(server.url, rate=100, count=9, model="m"))
    assert (result["completed"], result["failed"]) == (6, 3)
    assert all(e.startswith("RuntimeError: HTTP 500") and "Internal server error" in e for e in result["errors"])
    assert server.bodies[0]["model"] == "m"


@pytest.mark.parametrize("server", [{"break_stream": True}], indirect=True)
def test_a_stream_cut_before_done_is_a_failure(server):
    result = L.run(L.LoadSpec(server.url, rate=100, count=2))
    assert result["failed"] == 2 and "without [DONE]" in result["errors"][0]


@pytest.mark.parametrize("server", [{"empty_200": True}], indirect=True)
@pytest.mark.parametrize("stream", [True, False])
def test_an_empty_200_is_a_failure_named_as_the_proxys_decode_failure(server, stream):
    result = L.run(L.LoadSpec(server.url, rate=100, count=2, stream=stream))
    assert result["failed"] == 2 and result["completed"] == 0
    assert "HTTP 200 with an empty body" in result["errors"][0] and "decode" in result["errors"][0]


def test_a_refused_connection_is_a_failure_not_a_crash():
    # bound, never listening: a connect gets RST, and no other process can take the port meanwhile
    # (a closed server's port is free for anyone)
    hold = socket.socket()
    hold.bind(("127.0.0.1", 0))
    try:
        result = L.run(L.LoadSpec(f"http://127.0.0.1:{hold.getsockname()[1]}", rate=100, count=2, timeout=2))
    finally:
        hold.close()
    assert result["failed"] == 2 and result["completed"] == 0
    assert "ConnectionRefused" in result["errors"][0]


def test_fixed_rate_spaces_the_requests(server):
    result = L.run(L.LoadSpec(server.url, rate=20, count=5))
    assert result["completed"] == 5
    # request i leaves at i / rate: the last one at 0.2 s, and the run lasts at least that plus one answer
    assert result["duration_s"] >= 0.2 + 0.05


@pytest.mark.parametrize("server", [{"first_delay": 0.2, "gate": 2}], indirect=True)
def test_concurrency_caps_requests_in_flight(server):
    result = L.run(L.LoadSpec(server.url, rate=None, concurrency=2, count=6))
    assert result["completed"] == 6 and server.seen == 6
    assert server.max_in_flight == 2


@pytest.mark.parametrize("server", [{"first_delay": 0.2}], indirect=True)
def test_rate_with_concurrency_waits_for_a_slot(server):
    result = L.run(L.LoadSpec(server.url, rate=1000, concurrency=1, count=3))
    assert result["completed"] == 3 and server.max_in_flight == 1


def test_background_stops_sending_and_lets_in_flight_requests_finish(server, wait_until):
    bg = L.Background(L.LoadSpec(server.url, rate=20, count=1000)).start()
    wait_until(lambda: server.seen >= 2)    # running (not a fixed sleep: a slow start would leave fewer than 2)
    result = bg.stop_and_wait()
    assert 2 <= result["completed"] < 1000 and result["failed"] == 0
    assert server.seen == result["completed"]
    # nothing is sent after the stop: a count bound on the time the stop took would depend on the machine's load
    time.sleep(0.3)
    assert server.seen == result["completed"]


def test_the_guard_refuses_before_any_connection(server):
    def refuse(host):
        raise RuntimeError(f"route-guard refused {host}")

    with pytest.raises(RuntimeError, match="refused 127.0.0.1"):
        L.run(L.LoadSpec(server.url, count=1, guard=refuse))
    assert server.seen == 0


@pytest.mark.parametrize("kwargs, message", [
    ({"url": "https://x:1"}, "http://HOST:PORT"),
    ({"url": "http://h:1", "count": 0}, "count"),
    ({"url": "http://h:1", "rate": None}, "concurrency"),
    ({"url": "http://h:1", "rate": 0}, "rate"),
])
def test_bad_specs_are_refused(kwargs, message):
    with pytest.raises(ValueError, match=message):
        L.LoadSpec(**kwargs)
