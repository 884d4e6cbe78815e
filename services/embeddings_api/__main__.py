"""`python -m services.embeddings_api --port P [--models minilm,wordllama]` prints `READY http=<port> pid=<pid>`."""

from __future__ import annotations

import argparse
import asyncio
import sys
from collections.abc import Sequence

from services.common.embeddings import embedder_names
from services.common.metrics_http import serve_http_until_stopped
from services.embeddings_api.app import EmbeddingsConfig, start_server


def main(argv: Sequence[str] | None = None) -> None:
    ap = argparse.ArgumentParser(prog="python -m services.embeddings_api",
                                 description="OpenAI-compatible /v1/embeddings from the rig's embedders.")
    ap.add_argument("--host", default="127.0.0.1", help="bind address (default 127.0.0.1)")
    ap.add_argument("--port", type=int, default=8793, help="HTTP port (0 = any free port; default 8793)")
    ap.add_argument("--models", default="minilm,wordllama",
                    help=f"rig embedders to serve, comma-separated, from {embedder_names()} (loaded on first use)")
    ap.add_argument("--cache", default=None, help="embedding cache path (default: the rig's shared cache)")
    args = ap.parse_args(argv)
    models = tuple(m.strip() for m in args.models.split(",") if m.strip())
    bad = [m for m in models if m not in embedder_names()]
    if bad or not models:
        ap.error(f"--models: unknown {bad or 'empty list'}; expected names from {embedder_names()}")
    if args.host not in ("127.0.0.1", "localhost", "::1"):
        print(f"WARNING: embeddings-api binds {args.host} without authentication", file=sys.stderr)

    async def serve() -> None:
        runner, port = await start_server(EmbeddingsConfig(models=models, cache_path=args.cache), args.host, args.port)
        await serve_http_until_stopped(runner, port)

    try:
        asyncio.run(serve())
    except OSError as e:
        print(f"error: cannot serve on {args.host}:{args.port}: {e}", file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
