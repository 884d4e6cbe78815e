"""Per-request log of a locust run: one JSON line per request with wall-clock start and end.

Locust's own CSV history is a 1 s snapshot of a 10 s sliding window; to say that failures happened inside
exactly the fault window we need per-request times. Each locust process (local, or every worker) writes its own
`requests-<pid>.jsonl` into the log directory; `read_request_log` merges them. No locust import here.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any


@dataclass(frozen=True)
class RequestRecord:
    type: str
    name: str
    start: float  # wall clock, seconds since the epoch
    end: float
    ms: float
    ok: bool
    error: str = ""


class RequestLogWriter:
    def __init__(self, directory: str | Path):
        self.dir = Path(directory)
        self.dir.mkdir(parents=True, exist_ok=True)
        self.path = self.dir / f"requests-{os.getpid()}.jsonl"
        self._f: IO[str] | None = open(self.path, "a", buffering=1 << 16)  # closed in close()

    def write(self, request_type: str, name: str, start: float, end: float, response_time_ms: float,
              exception: BaseException | None) -> None:
        if self._f is None:
            return
        rec: dict[str, Any] = {"type": request_type, "name": name, "start": round(start, 6), "end": round(end, 6),
                               "ms": round(float(response_time_ms or 0.0), 3), "ok": exception is None}
        if exception is not None:
            rec["error"] = f"{type(exception).__name__}: {exception}"[:200]
        self._f.write(json.dumps(rec) + "\n")

    def flush(self) -> None:
        if self._f is not None:
            self._f.flush()

    def close(self) -> None:
        if self._f is not None:
            self._f.close()
            self._f = None


def iter_request_log(directory: str | Path) -> Iterator[RequestRecord]:
    for p in sorted(Path(directory).glob("requests-*.jsonl")):
        with open(p) as f:
            for line in f:
                line = line.strip()
                if line:
                    d = json.loads(line)
                    yield RequestRecord(d["type"], d["name"], d["start"], d["end"], d["ms"], d["ok"], d.get("error", ""))


def read_request_log(directory: str | Path) -> list[RequestRecord]:
    return sorted(iter_request_log(directory), key=lambda r: r.start)


def failures_by_window(records: list[RequestRecord], windows: list[tuple[float, float]]) -> dict[str, int]:
    """Count failures overlapping some window vs outside all windows (wall-clock [start, end] pairs)."""
    inside = outside = 0
    for r in records:
        if r.ok:
            continue
        if any(r.start <= w_end and r.end >= w_start for w_start, w_end in windows):
            inside += 1
        else:
            outside += 1
    return {"inside": inside, "outside": outside}
