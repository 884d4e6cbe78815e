"""`POST /v1/embeddings` in the OpenAI API's shape, answered by the rig's own embedders.

Why it exists: the OpenClaw port embeds in-process, while the real OpenClaw (Node) only speaks to embedding
providers over HTTP. Serving the rig's embedder here, through the same `Embedder` object and its content-hash cache,
gives both exactly the same vectors, so port-vs-real differences are differences of search logic alone.

Request: `input` (a string or a list of 1..2048 non-empty strings), `model` (one of the served names, see
`/v1/models`), optional `encoding_format` (`float` default, or `base64` of little-endian float32, which the `openai`
SDK asks for), optional `dimensions` (must equal the model's, as these models cannot be shortened), `user`
(ignored). Response: `{"object": "list", "data": [{"object": "embedding", "index", "embedding"}], "model",
"usage": {"prompt_tokens", "total_tokens"}}` with cl100k token counts. Errors are HTTP 400/404 with
`{"error": {"message", "type": "invalid_request_error", "param", "code"}}` naming the field.

This module assembles and serves the app; the service its routes call (parsing, errors, embedders, handlers) is
service.py, which ollama.py's and voyage.py's routes call too.
"""

from __future__ import annotations

from aiohttp import web
from prometheus_client import REGISTRY, CollectorRegistry

from services.common.http_input import application
from services.common.metrics_http import metrics_handler
from services.embeddings_api.ollama import add_ollama_routes
from services.embeddings_api.service import (
    MAX_BODY_BYTES,
    EmbeddingRequestError,
    EmbeddingsConfig,
    EmbeddingsService,
)
from services.embeddings_api.voyage import add_voyage_routes


def _too_long(status: int, field: str, message: str) -> web.Response:
    """A request line or header past the parser's limits (no handler ran): 414 / 431 in the OpenAI error shape."""
    return EmbeddingRequestError(field, message, "url_too_long" if status == 414 else "header_too_large",
                                 status).response()


@web.middleware
async def json_errors(request: web.Request, handler):
    try:
        return await handler(request)
    except web.HTTPNotFound:
        return EmbeddingRequestError(None, f"Unknown request URL: {request.method} {request.path}.",
                                     "unknown_url", 404).response()
    except web.HTTPMethodNotAllowed:
        return EmbeddingRequestError(None, f"Method {request.method} not allowed for {request.path}.",
                                     "method_not_allowed", 405).response()
    except web.HTTPRequestEntityTooLarge:
        return EmbeddingRequestError(None, f"Request body too large (limit {MAX_BODY_BYTES} bytes).",
                                     "request_too_large", 413).response()


def make_app(config: EmbeddingsConfig | None = None, registry: CollectorRegistry | None = None) -> web.Application:
    svc = EmbeddingsService(config or EmbeddingsConfig(), registry)
    app = application(_too_long, middlewares=[json_errors], client_max_size=MAX_BODY_BYTES)
    app.router.add_post("/v1/embeddings", svc.handle)
    app.router.add_get("/v1/models", svc.list_models)
    app.router.add_get("/health", svc.health)
    add_ollama_routes(app, svc)  # Ollama's /api/embed, /api/embeddings, /api/tags (quaid-real)
    add_voyage_routes(app, svc)  # Voyage's /v1/embeddings at /voyage/v1/embeddings (octybot-real)
    app.router.add_get("/metrics", metrics_handler(REGISTRY if registry is None else registry))
    return app


async def start_server(config: EmbeddingsConfig | None = None, host: str = "127.0.0.1", port: int = 0,
                       registry: CollectorRegistry | None = None) -> tuple[web.AppRunner, int]:
    """Serve in the running loop; returns (runner, bound port). Stop with `await runner.cleanup()`."""
    runner = web.AppRunner(make_app(config, registry), access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, host, port)
    await site.start()
    return runner, site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
