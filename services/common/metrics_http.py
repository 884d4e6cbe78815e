"""A side HTTP server exposing /metrics (Prometheus text format) for processes whose main server is gRPC.

One exporter per process (no multiprocess mode) so the default process collectors report this process's
RSS and CPU.
"""

from __future__ import annotations

import asyncio

from aiohttp import hdrs, web
from prometheus_client import REGISTRY, CollectorRegistry
from prometheus_client.exposition import choose_encoder

from services.common.http_input import application


def metrics_handler(registry: CollectorRegistry = REGISTRY):
    """GET /metrics, as every service of the rig serves it: the exposition made in a worker thread, never on the
    event loop, and one at a time: scrapes that arrive while one is being made share it. prometheus_client's own
    aiohttp handler makes it on the loop; a process whose registry had grown large (a test worker after hundreds of
    tests) then spent each 1 s scrape interval making the next exposition, and the coroutines it served waited for
    over half an hour."""
    pending: dict[str, asyncio.Future] = {}

    async def handler(request: web.Request) -> web.Response:
        encoder, content_type = choose_encoder(",".join(request.headers.getall(hdrs.ACCEPT, [])))
        fut = pending.get(content_type)
        if fut is None:
            fut = pending[content_type] = asyncio.ensure_future(asyncio.to_thread(encoder, registry))
            fut.add_done_callback(lambda _f, k=content_type: pending.pop(k, None))
        body = await asyncio.shield(fut)
        return web.Response(body=body, headers={hdrs.CONTENT_TYPE: content_type})

    return handler


async def start_metrics_server(
    host: str = "127.0.0.1", port: int = 0, registry: CollectorRegistry = REGISTRY
) -> tuple[web.AppRunner, int]:
    app = application()
    app.router.add_get("/metrics", metrics_handler(registry))

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
