"""The embeddings service every route of the embeddings API calls: the served models and their aliases, request
parsing and the OpenAI-shaped error (EmbeddingRequestError), the embedders it loads once per process, and the
`/v1/embeddings`, `/v1/models` and `/health` handlers (EmbeddingsService). app.py assembles the aiohttp app from it
and from ollama.py's and voyage.py's routes, which call it too; none of them imports app.py.
"""

from __future__ import annotations

import asyncio
import base64
import json
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from aiohttp import web
from prometheus_client import REGISTRY, CollectorRegistry, Counter, Histogram

from collectors.prom import get_metric
from services.common.embeddings import Embedder, get_embedder
from services.common.errors import InputError, http_status
from services.common.tokens import count_tokens

MAX_INPUTS = 2048  # the OpenAI API's limit on inputs per request
MAX_INPUT_CHARS = 8192 * 8  # generous bound on one input (OpenAI caps at 8192 tokens); keeps a request bounded
MAX_BODY_BYTES = 64 * 1024 * 1024
# Served model ids → the rig's embedder names. Either the short rig name or the model's own name is accepted.
MODEL_ALIASES = {
    "minilm": "minilm",
    "all-MiniLM-L6-v2": "minilm",
    "sentence-transformers/all-MiniLM-L6-v2": "minilm",
    "wordllama": "wordllama",
    "wordllama-l2-supercat-256": "wordllama",
    "hash": "hash",
}


class EmbeddingRequestError(InputError):
    """A bad embeddings request, in the OpenAI API's terms: `param` names the parameter (None: the body or URL as a
    whole), `code` the error code, `status` the HTTP status; `field` is `param` or "body", str(e) the message."""

    def __init__(self, param: str | None, message: str, code: str = "invalid_value", status: int = 400):
        super().__init__(param or "body", message, text=message)
        self.param, self.code, self.status = param, code, status

    def response(self) -> web.Response:
        return web.json_response({"error": {"message": self.message, "type": "invalid_request_error",
                                            "param": self.param, "code": self.code}}, status=http_status(self))


@dataclass
class EmbeddingsConfig:
    models: tuple[str, ...] = ("minilm", "wordllama")  # rig embedder names this server will load on demand
    cache_path: str | None = None
    max_concurrency: int = 4  # encode calls in flight (each runs in a worker thread)
    preloaded: dict[str, Embedder] = field(default_factory=dict)  # reuse an embedder the process already holds
    # A request of one text counts as a search query (see EmbeddingsService.encode). On for a real system that asks
    # for each query's vector alone and its documents' in batches (OpenClaw's embedQuery); off where one text a request
    # is also how documents come (Quaid embeds each fact alone), so those stay cached.
    single_text_is_query: bool = False


def resolve_model(model: Any, served: tuple[str, ...]) -> str:
    if not isinstance(model, str) or not model:
        raise EmbeddingRequestError("model", "Missing required parameter: 'model' (a non-empty string).",
                                    "missing_required_parameter")
    if model in served:  # an embedder the process already holds, under its own model name
        return model
    name = MODEL_ALIASES.get(model) or MODEL_ALIASES.get(model.lower())
    if name is None or name not in served:
        known = sorted({*(k for k, v in MODEL_ALIASES.items() if v in served), *served})
        raise EmbeddingRequestError("model", f"The model '{model}' does not exist; served: {', '.join(known)}.",
                                    "model_not_found", 404)
    return name


def parse_input(body: dict[str, Any]) -> list[str]:
    if "input" not in body:
        raise EmbeddingRequestError("input", "Missing required parameter: 'input'.", "missing_required_parameter")
    raw = body["input"]
    items = [raw] if isinstance(raw, str) else raw
    if not isinstance(items, list):
        raise EmbeddingRequestError("input", "Invalid type for 'input': expected a string or an array of strings.",
                                    "invalid_type")
    if not items:
        raise EmbeddingRequestError("input", "'input' must not be an empty array.")
    if len(items) > MAX_INPUTS:
        raise EmbeddingRequestError("input", f"'input' has {len(items)} items; at most {MAX_INPUTS} per request.")
    for i, t in enumerate(items):
        p = "input" if isinstance(raw, str) else f"input[{i}]"
        if not isinstance(t, str):
            # Token arrays are valid for OpenAI's own models; these models embed text, so say so plainly.
            raise EmbeddingRequestError(p, f"Invalid type for '{p}': expected a string (token arrays are not "
                                        "supported by this server).", "invalid_type")
        if not t.strip():
            raise EmbeddingRequestError(p, f"'{p}' must be non-empty text.")
        if len(t) > MAX_INPUT_CHARS:
            raise EmbeddingRequestError(p, f"'{p}' has {len(t)} characters; at most {MAX_INPUT_CHARS}.")
        try:
            t.encode("utf-8")
        except UnicodeEncodeError:
            raise EmbeddingRequestError(p, f"'{p}' contains a lone surrogate; send valid Unicode text.") from None
    return items


def encode_vectors(vecs: np.ndarray, fmt: str) -> list[Any]:
    if fmt == "base64":
        return [base64.b64encode(np.asarray(v, dtype="<f4").tobytes()).decode("ascii") for v in vecs]
    return [[float(x) for x in v] for v in vecs]


def _metrics(reg: CollectorRegistry) -> tuple[Counter, Counter, Histogram]:
    """One set of collectors per registry: a process may start the service more than once (one per backend)."""
    return (
        get_metric(Counter, "memrig_embeddings_requests_total", "Embedding requests", ("model", "outcome"), reg),
        get_metric(Counter, "memrig_embeddings_inputs_total", "Texts embedded (cache hits included)", ("model",), reg),
        get_metric(Histogram, "memrig_embeddings_request_duration_seconds", "Embedding request time", ("model",), reg,
                   buckets=(0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 30, 60)))


class EmbeddingsService:
    def __init__(self, config: EmbeddingsConfig, registry: CollectorRegistry | None = None):
        self.config = config
        self._embedders: dict[str, Embedder] = dict(config.preloaded)
        self._load_lock = asyncio.Lock()
        self._sem = asyncio.Semaphore(config.max_concurrency)
        self.requests, self.inputs, self.duration = _metrics(REGISTRY if registry is None else registry)

    @property
    def served(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys((*self.config.models, *self._embedders)))

    async def embedder(self, name: str) -> Embedder:
        emb = self._embedders.get(name)
        if emb is None:
            async with self._load_lock:  # load each model once per process, off the event loop
                emb = self._embedders.get(name)
                if emb is None:
                    emb = await asyncio.to_thread(get_embedder, name, self.config.cache_path)
                    self._embedders[name] = emb
        return emb

    async def encode(self, emb: Embedder, texts: list[str], input_type: Any = None) -> np.ndarray:
        """`texts`' vectors, at most max_concurrency calls at a time. A search query is embedded anew, never through
        the shared cache (Embedder.encode_query): a provider computes every query, and a system's query time includes
        it. A query is a request whose `input_type` is "query" (Voyage's field, which Octybot sends), or, with no
        input_type, a request of one text when the config says so (single_text_is_query)."""
        query = input_type == "query" or (input_type is None and self.config.single_text_is_query and len(texts) == 1)
        async with self._sem:
            if query:
                return np.stack([await emb.aencode_query(t) for t in texts])
            return await emb.aencode(texts)

    async def handle(self, request: web.Request) -> web.Response:
        loop = asyncio.get_running_loop()
        t0 = loop.time()
        model_label = "invalid"
        try:
            try:
                body = json.loads(await request.read())
            except (ValueError, RecursionError):
                raise EmbeddingRequestError(None, "The request body is not valid JSON.", "invalid_json") from None
            if not isinstance(body, dict):
                raise EmbeddingRequestError(None, "The request body must be a JSON object.", "invalid_type")
            name = resolve_model(body.get("model"), self.served)
            texts = parse_input(body)
            fmt = body.get("encoding_format") or "float"
            if fmt not in ("float", "base64"):
                raise EmbeddingRequestError("encoding_format", "'encoding_format' must be 'float' or 'base64'.")
            emb = await self.embedder(name)
            dims = body.get("dimensions")
            if dims is not None and (not isinstance(dims, int) or isinstance(dims, bool) or dims != emb.dim):
                raise EmbeddingRequestError("dimensions", f"'dimensions' must be {emb.dim} for '{body['model']}' "
                                            "(this model cannot be shortened).")
            model_label = name
            vecs = await self.encode(emb, texts, body.get("input_type") if isinstance(body.get("input_type"), str) else None)
            tokens = sum(count_tokens(t) for t in texts)
        except EmbeddingRequestError as e:
            self.requests.labels(model_label, f"error_{http_status(e)}").inc()
            return e.response()
        self.requests.labels(model_label, "ok").inc()
        self.inputs.labels(model_label).inc(len(texts))
        self.duration.labels(model_label).observe(loop.time() - t0)
        return web.json_response({
            "object": "list",
            "data": [{"object": "embedding", "index": i, "embedding": v}
                     for i, v in enumerate(encode_vectors(vecs, fmt))],
            "model": body["model"],
            "usage": {"prompt_tokens": tokens, "total_tokens": tokens},
        })

    async def list_models(self, request: web.Request) -> web.Response:
        ids = [k for k, v in MODEL_ALIASES.items() if v in self.served] + [k for k in self._embedders
                                                                            if k not in MODEL_ALIASES]
        return web.json_response({"object": "list", "data": [
            {"id": i, "object": "model", "created": 0, "owned_by": "memrig"} for i in ids]})

    async def health(self, request: web.Request) -> web.Response:
        return web.json_response({"status": "ok", "served": list(self.served),
                                  "loaded": {k: e.describe() for k, e in self._embedders.items()}})
