"""Per-tenant persistence (one SQLite file per tenant, like the real service's `cortex_{tenant_id}` databases)
and the in-memory search index built from it.

Writers (the server's sync ingest, in-process job workers, Redis worker processes) serialise on
`BEGIN IMMEDIATE`; every write bumps `meta.rev`, and a reader rebuilds its `TenantIndex` snapshot lazily when
the stored rev differs from the snapshot's. Snapshots are immutable (the one exception swaps the embedding
matrices for byte-identical shared copies: shared_arrays.py), so searches run without the lock.
All methods are blocking: call them through `asyncio.to_thread`.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import sqlite3
import threading
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np

from services.cortex_mock.shared_arrays import SharedArrays
from services.cortex_mock.snapshot import EntityRow, Fact, IndexDelta, TenantIndex
from services.cortex_mock.temporal import parse_datetime

SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS nodes (
  id TEXT PRIMARY KEY, type TEXT NOT NULL, content TEXT NOT NULL, norm TEXT NOT NULL DEFAULT '',
  tokens TEXT NOT NULL DEFAULT '', source TEXT NOT NULL DEFAULT '', confidence REAL NOT NULL DEFAULT 0.8,
  session_id TEXT, speaker TEXT, fact_type TEXT, occurred_at TEXT, created_at REAL NOT NULL,
  attr_key TEXT NOT NULL DEFAULT '', attr_value TEXT NOT NULL DEFAULT '', superseded_by TEXT,
  metadata TEXT NOT NULL DEFAULT '{}', emb BLOB, emb_model TEXT, n_tokens INTEGER NOT NULL DEFAULT -1);
CREATE INDEX IF NOT EXISTS nodes_type ON nodes(type);
CREATE INDEX IF NOT EXISTS nodes_session ON nodes(session_id);
CREATE INDEX IF NOT EXISTS nodes_norm ON nodes(type, norm);
CREATE TABLE IF NOT EXISTS edges (
  id INTEGER PRIMARY KEY AUTOINCREMENT, src TEXT NOT NULL, dst TEXT NOT NULL, type TEXT NOT NULL,
  weight REAL NOT NULL DEFAULT 1.0, created_at REAL NOT NULL, visible_at REAL NOT NULL);
CREATE INDEX IF NOT EXISTS edges_src ON edges(src);
CREATE INDEX IF NOT EXISTS edges_dst ON edges(dst);
CREATE TABLE IF NOT EXISTS questions (
  id INTEGER PRIMARY KEY AUTOINCREMENT, fact_id TEXT NOT NULL, text TEXT NOT NULL, emb BLOB, emb_model TEXT);
CREATE INDEX IF NOT EXISTS questions_fact ON questions(fact_id);
CREATE TABLE IF NOT EXISTS applied_jobs (job_id TEXT PRIMARY KEY, result TEXT NOT NULL, applied_at REAL NOT NULL);
"""


def tenant_id_for_key(api_key: str) -> str:
    """Stable tenant id from an API key (the key itself never reaches a file name or a log)."""
    # surrogateescape: a header with bytes that are not UTF-8 still maps to one stable tenant (not a 500)
    return "t" + hashlib.sha256(api_key.encode("utf-8", "surrogateescape")).hexdigest()[:16]


def _vec(blob: bytes | None, dim: int) -> np.ndarray | None:
    if blob is None:
        return None
    v = np.frombuffer(blob, dtype=np.float32)
    return v if v.shape[0] == dim else None


class TenantStore:
    """`shared` (the engine passes one): the snapshot's embedding matrices are swapped for file-mapped copies
    that every process on the data dir shares, once the snapshot is `share_after_s` old (a snapshot replaced
    by the next ingest within that time is not worth hashing and writing)."""

    def __init__(self, path: str | Path, tenant_id: str, shared: SharedArrays | None = None,
                 share_after_s: float = 1.0):
        self.path = Path(path)
        self.tenant_id = tenant_id
        self.shared = shared
        self.share_after_s = share_after_s
        self._share_lock = threading.Lock()
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.lock = threading.RLock()
        self._conn: sqlite3.Connection | None = None
        with self.lock:
            c = self.conn
            c.executescript(SCHEMA)
            cols = {r[1] for r in c.execute("PRAGMA table_info(nodes)")}
            if "n_tokens" not in cols:  # a tenant written before token counts were stored at ingest
                c.execute("ALTER TABLE nodes ADD COLUMN n_tokens INTEGER NOT NULL DEFAULT -1")
            c.execute("INSERT OR IGNORE INTO meta(key, value) VALUES ('rev', '0')")
            c.execute("INSERT OR IGNORE INTO meta(key, value) VALUES ('tenant_id', ?)", (tenant_id,))
        self._index: TenantIndex | None = None
        self.index_builds = 0
        self.features: dict[str, tuple] = {}  # fact id -> rule features (ingest.py), derived from content only

    @property
    def conn(self) -> sqlite3.Connection:
        """The connection, reopened if the engine closed this store (idle eviction) while a request still
        held it."""
        with self.lock:
            if self._conn is None:
                conn = sqlite3.connect(str(self.path), check_same_thread=False, timeout=60, isolation_level=None)
                conn.execute("PRAGMA journal_mode=WAL")
                conn.execute("PRAGMA synchronous=NORMAL")
                conn.execute("PRAGMA busy_timeout=60000")
                self._conn = conn
            return self._conn

    def close(self) -> None:
        with self.lock:
            if self._conn is not None:
                self._conn.close()
                self._conn = None

    # -- transactions ---------------------------------------------------------------------------------
    @contextlib.contextmanager
    def write(self):
        """An IMMEDIATE transaction (serialises writers across processes) that bumps rev on commit."""
        with self.lock:
            self.conn.execute("BEGIN IMMEDIATE")
            try:
                yield self.conn
                self.conn.execute("UPDATE meta SET value = CAST(value AS INTEGER) + 1 WHERE key = 'rev'")
                self.conn.execute("COMMIT")
            except BaseException:
                self.conn.execute("ROLLBACK")
                raise

    def rev(self) -> int:
        with self.lock:
            return int(self.conn.execute("SELECT value FROM meta WHERE key='rev'").fetchone()[0])

    @property
    def warm(self) -> bool:
        return self._index is not None

    def is_empty(self) -> bool:
        """No node of any kind (facts, entities) left."""
        with self.lock:
            return self.conn.execute("SELECT 1 FROM nodes LIMIT 1").fetchone() is None

    def compact(self) -> bool:
        """VACUUM the tenant's file (its freed pages back to the disk). False when another connection is using
        it (a sibling server process): it is left as it is, still correct."""
        with self.lock:
            try:
                self.conn.execute("VACUUM")
            except sqlite3.OperationalError:
                return False
        return True

    def drop_snapshot(self) -> None:
        """Let go of the in-memory snapshot (the next read rebuilds it from SQLite). After a forget, the snapshot
        describes memories that no longer exist and nothing extends it: kept, it pinned a forgotten tenant's facts
        and matrices in RAM until the tenant was evicted (up to `max_open_tenants` of them: cortex-mock's RSS grew
        1:1 with the namespaces a LongMemEval S run had already released)."""
        with self.lock:
            self._index = None

    def install(self, base: TenantIndex, delta: IndexDelta) -> TenantIndex | None:
        """After a commit of our own on top of `base` (rev base.rev + 1): extend instead of rebuilding. Returns
        the new snapshot, or None when the next read rebuilds from SQLite (another writer came between, or the
        extension failed half-way: the shared containers may hold part of it, so the chain is dropped)."""
        with self.lock:
            if self._index is base and self.rev() == base.rev + 1:
                try:
                    self._index = base.extended(delta, base.rev + 1)
                except BaseException:
                    self._index = None
                    raise
                return self._index
            return None

    # -- index ------------------------------------------------------------------------------------------
    def index(self, embedder) -> TenantIndex:
        """The current snapshot, rebuilt when another writer (or this one) changed the tenant."""
        with self.lock:
            rev = self.rev()
            if self._index is None or self._index.rev != rev:
                self._index = self._build(rev, embedder)
                self.index_builds += 1
            idx = self._index
        if self.shared is not None and not idx._shared and time.time() - idx.built_at >= self.share_after_s:
            self._share(idx)
        return idx

    def _share(self, idx: TenantIndex) -> None:
        """Swap the snapshot's embedding matrices for shared file-mapped copies with the same bytes. Outside
        the store lock (hashing 15 MB takes ~10 ms); one thread at a time, the others keep searching the
        private copies meanwhile. A concurrent search reads either copy: both give the same answer."""
        if not self._share_lock.acquire(blocking=False):
            return
        try:
            if not idx._shared:
                idx.emb = self.shared.share("emb", idx.emb)  # type: ignore[union-attr]
                idx.q_emb = self.shared.share("qemb", idx.q_emb)  # type: ignore[union-attr]
                idx._shared = True
        finally:
            self._share_lock.release()

    def _build(self, rev: int, embedder) -> TenantIndex:
        c = self.conn
        dim, model = embedder.dim, embedder.name
        idx = TenantIndex(rev=rev, built_at=time.time())
        rows = c.execute(
            "SELECT id, content, source, confidence, session_id, speaker, fact_type, occurred_at, attr_key, attr_value,"
            " superseded_by, metadata, tokens, norm, created_at, emb, emb_model, n_tokens FROM nodes"
            " WHERE type='FACT' ORDER BY rowid").fetchall()
        vecs: list[np.ndarray | None] = []
        for r in rows:
            occ = parse_datetime(r[7])
            f = Fact(id=r[0], content=r[1], source=r[2], confidence=r[3], session_id=r[4], speaker=r[5],
                     fact_type=r[6] or "fact", occurred_at=occ, occurred_iso=r[7], attr_key=r[8], attr_value=r[9],
                     superseded_by=r[10], metadata=json.loads(r[11] or "{}"), tokens=(r[12] or "").split(),
                     norm=r[13], created_at=r[14], n_tokens=r[17])
            idx.fact_pos[f.id] = len(idx.facts)
            idx.facts.append(f)
            idx.norm_pos.setdefault(f.norm, len(idx.facts) - 1)
            vecs.append(_vec(r[15], dim) if r[16] == model else None)
        missing = [i for i, v in enumerate(vecs) if v is None]
        if missing:  # written by another embedder (or never embedded): re-embed once and store
            new = embedder.encode([idx.facts[i].content for i in missing])
            self._store_embeddings("nodes", [(idx.facts[i].id, new[j]) for j, i in enumerate(missing)], model)
            for j, i in enumerate(missing):
                vecs[i] = new[j]
        idx.emb = np.stack(vecs).astype(np.float32) if vecs else np.zeros((0, dim), np.float32)
        # questions
        qrows = c.execute("SELECT id, fact_id, text, emb, emb_model FROM questions ORDER BY id").fetchall()
        qv: list[np.ndarray | None] = []
        owners: list[int] = []
        for qid, fid, text, blob, qmodel in qrows:
            pos = idx.fact_pos.get(fid)
            if pos is None:
                continue
            owners.append(pos)
            idx.q_text.append(text)
            qv.append(_vec(blob, dim) if qmodel == model else None)
            if qv[-1] is None:
                qv[-1] = (qid, text)  # type: ignore[assignment]
        pending = [(i, v) for i, v in enumerate(qv) if isinstance(v, tuple)]
        if pending:
            new = embedder.encode([t for _, (_, t) in pending])
            self._store_embeddings("questions", [(qid, new[j]) for j, (_, (qid, _)) in enumerate(pending)], model)
            for j, (i, _) in enumerate(pending):
                qv[i] = new[j]
        idx.q_emb = np.stack(qv).astype(np.float32) if qv else np.zeros((0, dim), np.float32)
        idx.q_owner = np.asarray(owners, dtype=np.int64)
        # BM25 postings
        tf_maps: dict[str, dict[int, int]] = {}
        lens = np.zeros(len(idx.facts), dtype=np.float64)
        for i, f in enumerate(idx.facts):
            lens[i] = len(f.tokens)
            for t in f.tokens:
                d = tf_maps.setdefault(t, {})
                d[i] = d.get(i, 0) + 1
        idx.postings = {t: (np.fromiter(d.keys(), np.int64, len(d)), np.fromiter(d.values(), np.float64, len(d)))
                        for t, d in tf_maps.items()}
        idx.doc_len = lens
        # entities and MENTIONS
        for eid, name, norm, meta in c.execute(
                "SELECT id, content, norm, metadata FROM nodes WHERE type='ENTITY' ORDER BY rowid"):
            m = json.loads(meta or "{}")
            idx.entity_by_key[norm] = len(idx.entities)
            idx.entity_by_id[eid] = len(idx.entities)
            idx.entities.append(EntityRow(eid, name, norm, m.get("entity_type", "named"), m.get("aliases", [])))
        mf, me, mv = [], [], []
        for src, dst, vis in c.execute("SELECT src, dst, visible_at FROM edges WHERE type='MENTIONS'"):
            fp, ep = idx.fact_pos.get(src), idx.entity_by_id.get(dst)
            if fp is not None and ep is not None:
                mf.append(fp)
                me.append(ep)
                mv.append(vis)
        idx.m_fact = np.asarray(mf, dtype=np.int64)
        idx.m_ent = np.asarray(me, dtype=np.int64)
        idx.m_visible = np.asarray(mv, dtype=np.float64)
        return idx

    def _store_embeddings(self, table: str, items: list[tuple[Any, np.ndarray]], model: str) -> None:
        # Cache write only: does not change what a search returns, so rev is not bumped.
        rows = [(np.asarray(v, np.float32).tobytes(), model, k) for k, v in items]
        if self.conn.in_transaction:  # called while building the index inside a writer's transaction
            self.conn.executemany(f"UPDATE {table} SET emb=?, emb_model=? WHERE id=?", rows)
            return
        self.conn.execute("BEGIN IMMEDIATE")
        try:
            self.conn.executemany(f"UPDATE {table} SET emb=?, emb_model=? WHERE id=?", rows)
            self.conn.execute("COMMIT")
        except BaseException:
            self.conn.execute("ROLLBACK")
            raise

    # -- simple reads ---------------------------------------------------------------------------------
    def counts(self, now: float, user_id: str | None = None) -> dict[str, Any]:
        """Nodes by type, visible edges by type, edges still settling, sessions. With `user_id`: that user's
        FACT nodes, the ENTITY nodes they mention, and the edges with one of those facts at an end."""
        with self.lock:
            c = self.conn
            if user_id is None:
                nodes = dict(c.execute("SELECT type, COUNT(*) FROM nodes GROUP BY type").fetchall())
                edges = dict(c.execute(
                    "SELECT type, COUNT(*) FROM edges WHERE visible_at <= ? GROUP BY type", (now,)).fetchall())
                pending = c.execute("SELECT COUNT(*) FROM edges WHERE visible_at > ?", (now,)).fetchone()[0]
                sessions = c.execute("SELECT COUNT(DISTINCT session_id) FROM nodes WHERE type='FACT'"
                                     " AND session_id IS NOT NULL").fetchone()[0]
                return {"nodes": nodes, "edges": edges, "pending_edges": pending, "sessions": sessions}
            c.execute("CREATE TEMP TABLE IF NOT EXISTS user_facts (id TEXT PRIMARY KEY)")
            c.execute("DELETE FROM user_facts")
            c.execute("INSERT INTO user_facts SELECT id FROM nodes WHERE type='FACT'"
                      " AND json_extract(metadata, '$.user_id') = ?", (user_id,))
            n_facts = c.execute("SELECT COUNT(*) FROM user_facts").fetchone()[0]
            touching = "(src IN (SELECT id FROM user_facts) OR dst IN (SELECT id FROM user_facts))"
            n_ents = c.execute("SELECT COUNT(DISTINCT dst) FROM edges WHERE type='MENTIONS' AND visible_at <= ?"
                               " AND src IN (SELECT id FROM user_facts)", (now,)).fetchone()[0]
            edges = dict(c.execute(f"SELECT type, COUNT(*) FROM edges WHERE visible_at <= ? AND {touching}"
                                   " GROUP BY type", (now,)).fetchall())
            pending = c.execute(f"SELECT COUNT(*) FROM edges WHERE visible_at > ? AND {touching}",
                                (now,)).fetchone()[0]
            sessions = c.execute("SELECT COUNT(DISTINCT session_id) FROM nodes WHERE session_id IS NOT NULL"
                                 " AND id IN (SELECT id FROM user_facts)").fetchone()[0]
            c.execute("DELETE FROM user_facts")
        nodes = {k: v for k, v in (("FACT", n_facts), ("ENTITY", n_ents)) if v}
        return {"nodes": nodes, "edges": edges, "pending_edges": pending, "sessions": sessions}

    def node_detail(self, node_id: str, now: float) -> dict[str, Any] | None:
        """NodeDetailResponse of `GET /v1/nodes/{id}` (client.ts 2.22.1): the node, its visible edges with the
        node at their other end, and no confidence explanation (the mock does not model one: null)."""
        with self.lock:
            c = self.conn
            row = c.execute("SELECT id, type, content, confidence, metadata, created_at FROM nodes WHERE id=?",
                            (node_id,)).fetchone()
            if row is None:
                return None
            rel = c.execute(
                "SELECT e.type, e.weight, n.id, n.type, n.content, n.confidence, n.metadata, n.created_at"
                " FROM edges e JOIN nodes n ON n.id = CASE WHEN e.src = ? THEN e.dst ELSE e.src END"
                " WHERE (e.src = ? OR e.dst = ?) AND e.visible_at <= ? ORDER BY e.id",
                (node_id, node_id, node_id, now)).fetchall()

        def node_out(r) -> dict[str, Any]:
            return {"id": r[0], "type": r[1], "content": r[2], "confidence": float(r[3]),
                    "metadata": json.loads(r[4] or "{}"),
                    "created_at": datetime.fromtimestamp(r[5], UTC).isoformat().replace("+00:00", "Z")}

        return {"node": node_out(row),
                "related": [{"node": node_out(r[2:]), "edge": {"type": r[0], "strength": float(r[1]),
                                                               "reason": None}} for r in rel],
                "confidence_explanation": None}

    def applied_job(self, job_id: str) -> dict | None:
        with self.lock:
            row = self.conn.execute("SELECT result FROM applied_jobs WHERE job_id=?", (job_id,)).fetchone()
        return json.loads(row[0]) if row else None


def forget_session(store: TenantStore, session_id: str) -> int:
    """Delete the session's FACT nodes (see `forget_facts`). Returns the number of facts removed."""
    return forget_facts(store, "session_id=?", (session_id,))["facts"]


def forget_entity(store: TenantStore, name: str) -> int:
    """`DELETE /v1/forget/entity/{name}`: delete the facts that mention the entity (name or alias, any case,
    edges still settling included). Returns the number of facts removed."""
    key = name.strip().lower()
    with store.lock:
        ents = [eid for eid, content, norm, meta in store.conn.execute(
            "SELECT id, content, norm, metadata FROM nodes WHERE type='ENTITY'")
            if key in (content.lower(), norm.lower(),
                       *(a.lower() for a in json.loads(meta or "{}").get("aliases", []) if isinstance(a, str)))]
    if not ents:
        return 0
    marks = ",".join("?" * len(ents))
    return forget_facts(store, f"id IN (SELECT src FROM edges WHERE type='MENTIONS' AND dst IN ({marks}))",
                        tuple(ents))["facts"]


def forget_user(store: TenantStore, user_id: str) -> dict[str, int]:
    return forget_facts(store, "json_extract(metadata, '$.user_id')=?", (user_id,))


def forget_facts(store: TenantStore, where: str, params: tuple) -> dict[str, int]:
    """Delete FACT nodes matching `where`, their edges and questions; un-supersede facts they superseded; drop
    entities left without any MENTIONS edge. The matching ids are fixed first, so `where` may refer to the
    edges this deletes."""
    with store.write() as c:
        c.execute("CREATE TEMP TABLE IF NOT EXISTS doomed (id TEXT PRIMARY KEY)")
        c.execute("DELETE FROM doomed")
        c.execute(f"INSERT INTO doomed SELECT id FROM nodes WHERE type='FACT' AND {where}", params)
        sub = "SELECT id FROM doomed"
        n = c.execute("SELECT COUNT(*) FROM doomed").fetchone()[0]
        c.execute(f"UPDATE nodes SET superseded_by=NULL WHERE superseded_by IN ({sub})")
        edges = c.execute(f"DELETE FROM edges WHERE src IN ({sub}) OR dst IN ({sub})").rowcount
        c.execute(f"DELETE FROM questions WHERE fact_id IN ({sub})")
        c.execute(f"DELETE FROM nodes WHERE id IN ({sub})")
        ents = c.execute("DELETE FROM nodes WHERE type='ENTITY' AND id NOT IN "
                         "(SELECT dst FROM edges WHERE type='MENTIONS')").rowcount
        c.execute("DELETE FROM doomed")
    if n or ents:
        store.drop_snapshot()
    return {"facts": int(n), "edges": int(edges), "entities": int(ents)}
