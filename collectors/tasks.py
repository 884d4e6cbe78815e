"""The background sampling task every periodic collector runs, started once and stopped cleanly."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable


def start_task(task: asyncio.Task | None, run: Callable[[], Awaitable[None]], name: str) -> asyncio.Task:
    """The running task, or a new one if none is running (start() is idempotent)."""
    return task if task is not None else asyncio.create_task(run(), name=name)


async def stop_task(task: asyncio.Task | None) -> None:
    """Cancel the task and wait until it has finished, so no sample lands after stop()."""
    if task is not None:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
