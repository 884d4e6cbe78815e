"""FaultEngine: the proxy's view of the active faults, per-request numbering, state, waits and the log.

It owns everything the HTTP layer needs besides sockets: the seeded request numbering, the cached fault
list (refreshed from the store before every decision), per-fault state (token buckets, in-flight counts,
hit counts for one-shot faults), the events that release delayed and blackholed requests when their
fault is removed or changed (toxiproxy's "flush, never drop"), and the bounded decision log.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import time
from collections import deque
from collections.abc import Callable
from typing import Any

from services.fault_proxy.faults import FaultSpec, RequestInfo, decide
from services.fault_proxy.store import FaultStore, LocalStore


class FaultEngine:
    def __init__(self, store: FaultStore | None = None, seed: int | None = None, log_size: int = 10_000,
                 clock: Callable[[], float] = time.time):
        self.store: FaultStore = store or LocalStore()
        self.seed = seed if seed is not None else int.from_bytes(os.urandom(4), "big")
        self.clock = clock
        self._seq = 0
        self._version = -1
        self.faults: list[FaultSpec] = []
        self._states: dict[tuple[str, int], Any] = {}
        self._hits: dict[tuple[str, int], int] = {}
        self._release: dict[tuple[str, int], asyncio.Event] = {}
        self.log: deque[dict[str, Any]] = deque(maxlen=log_size)
        self._refresh_lock = asyncio.Lock()

    # -- numbering --------------------------------------------------------------------------------
    def next_seq(self) -> int:
        self._seq += 1
        return self._seq

    def reset_run(self, seed: int | None = None) -> None:
        """Start a new run: request numbering from 1, empty log, fresh state (and a new seed if given)."""
        if seed is not None:
            self.seed = seed
        self._seq = 0
        self.log.clear()
        self._states.clear()
        self._hits.clear()

    # -- fault list -------------------------------------------------------------------------------
    async def refresh(self, force: bool = False) -> None:
        ver = await self.store.version()
        if ver == self._version and not force:
            return
        async with self._refresh_lock:
            ver, faults = await self.store.load()
            live = {(f.name, f.generation) for f in faults}
            # A fault that went away or changed generation releases whatever it is holding.
            for key in list(self._release):
                if key not in live:
                    self._release.pop(key).set()
            for d in (self._states, self._hits):
                for key in [k for k in d if k not in live]:
                    del d[key]
            self.faults, self._version = faults, ver

    def matching(self, info: RequestInfo, stage: str) -> list[FaultSpec]:
        return [f for f in self.faults if f.stage == stage and f.match.matches(info)]

    def decide(self, spec: FaultSpec, info: RequestInfo):
        key = (spec.name, spec.generation)
        now = self.clock()
        state = None
        if spec.kind.STATEFUL:
            state = self._states.get(key)
            if state is None:
                state = self._states[key] = spec.kind.new_state(spec, now)
        dec, drawn, rng = decide(spec, info, self.seed, now, state, self._hits.get(key, 0))
        if drawn.applied:
            self._hits[key] = self._hits.get(key, 0) + 1
        return dec, drawn, rng

    # -- waits that a removal releases -------------------------------------------------------------
    def _event(self, spec: FaultSpec) -> asyncio.Event:
        key = (spec.name, spec.generation)
        ev = self._release.get(key)
        if ev is None:
            ev = self._release[key] = asyncio.Event()
            if key not in {(f.name, f.generation) for f in self.faults}:
                ev.set()  # removed between the decision and the wait
        return ev

    async def wait(self, spec: FaultSpec | None, seconds: float | None) -> bool:
        """Sleep `seconds` (None = until released). True if the fault's removal cut the wait short."""
        if spec is None:  # header-forced faults are not removable
            if seconds:
                await asyncio.sleep(seconds)
            return False
        ev = self._event(spec)
        if seconds is None:
            await ev.wait()
            return True
        if seconds <= 0:
            return ev.is_set()
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(seconds):
                await ev.wait()
                return True
        return False

    def release_all(self) -> None:
        for ev in self._release.values():
            ev.set()
        self._release.clear()

    # -- log --------------------------------------------------------------------------------------
    def record(self, entry: dict[str, Any]) -> None:
        self.log.append(entry)

    def log_entries(self, since: int = 0, limit: int | None = None) -> list[dict[str, Any]]:
        out = [e for e in self.log if e["seq"] > since]
        out.sort(key=lambda e: e["seq"])
        return out[:limit] if limit else out

    @property
    def requests_seen(self) -> int:
        return self._seq
