"""OpenAI-style API as vLLM serves it [facts §5]: the socket is bound (SO_REUSEADDR, SO_REUSEPORT)
before the engine starts but listens only once it is ready, so connects are refused until then.

Time is spent as on an engine, so TTFT and TPOT mean something: VLLM_LAB_PREFILL_MS_PER_TOKEN per
prompt token before the first token of a prompt computed here (P, or an engine alone), one
VLLM_LAB_DECODE_MS_PER_TOKEN per decode step (D's first token after its KV pull is a decode step).
Both default to 0. Requests decode concurrently, as in a batch."""
import asyncio
import hashlib
import json
import secrets
import socket
import time

from . import kvcache, logs, metrics
from .consumer import TransferError
from .engine import internal_request_id

VOCAB = ("the", "cache", "moved", "from", "prefill", "to", "decode", "over", "mooncake", "and",
         "ascend", "lab", "tokens", "flow", "block", "by")

_api_log = logs.get("api_server.py:579")
_route_log = logs.get("launcher.py:46")
_serving_log = logs.get("serving.py:192")
_kv_log = logs.get("mooncake_connector.py:724")
_params_log = logs.get("mooncake_connector.py:1893")
REQUIRED_REMOTE = ("remote_engine_id", "remote_block_ids", "remote_host", "remote_port", "remote_request_id")
# vLLM 0.23 (entrypoints/serve/utils/server_utils.py): with a key, these paths need "Authorization: Bearer KEY";
# /health and /metrics do not
GUARDED_PREFIX = ("/v1", "/v2", "/inference")


def prebind(host, port):
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
    sock.bind((host, port))
    return sock


def generate(tokens, max_tokens, kv):
    """Greedy, deterministic text from the prompt and what attention read from the KV cache (KV: the
    prompt itself when the KV is right), so a wrong transfer changes D's output like on NPUs."""
    digest = b"".join(hashlib.sha256(f"{n}|{' '.join(tokens)}|{kv}".encode()).digest() for n in range(4))
    return [" " + VOCAB[b % len(VOCAB)] for b in digest[:max(1, max_tokens)]]


def _error(status, message, kind):
    from fastapi.responses import JSONResponse
    return JSONResponse(status_code=status, content={"error": {
        "message": message, "type": kind, "param": None, "code": status}})


class Authentication:
    """vLLM's AuthenticationMiddleware (api_server.py build_app: `args.api_key or [envs.VLLM_API_KEY]`): HTTP 401
    {"error": "Unauthorized"} on a guarded path unless the Bearer token equals a key; OPTIONS passes."""

    def __init__(self, app, tokens):
        self.app = app
        self.hashes = [hashlib.sha256(t.encode("utf-8")).digest() for t in tokens]

    def allowed(self, scope):
        value = ""
        for name, raw in scope.get("headers") or []:
            if name.lower() == b"authorization":
                value = raw.decode("latin-1")
        scheme, _sep, param = value.partition(" ")
        if not value or scheme.lower() != "bearer":
            return False
        digest = hashlib.sha256(param.encode("utf-8")).digest()
        match = False
        for h in self.hashes:
            match |= secrets.compare_digest(digest, h)
        return match

    async def __call__(self, scope, receive, send):
        if scope["type"] not in ("http", "websocket") or scope.get("method") == "OPTIONS":
            return await self.app(scope, receive, send)
        path = scope["path"].removeprefix(scope.get("root_path", ""))
        if path.startswith(GUARDED_PREFIX) and not self.allowed(scope):
            body = json.dumps({"error": "Unauthorized"}).encode()
            await send({"type": "http.response.start", "status": 401, "headers": [
                (b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]})
            return await send({"type": "http.response.body", "body": body})
        return await self.app(scope, receive, send)


def api_tokens(api_key, env):
    """The keys the API accepts: --api-key before VLLM_API_KEY, empty ones dropped (none: no check)."""
    return [k for k in ([api_key] if api_key else [env.get("VLLM_API_KEY")]) if k]


def _ms_env(env, name):
    return float(env.get(name) or 0) / 1000.0


def build_app(engine, served_name, max_model_len):
    from fastapi import FastAPI, Request
    from fastapi.responses import JSONResponse, PlainTextResponse, Response, StreamingResponse

    app = FastAPI()
    tokens = api_tokens(getattr(engine.args, "api_key", None), engine.env)
    if tokens:
        app.add_middleware(Authentication, tokens=tokens)
    stats = metrics.Metrics(served_name, engine.pool)
    prefill_per_token = _ms_env(engine.env, "VLLM_LAB_PREFILL_MS_PER_TOKEN")
    decode_step = _ms_env(engine.env, "VLLM_LAB_DECODE_MS_PER_TOKEN")

    async def emit(words, arrival, prompt_tokens, first_delay):
        """The tokens of one running request, first after FIRST_DELAY, then one per decode step."""
        stats.change(running=1)
        try:
            last = None
            for word in words:
                await asyncio.sleep(first_delay if last is None else decode_step)
                now = time.monotonic()
                stats.observe("ttft" if last is None else "itl", now - (arrival if last is None else last))
                last = now
                yield word
            stats.finished("length", prompt_tokens, len(words), time.monotonic() - arrival)
        finally:
            stats.change(running=-1)

    @app.get("/metrics")
    async def prometheus_metrics():
        return PlainTextResponse(stats.render(), media_type="text/plain; version=0.0.4; charset=utf-8")

    @app.get("/health")
    async def health():
        # The engine runs in this process: if it had died, so would the API.
        return Response(status_code=200)

    @app.get("/v1/models")
    async def models():
        return {"object": "list", "data": [{
            "id": served_name, "object": "model", "created": int(time.time()), "owned_by": "vllm",
            "root": engine.args.model, "parent": None, "max_model_len": max_model_len}]}

    # vLLM serves it only in dev mode (entrypoints/serve/dev/cache/api_router.py); the example proxy's own
    # /reset_prefix_cache calls it on every member
    if engine.env.get("VLLM_SERVER_DEV_MODE") == "1":
        @app.post("/reset_prefix_cache")
        async def reset_prefix_cache():
            return Response(status_code=200)

    async def handle(request: Request, chat: bool):
        try:
            body = await request.json()
        except ValueError:
            return _error(400, "Invalid JSON body", "BadRequestError")
        if body.get("model") not in (None, served_name):
            return _error(404, f"The model `{body.get('model')}` does not exist.", "NotFoundError")
        if chat:
            prompt = " ".join(str(m.get("content", "")) for m in body.get("messages", []))
        else:
            prompt = body.get("prompt", "")
        arrival = time.monotonic()
        tokens = kvcache.tokenize(prompt)
        prefix = "chatcmpl" if chat else "cmpl"
        external = f"{prefix}-{request.headers.get('x-request-id') or internal_request_id('')[1:]}"
        request_id = internal_request_id(external)
        max_tokens = int(body.get("max_tokens") or body.get("max_completion_tokens") or 16)
        params = body.get("kv_transfer_params") or {}
        out_params = None
        kv = kvcache.computed_kv(tokens)
        first_delay = prefill_per_token * len(tokens)
        if params.get("do_remote_decode") and engine.role == "kv_producer":
            out_params = engine.prefill_for_remote_decode(request_id, tokens)
            max_tokens = 1
        elif params.get("do_remote_prefill") and engine.role != "kv_producer":
            missing = [k for k in REQUIRED_REMOTE if params.get(k) is None]
            if missing:
                _params_log.warning("Got invalid KVTransferParams. params=%s.", params)
            else:
                stats.change(waiting=1)  # WAITING_FOR_REMOTE_KVS is a waiting state in vLLM's scheduler
                try:
                    kv = await asyncio.to_thread(engine.puller.pull, request_id, params, tokens)
                except (TransferError, RuntimeError) as e:
                    _kv_log.error("Failed to transfer KV cache for request %s: %s", request_id, e)
                    _serving_log.error("Request %s failed with an internal error during generation", request_id)
                    return _error(500, "Internal server error", "InternalServerError")
                finally:
                    stats.change(waiting=-1)
                first_delay = decode_step
        words = generate(tokens, max_tokens, kv)
        tokens_out = emit(words, arrival, len(tokens), first_delay)
        finish = "length"
        usage = {"prompt_tokens": len(tokens), "completion_tokens": len(words),
                 "total_tokens": len(tokens) + len(words), "prompt_tokens_details": None}
        created = int(time.time())
        obj = "chat.completion" if chat else "text_completion"
        if body.get("stream"):
            async def events():
                try:
                    async for w in tokens_out:
                        delta = {"delta": {"role": "assistant", "content": w}} if chat else {"text": w}
                        chunk = {"id": external, "object": obj + (".chunk" if chat else ""), "created": created,
                                 "model": served_name, "choices": [dict(index=0, finish_reason=None, **delta)]}
                        yield f"data: {json.dumps(chunk)}\n\n"
                    yield "data: [DONE]\n\n"
                finally:  # a client that went away ends the request at once, as vLLM aborts it
                    await tokens_out.aclose()
            return StreamingResponse(events(), media_type="text/event-stream")
        text = "".join([w async for w in tokens_out])
        choice = ({"index": 0, "message": {"role": "assistant", "content": text}} if chat
                  else {"index": 0, "text": text, "logprobs": None})
        choice.update(finish_reason=finish, stop_reason=None)
        return JSONResponse({"id": external, "object": obj, "created": created, "model": served_name,
                             "choices": [choice], "usage": usage, "kv_transfer_params": out_params})

    @app.post("/v1/completions")
    async def completions(request: Request):
        return await handle(request, chat=False)

    @app.post("/v1/chat/completions")
    async def chat_completions(request: Request):
        return await handle(request, chat=True)

    return app


def serve(app, sock, host, port, shutdown_timeout=0):
    """Serve until SIGTERM; then, as vLLM's --shutdown-timeout [day2-ops §2a]: no new connection,
    in-flight requests get SHUTDOWN_TIMEOUT seconds and are cut after (0: at once)."""
    import uvicorn

    _api_log.info("Starting vLLM server on http://%s:%d", host, port)
    _route_log.info("Available routes are:")
    for route in app.routes:
        methods = getattr(route, "methods", None)
        if methods:
            _route_log.info("Route: %s, Methods: %s", route.path, ", ".join(sorted(methods)))
    config = uvicorn.Config(app, log_level="info", timeout_keep_alive=5, timeout_graceful_shutdown=shutdown_timeout)
    uvicorn.Server(config).run(sockets=[sock])
