"""The stand-in's API key check, as vLLM 0.23's AuthenticationMiddleware: 401 on /v1, /v2 and /inference
without "Authorization: Bearer KEY" when a key is set; /health and /metrics open; --api-key before
VLLM_API_KEY."""
import asyncio
import json

import pytest

from vllm_standin import api


def call(app, path, headers=(), method="GET"):
    sent = []

    async def send(message):
        sent.append(message)

    async def receive():
        return {"type": "http.request", "body": b""}

    scope = {"type": "http", "method": method, "path": path, "root_path": "",
             "headers": [(k.lower().encode(), v.encode()) for k, v in headers]}
    asyncio.run(app(scope, receive, send))
    return sent


async def inner(scope, receive, send):
    await send({"type": "http.response.start", "status": 200, "headers": []})
    await send({"type": "http.response.body", "body": b"ok"})


APP = api.Authentication(inner, tokens=["sk-right"])


@pytest.mark.parametrize("path", ["/v1/models", "/v1/completions", "/v2/x", "/inference/v1/generate"])
@pytest.mark.parametrize("headers", [(), [("Authorization", "Bearer sk-wrong")], [("Authorization", "sk-right")],
                                     [("Authorization", "Basic sk-right")], [("Authorization", "Bearer None")]])
def test_guarded_paths_refuse_without_the_key(path, headers):
    sent = call(APP, path, headers)
    assert sent[0]["status"] == 401
    assert json.loads(sent[1]["body"]) == {"error": "Unauthorized"}


@pytest.mark.parametrize("path", ["/v1/models", "/v1/completions", "/inference/v1/generate"])
def test_the_right_key_passes(path):
    assert call(APP, path, [("Authorization", "Bearer sk-right")])[0]["status"] == 200
    assert call(APP, path, [("authorization", "bearer sk-right")])[0]["status"] == 200


@pytest.mark.parametrize("path", ["/health", "/metrics", "/healthcheck", "/reset_prefix_cache"])
def test_open_paths_need_no_key(path):
    assert call(APP, path)[0]["status"] == 200


def test_options_passes():
    assert call(APP, "/v1/models", method="OPTIONS")[0]["status"] == 200


def test_tokens_cli_before_env_and_none_without_a_key():
    assert api.api_tokens("cli", {"VLLM_API_KEY": "env"}) == ["cli"]
    assert api.api_tokens(None, {"VLLM_API_KEY": "env"}) == ["env"]
    assert api.api_tokens(None, {"VLLM_API_KEY": ""}) == [] and api.api_tokens(None, {}) == []
