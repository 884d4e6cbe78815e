"""A trivial aiohttp server for measuring the load generator's own ceiling: `POST /v1/retrieve` answers a
fixed small JSON body at once (no parsing, no work). Run as its own process, on the same cores as the system
under test, so the ceiling it gives is what the generator can drive on this machine.

    python -m loadtests.trivial_target [--port 0]     prints `READY http=<port> pid=<pid>`; SIGTERM stops it
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal

from aiohttp import web

from services.common import event_loop

BODY = b'{"results": [], "coverage": "none"}'


async def retrieve(request: web.Request) -> web.Response:
    return web.Response(body=BODY, content_type="application/json")


async def serve(port: int) -> None:
    app = web.Application()
    app.router.add_post("/v1/retrieve", retrieve)
    runner = web.AppRunner(app, access_log=None, handle_signals=False)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", port)
    await site.start()
    print(f"READY http={site._server.sockets[0].getsockname()[1]} pid={os.getpid()}", flush=True)  # type: ignore[union-attr]
    stop = asyncio.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        asyncio.get_running_loop().add_signal_handler(sig, stop.set)
    await stop.wait()
    await runner.cleanup()


def main() -> None:
    ap = argparse.ArgumentParser(prog="python -m loadtests.trivial_target")
    ap.add_argument("--port", type=int, default=0)
    event_loop.run(serve(ap.parse_args().port))


if __name__ == "__main__":
    main()
