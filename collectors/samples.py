"""The run's raw samples: one JSON object per line, written as they are measured.

Every collector writes its rows here (and to Prometheus). A sink without a path keeps rows in memory only, which
is what tests and short in-process runs use; `rows` always holds what was written.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any


class SampleSink:
    def __init__(self, path: str | Path | None = None, keep: bool = True):
        self.path = Path(path) if path else None
        self.keep = keep
        self.rows: list[dict[str, Any]] = []
        self._fh = None
        if self.path is not None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._fh = open(self.path, "a", encoding="utf-8")  # closed in close()

    def write(self, kind: str, **fields: Any) -> dict[str, Any]:
        row = {"kind": kind, "t": round(time.time(), 6), **fields}
        if self.keep:
            self.rows.append(row)
        if self._fh is not None:
            self._fh.write(json.dumps(row, default=str, sort_keys=True) + "\n")
            self._fh.flush()
        return row

    def of_kind(self, kind: str) -> list[dict[str, Any]]:
        return [r for r in self.rows if r["kind"] == kind]

    def close(self) -> None:
        if self._fh is not None:
            self._fh.close()
            self._fh = None


def read_samples(path: str | Path) -> list[dict[str, Any]]:
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]
