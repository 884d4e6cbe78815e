"""`local-llm`: the local model behind an OpenAI-compatible `/v1/chat/completions` on 127.0.0.1.

One process: it checks the model file (model.py; a wrong digest never loads), loads it with llama-cpp-python's
server application (the `[server]` extra: FastAPI + uvicorn, OpenAI request and response shapes), binds
127.0.0.1 and prints `READY http=<port> pid=<pid>` once it serves, so the launcher starts and stops it by PID like
every other service. Bounds: memory (logits are kept only for the sampled position, not for every prompt
position: model_settings), the context window (`--n-ctx`, default 8192 tokens; a longer prompt is a 400 that
says so), the CPU threads (`--threads`, default 2), and the requests admitted at once (`--max-inflight`, default
16): llama.cpp decodes one request at a time, the others wait in order, and one beyond the bound gets 503 with
Retry-After (the rig's client backs off and retries).

Besides the OpenAI routes: `GET /memrig/identity` (model, quantisation, file SHA-256, context size, threads,
runtime version: what reports print), `GET /healthz` and `GET /metrics` (Prometheus).
"""

from __future__ import annotations

import argparse
import asyncio
import signal
import socket
import sys
import time
from pathlib import Path
from typing import Any

from services.common import process
from services.local_llm import model as M

DEFAULT_N_CTX = 8192
DEFAULT_THREADS = 2
DEFAULT_MAX_INFLIGHT = 16


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="python -m services.local_llm", description="the rig's local language model")
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--model-path", default=None, help="GGUF file (default: the verified file in the cache dir)")
    ap.add_argument("--n-ctx", type=int, default=DEFAULT_N_CTX, help="context window in tokens")
    ap.add_argument("--threads", type=int, default=DEFAULT_THREADS, help="CPU threads for llama.cpp")
    ap.add_argument("--max-inflight", type=int, default=DEFAULT_MAX_INFLIGHT,
                    help="requests admitted at once (running + waiting); more get 503 + Retry-After")
    return ap


def check_args(args: argparse.Namespace) -> None:
    for name in ("n_ctx", "threads", "max_inflight"):
        v = getattr(args, name)
        if v < 1:
            raise ValueError(f"--{name.replace('_', '-')}: must be at least 1, got {v}")
    if args.n_ctx < 512:
        raise ValueError(f"--n-ctx: {args.n_ctx} is too small for the rig's prompts; use at least 512")
    if not (0 <= args.port <= 65535):
        raise ValueError(f"--port: {args.port} is not a TCP port")


def identity(spec: M.ModelSpec, path: Path, args: argparse.Namespace) -> dict[str, Any]:
    import importlib.metadata as md

    return {"model": spec.alias, "name": spec.name, "quantization": spec.quantization, "sha256": spec.sha256,
            "file": path.name, "bytes": spec.size, "source": spec.source, "licence": spec.licence,
            "runtime": f"llama-cpp-python {md.version('llama-cpp-python')}", "n_ctx": args.n_ctx,
            "threads": args.threads, "max_inflight": args.max_inflight}


class InflightLimit:
    """ASGI middleware: at most `limit` chat/completion requests admitted; one beyond gets 503 + Retry-After."""

    def __init__(self, app, limit: int, on_reject=None):
        self.app = app
        self.limit = limit
        self.inflight = 0
        self.on_reject = on_reject or (lambda: None)

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http" or not scope["path"].startswith("/v1/") or scope["method"] != "POST":
            return await self.app(scope, receive, send)
        if self.inflight >= self.limit:
            self.on_reject()
            body = (b'{"error": {"message": "local-llm: %d requests already admitted (--max-inflight); retry", '
                    b'"type": "server_busy", "code": "busy"}}' % self.limit)
            await send({"type": "http.response.start", "status": 503,
                        "headers": [(b"content-type", b"application/json"), (b"retry-after", b"2")]})
            await send({"type": "http.response.body", "body": body})
            return None
        self.inflight += 1
        try:
            return await self.app(scope, receive, send)
        finally:
            self.inflight -= 1


def model_settings(path: Path, spec: M.ModelSpec, args: argparse.Namespace) -> dict[str, Any]:
    """llama-cpp-python's ModelSettings for the model. `logits_all=False`: logits only for the position being
    sampled. The server's default (True) keeps a float32 row of the whole vocabulary (151,936 entries for Qwen2.5,
    0.6 MB) for every prompt position, so one 2.4k-token prompt grew the process by about 2 GB and a full
    8,192-token context would reserve about 5 GB; the rig never asks for prompt logprobs, the one thing that
    needs them."""
    return {"model": str(path), "model_alias": spec.alias, "n_ctx": args.n_ctx, "n_threads": args.threads,
            "n_threads_batch": args.threads, "logits_all": False, "verbose": False}


def make_app(path: Path, spec: M.ModelSpec, args: argparse.Namespace):
    """llama-cpp-python's OpenAI app for the model, with the rig's routes and the admission bound."""
    from fastapi.responses import Response
    from llama_cpp.server.app import create_app
    from llama_cpp.server.settings import ModelSettings, ServerSettings
    from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Counter, Histogram, generate_latest

    app = create_app(
        server_settings=ServerSettings(host=args.host, port=args.port or 8794),
        model_settings=[ModelSettings(**model_settings(path, spec, args))],
    )
    ident = identity(spec, path, args)
    registry = CollectorRegistry(auto_describe=True)
    requests = Counter("memrig_local_llm_requests", "HTTP requests by path and status", ["path", "status"],
                       registry=registry)
    latency = Histogram("memrig_local_llm_request_seconds", "request latency by path", ["path"], registry=registry,
                        buckets=(0.1, 0.5, 1, 2, 5, 10, 20, 40, 80, 160))
    rejected = Counter("memrig_local_llm_rejected", "requests refused by --max-inflight", registry=registry)

    @app.get("/memrig/identity")
    async def _identity() -> dict[str, Any]:
        return ident

    @app.get("/healthz")
    async def _health() -> dict[str, str]:
        return {"status": "ok", "model": spec.alias}

    @app.get("/metrics")
    async def _metrics() -> Response:
        return Response(generate_latest(registry), media_type=CONTENT_TYPE_LATEST)

    @app.middleware("http")
    async def _measure(request, call_next):
        t0 = time.perf_counter()
        resp = await call_next(request)
        if request.url.path.startswith("/v1/"):
            requests.labels(request.url.path, str(resp.status_code)).inc()
            latency.labels(request.url.path).observe(time.perf_counter() - t0)
        return resp

    return InflightLimit(app, args.max_inflight, on_reject=rejected.inc), ident


async def serve(args: argparse.Namespace) -> int:
    spec = M.DEFAULT_MODEL
    path = Path(args.model_path) if args.model_path else M.model_path(spec)
    M.verify(path, spec)  # a missing model is named before any missing package
    import uvicorn

    app, _ident = make_app(path, spec, args)
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((args.host, args.port))
    port = sock.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", access_log=False, lifespan="off",
                                           timeout_graceful_shutdown=2))
    server.install_signal_handlers = lambda: None  # type: ignore[method-assign]  # ours below
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, lambda: setattr(server, "should_exit", True))

    async def announce() -> None:
        while not server.started:
            await asyncio.sleep(0.02)
        process.announce_ready(http=port)

    task = asyncio.ensure_future(announce())
    await server.serve(sockets=[sock])
    task.cancel()
    return 0


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        check_args(args)
        return asyncio.run(serve(args))
    except (ValueError, M.ModelError) as e:
        print(f"local-llm: {e}", file=sys.stderr, flush=True)
        return 2
    except ModuleNotFoundError as e:
        print(f"local-llm: {e.name} is not installed ({M.SETUP_HINT})", file=sys.stderr, flush=True)
        return 2
