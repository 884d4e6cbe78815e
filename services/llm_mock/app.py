"""The llm-mock HTTP app: an offline, deterministic, OpenAI-compatible chat server (aiohttp).

Routes: `POST /v1/chat/completions`, `GET /v1/models`, `GET /v1/models/{id}`, `GET /health`, `GET /metrics`.
`make_app(config)` builds the app (tests run it with aiohttp's test utilities); `start_server(config)` serves
it on a port (0 = pick one) in the running loop and returns `(runner, port)`.

Per valid chat request: sleep `latency_ms` + a seeded uniform draw in [0, `latency_jitter_ms`] (asyncio, the
loop stays free), then with probability `error_rate` (a second seeded stream) answer `error_status` with an
OpenAI-style `server_error`; otherwise reply with the task's text (services/llm_mock/tasks.py). The text
depends only on the messages, so the same body always gets the same text; the random draws only decide
timing and injected failures, in request order from `seed`. `response_format` json_object / json_schema turns
that text into JSON (services/llm_mock/json_mode.py); `stream: true` sends it as SSE chunks
(services/llm_mock/streaming.py). A `model` other than the configured one and its aliases is 404
`model_not_found`, on chat completions and `/v1/models/{id}` alike. Usage counts cl100k tokens
(services.common.tokens) unless an override is configured; `max_tokens` cuts the text and sets
finish_reason "length" as the real API does.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import random
import time
from collections import OrderedDict
from typing import Any

from aiohttp import web
from prometheus_client import REGISTRY, CollectorRegistry

from services.common import prompts
from services.common.errors import http_status
from services.common.http_input import application
from services.common.metrics_http import metrics_handler
from services.common.tokens import count_messages_tokens, count_tokens, tokenizer_name, truncate_to_tokens
from services.llm_mock import BEHAVIOUR_VERSION
from services.llm_mock.body_checks import lone_surrogate_path, nesting_error, surrogate_error
from services.llm_mock.config import MockConfig
from services.llm_mock.json_mode import as_json_object, as_schema_instance
from services.llm_mock.metrics import MockMetrics, metrics_for
from services.llm_mock.streaming import send_stream
from services.llm_mock.tasks import detect_task, respond
from services.llm_mock.validation import (
    ChatRequest,
    RequestError,
    oversize_error,
    too_long_error,
    validate_chat,
)

STATE_KEY = web.AppKey("llm_mock_state", object)
# Requests bigger than this are computed in a worker thread so a long transcript never stalls the loop.
OFFLOAD_CHARS = 16_000
# The sleep used for injected latency (module-level so a test can observe it without timing anything).
_sleep = asyncio.sleep


def error_body(message: str, type_: str, param: str | None = None, code: str | None = None) -> dict[str, Any]:
    return {"error": {"message": message, "type": type_, "param": param, "code": code}}


class MockState:
    def __init__(self, config: MockConfig, metrics: MockMetrics):
        self.config = config
        self.metrics = metrics
        # Two independent seeded streams: turning jitter on must not change which requests fail.
        self._latency_rng = random.Random(f"latency:{config.seed}")
        self._error_rng = random.Random(f"errors:{config.seed}")
        self._cache: OrderedDict[str, tuple[str, int]] = OrderedDict()
        self.requests = 0
        self.injected_errors = 0

    def next_delay_s(self) -> float:
        jitter = self.config.latency_jitter_ms
        extra = self._latency_rng.uniform(0.0, jitter) if jitter > 0 else 0.0
        return (self.config.latency_ms + extra) / 1000.0

    def next_is_error(self) -> bool:
        rate = self.config.error_rate
        if rate <= 0:
            return False
        return self._error_rng.random() < rate

    def compute(self, task: str, messages: list[dict[str, str]]) -> tuple[str, int]:
        """(reply text, counted prompt tokens), remembered by content."""
        key = hashlib.sha256(json.dumps([task, messages], sort_keys=True).encode()).hexdigest()
        hit = self._cache.get(key)
        if hit is not None:
            self._cache.move_to_end(key)
            return hit
        out = (respond(task, messages), count_messages_tokens(messages))
        if self.config.cache_size > 0:
            self._cache[key] = out
            while len(self._cache) > self.config.cache_size:
                self._cache.popitem(last=False)
        return out


def _state(request: web.Request) -> MockState:
    return request.app[STATE_KEY]  # type: ignore[return-value]


def _bad_request(e: RequestError) -> web.Response:
    return web.json_response(e.body(), status=http_status(e))


async def chat_completions(request: web.Request) -> web.StreamResponse:
    st = _state(request)
    t0 = time.perf_counter()
    task = "invalid"
    status = 500
    try:
        try:
            raw = await request.read()
        except web.HTTPRequestEntityTooLarge:
            status = 413
            raise
        try:
            body = json.loads(raw)
        except (json.JSONDecodeError, UnicodeDecodeError) as e:
            status = 400
            return web.json_response(
                error_body(f"We could not parse the JSON body of your request ({e}). The body must be valid JSON.",
                           "invalid_request_error", None, "invalid_json"),
                status=400,
            )
        except RecursionError:
            status = 400
            return _bad_request(nesting_error(raw))
        try:
            bad_text = lone_surrogate_path(raw, body)
            if bad_text is not None:
                raise surrogate_error(bad_text)
            req = validate_chat(body)
        except RequestError as e:
            status = http_status(e)
            return _bad_request(e)
        if not st.config.serves_model(req.model):
            status = 404
            return _model_not_found(req.model)
        task = detect_task(req.messages)
        st.requests += 1
        delay = st.next_delay_s()
        if delay > 0:
            await _sleep(delay)
        if st.next_is_error():
            st.injected_errors += 1
            status = st.config.error_status
            kind = "rate_limit_exceeded" if status == 429 else "server_error"
            return web.json_response(
                error_body(f"Injected failure (llm-mock --error-rate {st.config.error_rate:g}); retry the request.",
                           kind),
                status=status,
            )
        size = sum(len(m["content"]) for m in req.messages)
        if size > OFFLOAD_CHARS:
            text, counted = await asyncio.to_thread(st.compute, task, req.messages)
        else:
            text, counted = st.compute(task, req.messages)
        text = _formatted(req, text)
        payload = build_response(st, req, task, text, counted, raw)
        status = 200
        if req.stream:
            return await send_stream(request, payload, req.include_usage)
        return web.json_response(payload)
    finally:
        st.metrics.requests.labels(task, str(status)).inc()
        st.metrics.latency.labels(task).observe(time.perf_counter() - t0)


def _formatted(req: ChatRequest, text: str) -> str:
    if req.response_format == "json_object":
        return as_json_object(text)
    if req.response_format == "json_schema":
        return as_schema_instance(text, req.json_schema or {})
    return text


def _model_not_found(model: str) -> web.Response:
    # The OpenAI API's answer for an unknown model: 404, code model_not_found (param named here for clarity).
    return web.json_response(
        error_body(f"The model '{model}' does not exist or you do not have access to it. This llm-mock serves "
                   "the models GET /v1/models lists (configure more with --model-alias).",
                   "invalid_request_error", "model", "model_not_found"),
        status=404,
    )


def build_response(st: MockState, req: ChatRequest, task: str, text: str, counted: int, raw: bytes) -> dict:
    finish = "stop"
    if req.max_tokens is not None and count_tokens(text) > req.max_tokens:
        text = truncate_to_tokens(text, req.max_tokens)
        finish = "length"
    cfg = st.config
    prompt_tokens = cfg.prompt_tokens_override if cfg.prompt_tokens_override is not None else counted
    per_choice = cfg.completion_tokens_override if cfg.completion_tokens_override is not None else count_tokens(text)
    completion_tokens = per_choice * req.n
    st.metrics.prompt_tokens.labels(task).inc(prompt_tokens)
    st.metrics.completion_tokens.labels(task).inc(completion_tokens)
    digest = hashlib.sha256(raw).hexdigest()[:12]
    return {
        "id": f"chatcmpl-mock{st.requests:08d}{digest}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": req.model,
        "system_fingerprint": f"fp_memrig_mock_{BEHAVIOUR_VERSION}",
        "choices": [
            {
                "index": i,
                "message": {"role": "assistant", "content": text, "refusal": None},
                "logprobs": None,
                "finish_reason": finish,
            }
            for i in range(req.n)
        ],
        "usage": {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens,
        },
    }


def _model_obj(model: str) -> dict[str, Any]:
    return {"id": model, "object": "model", "created": 0, "owned_by": "memrig"}


async def list_models(request: web.Request) -> web.Response:
    cfg = _state(request).config
    return web.json_response({"object": "list", "data": [_model_obj(m) for m in cfg.listed_models()]})


async def get_model(request: web.Request) -> web.Response:
    model = request.match_info["model"]
    if not _state(request).config.serves_model(model):
        return _model_not_found(model)
    return web.json_response(_model_obj(model))


async def health(request: web.Request) -> web.Response:
    st = _state(request)
    return web.json_response({
        "status": "ok",
        "model": st.config.model,
        "behaviour_version": BEHAVIOUR_VERSION,
        "prompts_hash": prompts.prompts_hash(),
        "tokenizer": tokenizer_name(),
        "requests": st.requests,
        "injected_errors": st.injected_errors,
    })


def _too_long(status: int, field: str, message: str) -> web.Response:
    """A request line or header past the parser's limits (no handler ran): 414 / 431 in the OpenAI error shape."""
    return web.json_response(too_long_error(status, field, message).body(), status=status)


@web.middleware
async def openai_errors(request: web.Request, handler):
    """Unknown routes, wrong methods, oversized bodies, URLs and headers answer in the OpenAI error shape too."""
    too_long = oversize_error(request)
    if too_long is not None:
        return web.json_response(too_long[1].body(), status=too_long[0])
    try:
        return await handler(request)
    except web.HTTPNotFound:
        return web.json_response(
            error_body(f"Unknown request URL: {request.method} {request.path}.", "invalid_request_error", None,
                       "unknown_url"),
            status=404,
        )
    except web.HTTPMethodNotAllowed as e:
        return web.json_response(
            error_body(f"Method {request.method} not allowed for {request.path}; allowed: "
                       f"{', '.join(sorted(e.allowed_methods))}.", "invalid_request_error", None, "method_not_allowed"),
            status=405,
        )
    except web.HTTPRequestEntityTooLarge as e:
        return web.json_response(
            error_body(f"Request body too large: {e.text}", "invalid_request_error", None, "request_too_large"),
            status=413,
        )


def make_app(config: MockConfig | None = None, registry: CollectorRegistry | None = None) -> web.Application:
    """The aiohttp app. `registry` defaults to the process-wide Prometheus registry."""
    cfg = (config or MockConfig()).validate()
    app = application(_too_long, middlewares=[openai_errors], client_max_size=cfg.max_body_bytes)
    app[STATE_KEY] = MockState(cfg, metrics_for(registry))
    app.router.add_post("/v1/chat/completions", chat_completions)
    app.router.add_get("/v1/models", list_models)
    app.router.add_get("/v1/models/{model}", get_model)
    app.router.add_get("/health", health)
    app.router.add_get("/metrics", metrics_handler(REGISTRY if registry is None else registry))
    return app


async def start_server(
    config: MockConfig | None = None, registry: CollectorRegistry | None = None
) -> tuple[web.AppRunner, int]:
    """Serve on config.host:config.port (0 = any free port) in the running loop; returns (runner, bound port).
    Stop with `await runner.cleanup()`."""
    cfg = config or MockConfig()
    runner = web.AppRunner(make_app(cfg, registry), access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, cfg.host, cfg.port)
    await site.start()
    bound = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    return runner, bound
