"""A Redis job worker process for cortex-mock.

    python -m services.cortex_mock.worker --redis-url URL --data-dir DIR [--embedder ...] [--settle-delay-ms N]
        [--job-delay-ms N] [--lease-ms N] [--max-attempts N] [--concurrency N]

Claims jobs with BLMOVE into its own processing list, keeps a heartbeat lease, and runs a reaper that hands the
jobs of dead workers back (see jobs.py). Prints `READY pid=<pid>` once it serves. SIGTERM stops it within a
stated bound: --stop-grace-s (default 10) for the running job, then at most 4 s to delete its lease and hand
its unfinished jobs back, and a hard exit at --stop-grace-s + 5 s whatever hangs. With --parent-pid (cortex-mock
passes its own) it stops the same way once that process is gone, however it ended: a cortex-mock killed by
SIGKILL left its workers running for good (issue 49).
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import sys

from services.common import process
from services.cortex_mock.__main__ import build_parser, config_from_args
from services.cortex_mock.engine import CortexEngine
from services.cortex_mock.jobs import RedisJobs


async def run(argv: list[str] | None = None) -> None:
    ap = build_parser("python -m services.cortex_mock.worker", worker=True)
    ap.add_argument("--concurrency", type=int, default=1, help="jobs this process runs at once")
    ap.add_argument("--stop-grace-s", type=float, default=10.0,
                    help="SIGTERM: finish or abandon the running job within this long (then exit; +5 s hard cap)")
    ap.add_argument("--parent-pid", type=int, default=None,
                    help="stop (as on SIGTERM) once this process, the cortex-mock that spawned it, is gone")
    a = ap.parse_args(argv)
    cfg = config_from_args(a)
    if not cfg.redis_url:
        ap.error("--redis-url (or REDIS_URL) is required")
    if not a.data_dir:
        ap.error("--data-dir is required (the server's data dir)")
    engine = CortexEngine(cfg)
    jobs = RedisJobs(cfg.redis_url, cfg.redis_prefix, cfg.lease_ms, cfg.max_attempts)
    await jobs.r.ping()
    await asyncio.to_thread(_warm, engine)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()

    def on_signal() -> None:
        stop.set()
        # The hard cap: whatever hangs (a cancel swallowed inside a Redis call, a stuck thread), the process
        # is gone stop_grace_s + 5 s after SIGTERM; its lease then expires and another worker's reaper hands
        # the job back.
        loop.call_later(a.stop_grace_s + 5.0, _hard_exit)

    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, on_signal)
    task = asyncio.create_task(jobs.serve(engine, a.concurrency, stop, stop_grace_s=a.stop_grace_s))
    orphan = asyncio.create_task(_stop_when_orphaned(a.parent_pid, stop, on_signal)) if a.parent_pid else None
    await asyncio.sleep(0)
    process.announce_ready()
    try:
        await task
    finally:
        if orphan is not None:
            orphan.cancel()
        await jobs.r.aclose()
        await engine.close()


async def _stop_when_orphaned(parent: int, stop: asyncio.Event, on_signal) -> None:
    """Stop as on SIGTERM once `parent` is no longer this process's parent (it exited or was killed: the process is
    re-parented), checked every 0.5 s."""
    while os.getppid() == parent and not stop.is_set():
        await asyncio.sleep(0.5)
    if not stop.is_set():
        logging.getLogger("cortex_mock.worker").warning("cortex-mock (pid %d) is gone; stopping", parent)
        on_signal()


def _warm(engine: CortexEngine) -> None:
    """Load the embedder and the tokenizer (token counts are stored at ingest) before claiming: loading them
    mid-job holds the GIL long enough to starve the heartbeat past a short lease."""
    from services.common.tokens import count_tokens

    engine.embedder.encode(["warm up"])
    count_tokens("warm up")


def _hard_exit() -> None:
    logging.getLogger("cortex_mock.worker").error("shutdown exceeded its bound; exiting now")
    os._exit(3)


def main() -> None:
    logging.basicConfig(level=logging.INFO, stream=sys.stderr, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    asyncio.run(run())


if __name__ == "__main__":
    main()
