"""Run a fault proxy (or any aiohttp app) inside the test's event loop, on an ephemeral loopback port:
`async with running_proxy(upstream_url, seed=1) as p: p.url, p.engine`.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass

from aiohttp import web

from services.fault_proxy.app import STATE, ProxyConfig, make_proxy_app
from services.fault_proxy.engine import FaultEngine
from services.fault_proxy.store import FaultStore


async def serve_app(app: web.Application, host: str = "127.0.0.1", port: int = 0,
                    handler_cancellation: bool = True) -> tuple[web.AppRunner, int]:
    runner = web.AppRunner(app, access_log=None, handler_cancellation=handler_cancellation)
    await runner.setup()
    site = web.TCPSite(runner, host, port)
    await site.start()
    return runner, site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]


@dataclass
class RunningProxy:
    url: str
    port: int
    engine: FaultEngine
    app: web.Application


@contextlib.asynccontextmanager
async def running_proxy(upstream: str, *, seed: int | None = 0, allow_header_faults: bool = False,
                        admin_token: str = "", store: FaultStore | None = None,
                        clock: Callable[[], float] | None = None) -> AsyncIterator[RunningProxy]:
    kw = {"clock": clock} if clock is not None else {}
    engine = FaultEngine(store, seed=seed, **kw)
    cfg = ProxyConfig(upstream=upstream.rstrip("/"), allow_header_faults=allow_header_faults,
                      admin_token=admin_token, store_kind="local" if store is None else type(store).__name__)
    app = make_proxy_app(cfg, engine)
    runner, port = await serve_app(app)
    try:
        yield RunningProxy(f"http://127.0.0.1:{port}", port, engine, app)
    finally:
        app[STATE].engine.release_all()
        await runner.cleanup()
