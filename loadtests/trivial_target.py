"""A trivial aiohttp server for measuring the load generator's own ceiling: `POST /v1/retrieve` answers a
fixed small JSON body at once (no parsing, no work). Run as its own process, on the same cores as the system
under test, so the ceiling it gives is what the generator can drive on this machine.

    python -m loadtests.trivial_target [--port 0]     prints `READY http=<port> pid=<pid>`; SIGTERM stops it

`start(log)` runs it as a child for the generator-ceiling measurements (loadtests/capacity.py,
loadtests/locust_scaling.py); stop it with services.common.process.stop.
"""

from __future__ import annotations

import argparse
import asyncio
import signal
import subprocess
import sys
from pathlib import Path

from aiohttp import web

from services.common import event_loop, process

ROOT = Path(__file__).resolve().parent.parent

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
    process.announce_ready(http=site._server.sockets[0].getsockname()[1])  # type: ignore[union-attr]
    stop = asyncio.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        asyncio.get_running_loop().add_signal_handler(sig, stop.set)
    await stop.wait()
    await runner.cleanup()


def start(log: Path, timeout_s: float = 60.0) -> tuple[subprocess.Popen, int]:
    """The target as a child (stdout and stderr into `log`), once it serves; its process and port. In this
    process's session, so a Ctrl-C at the terminal stops it with the measurement."""
    p = process.spawn([sys.executable, "-m", "loadtests.trivial_target", "--port", "0"], log, cwd=ROOT,
                      new_session=False)
    return p, process.wait_ready(p, "trivial target", log, timeout_s)["http"]


def main() -> None:
    ap = argparse.ArgumentParser(prog="python -m loadtests.trivial_target")
    ap.add_argument("--port", type=int, default=0)
    event_loop.run(serve(ap.parse_args().port))


if __name__ == "__main__":
    main()
