"""Study (not a test): how long bench-all's backends take to start, one at a time against N at a time (issue 46).

    python -m services.studies.backend_starts [--at-once 1 2 ...] [--backends a,b,...] [--embedder minilm]

For each value of --at-once (in the order given; repeat values for repeated passes), starts llm-mock and then every
backend with `services.launcher.Rig`, that many at a time, as `runner.run_suite` does (START_AT_ONCE), and times
from the first backend's start until the last one answers READY and its first Describe. Every process is stopped by
PID before the next pass. Prints one line a pass: at-once, seconds, and the ratio to the first pass.

The seconds depend on the host's speed and load: compare the ratios within one invocation.
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
import time
from collections.abc import Awaitable, Callable
from typing import Any

from services.adapters.client import GrpcBackendClient
from services.adapters.registry import default_backends
from services.launcher import Rig


async def start_all(names: list[str], at_once: int, start: Callable[[str], Awaitable[Any]]) -> float:
    """Seconds to run `start(name)` for every name, at most `at_once` at a time."""
    gate = asyncio.Semaphore(max(1, at_once))

    async def one(name: str) -> None:
        async with gate:
            await start(name)

    t0 = time.perf_counter()
    await asyncio.gather(*(one(n) for n in names))
    return time.perf_counter() - t0


async def one_pass(names: list[str], at_once: int, embedder: str) -> float:
    rig = Rig(tempfile.mkdtemp(prefix="memrig-backend-starts-"))
    try:
        await rig.ensure_llm()

        async def start(name: str) -> None:
            proc = await rig.start_backend(name, embedder=embedder)
            client = GrpcBackendClient(proc.url, name=name)
            try:
                await client.describe(deadline=300.0)
            finally:
                await client.close()

        return await start_all(names, at_once, start)
    finally:
        rig.stop_all()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m services.studies.backend_starts", description=__doc__.split("\n")[0])
    ap.add_argument("--at-once", type=int, nargs="+", default=[1, 2], help="backends started at a time, one per pass")
    ap.add_argument("--backends", default="", help="comma-separated (default: bench-all's default backends)")
    ap.add_argument("--embedder", default="minilm")
    a = ap.parse_args(argv)
    if any(n < 1 for n in a.at_once):
        ap.error(f"--at-once: every value must be at least 1, got {a.at_once}")
    names = [b for b in a.backends.split(",") if b] or default_backends()
    first = None
    for n in a.at_once:
        s = asyncio.run(one_pass(names, n, a.embedder))
        first = first or s
        print(f"at once {n}: {len(names)} backends started and described in {s:.1f} s ({s / first:.2f} of the first "
              f"pass)", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
