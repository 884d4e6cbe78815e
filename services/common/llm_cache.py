"""An on-disk response cache for chat completions, so a rerun of the same run costs no model time.

Only calls whose reply is meant to be reproducible are cached: temperature 0, or any temperature with a stated
`seed` (one named draw: the judges' passes 2..N, coordinator/judges.judge_pass_settings; a rerun then reproduces the
same draws even where the endpoint cannot), and no streaming. The key is the SHA-256 of a canonical JSON
of what decides the reply:

- the model name and the model file's digest (when the endpoint says which file it serves, e.g. the rig's
  local-llm; a remote endpoint without a digest is keyed by its base URL as well, so two endpoints that serve
  the same model name never share entries),
- the messages, exactly as sent,
- every generation parameter in the request body (temperature, max_tokens, seed, ...).

The offline llm-mock is never cached: its replies are a function of the rig's own code, which a cache would
hide after a change. Entries live in one SQLite file (WAL, shared by every process of a run: the coordinator
and the backends' flush writers), `$MEMRIG_STATE_DIR/llm-cache.sqlite` by default. Modes: `on` (read and
write), `refresh` (call the model, overwrite the entry: `--no-llm-cache`), `off` (neither).
"""

from __future__ import annotations

import hashlib
import json
import os
import sqlite3
import threading
import time
from pathlib import Path
from typing import Any

MODES = ("on", "refresh", "off")
KEY_VERSION = 1

_SCHEMA = """
CREATE TABLE IF NOT EXISTS responses (
    key TEXT PRIMARY KEY,
    model TEXT NOT NULL,
    digest TEXT NOT NULL,
    request TEXT NOT NULL,
    response TEXT NOT NULL,
    latency_s REAL NOT NULL,
    created_at REAL NOT NULL,
    hits INTEGER NOT NULL DEFAULT 0,
    last_hit_at REAL
)
"""


def default_path() -> Path:
    return (Path(os.environ.get("MEMRIG_STATE_DIR", ".memrig")) / "llm-cache.sqlite").resolve()


def parse_mode(value: str | None, field: str = "MEMRIG_LLM_CACHE") -> str:
    v = (value or "on").strip().lower()
    if v not in MODES:
        raise ValueError(f"{field}: {value!r} is not a cache mode; expected one of {', '.join(MODES)}")
    return v


def cache_key(model: str, digest: str, base_url: str, body: dict[str, Any]) -> str:
    """The entry's key. `body` is the request body sent to /chat/completions (model and messages included);
    `base_url` counts only when the digest is unknown."""
    params = {k: v for k, v in body.items() if k not in ("model", "messages")}
    doc = {
        "v": KEY_VERSION,
        "model": model,
        "digest": digest,
        "endpoint": "" if digest else base_url.rstrip("/"),
        "messages": body["messages"],
        "params": params,
    }
    canon = json.dumps(doc, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(canon.encode("utf-8")).hexdigest()


def cacheable(body: dict[str, Any]) -> bool:
    """Temperature 0 (or unset, which the client never sends) or a stated seed, and no streaming."""
    return (float(body.get("temperature", 0.0)) == 0.0 or body.get("seed") is not None) and not body.get("stream")


class ResponseCache:
    """Thread-safe; one connection per process, opened lazily. Every method is a few ms at most."""

    def __init__(self, path: str | Path | None = None):
        self.path = Path(path) if path else default_path()
        self._conn: sqlite3.Connection | None = None
        self._lock = threading.Lock()

    def _db(self) -> sqlite3.Connection:
        if self._conn is None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            conn = sqlite3.connect(self.path, timeout=30.0, check_same_thread=False, isolation_level=None)
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute("PRAGMA busy_timeout=30000")
            conn.execute(_SCHEMA)
            self._conn = conn
        return self._conn

    def get(self, key: str) -> tuple[dict[str, Any], float] | None:
        """(response JSON, the original call's latency in seconds) or None; a hit is counted on the entry."""
        with self._lock:
            db = self._db()
            row = db.execute("SELECT response, latency_s FROM responses WHERE key = ?", (key,)).fetchone()
            if row is None:
                return None
            db.execute("UPDATE responses SET hits = hits + 1, last_hit_at = ? WHERE key = ?", (time.time(), key))
        return json.loads(row[0]), float(row[1])

    def put(self, key: str, model: str, digest: str, body: dict[str, Any], response: dict[str, Any],
            latency_s: float) -> None:
        with self._lock:
            self._db().execute(
                "INSERT OR REPLACE INTO responses (key, model, digest, request, response, latency_s, created_at, hits)"
                " VALUES (?, ?, ?, ?, ?, ?, ?, 0)",
                (key, model, digest, json.dumps(body, sort_keys=True, ensure_ascii=False),
                 json.dumps(response, ensure_ascii=False), latency_s, time.time()))

    def stats(self) -> dict[str, Any]:
        """Entries, the hits recorded on them and the newest entry's time: two readings around a run tell how
        many calls it made that no entry answered (new entries) and how many it took from the cache."""
        with self._lock:
            if not self.path.exists():
                return {"entries": 0, "hits": 0, "newest": None, "path": str(self.path)}
            n, hits, newest = self._db().execute(
                "SELECT COUNT(*), COALESCE(SUM(hits), 0), MAX(created_at) FROM responses").fetchone()
        return {"entries": int(n), "hits": int(hits), "newest": newest, "path": str(self.path)}

    def close(self) -> None:
        with self._lock:
            if self._conn is not None:
                self._conn.close()
                self._conn = None


_shared: dict[Path, ResponseCache] = {}
_shared_lock = threading.Lock()


def shared(path: str | Path | None = None) -> ResponseCache:
    """One ResponseCache per file per process (every LLMClient of a process shares it)."""
    p = (Path(path) if path else default_path()).resolve()
    with _shared_lock:
        if p not in _shared:
            _shared[p] = ResponseCache(p)
        return _shared[p]


def stats_delta(before: dict[str, Any], after: dict[str, Any]) -> dict[str, int]:
    """What happened between two stats() readings: calls answered from the cache and calls that made entries."""
    return {"hits": after["hits"] - before["hits"], "new_entries": after["entries"] - before["entries"]}
