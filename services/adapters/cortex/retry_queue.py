"""The plugin's capture RetryQueue (Ubundi/openclaw-cortex, `src/internal/retry-queue.ts`, unchanged since v0.3).

Behaviour reproduced: tasks keyed by label, kept in arrival order; enqueueing a label already queued
replaces its work in place (retries back to 0, due now); enqueueing past `capacity` (100) drops the oldest
task with a warning; `flush` (every `flush_interval_ms`, 5 s) runs the due tasks one after another, guarded
so two flushes never overlap; a failure bumps `retries` and waits `min(base · 2^retries, max)` (2 s, 4 s,
8 s, 16 s with the defaults); after `max_retries` (5) failures the task is dropped with a warning.

Additions for the rig (not in the plugin): drops are counted (with the number of items they carried) so a
report can say what was lost, `discard` removes tasks of a namespace being reset, the clock is injectable, each task
keeps its last error, and `due_now` makes chosen tasks due at once: the adapter's settle uses it for a capture the
API refused as invalid, whose every retry fails the same way (see CortexBackend.settle), so the rig does not sit
out 2 + 4 + 8 + 16 s of backoff to learn what the plugin ends up doing: dropping it after its five attempts.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

log = logging.getLogger("memrig.cortex")


@dataclass
class RetryTask:
    label: str
    execute: Callable[[], Awaitable[Any]]
    retries: int = 0
    next_attempt_at: float = 0.0
    items: int = 1  # how many ingested items the task carries (for items_pending)
    meta: dict[str, Any] = field(default_factory=dict)
    last_error: BaseException | None = None  # the failure of its latest attempt


class RetryQueue:
    def __init__(self, max_retries: int = 5, base_delay_ms: float = 1000, max_delay_ms: float = 60_000,
                 capacity: int = 100, flush_interval_ms: float = 5000,
                 clock: Callable[[], float] = time.monotonic, logger: logging.Logger = log):
        self.max_retries = max_retries
        self.base_delay_s = base_delay_ms / 1000.0
        self.max_delay_s = max_delay_ms / 1000.0
        self.capacity = capacity
        self.flush_interval_s = flush_interval_ms / 1000.0
        self.clock = clock
        self.logger = logger
        self._tasks: OrderedDict[str, RetryTask] = OrderedDict()
        self._flushing = False
        self._timer: asyncio.Task | None = None
        self._counter = 0
        self.stats = {"enqueued": 0, "replaced": 0, "succeeded": 0, "failed_attempts": 0,
                      "dropped_capacity": 0, "dropped_retries": 0, "dropped_items": 0, "fast_forwarded": 0}

    # -- queue ------------------------------------------------------------------------------------
    @property
    def pending(self) -> int:
        return len(self._tasks)

    @property
    def pending_items(self) -> int:
        return sum(t.items for t in self._tasks.values())

    def labels(self) -> list[str]:
        return list(self._tasks)

    def tasks(self) -> list[RetryTask]:
        return list(self._tasks.values())

    def enqueue(self, execute: Callable[[], Awaitable[Any]], label: str | None = None, items: int = 1,
                **meta: Any) -> None:
        if label is None:
            self._counter += 1
            label = f"task-{self._counter}"
        now = self.clock()
        task = self._tasks.get(label)
        if task is not None:
            task.execute, task.retries, task.next_attempt_at = execute, 0, now
            task.items, task.meta = items, meta
            self.stats["replaced"] += 1
            return
        if len(self._tasks) >= self.capacity:
            _, dropped = self._tasks.popitem(last=False)
            self.stats["dropped_capacity"] += 1
            self.stats["dropped_items"] += dropped.items
            self.logger.warning("Retry queue: at capacity (%d), dropped oldest task %s", self.capacity, dropped.label)
        self._tasks[label] = RetryTask(label, execute, 0, now, items, meta)
        self.stats["enqueued"] += 1

    def discard(self, predicate: Callable[[RetryTask], bool]) -> int:
        gone = [k for k, t in self._tasks.items() if predicate(t)]
        for k in gone:
            del self._tasks[k]
        return len(gone)

    def due_now(self, predicate: Callable[[RetryTask], bool]) -> int:
        """Make the tasks matching `predicate` due at once (their retry count unchanged); returns how many."""
        now, n = self.clock(), 0
        for t in self._tasks.values():
            if t.next_attempt_at > now and predicate(t):
                t.next_attempt_at, n = now, n + 1
        self.stats["fast_forwarded"] += n
        return n

    def next_due_in(self) -> float | None:
        if not self._tasks:
            return None
        return max(0.0, min(t.next_attempt_at for t in self._tasks.values()) - self.clock())

    async def flush(self) -> int:
        """Run every due task once, in order. Returns how many succeeded (0 if a flush is already running)."""
        if self._flushing:
            return 0
        self._flushing = True
        ok = 0
        try:
            now = self.clock()
            for label in list(self._tasks):
                task = self._tasks.get(label)
                if task is None or task.next_attempt_at > now:
                    continue
                try:
                    await task.execute()
                except Exception as e:  # any failure is a retry
                    self.stats["failed_attempts"] += 1
                    task.retries += 1
                    task.last_error = e
                    if task.retries >= self.max_retries:
                        self._remove(task)
                        self.stats["dropped_retries"] += 1
                        self.stats["dropped_items"] += task.items
                        self.logger.warning("Retry queue: %s failed after %d retries, dropping: %s",
                                            label, self.max_retries, e)
                    else:
                        delay = min(self.base_delay_s * 2 ** task.retries, self.max_delay_s)
                        task.next_attempt_at = self.clock() + delay
                else:
                    self._remove(task)
                    self.stats["succeeded"] += 1
                    ok += 1
        finally:
            self._flushing = False
        return ok

    def _remove(self, task: RetryTask) -> None:
        # As in the plugin, a same-label enqueue mutates the task in place, so this removes it either way.
        self._tasks.pop(task.label, None)

    # -- timer ------------------------------------------------------------------------------------
    def start(self) -> None:
        if self._timer is None:
            self._timer = asyncio.get_running_loop().create_task(self._loop())

    async def _loop(self) -> None:
        while True:
            await asyncio.sleep(self.flush_interval_s)
            with contextlib.suppress(Exception):
                await self.flush()

    async def stop(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._timer
            self._timer = None
        if self._tasks:
            self.logger.warning("Retry queue stopped with %d pending tasks", len(self._tasks))
        self._tasks.clear()
        self._flushing = False
