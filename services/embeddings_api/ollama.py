"""Ollama's embedding API on the rig's embedders: `POST /api/embed`, `POST /api/embeddings`, `GET /api/tags`.

Why: Quaid (quaid-real) embeds through Ollama (`lib/providers.py` `OllamaEmbeddingsProvider`: `POST {url}/api/embed`
with `{"model", "input", "keep_alive": -1}`, reading `embeddings[0]`) and checks Ollama is up with `GET /api/tags`
before a recall (`memory_graph._ollama_healthy`; a failed check sends recall to FTS only). Serving those shapes
from the same `Embedder` object the re-implementation uses gives both identical vectors.

Shapes (Ollama's API documentation, docs/api.md):
- `/api/embed`: request `model` (required), `input` (a string or a non-empty array of strings), optional
  `truncate`, `keep_alive`, `options` (accepted, no effect here) and `dimensions` (must equal the model's).
  Response `{"model", "embeddings": [[...], ...], "total_duration", "load_duration", "prompt_eval_count"}`
  (durations in nanoseconds, prompt_eval_count = cl100k tokens).
- `/api/embeddings` (Ollama's older endpoint): request `model`, `prompt` (one string); response `{"embedding": [...]}`.
- `/api/tags`: the served models as `{"models": [{"name", "model", "modified_at", "size", "digest", "details"}]}`.
A model is named by a rig embedder name or alias (see service.MODEL_ALIASES), optionally with Ollama's `:latest` tag.
Errors are Ollama's `{"error": "<message>"}` (HTTP 400, 404 for an unknown model) with the message starting with the
field at fault, plus `"param"` naming it.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
from typing import Any

from aiohttp import web

from services.common.tokens import count_tokens
from services.embeddings_api.service import (
    MODEL_ALIASES,
    EmbeddingRequestError,
    EmbeddingsService,
    parse_input,
    resolve_model,
)


def _error(e: EmbeddingRequestError) -> web.Response:
    msg = e.message if e.param is None or e.message.startswith(e.param) else f"{e.param}: {e.message}"
    return web.json_response({"error": msg, "param": e.param}, status=e.status)


def ollama_model(model: Any, served: tuple[str, ...]) -> str:
    """The rig embedder behind an Ollama model name (`minilm`, `all-MiniLM-L6-v2:latest`, ...)."""
    if isinstance(model, str) and model.endswith(":latest"):
        model = model[: -len(":latest")]
    return resolve_model(model, served)


async def _body(request: web.Request) -> dict[str, Any]:
    try:
        body = json.loads(await request.read())
    except (ValueError, RecursionError):
        raise EmbeddingRequestError(None, "the request body is not valid JSON", "invalid_json") from None
    if not isinstance(body, dict):
        raise EmbeddingRequestError(None, "the request body must be a JSON object", "invalid_type")
    return body


class OllamaRoutes:
    def __init__(self, svc: EmbeddingsService):
        self.svc = svc

    async def _encode(self, name: str, texts: list[str], dims: Any, model_field: str):
        emb = await self.svc.embedder(name)
        if dims is not None and (not isinstance(dims, int) or isinstance(dims, bool) or dims != emb.dim):
            raise EmbeddingRequestError("dimensions", f"'dimensions' must be {emb.dim} for '{model_field}' "
                                        "(this model cannot be shortened)")
        return await self.svc.encode(emb, texts)

    async def embed(self, request: web.Request) -> web.Response:
        loop = asyncio.get_running_loop()
        t0 = loop.time()
        label = "invalid"
        try:
            body = await _body(request)
            name = ollama_model(body.get("model"), self.svc.served)
            texts = parse_input(body)
            label = name
            vecs = await self._encode(name, texts, body.get("dimensions"), body["model"])
        except EmbeddingRequestError as e:
            self.svc.requests.labels(label, f"error_{e.status}").inc()
            return _error(e)
        took = loop.time() - t0
        self.svc.requests.labels(label, "ok").inc()
        self.svc.inputs.labels(label).inc(len(texts))
        self.svc.duration.labels(label).observe(took)
        return web.json_response({
            "model": body["model"],
            "embeddings": [[float(x) for x in v] for v in vecs],
            "total_duration": int(took * 1e9),
            "load_duration": 0,
            "prompt_eval_count": sum(count_tokens(t) for t in texts),
        })

    async def embeddings(self, request: web.Request) -> web.Response:
        label = "invalid"
        try:
            body = await _body(request)
            name = ollama_model(body.get("model"), self.svc.served)
            prompt = body.get("prompt")
            if "prompt" not in body:
                raise EmbeddingRequestError("prompt", "missing required parameter 'prompt' (a string)",
                                            "missing_required_parameter")
            if not isinstance(prompt, str):
                raise EmbeddingRequestError("prompt", "'prompt' must be a string", "invalid_type")
            texts = parse_input({"input": prompt})  # the same checks as /api/embed's input (non-empty, bounded)
            label = name
            vecs = await self._encode(name, texts, None, body["model"])
        except EmbeddingRequestError as e:
            if e.param == "input":
                e.param, e.message = "prompt", e.message.replace("'input'", "'prompt'")
            self.svc.requests.labels(label, f"error_{e.status}").inc()
            return _error(e)
        self.svc.requests.labels(label, "ok").inc()
        self.svc.inputs.labels(label).inc(1)
        return web.json_response({"embedding": [float(x) for x in vecs[0]]})

    async def tags(self, request: web.Request) -> web.Response:
        names = [k for k, v in MODEL_ALIASES.items() if v in self.svc.served]
        names += [k for k in self.svc.served if k not in MODEL_ALIASES]
        return web.json_response({"models": [{
            "name": f"{n}:latest", "model": f"{n}:latest", "modified_at": "1970-01-01T00:00:00Z", "size": 0,
            "digest": hashlib.sha256(n.encode()).hexdigest(),
            "details": {"format": "memrig", "family": MODEL_ALIASES.get(n, n), "families": [MODEL_ALIASES.get(n, n)],
                        "parameter_size": "", "quantization_level": ""}} for n in dict.fromkeys(names)]})


def add_ollama_routes(app: web.Application, svc: EmbeddingsService) -> None:
    r = OllamaRoutes(svc)
    app.router.add_post("/api/embed", r.embed)
    app.router.add_post("/api/embeddings", r.embeddings)
    app.router.add_get("/api/tags", r.tags)
