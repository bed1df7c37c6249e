"""Lab stand-in of vllm-ascend's examples/disaggregated_prefill_v1/load_balance_proxy_server_example.py
(v0.15.0rc1 and later: add/remove with the delayed removal), written from its documented behaviour
(shared docs day2-ops.md §1a, §4), not copied:

- the same CLI flags (unknown ones are an argparse error, as upstream);
- /v1/completions and /v1/chat/completions: P first (max_tokens 1, kv_transfer_params
  do_remote_decode, not streamed), then D with P's kv_transfer_params, D's answer streamed back;
- each backend is retried up to --max-retries with exponential backoff from --retry-delay, the SAME
  backend, never on HTTP 400; no failover, no health check of members, no ejection: a dead member
  stays in rotation until /instances/remove; an upstream HTTP error is forwarded with its status and body;
- GET /healthcheck: counts and the proxy-global request_num;
- POST /instances/add: the instances wait; a background thread probes GET /v1/models (5 s timeout)
  every --waiting-retry-interval s and drops one after --max-waiting-retries failures;
- POST /instances/remove: with any request in flight (global request_num > 0) the instances are only
  tainted (priority 1e15: chosen only when nothing else of their role is left) and really removed by
  that thread once request_num is 0; otherwise at once. An unknown type answers HTTP 200 with "error".

Membership lives in memory only: a restart goes back to the command line.
"""
import argparse
import asyncio
import os
import sys
import threading
import time
import urllib.request
import uuid

TAINT_PRIORITY = 1e15
ROLES = ("prefill", "decode")


def server_key(host, port):
    # upstream folds loopback names together the same way
    return f"{host.replace('localhost', '0.0.0.0').replace('127.0.0.1', '0.0.0.0')}:{int(port)}"


def parse_instances(instances):
    """'host:port' strings -> [(host, port)]; split on ':' as upstream (no IPv6 literals)."""
    if isinstance(instances, str):
        instances = [instances]
    return [(host, int(port)) for host, port in (i.split(":") for i in instances)]


class Scheduler:
    """Members, load and the delayed removal (no HTTP: unit-tested on its own)."""

    def __init__(self, prefill, decode):
        self.lock = threading.RLock()
        self.request_num = 0
        self.servers = {r: {} for r in ROLES}     # key -> {"host", "port", "ordinal", "load"}
        self.tainted = {r: set() for r in ROLES}
        self.waiting = {}                         # key -> [role, host, port, retries]
        self._ordinal = 0
        for role, members in (("prefill", prefill), ("decode", decode)):
            for host, port in members:
                self._add(role, host, port)

    def _add(self, role, host, port):
        key = server_key(host, port)
        if key in self.servers[role]:
            return False
        self.servers[role][key] = {"host": host, "port": int(port), "ordinal": self._ordinal, "load": 0.0}
        self._ordinal += 1
        return True

    def snapshot(self):
        with self.lock:
            return {r: [f"{s['host']}:{s['port']}" for s in sorted(self.servers[r].values(), key=lambda s: s["ordinal"])]
                    for r in ROLES}

    def healthcheck(self):
        with self.lock:
            return {"status": "ok", "prefill_instances": len(self.servers["prefill"]),
                    "decode_instances": len(self.servers["decode"]), "request_num": self.request_num}

    def pick(self, role, load, begin=False):
        """The least loaded member; a tainted one only when no other is left."""
        with self.lock:
            if not self.servers[role]:
                raise RuntimeError(f"No available {role} servers")
            key = min(self.servers[role], key=lambda k: (
                TAINT_PRIORITY if k in self.tainted[role] else self.servers[role][k]["load"],
                self.servers[role][k]["ordinal"]))
            self.servers[role][key]["load"] += load
            if begin:
                self.request_num += 1
            entry = self.servers[role][key]
            return key, entry["host"], entry["port"]

    def release(self, role, key, load):
        with self.lock:
            if key in self.servers[role]:
                self.servers[role][key]["load"] -= load

    def finish(self):
        with self.lock:
            self.request_num = max(0, self.request_num - 1)

    def add(self, role, instances):
        queued = []
        with self.lock:
            for host, port in instances:
                key = server_key(host, port)
                if key in self.servers[role] or key in self.waiting:
                    continue
                self.waiting[key] = [role, host, int(port), 0]
                queued.append(f"{host}:{port}")
        return queued

    def remove(self, role, instances):
        """True when the instances were only tainted (requests in flight)."""
        keys = {server_key(h, p) for h, p in instances}
        with self.lock:
            if self.request_num > 0:
                self.tainted[role] |= keys
                return True
            for key in keys:
                self.servers[role].pop(key, None)
                self.waiting.pop(key, None)
            self.tainted[role] -= keys
            return False

    def probe_waiting(self, probe, max_retries):
        """One pass of the listener: activate what answers, drop what failed too often, then finish
        the delayed removals if nothing is in flight. Returns the dropped 'host:port' strings."""
        dropped = []
        for key, (role, host, port, retries) in list(self.waiting.items()):
            ok = probe(host, port)
            with self.lock:
                if key not in self.waiting:
                    continue
                if ok:
                    del self.waiting[key]
                    self.tainted[role].discard(key)
                    self._add(role, host, port)
                elif retries + 1 >= max_retries:
                    del self.waiting[key]
                    dropped.append(f"{host}:{port}")
                else:
                    self.waiting[key][3] = retries + 1
        with self.lock:
            if self.request_num == 0:
                for role in ROLES:
                    for key in self.tainted[role]:
                        self.servers[role].pop(key, None)
                    self.tainted[role].clear()
        return dropped


def probe_models(host, port):
    req = urllib.request.Request(f"http://{host}:{port}/v1/models",
                                 headers={"Authorization": f"Bearer {os.environ.get('OPENAI_API_KEY')}"})
    try:
        with urllib.request.urlopen(req, timeout=5) as r:
            return 200 <= r.status < 300
    except OSError:
        return False


def listener(sched, args):
    while True:
        for dropped in sched.probe_waiting(probe_models, args.max_waiting_retries):
            print(f"Instance {dropped} was not added to the proxy.", flush=True)
        time.sleep(args.waiting_retry_interval)


def parse_args(argv):
    ap = argparse.ArgumentParser()
    ap.add_argument("--port", type=int, default=8000)
    ap.add_argument("--host", type=str, default="localhost")
    ap.add_argument("--prefiller-hosts", type=str, nargs="+", default=["localhost"])
    ap.add_argument("--prefiller-ports", type=int, nargs="+", default=[8001])
    ap.add_argument("--decoder-hosts", type=str, nargs="+", default=["localhost"])
    ap.add_argument("--decoder-ports", type=int, nargs="+", default=[8002])
    ap.add_argument("--max-retries", type=int, default=3)
    ap.add_argument("--retry-delay", type=float, default=0.001)
    ap.add_argument("--max-waiting-retries", type=int, default=3)
    ap.add_argument("--waiting-retry-interval", type=float, default=10)
    ap.add_argument("--workers", type=int, default=1)
    ap.add_argument("--log-level", type=str, default="INFO", choices=["DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"])
    args = ap.parse_args(argv)
    if len(args.prefiller_hosts) != len(args.prefiller_ports):
        raise ValueError("Number of prefiller hosts must match number of prefiller ports")
    if len(args.decoder_hosts) != len(args.decoder_ports):
        raise ValueError("Number of decoder hosts must match number of decoder ports")
    return args


def build_app(sched, args):
    import httpx
    from fastapi import FastAPI, Request
    from fastapi.responses import JSONResponse, StreamingResponse

    app = FastAPI()
    client = httpx.AsyncClient(timeout=None, limits=httpx.Limits(max_connections=None, max_keepalive_connections=None))

    def headers(request_id):
        return {"Authorization": f"Bearer {os.environ.get('OPENAI_API_KEY')}", "X-Request-Id": request_id}

    async def backoff(attempt):
        await asyncio.sleep(args.retry_delay * (2 ** (attempt - 1)))

    async def prefill(host, port, api, body, request_id):
        body = dict(body, stream=False, max_tokens=1, min_tokens=1, kv_transfer_params={
            "do_remote_decode": True, "do_remote_prefill": False, "remote_engine_id": None,
            "remote_block_ids": None, "remote_host": None, "remote_port": None})
        if "max_completion_tokens" in body:
            body["max_completion_tokens"] = 1
        body.pop("stream_options", None)
        attempts = max(1, args.max_retries)
        for attempt in range(1, attempts + 1):
            try:
                r = await client.post(f"http://{host}:{port}/v1{api}", json=body, headers=headers(request_id))
                r.raise_for_status()
                return r.json()
            except httpx.HTTPStatusError as e:
                if e.response.status_code == 400 or attempt == attempts:
                    raise
            except httpx.RequestError:
                if attempt == attempts:
                    raise
            await backoff(attempt)

    async def decode_stream(host, port, api, body, request_id):
        attempts = max(1, args.max_retries)
        for attempt in range(1, attempts + 1):
            sent = False
            try:
                async with client.stream("POST", f"http://{host}:{port}/v1{api}", json=body,
                                         headers=headers(request_id)) as r:
                    r.raise_for_status()
                    async for chunk in r.aiter_bytes():
                        sent = True
                        yield chunk
                    return
            except httpx.HTTPStatusError as e:
                if e.response.status_code == 400 or attempt == attempts:
                    raise
            except httpx.RequestError:
                if sent:
                    return
                if attempt == attempts:
                    raise
            await backoff(attempt)

    async def completions(api, request):
        body = await request.json()
        length = len(await request.body())
        request_id = str(uuid.uuid4())
        p_load = length / 4.0 * 0.0345 + 120.0745
        p_key, p_host, p_port = sched.pick("prefill", p_load, begin=True)
        d_key = None
        try:
            p_json = await prefill(p_host, p_port, api, body, request_id)
            if p_json.get("kv_transfer_params"):
                body["kv_transfer_params"] = p_json["kv_transfer_params"]
            d_key, d_host, d_port = sched.pick("decode", length)
            stream = decode_stream(d_host, d_port, api, body, request_id)
            first = await stream.__anext__()
        except StopAsyncIteration:
            first = b""
        except Exception as e:  # noqa: BLE001 - forwarded like upstream, request accounting released
            sched.release("prefill", p_key, p_load)
            if d_key:
                sched.release("decode", d_key, length)
            sched.finish()
            print(f"Error occurred in disagg prefill proxy server - {api} endpoint: {e!r}", flush=True)
            if isinstance(e, httpx.HTTPStatusError):
                try:
                    err = e.response.json()
                except ValueError:
                    err = {"error": {"message": e.response.text or "upstream error"}}
                return JSONResponse(err, status_code=e.response.status_code)
            return JSONResponse({"error": {"message": f"{type(e).__name__}: {e}"}}, status_code=500)
        sched.release("prefill", p_key, p_load)

        async def relay():
            try:
                if first:
                    yield first
                async for chunk in stream:
                    yield chunk
            finally:
                sched.release("decode", d_key, length)
                sched.finish()

        media = "text/event-stream; charset=utf-8" if body.get("stream") else "application/json"
        return StreamingResponse(relay(), media_type=media)

    @app.post("/v1/completions")
    async def handle_completions(request: Request):
        return await completions("/completions", request)

    @app.post("/v1/chat/completions")
    async def handle_chat(request: Request):
        return await completions("/chat/completions", request)

    @app.get("/healthcheck")
    async def healthcheck():
        return sched.healthcheck()

    async def adjust(mode, request):
        body = await request.json()
        kind = body.get("type", "")
        instances = parse_instances(body.get("instances", []))
        msg = f"{mode} {kind} instances: {[f'{h}:{p}' for h, p in instances]}."
        if kind not in ROLES:
            return {"error": f"Instance type {kind!r} is not supported. Only 'prefill' and 'decode' are allowed."}
        if mode == "add":
            queued = sched.add(kind, instances)
            if queued:
                msg = f"Instances {queued} are waiting to be added."
        elif sched.remove(kind, instances):
            msg = f"Instances {[f'{h}:{p}' for h, p in instances]} are isolated and waiting to be removed."
        snap = sched.snapshot()
        return {"message": msg, "current_prefill_instances": snap["prefill"],
                "current_decode_instances": snap["decode"]}

    @app.post("/instances/add")
    async def add(request: Request):
        return await adjust("add", request)

    @app.post("/instances/remove")
    async def remove(request: Request):
        return await adjust("remove", request)

    return app


def main(argv):
    args = parse_args(argv)
    sched = Scheduler(list(zip(args.prefiller_hosts, args.prefiller_ports)),
                      list(zip(args.decoder_hosts, args.decoder_ports)))
    threading.Thread(target=listener, args=(sched, args), daemon=True).start()
    import uvicorn
    uvicorn.run(build_app(sched, args), host=args.host, port=args.port, log_level=args.log_level.lower())


if __name__ == "__main__":
    main(sys.argv[1:])
