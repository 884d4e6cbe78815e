"""Quaid's keyword side: an SQLite FTS5 table of facts per namespace (its own tables; BM25 statistics per
namespace, as one Quaid database per agent). Thread-safe: callers run it off the event loop.

Query construction is the rig's choice (../shared/reference/peers.md does not record Quaid's): the query's word tokens, lower-cased,
stop words removed, each quoted, OR-joined, so a multi-word question still matches facts sharing any term;
the tokenizer is `porter unicode61` so "rotate" matches "rotates". Results are in FTS5 `rank` (BM25) order.
"""

from __future__ import annotations

import hashlib
import re
import sqlite3
import threading
from collections.abc import Sequence

from services.adapters.fact_extraction import STOP_WORDS

FTS_TOKENIZER = "porter unicode61"
_TOKEN_RE = re.compile(r"\w+", re.UNICODE)


def build_fts_query(text: str) -> str | None:
    toks = [t for t in dict.fromkeys(_TOKEN_RE.findall(text.lower())) if t not in STOP_WORDS and len(t) > 1]
    if not toks:
        return None
    return " OR ".join('"' + t.replace('"', '""') + '"' for t in toks)


class FactFts:
    def __init__(self, path: str = ":memory:"):
        self._db = sqlite3.connect(path, check_same_thread=False, isolation_level=None)
        self._lock = threading.Lock()

    @staticmethod
    def table(namespace: str) -> str:
        return "fts_" + hashlib.sha1(namespace.encode()).hexdigest()[:20]

    def add(self, namespace: str, rows: Sequence[tuple[str, str]]) -> None:
        """Insert (fact_id, text) rows in one transaction (all or nothing)."""
        t = self.table(namespace)
        with self._lock:
            self._db.execute(f"CREATE VIRTUAL TABLE IF NOT EXISTS {t} USING fts5(text, fact_id UNINDEXED, "
                             f"tokenize='{FTS_TOKENIZER}')")
            self._db.execute("BEGIN")
            try:
                self._db.executemany(f"INSERT INTO {t}(text, fact_id) VALUES (?, ?)", [(x, i) for i, x in rows])
                self._db.execute("COMMIT")
            except BaseException:
                self._db.execute("ROLLBACK")
                raise

    def search(self, namespace: str, query: str, limit: int) -> list[str]:
        q = build_fts_query(query)
        if q is None or limit <= 0:
            return []
        t = self.table(namespace)
        with self._lock:
            try:
                rows = self._db.execute(f"SELECT fact_id FROM {t} WHERE {t} MATCH ? ORDER BY rank LIMIT ?",
                                        (q, limit)).fetchall()
            except sqlite3.OperationalError as e:
                if "no such table" in str(e):
                    return []
                raise
        return [r[0] for r in rows]

    def drop(self, namespace: str) -> None:
        with self._lock:
            self._db.execute(f"DROP TABLE IF EXISTS {self.table(namespace)}")

    def close(self) -> None:
        with self._lock:
            self._db.close()
