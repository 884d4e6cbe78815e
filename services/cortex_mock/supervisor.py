"""Supervision of cortex-mock's Redis worker processes: spawn N, respawn any that exits (with exponential
backoff, so a worker that dies at start-up does not spin), report real health, stop them by PID.

Without it a SIGKILLed worker stayed dead, `/health` kept listing its PID as fine, and with every worker gone
jobs waited forever (issue 14). The server runs `watch()` as a background task; `/health` answers 503
"degraded" while any slot has no live process.

Backoff: a slot's n-th consecutive early death (the process lived less than `stable_s`) waits
`min(backoff_base_s * 2**(n-1), backoff_max_s)` before the respawn. The clock is injectable for tests.
"""

from __future__ import annotations

import asyncio
import logging
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from services.common import process
from services.common.errors import LaunchError

log = logging.getLogger("cortex_mock.supervisor")


@dataclass
class WorkerSlot:
    index: int
    proc: subprocess.Popen | None = None
    started_at: float = 0.0
    restarts: int = 0
    early_deaths: int = 0  # consecutive deaths within stable_s of the start
    last_exit: int | None = None
    respawn_at: float | None = None  # set while the slot waits out its backoff
    history: list[dict[str, Any]] = field(default_factory=list)

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None


class WorkerSupervisor:
    def __init__(self, argv: Callable[[], list[str]] | list[str], n: int, ready_timeout_s: float = 120.0,
                 backoff_base_s: float = 0.5, backoff_max_s: float = 30.0, stable_s: float = 60.0,
                 poll_s: float = 0.5, clock: Callable[[], float] = time.monotonic,
                 env: dict[str, str] | None = None):
        self._argv = argv if callable(argv) else (lambda: list(argv))
        self.env = env
        self.slots = [WorkerSlot(i) for i in range(n)]
        self.ready_timeout_s = ready_timeout_s
        self.backoff_base_s, self.backoff_max_s, self.stable_s = backoff_base_s, backoff_max_s, stable_s
        self.poll_s = poll_s
        self.clock = clock
        self._stopping = False

    # -- spawning (blocking: call through asyncio.to_thread) ------------------------------------------
    def _spawn(self, slot: WorkerSlot) -> None:
        """A worker in cortex-mock's own session (a Ctrl-C at cortex-mock's terminal reaches it too), its stderr
        into cortex-mock's log, its stdout read until READY; one that is not ready is killed at once."""
        p = process.spawn(self._argv(), None, env=self.env, new_session=False)
        process.wait_ready(p, f"cortex-mock worker pid={p.pid}", None, self.ready_timeout_s, grace_s=0)
        slot.proc, slot.started_at, slot.respawn_at = p, self.clock(), None

    def start(self) -> None:
        try:
            for slot in self.slots:
                self._spawn(slot)
        except BaseException:
            self.stop()
            raise

    # -- watching -------------------------------------------------------------------------------------
    def backoff_s(self, early_deaths: int) -> float:
        return min(self.backoff_base_s * 2 ** max(0, early_deaths - 1), self.backoff_max_s)

    def check(self) -> list[int]:
        """One supervision step (blocking): note exits, schedule respawns, respawn those due. Returns the
        slots respawned now."""
        now = self.clock()
        respawned: list[int] = []
        for slot in self.slots:
            if self._stopping:
                break
            if slot.proc is not None and slot.proc.poll() is not None and slot.respawn_at is None:
                code = slot.proc.returncode
                lived = now - slot.started_at
                slot.early_deaths = slot.early_deaths + 1 if lived < self.stable_s else 1
                slot.last_exit = code
                slot.respawn_at = now + self.backoff_s(slot.early_deaths)
                slot.history.append({"pid": slot.proc.pid, "exit": code, "lived_s": round(lived, 3)})
                log.warning("cortex-mock worker %d (pid %d) exited with %s after %.1fs; respawn in %.1fs",
                            slot.index, slot.proc.pid, code, lived, slot.respawn_at - now)
            if slot.respawn_at is not None and now >= slot.respawn_at:
                try:
                    self._spawn(slot)
                    slot.restarts += 1
                    respawned.append(slot.index)
                except LaunchError:
                    log.exception("respawn of worker %d failed", slot.index)
                    slot.early_deaths += 1
                    slot.respawn_at = self.clock() + self.backoff_s(slot.early_deaths)
        return respawned

    async def watch(self) -> None:
        while not self._stopping:
            await asyncio.to_thread(self.check)
            await asyncio.sleep(self.poll_s)

    # -- reporting --------------------------------------------------------------------------------------
    def pids(self) -> list[int]:
        return [s.proc.pid for s in self.slots if s.alive()]

    def healthy(self) -> bool:
        return all(s.alive() for s in self.slots)

    def health(self) -> list[dict[str, Any]]:
        return [{"slot": s.index, "pid": s.proc.pid if s.alive() else None, "alive": s.alive(),
                 "restarts": s.restarts, "last_exit": s.last_exit,
                 "respawn_in_s": round(max(0.0, s.respawn_at - self.clock()), 3) if s.respawn_at else None}
                for s in self.slots]

    # -- stopping ---------------------------------------------------------------------------------------
    def stop(self, grace_s: float = 15.0) -> None:
        """SIGTERM every live worker, SIGKILL any still running after `grace_s` (a worker's own shutdown is
        bounded by its --stop-grace-s, so the kill is the last resort)."""
        self._stopping = True
        process.stop(*(s.proc for s in self.slots if s.proc is not None), grace_s=grace_s)
