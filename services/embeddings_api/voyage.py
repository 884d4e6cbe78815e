"""Voyage AI's `POST /v1/embeddings`, served under `/voyage/v1/embeddings` by the rig's embedders.

Why: Octybot (octybot-real) embeds through Voyage's API. Serving its request shape here from the same `Embedder`
object the rest of the rig uses (same vectors, same cache) lets it run offline, and lets its re-implementation be
compared on identical vectors. The prefix keeps Voyage's path apart from the OpenAI-shaped `/v1/embeddings` beside it
(a client's base URL is then `http://host:port/voyage/v1`).

Request (Voyage's fields): `input` (a string or a list of 1..1000 non-empty strings), `model` (one of the served
names, see `/v1/models`), optional `input_type` (null, "query" or "document"; accepted and recorded, as the rig's
embedders are symmetric and add no query/document prompt), `truncation` (boolean), `output_dimension` (null, or an
integer >= the model's own dimension: a larger one is the model's vector zero-padded, which keeps every cosine and dot
product exactly; a smaller one is refused, as these models cannot be shortened), `output_dtype` ("float" only) and
`encoding_format` (null, or "base64" of little-endian float32).
Response: `{"object": "list", "data": [{"object": "embedding", "embedding", "index"}], "model", "usage":
{"total_tokens"}}`. Errors: HTTP 400/404 with Voyage's `{"detail": message}`, the message naming the field.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import numpy as np
from aiohttp import web

from services.common.tokens import count_tokens
from services.embeddings_api.service import (
    EmbeddingRequestError,
    EmbeddingsService,
    encode_vectors,
    resolve_model,
)

MAX_INPUTS = 1000  # Voyage's limit on the length of the input list
INPUT_TYPES = (None, "query", "document")


def _error(e: EmbeddingRequestError) -> web.Response:
    field = f"{e.param}: " if e.param and not e.message.startswith(("'", e.param)) else ""
    return web.json_response({"detail": field + e.message}, status=e.status)


def parse_voyage_input(body: dict[str, Any]) -> list[str]:
    if "input" not in body:
        raise EmbeddingRequestError("input", "Missing required field 'input'.")
    raw = body["input"]
    items = [raw] if isinstance(raw, str) else raw
    if not isinstance(items, list):
        raise EmbeddingRequestError("input", "'input' must be a string or a list of strings.")
    if not items:
        raise EmbeddingRequestError("input", "'input' must not be an empty list.")
    if len(items) > MAX_INPUTS:
        raise EmbeddingRequestError("input", f"'input' has {len(items)} items; at most {MAX_INPUTS}.")
    for i, t in enumerate(items):
        p = "input" if isinstance(raw, str) else f"input[{i}]"
        if not isinstance(t, str):
            raise EmbeddingRequestError(p, f"'{p}' must be a string.")
        if not t.strip():
            raise EmbeddingRequestError(p, f"'{p}' must be non-empty text.")
    return items


def output_dimension(body: dict[str, Any], native: int) -> int:
    d = body.get("output_dimension")
    if d is None:
        return native
    if not isinstance(d, int) or isinstance(d, bool) or d <= 0:
        raise EmbeddingRequestError("output_dimension", "'output_dimension' must be a positive integer or null.")
    if d < native:
        raise EmbeddingRequestError("output_dimension", f"'output_dimension' {d} is below the model's dimension "
                                    f"{native}; this model cannot be shortened.")
    return d


def pad(vecs: np.ndarray, dim: int) -> np.ndarray:
    if vecs.shape[1] == dim:
        return vecs
    out = np.zeros((vecs.shape[0], dim), dtype=np.float32)
    out[:, :vecs.shape[1]] = vecs
    return out


def validate_options(body: dict[str, Any]) -> str:
    """Checks input_type, truncation, output_dtype, encoding_format; returns the encoding ("float" or "base64")."""
    if body.get("input_type") not in INPUT_TYPES:
        raise EmbeddingRequestError("input_type", f"'input_type' must be null, 'query' or 'document', not "
                                    f"{body.get('input_type')!r}.")
    if "truncation" in body and not isinstance(body["truncation"], bool):
        raise EmbeddingRequestError("truncation", "'truncation' must be a boolean.")
    if body.get("output_dtype") not in (None, "float"):
        raise EmbeddingRequestError("output_dtype", f"'output_dtype' {body.get('output_dtype')!r} is not served; "
                                    "only 'float'.")
    enc = body.get("encoding_format")
    if enc not in (None, "base64"):
        raise EmbeddingRequestError("encoding_format", "'encoding_format' must be null or 'base64'.")
    return enc or "float"


def add_voyage_routes(app: web.Application, svc: EmbeddingsService) -> None:
    async def embeddings(request: web.Request) -> web.Response:
        try:
            try:
                body = json.loads(await request.read())
            except (ValueError, RecursionError):
                raise EmbeddingRequestError(None, "The request body is not valid JSON.") from None
            if not isinstance(body, dict):
                raise EmbeddingRequestError(None, "The request body must be a JSON object.")
            name = resolve_model(body.get("model"), svc.served)
            texts = parse_voyage_input(body)
            fmt = validate_options(body)
            emb = await svc.embedder(name)
            dim = output_dimension(body, emb.dim)
            vecs = await svc.encode(emb, texts, body.get("input_type"))
            vecs = await asyncio.to_thread(pad, np.asarray(vecs, dtype=np.float32), dim)
        except EmbeddingRequestError as e:
            svc.requests.labels("voyage", f"error_{e.status}").inc()
            return _error(e)
        svc.requests.labels(name, "ok").inc()
        svc.inputs.labels(name).inc(len(texts))
        return web.json_response({
            "object": "list",
            "data": [{"object": "embedding", "embedding": v, "index": i}
                     for i, v in enumerate(encode_vectors(vecs, fmt))],
            "model": body["model"],
            "usage": {"total_tokens": sum(count_tokens(t) for t in texts)},
        })

    app.router.add_post("/voyage/v1/embeddings", embeddings)
