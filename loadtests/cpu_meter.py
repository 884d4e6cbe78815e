"""CPU milliseconds per request during a load step, for the server under test and for the generator itself.

Wall-clock rates on a shared 2-core machine move with whatever else runs; the CPU a request costs is what
decides how many fit on the cores (issue 14's arithmetic: at 1,000 req/s the generator and every server
process together must stay under 2 cores). `StepCpu` reads the server's process tree (psutil: the process and
its live descendants, e.g. the sibling server processes of `--processes N`) and this process's own CPU time
(`time.process_time`, the generator) before and after a step, and splits the server's share by thread: the
event loops, cortex-mock's search threads (the engine) and the rest, so the cost beyond the engine is
measured, not inferred.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any


def tree_cpu_seconds(pid: int) -> float | None:
    """User + system CPU seconds of `pid` and its live descendants (None if the process is gone)."""
    import psutil

    try:
        root = psutil.Process(pid)
        procs = [root, *root.children(recursive=True)]
    except psutil.Error:
        return None
    total = 0.0
    for p in procs:
        try:
            t = p.cpu_times()
            total += t.user + t.system
        except psutil.Error:  # a descendant that exited between the listing and the read
            continue
    return total


THREAD_ROLES = ("loop", "search", "other")


def thread_role(pid: int, tid: int, name: str) -> str:
    """What a server thread does: "loop" is a process's main thread (the event loop: HTTP parsing, middleware,
    validation, JSON, the hand-off), "search" a thread of cortex-mock's search pool (`cortex-search_N`, the
    engine), "other" anything else (the default executor, tqdm's monitor, BLAS)."""
    if tid == pid:
        return "loop"
    return "search" if name.startswith("cortex-search") else "other"


def _thread_name(pid: int, tid: int) -> str:
    try:  # Linux: the thread's name as set by Python's threading (truncated to 15 characters)
        with open(f"/proc/{pid}/task/{tid}/comm") as f:
            return f.read().strip()
    except OSError:
        return ""


def tree_cpu_by_role(pid: int) -> dict[str, float] | None:
    """tree_cpu_seconds split by thread_role (threads that exited are no longer counted, so the parts can sum
    to a little less than the tree's total; None if the process is gone)."""
    import psutil

    try:
        root = psutil.Process(pid)
        procs = [root, *root.children(recursive=True)]
    except psutil.Error:
        return None
    out = dict.fromkeys(THREAD_ROLES, 0.0)
    for p in procs:
        try:
            threads = p.threads()
        except psutil.Error:
            continue
        for t in threads:
            out[thread_role(p.pid, t.id, _thread_name(p.pid, t.id))] += t.user_time + t.system_time
    return out


def cpu_ms_per_request(before_s: float | None, after_s: float | None, requests: int) -> float | None:
    """CPU milliseconds per completed request over a step (None without requests or readings)."""
    if before_s is None or after_s is None or requests <= 0:
        return None
    return round((after_s - before_s) * 1000.0 / requests, 3)


def cores_busy(before_s: float | None, after_s: float | None, wall_s: float) -> float | None:
    """Average number of cores kept busy over a step of `wall_s` seconds."""
    if before_s is None or after_s is None or wall_s <= 0:
        return None
    return round((after_s - before_s) / wall_s, 3)


def cores_needed(rate_rps: float | None, server_ms: float | None, generator_ms: float | None) -> float | None:
    """Cores that `rate_rps` requests a second take at the measured CPU cost of a request (server + generator)."""
    if rate_rps is None or server_ms is None or generator_ms is None:
        return None
    return round(rate_rps * (server_ms + generator_ms) / 1000.0, 3)


@dataclass
class StepCpu:
    """One reading before a step and one after: `start()`, run the step, `stop(completed_requests)`."""

    server_pid: int | None
    _server0: float | None = None
    _roles0: dict[str, float] | None = None
    _gen0: float = 0.0
    _wall0: float = 0.0

    def start(self) -> StepCpu:
        self._server0 = tree_cpu_seconds(self.server_pid) if self.server_pid else None
        self._roles0 = tree_cpu_by_role(self.server_pid) if self.server_pid else None
        self._gen0 = time.process_time()
        self._wall0 = time.perf_counter()
        return self

    def stop(self, requests: int) -> dict[str, Any]:
        wall = time.perf_counter() - self._wall0
        server1 = tree_cpu_seconds(self.server_pid) if self.server_pid else None
        roles1 = tree_cpu_by_role(self.server_pid) if self.server_pid else None
        gen1 = time.process_time()
        split = None
        if self._roles0 is not None and roles1 is not None:
            split = {r: cpu_ms_per_request(self._roles0[r], roles1[r], requests) for r in THREAD_ROLES}
        return {"server_ms_per_req": cpu_ms_per_request(self._server0, server1, requests),
                "server_ms_per_req_by_thread": split,
                "generator_ms_per_req": cpu_ms_per_request(self._gen0, gen1, requests),
                "server_cores": cores_busy(self._server0, server1, wall),
                "generator_cores": cores_busy(self._gen0, gen1, wall), "requests": requests,
                "wall_s": round(wall, 3)}
