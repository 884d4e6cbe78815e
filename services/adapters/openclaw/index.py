"""The derived search index of one OpenClaw workspace per namespace: SQLite (schema of OpenClaw's
src/memory/memory-schema.ts) with an FTS5 table, plus an in-memory numpy matrix of the chunk embeddings.

One SQLite database per backend process (a file under the data dir, or in memory); every namespace gets its
own set of the schema's tables, prefixed `ns<id>_`, so BM25 statistics and Reset are per namespace, as each
OpenClaw agent has its own index. Differences from upstream, on purpose:
- `chunks.embedding` holds float32 bytes, not a JSON array (same values; JSON would be ~10× larger);
- `chunks.evidence` (JSON list of message ids) is an added column: the rig's evidence mapping;
- the embedding cache is the rig's shared content-hash cache (services/common/embeddings.py), not a per-index
  `embedding_cache` table;
- vector search is OpenClaw's in-process path (no sqlite-vec): cosine over every chunk of the model, here one
  vectorised matrix product over a matrix kept per namespace.

Writes are two-phase so an ingest is atomic: `plan_sync` reads and chunks (no mutation), the caller embeds the
new chunk texts, `apply` writes the whole plan in one transaction and swaps the in-memory state.
"""

from __future__ import annotations

import json
import sqlite3
import threading
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from services.adapters.openclaw.chunker import chunk_markdown, chunk_markdown_v5
from services.adapters.openclaw.hybrid import KeywordHit, VectorHit, mmr_tokens
from services.adapters.openclaw.jsstr import sha256_hex, truncate_utf16_safe
from services.adapters.openclaw.mmr_matrix import TokenVocab

META_KEY = "memory_index_meta_v1"


@dataclass(frozen=True)
class FileInput:
    """One workspace file to index: its text, mtime (epoch ms) and the evidence ids of each line (1-based)."""

    path: str
    content: str
    mtime_ms: int
    line_evidence: tuple[tuple[str, ...], ...] = ()
    source: str = "memory"

    @property
    def hash(self) -> str:
        return sha256_hex(self.content)


@dataclass
class ChunkRow:
    id: str
    path: str
    source: str
    start_line: int
    end_line: int
    hash: str
    text: str
    evidence: tuple[str, ...]


@dataclass
class SyncPlan:
    namespace: str
    model: str
    files_upsert: list[FileInput] = field(default_factory=list)
    files_delete: list[str] = field(default_factory=list)
    files_reindex: list[str] = field(default_factory=list)  # upserted paths that were indexed before
    new_chunks: list[ChunkRow] = field(default_factory=list)
    vectors: np.ndarray | None = None  # filled by the caller: one row per new chunk (None in FTS-only mode)

    @property
    def empty(self) -> bool:
        return not self.files_upsert and not self.files_delete


@dataclass
class NsMatrix:
    """Everything vector search needs for one namespace, kept in memory (rebuilt after each applied sync)."""

    ids: list[str]
    rows: list[ChunkRow]
    matrix: np.ndarray  # (n, dim) float32 unit rows
    by_id: dict[str, ChunkRow] = field(default_factory=dict)  # built once per rebuild, not per search
    # MMR token ids (TokenVocab) of each chunk's snippet, computed at index time (not per query) and reused across
    # rebuilds; int32 arrays, ~0.4 kB a chunk (Python sets would take ~4 kB).
    mmr_tokens: dict[str, np.ndarray] = field(default_factory=dict)
    # path -> the file's first chunk (by start line, end line, id): the row a filename match returns.
    first_chunk: dict[str, ChunkRow] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not self.by_id:
            self.by_id = {r.id: r for r in self.rows}


def chunk_id(source: str, path: str, start: int, end: int, chunk_hash: str, model: str) -> str:
    """sha256(`${source}:${path}:${startLine}:${endLine}:${chunk.hash}:${model}`) (manager-sync-ops.ts)."""
    return sha256_hex(f"{source}:{path}:{start}:{end}:{chunk_hash}:{model}")


def is_memory_source_path(path: str) -> bool:
    """The files 2026.9.6 indexes from a workspace (internal-xwKaATp-.mjs `listMemoryFiles`): the root MEMORY.md
    and USER.md, and every `.md` file under memory/ at any depth (not memory/.openclaw-repair/); a document the rig
    writes elsewhere (e.g. notes/x.md) is not part of OpenClaw's memory."""
    p = path.replace("\\", "/")
    if p in ("MEMORY.md", "USER.md"):
        return True
    return p.startswith("memory/") and p.endswith(".md") and not p.startswith("memory/.openclaw-repair/")


def chunk_evidence(line_evidence: tuple[tuple[str, ...], ...], start: int, end: int) -> tuple[str, ...]:
    seen: dict[str, None] = {}
    for ln in range(start, end + 1):
        if 1 <= ln <= len(line_evidence):
            for e in line_evidence[ln - 1]:
                seen.setdefault(e, None)
    return tuple(seen)


class IndexStore:
    def __init__(self, path: str | Path | None = None, chunk_tokens: int = 400, overlap_tokens: int = 80,
                 fts_tokenizer: str = "unicode61", snippet_max_chars: int = 700, chunker: str = "v1",
                 per_entry_paths: tuple[str, ...] = (), mmr_tokenizer: str = "ascii+cjk",
                 memory_roots_only: bool = False):
        self.path = str(path) if path else ":memory:"
        if path:
            Path(path).parent.mkdir(parents=True, exist_ok=True)
        self._conn = sqlite3.connect(self.path, check_same_thread=False, isolation_level=None)
        self._conn.execute("PRAGMA journal_mode=WAL" if path else "PRAGMA journal_mode=MEMORY")
        self._conn.execute("PRAGMA synchronous=NORMAL")
        self._conn.execute("CREATE TABLE IF NOT EXISTS namespaces (id INTEGER PRIMARY KEY, name TEXT UNIQUE NOT NULL)")
        self._lock = threading.RLock()
        self.chunk_tokens = chunk_tokens
        self.overlap_tokens = overlap_tokens
        self.fts_tokenizer = fts_tokenizer
        self.snippet_max_chars = snippet_max_chars
        if chunker not in ("v1", "v5"):
            raise ValueError(f"unknown chunker {chunker!r}")
        self.chunker = chunker  # "v1": early chunkMarkdown; "v5": 2026.9.6 (per-entry MEMORY.md/USER.md)
        self.per_entry_paths = tuple(per_entry_paths)
        self.mmr_tokenizer = mmr_tokenizer
        self.memory_roots_only = memory_roots_only
        self.vocab = TokenVocab()
        self._matrices: dict[str, NsMatrix] = {}
        self._dims: dict[str, int] = {}
        self._mtimes: dict[str, dict[str, int]] = {}  # namespace → path → mtime (ms), refreshed on apply

    # ------------------------------------------------------------------ schema
    def _prefix(self, namespace: str, create: bool) -> str | None:
        with self._lock:
            row = self._conn.execute("SELECT id FROM namespaces WHERE name=?", (namespace,)).fetchone()
            if row is None:
                if not create:
                    return None
                cur = self._conn.execute("INSERT INTO namespaces(name) VALUES (?)", (namespace,))
                nid = cur.lastrowid
                self._create_tables(f"ns{nid}_")
                return f"ns{nid}_"
            return f"ns{row[0]}_"

    def _create_tables(self, p: str) -> None:
        # ensureMemoryIndexSchema() with a per-namespace prefix (+ the evidence column, float32 embedding bytes).
        c = self._conn
        c.execute(f"CREATE TABLE IF NOT EXISTS {p}meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)")
        c.execute(f"CREATE TABLE IF NOT EXISTS {p}files (path TEXT PRIMARY KEY, source TEXT NOT NULL DEFAULT 'memory',"
                  " hash TEXT NOT NULL, mtime INTEGER NOT NULL, size INTEGER NOT NULL)")
        c.execute(f"CREATE TABLE IF NOT EXISTS {p}chunks (id TEXT PRIMARY KEY, path TEXT NOT NULL,"
                  " source TEXT NOT NULL DEFAULT 'memory', start_line INTEGER NOT NULL, end_line INTEGER NOT NULL,"
                  " hash TEXT NOT NULL, model TEXT NOT NULL, dims INTEGER, text TEXT NOT NULL, embedding BLOB,"
                  " updated_at INTEGER NOT NULL, evidence TEXT NOT NULL DEFAULT '[]')")
        c.execute(f"CREATE INDEX IF NOT EXISTS {p}idx_chunks_path ON {p}chunks(path)")
        c.execute(f"CREATE INDEX IF NOT EXISTS {p}idx_chunks_source ON {p}chunks(source)")
        c.execute(f"CREATE VIRTUAL TABLE IF NOT EXISTS {p}chunks_fts USING fts5(text, id UNINDEXED, path UNINDEXED,"
                  f" source UNINDEXED, model UNINDEXED, start_line UNINDEXED, end_line UNINDEXED,"
                  f" tokenize='{self.fts_tokenizer}')")
        # 2026.9.6 indexes file paths separately (memory-schema-CkxujvZk.mjs ensureMemoryPathFtsSchema: one row
        # per source file, `path` indexed, same tokenizer); filename search runs on it.
        c.execute(f"CREATE VIRTUAL TABLE IF NOT EXISTS {p}paths_fts USING fts5(path, source UNINDEXED,"
                  f" tokenize='{self.fts_tokenizer}')")

    def drop_namespace(self, namespace: str) -> int:
        with self._lock:
            p = self._prefix(namespace, create=False)
            self._matrices.pop(namespace, None)
            self._dims.pop(namespace, None)
            self._mtimes.pop(namespace, None)
            if p is None:
                return 0
            n = self._conn.execute(f"SELECT COUNT(*) FROM {p}chunks").fetchone()[0]
            self._conn.execute("BEGIN")
            for t in ("chunks_fts", "paths_fts", "chunks", "files", "meta"):
                self._conn.execute(f"DROP TABLE IF EXISTS {p}{t}")
            self._conn.execute("DELETE FROM namespaces WHERE name=?", (namespace,))
            self._conn.execute("COMMIT")
            return n

    # ------------------------------------------------------------------ sync
    def plan_sync(self, namespace: str, files: list[FileInput], model: str) -> SyncPlan:
        """Delta by hash: files whose hash is unchanged are skipped; changed files are re-chunked."""
        plan = SyncPlan(namespace, model)
        with self._lock:
            p = self._prefix(namespace, create=False)
            have = {} if p is None else dict(self._conn.execute(f"SELECT path, hash FROM {p}files").fetchall())
        if self.memory_roots_only:
            files = [f for f in files if is_memory_source_path(f.path)]
        wanted = {f.path for f in files}
        seen_ids: set[str] = set()
        for f in files:
            if have.get(f.path) == f.hash:
                continue
            plan.files_upsert.append(f)
            if f.path in have:
                plan.files_reindex.append(f.path)
            for ch in self._chunk(f):
                cid = chunk_id(f.source, f.path, ch.start_line, ch.end_line, ch.hash, model)
                if cid in seen_ids:  # the overlap quirk can repeat a chunk exactly: same id, stored once
                    continue
                seen_ids.add(cid)
                plan.new_chunks.append(ChunkRow(
                    cid, f.path, f.source,
                    ch.start_line, ch.end_line, ch.hash, ch.text, chunk_evidence(f.line_evidence, ch.start_line,
                                                                                  ch.end_line)))
        plan.files_delete = sorted(set(have) - wanted)
        return plan

    def _chunk(self, f: FileInput):
        if self.chunker == "v5":
            # prepareMemoryIndexChunks: perEntry for memory-source MEMORY.md / USER.md at the workspace root.
            per_entry = f.source == "memory" and f.path.replace("\\", "/") in self.per_entry_paths
            return chunk_markdown_v5(f.content, self.chunk_tokens, self.overlap_tokens, per_entry)
        return chunk_markdown(f.content, self.chunk_tokens, self.overlap_tokens)

    def apply(self, plan: SyncPlan, now_ms: int) -> None:
        """Write the plan in one transaction, then rebuild the namespace's vector matrix."""
        if plan.empty:
            return
        if plan.vectors is not None and len(plan.vectors) != len(plan.new_chunks):
            raise ValueError("apply: one vector per new chunk is required")
        with self._lock:
            p = self._prefix(plan.namespace, create=True)
            c = self._conn
            c.execute("BEGIN")
            try:
                for path in plan.files_reindex + plan.files_delete:
                    # FTS rows share the chunk's rowid, so a path's FTS rows are found through the chunks index.
                    c.execute(f"DELETE FROM {p}chunks_fts WHERE rowid IN (SELECT rowid FROM {p}chunks WHERE path=?)",
                              (path,))
                    c.execute(f"DELETE FROM {p}chunks WHERE path=?", (path,))
                    c.execute(f"DELETE FROM {p}files WHERE path=?", (path,))
                    c.execute(f"DELETE FROM {p}paths_fts WHERE path=?", (path,))
                dims = int(plan.vectors.shape[1]) if plan.vectors is not None and len(plan.vectors) else None
                fts_rows = []
                for i, ch in enumerate(plan.new_chunks):
                    emb = plan.vectors[i].astype(np.float32).tobytes() if plan.vectors is not None else None
                    cur = c.execute(f"INSERT INTO {p}chunks VALUES (?,?,?,?,?,?,?,?,?,?,?,?)",
                                    (ch.id, ch.path, ch.source, ch.start_line, ch.end_line, ch.hash, plan.model, dims,
                                     ch.text, emb, now_ms, json.dumps(list(ch.evidence))))
                    fts_rows.append((cur.lastrowid, ch.text, ch.id, ch.path, ch.source, plan.model, ch.start_line,
                                     ch.end_line))
                c.executemany(f"INSERT INTO {p}chunks_fts(rowid, text, id, path, source, model, start_line, end_line)"
                              " VALUES (?,?,?,?,?,?,?,?)", fts_rows)
                c.executemany(f"INSERT INTO {p}files(path, source, hash, mtime, size) VALUES (?,?,?,?,?)",
                              [(f.path, f.source, f.hash, f.mtime_ms, len(f.content.encode('utf-8', 'replace')))
                               for f in plan.files_upsert])
                c.executemany(f"INSERT INTO {p}paths_fts(path, source) VALUES (?,?)",
                              [(f.path, f.source) for f in plan.files_upsert])
                meta = {"model": plan.model, "chunkTokens": self.chunk_tokens, "chunkOverlap": self.overlap_tokens,
                        "vectorDims": dims or self._dims.get(plan.namespace, 0), "ftsTokenizer": self.fts_tokenizer}
                c.execute(f"INSERT OR REPLACE INTO {p}meta(key, value) VALUES (?, ?)", (META_KEY, json.dumps(meta)))
                c.execute("COMMIT")
            except BaseException:
                c.execute("ROLLBACK")
                raise
            self._rebuild_matrix(plan.namespace, p, plan.model)

    def _rebuild_matrix(self, namespace: str, p: str, model: str) -> None:
        cur = self._conn.execute(f"SELECT id, path, source, start_line, end_line, hash, text, evidence, embedding"
                                 f" FROM {p}chunks WHERE model=? ORDER BY rowid", (model,))
        ids, rows, vecs = [], [], []
        for cid, path, source, s, e, h, text, ev, emb in cur:
            ids.append(cid)
            rows.append(ChunkRow(cid, path, source, s, e, h, text, tuple(json.loads(ev))))
            if emb is not None:
                vecs.append(np.frombuffer(emb, dtype=np.float32))
        if vecs and len(vecs) == len(rows):
            mat = np.ascontiguousarray(np.stack(vecs))
        else:
            mat = np.zeros((len(rows), 0), dtype=np.float32)
        old = self._matrices.get(namespace)
        old_tokens = old.mmr_tokens if old is not None else {}
        tokens = {}
        first: dict[str, ChunkRow] = {}
        for r in rows:
            t = old_tokens.get(r.id)
            tokens[r.id] = t if t is not None else self.vocab.ids(
                mmr_tokens(truncate_utf16_safe(r.text, self.snippet_max_chars), self.mmr_tokenizer))
            f = first.get(r.path)
            if f is None or (r.start_line, r.end_line, r.id) < (f.start_line, f.end_line, f.id):
                first[r.path] = r
        self._matrices[namespace] = NsMatrix(ids, rows, mat, mmr_tokens=tokens, first_chunk=first)
        self._mtimes[namespace] = dict(self._conn.execute(f"SELECT path, mtime FROM {p}files").fetchall())
        if mat.shape[1]:
            self._dims[namespace] = mat.shape[1]

    # ------------------------------------------------------------------ search
    def search_vector(self, namespace: str, query_vec: np.ndarray, limit: int) -> list[VectorHit]:
        """Cosine over every chunk of the namespace, best `limit` (OpenClaw's fallback without sqlite-vec).
        Rows are unit vectors, so cosine is a dot product; score = 1 - cosine distance = cosine."""
        m = self._matrices.get(namespace)
        if m is None or not m.rows or m.matrix.shape[1] == 0 or limit <= 0:
            return []
        q = np.asarray(query_vec, dtype=np.float32).reshape(-1)
        if not np.any(q):
            return []  # an all-zero query vector → no vector results
        n = np.linalg.norm(q)
        q = q / n
        scores = m.matrix @ q
        k = min(limit, len(scores))
        if k < len(scores):
            top = np.argpartition(-scores, k - 1)[:k]
        else:
            top = np.arange(len(scores))
        top = top[np.lexsort((top, -scores[top]))]  # score desc, then index order (stable)
        out = []
        for i in top:
            r = m.rows[int(i)]
            out.append(VectorHit(r.id, r.path, r.start_line, r.end_line,
                                 truncate_utf16_safe(r.text, self.snippet_max_chars), float(scores[i]), r.source))
        return out

    def _fts_rows(self, namespace: str, sql_for_prefix, args: list) -> list[tuple]:
        """Run one FTS5 MATCH query against the namespace's tables (`sql_for_prefix(prefix)` builds it) under the
        store lock; an unknown namespace or a query FTS5 rejects yields no rows."""
        with self._lock:
            p = self._prefix(namespace, create=False)
            if p is None:
                return []
            try:
                return self._conn.execute(sql_for_prefix(p), args).fetchall()
            except sqlite3.OperationalError:
                return []

    def search_keyword(self, namespace: str, fts_query: str | None, limit: int, model: str | None,
                       rank_to_score) -> list[KeywordHit]:
        """searchKeyword: MATCH the built query, ORDER BY bm25 ASC LIMIT; textScore = bm25RankToScore(rank).
        The model clause is omitted in FTS-only mode (model None). A query FTS5 rejects yields no hits."""
        if not fts_query or limit <= 0:
            return []
        model_clause = "" if model is None else " AND model = ?"
        args = [fts_query] + ([] if model is None else [model]) + [limit]
        rows = self._fts_rows(namespace, lambda p: (
            f"SELECT id, path, source, start_line, end_line, text, bm25({p}chunks_fts) AS rank"
            f" FROM {p}chunks_fts WHERE {p}chunks_fts MATCH ?{model_clause} ORDER BY rank ASC LIMIT ?"), args)
        return [KeywordHit(cid, path, int(s), int(e), truncate_utf16_safe(text, self.snippet_max_chars),
                           rank_to_score(float(rank)), source)
                for cid, path, source, s, e, text, rank in rows]

    def search_body_rows(self, namespace: str, fts_query: str | None, limit: int
                         ) -> list[tuple[str, str, str, int, int, str, float]]:
        """2026.9.6 body keyword search (manager-search-Fk8GHOOd.mjs `searchKeyword`): MATCH, ORDER BY rank
        ASC, LIMIT, with no model clause; rows carry the chunk's full text (the lexical boost reads it).
        Returns (id, path, source, start_line, end_line, text, rank); a query FTS5 rejects yields no rows."""
        if not fts_query or limit <= 0:
            return []
        rows = self._fts_rows(namespace, lambda p: (
            f"SELECT id, path, source, start_line, end_line, text, bm25({p}chunks_fts) AS rank"
            f" FROM {p}chunks_fts WHERE {p}chunks_fts MATCH ? ORDER BY rank ASC LIMIT ?"), [fts_query, limit])
        return [(cid, path, source, int(s), int(e), text, float(rank)) for cid, path, source, s, e, text, rank in rows]

    def search_path_rows(self, namespace: str, fts_query: str | None) -> list[tuple[str, str, float]]:
        """Every file whose path matches the query in the path FTS index, as (path, source, rank), ordered by
        rank ASC, path ASC, source ASC (searchPathKeyword's `retained_paths`). Files without a live chunk are
        left out, as the upstream EXISTS clause does."""
        if not fts_query:
            return []
        rows = self._fts_rows(namespace, lambda p: (
            f"SELECT path, source, bm25({p}paths_fts) AS rank FROM {p}paths_fts WHERE {p}paths_fts MATCH ?"
            " ORDER BY rank ASC, path ASC, source ASC"), [fts_query])
        first = self.first_chunks(namespace)
        return [(path, source, float(rank)) for path, source, rank in rows if path in first]

    def first_chunks(self, namespace: str) -> dict[str, ChunkRow]:
        m = self._matrices.get(namespace)
        return m.first_chunk if m else {}

    def mmr_token_ids(self, namespace: str) -> dict[str, np.ndarray]:
        m = self._matrices.get(namespace)
        return m.mmr_tokens if m else {}

    # ------------------------------------------------------------------ introspection
    def chunk_rows(self, namespace: str) -> dict[str, ChunkRow]:
        m = self._matrices.get(namespace)
        return m.by_id if m else {}

    def file_mtimes(self, namespace: str) -> dict[str, int]:
        return self._mtimes.get(namespace, {})

    def counts(self, namespace: str) -> dict[str, int]:
        with self._lock:
            p = self._prefix(namespace, create=False)
            if p is None:
                return {"files": 0, "chunks": 0}
            f = self._conn.execute(f"SELECT COUNT(*) FROM {p}files").fetchone()[0]
            c = self._conn.execute(f"SELECT COUNT(*) FROM {p}chunks").fetchone()[0]
            return {"files": int(f), "chunks": int(c)}

    def disk_bytes(self) -> int:
        if self.path == ":memory:":
            return 0
        return sum(Path(self.path + s).stat().st_size for s in ("", "-wal", "-shm") if Path(self.path + s).exists())

    def close(self) -> None:
        with self._lock:
            self._conn.close()
