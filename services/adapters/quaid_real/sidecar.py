"""The quaid-real sidecar: a Python process that imports Quaid's own modules (read from the source directory, never
copied) and answers one JSON request per line on stdin with one JSON line on stdout.

Started by backend.py as `python -m services.adapters.quaid_real.sidecar` with QUAID_HOME (a standalone install's
home with `config/memory.json`, written by the backend), OLLAMA_URL (the rig's embeddings service, Ollama's shape)
and MEMRIG_QUAID_MODULES (Quaid's `modules/quaid`). Quaid's print()s go to stderr; stdout carries only replies.

SQLite: Quaid loads sqlite-vec into the stdlib `sqlite3` module. When this Python's `sqlite3` cannot load extensions
(a build without `enable_load_extension`), `pysqlite3` (the same DB-API module with a newer SQLite that can) is
installed as `sqlite3` before Quaid is imported; Quaid's code is unchanged.

One Quaid database per namespace (Quaid keeps one per agent install): before each request the namespace's
`MemoryGraph` becomes Quaid's singleton (`memory_graph._graph`) and MEMORY_DB_PATH points at its file, so every
Quaid function that calls `get_graph()` or `get_db_path()` works on that namespace alone. Requests are served one at
a time, so the switch is never seen half-done.

Requests (`op`): `store` (Quaid's `store()` per fact), `extract` (Quaid's `extract_from_transcript()`), `recall`
(Quaid's `recall()`), `nodes` (the namespace's nodes, for the fidelity study), `drop` (delete a namespace's files),
`info`. Every reply is `{"ok": true, ...}` or `{"ok": false, "error": "..."}`.
"""

from __future__ import annotations

import base64
import json
import os
import sys
import traceback
from pathlib import Path
from typing import Any


def _sqlite_with_extensions() -> str:
    import sqlite3

    if hasattr(sqlite3.Connection, "enable_load_extension"):
        return "stdlib sqlite3 " + sqlite3.sqlite_version
    import pysqlite3  # pinned by make setup-quaid
    import pysqlite3.dbapi2

    sys.modules["sqlite3"] = pysqlite3
    sys.modules["sqlite3.dbapi2"] = pysqlite3.dbapi2
    return "pysqlite3 " + pysqlite3.dbapi2.sqlite_version


class Sidecar:
    def __init__(self) -> None:
        self.home = Path(os.environ["QUAID_HOME"])
        self.sqlite = _sqlite_with_extensions()
        sys.path.insert(0, os.environ["MEMRIG_QUAID_MODULES"])
        (self.home / "data").mkdir(parents=True, exist_ok=True)
        os.environ["MEMORY_DB_PATH"] = str(self.home / "data" / "_boot.db")
        from datastore.memorydb import memory_graph as mg
        from lib import database

        self.mg = mg
        self.has_vec = database.has_vec()
        self.graphs: dict[str, Any] = {}
        self.paths: dict[str, Path] = {}

    # -- namespaces ---------------------------------------------------------------------------------
    def db_path(self, ns_key: str) -> Path:
        return self.home / "data" / f"{ns_key}.db"

    def use(self, ns_key: str):
        g = self.graphs.get(ns_key)
        path = self.db_path(ns_key)
        os.environ["MEMORY_DB_PATH"] = str(path)
        if g is None:
            g = self.mg.MemoryGraph(db_path=path)
            self.graphs[ns_key] = g
        with self.mg._graph_lock:
            self.mg._graph = g
        return g

    # -- ops ----------------------------------------------------------------------------------------
    def op_info(self, req: dict) -> dict:
        from config import get_config

        cfg = get_config()
        return {"sqlite": self.sqlite, "sqlite_vec": self.has_vec,
                "embedding_model": cfg.ollama.embedding_model, "embedding_dim": cfg.ollama.embedding_dim,
                "min_similarity": cfg.retrieval.min_similarity, "use_hyde": cfg.retrieval.use_hyde,
                "reranker": cfg.retrieval.reranker_enabled, "llm_provider": cfg.models.llm_provider}

    def op_store(self, req: dict) -> dict:
        self.use(req["ns"])
        out = []
        for f in req["facts"]:
            try:
                r = self.mg.store(
                    f["text"], category=f.get("category", "fact"), confidence=f.get("confidence", 0.5),
                    source=f.get("source"), source_id=f.get("source_id"), owner_id=req.get("owner"),
                    session_id=f.get("session_id"), created_at=f.get("created_at"),
                    knowledge_type=f.get("knowledge_type", "fact"), source_type=f.get("source_type"))
                out.append({"id": r.get("id"), "status": r.get("status")})
            except ValueError as e:  # Quaid's own input rules (e.g. a fact needs 3+ words)
                out.append({"id": None, "status": "rejected", "reason": str(e)})
        return {"results": out}

    def op_extract(self, req: dict) -> dict:
        self.use(req["ns"])
        from ingest.extract import extract_from_transcript

        r = extract_from_transcript(req["transcript"], owner_id=req.get("owner") or "default",
                                    label=req.get("label", "memrig"), session_id=req.get("session_id"),
                                    write_snippets=False, write_journal=False)
        return {"facts_stored": r["facts_stored"], "facts_skipped": r["facts_skipped"],
                "edges_created": r["edges_created"], "facts": r["facts"]}

    def op_recall(self, req: dict) -> dict:
        g = self.use(req["ns"])
        res = self.mg.recall(req["query"], limit=int(req["limit"]), owner_id=req.get("owner"),
                             debug=bool(req.get("debug")))
        nodes = {}
        for r in res:
            n = g.get_node(r["id"])
            if n is not None:
                nodes[n.id] = {"source_id": n.source_id, "session_id": n.session_id, "created_at": n.created_at,
                               "accessed_at": n.accessed_at, "access_count": n.access_count, "type": n.type}
        return {"results": [_plain(r) for r in res], "nodes": nodes}

    def op_nodes(self, req: dict) -> dict:
        g = self.use(req["ns"])
        with g._get_conn() as conn:
            rows = conn.execute("SELECT * FROM nodes ORDER BY rowid").fetchall()
        out = []
        for row in rows:
            n = g._row_to_node(row)
            emb = n.embedding
            out.append({
                "id": n.id, "type": n.type, "name": n.name, "status": n.status, "owner_id": n.owner_id,
                "session_id": n.session_id, "source_id": n.source_id, "created_at": n.created_at,
                "accessed_at": n.accessed_at, "access_count": n.access_count, "confidence": n.confidence,
                "storage_strength": n.storage_strength, "confirmation_count": n.confirmation_count,
                "knowledge_type": n.knowledge_type, "valid_from": n.valid_from, "valid_until": n.valid_until,
                "keywords": n.keywords,
                "embedding": base64.b64encode(_pack(emb)).decode("ascii") if emb else None,
            })
        return {"nodes": out}

    def op_drop(self, req: dict) -> dict:
        key = req["ns"]
        self.graphs.pop(key, None)
        n = 0
        for suffix in ("", "-wal", "-shm"):
            p = Path(str(self.db_path(key)) + suffix)
            if p.exists():
                p.unlink()
                n += 1
        return {"removed_files": n}

    def handle(self, req: dict) -> dict:
        fn = getattr(self, "op_" + str(req.get("op")), None)
        if fn is None:
            return {"ok": False, "error": f"op: unknown operation {req.get('op')!r}"}
        try:
            return {"ok": True, **fn(req)}
        except Exception as e:  # reported to the backend, which raises it as a DependencyError
            return {"ok": False, "error": f"{type(e).__name__}: {e}", "trace": traceback.format_exc()[-2000:]}


def _pack(v) -> bytes:
    import struct

    return struct.pack(f"<{len(v)}f", *v)


def _plain(r: dict) -> dict:
    return {k: v for k, v in r.items() if isinstance(v, str | int | float | bool | list | dict | type(None))}


def main() -> int:
    out = os.fdopen(os.dup(sys.stdout.fileno()), "w", buffering=1)
    sys.stdout = sys.stderr  # Quaid's print()s must not corrupt the reply stream
    try:
        sc = Sidecar()
    except Exception as e:
        out.write(json.dumps({"ok": False, "error": f"quaid sidecar failed to start: {type(e).__name__}: {e}"}) + "\n")
        return 1
    out.write(json.dumps({"ok": True, "ready": True, "pid": os.getpid(), **sc.op_info({})}) + "\n")
    for line in sys.stdin:
        if not line.strip():
            continue
        try:
            req = json.loads(line)
        except ValueError as e:
            out.write(json.dumps({"ok": False, "error": f"request is not JSON: {e}"}) + "\n")
            continue
        out.write(json.dumps(sc.handle(req), default=str) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
