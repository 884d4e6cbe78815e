"""A side HTTP server exposing /metrics (Prometheus text format) for processes whose main server is gRPC.

One exporter per process (no multiprocess mode) so the default process collectors report this process's
RSS and CPU.
"""

from __future__ import annotations

from aiohttp import web
from prometheus_client import REGISTRY, CollectorRegistry
from prometheus_client.aiohttp import make_aiohttp_handler

from services.common.http_input import application


async def start_metrics_server(
    host: str = "127.0.0.1", port: int = 0, registry: CollectorRegistry = REGISTRY
) -> tuple[web.AppRunner, int]:
    app = application()
    app.router.add_get("/metrics", make_aiohttp_handler(registry))

    async def healthz(_: web.Request) -> web.Response:
        return web.json_response({"status": "ok"})

    app.router.add_get("/healthz", healthz)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, host, port)
    await site.start()
    bound = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    return runner, bound


async def serve_http_until_stopped(runner: web.AppRunner, port: int) -> None:
    """Announce `READY http=<port> pid=<pid>` (what the launcher waits for), serve until SIGTERM/SIGINT, then clean
    up: the main loop of an aiohttp service started with `python -m services.<name>`."""
    import asyncio

    from services.common import process
    from services.common.grpc_util import install_stop_signals

    stop = asyncio.Event()
    install_stop_signals(stop)
    process.announce_ready(http=port)
    try:
        await stop.wait()
    finally:
        await runner.cleanup()
