"""Run `memrig conformance` against a backend object served in the test's event loop (no adapter process)."""

from __future__ import annotations

import asyncio

from services.adapters.server import serve_backend
from services.conformance import Conformance


async def conformance_in_process(backend):
    """Serve `backend` on an ephemeral port, run every conformance check against it, stop it; the results."""
    ready, stop = asyncio.Event(), asyncio.Event()
    task = asyncio.ensure_future(serve_backend(backend, port=0, metrics_port=None, ready=ready, stop=stop,
                                               announce=False))
    await asyncio.wait_for(ready.wait(), 30)
    try:
        return await Conformance(f"127.0.0.1:{ready.port}").run_all()
    finally:
        stop.set()
        await task
