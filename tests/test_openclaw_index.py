"""The OpenClaw port's per-namespace index (services/adapters/openclaw/index.py) by hand: line evidence of a
chunk, the cosine search over hand-made unit vectors (normalisation, the top-k cut at every limit, ties by
index order, FTS-only and mixed namespaces), the first chunk of a file, the metadata's vector size, atomic
writes that roll back, reads that never create a namespace, dropping a namespace, and the constructor's
defaults and storage."""

from __future__ import annotations

import dataclasses
import json
import sqlite3

import numpy as np
import pytest

from services.adapters.openclaw.index import (
    META_KEY,
    ChunkRow,
    FileInput,
    IndexStore,
    SyncPlan,
    chunk_evidence,
)


def dyn(s: str) -> str:
    return "".join([s[:1], s[1:]])  # the same text as a new string object (read from a file, not a literal)


LE = (("e1",), ("e2", "e1"), (), ("e3",))  # evidence ids of lines 1-4


@pytest.mark.parametrize("start, end, out", [
    (2, 4, ("e2", "e1", "e3")),  # lines 2..4, first appearance order, no repeats
    (4, 5, ("e3",)),  # line 5 does not exist
    (0, 1, ("e1",)),  # nor does line 0
    (1, 1, ("e1",)),
    (3, 3, ()),
])
def test_chunk_evidence(start, end, out):
    assert chunk_evidence(LE, start, end) == out


def _store(tmp_path=None, **kw) -> IndexStore:
    return IndexStore(tmp_path / "idx.sqlite" if tmp_path else None, **kw)


def _sync(store, ns, files, vectors_for=None, model="m", now=1000):
    plan = store.plan_sync(ns, files, model)
    if vectors_for is not None:
        plan.vectors = np.array([vectors_for(c) for c in plan.new_chunks], dtype=np.float32)
    store.apply(plan, now)
    return plan


# one chunk per file (short files): the vector of each file is given by hand
VECS = {"a.md": [1, 0, 0], "b.md": [0.6, 0.8, 0], "c.md": [0, 1, 0], "d.md": [0, 0, 1], "e.md": [0.6, 0.8, 0]}


def _vector_store():
    s = _store()
    files = [FileInput(p, f"text {p}", 1) for p in VECS]
    _sync(s, "ns", files, lambda c: VECS[c.path])
    return s


@pytest.mark.parametrize("limit, out", [
    (1, [("a.md", 1.0)]),
    (2, [("a.md", 1.0), ("b.md", 0.6)]),
    (3, [("a.md", 1.0), ("b.md", 0.6), ("e.md", 0.6)]),  # b and e tie: index (insertion) order
    (4, [("a.md", 1.0), ("b.md", 0.6), ("e.md", 0.6), ("c.md", 0.0)]),
    (5, [("a.md", 1.0), ("b.md", 0.6), ("e.md", 0.6), ("c.md", 0.0), ("d.md", 0.0)]),
    (9, [("a.md", 1.0), ("b.md", 0.6), ("e.md", 0.6), ("c.md", 0.0), ("d.md", 0.0)]),
])
def test_vector_search_top_k(limit, out):
    s = _vector_store()
    # the query (2, 0, 0) is normalised first: cosine with each unit row is its first coordinate
    hits = s.search_vector("ns", np.array([2.0, 0.0, 0.0]), limit)
    assert [(h.path, round(h.vector_score, 6)) for h in hits] == out
    assert all(h.snippet == f"text {h.path}" and h.source == "memory" for h in hits)


def test_vector_search_other_query_and_edges():
    s = _vector_store()
    hits = s.search_vector("ns", [[0.0, 3.0, 4.0]], 2)  # → (0, 0.6, 0.8): d 0.8, b 0.48 / c 0.6 / e 0.48
    assert [(h.path, round(h.vector_score, 6)) for h in hits] == [("d.md", 0.8), ("c.md", 0.6)]
    assert s.search_vector("ns", np.zeros(3), 3) == []  # a zero query vector
    for limit in (0, -1):
        assert s.search_vector("ns", np.array([1.0, 0, 0]), limit) == []
    assert s.search_vector("unknown", np.array([1.0, 0, 0]), 3) == []


def test_one_dimensional_vectors():
    s = _store()
    _sync(s, "ns", [FileInput("p.md", "plus", 1), FileInput("q.md", "minus", 1)],
          lambda c: [1.0] if c.path == "p.md" else [-1.0])
    assert [(h.path, h.vector_score) for h in s.search_vector("ns", np.array([3.0]), 5)] == [("p.md", 1.0), ("q.md", -1.0)]


def _meta(s, ns_id=1):
    return json.loads(s._conn.execute(f"SELECT value FROM ns{ns_id}_meta WHERE key=?", (META_KEY,)).fetchone()[0])


def test_fts_only_and_mixed_namespaces_have_no_vector_search():
    s = _store()
    _sync(s, "ns", [FileInput("a.md", "alpha", 1)])  # no vectors: FTS-only
    assert s.search_vector("ns", np.array([1.0, 0, 0]), 3) == []
    assert _meta(s)["vectorDims"] == 0
    # a second file with a vector: one chunk of two has an embedding, so the namespace stays without vectors
    _sync(s, "ns", [FileInput("a.md", "alpha", 1), FileInput("b.md", "beta", 1)], lambda c: [0.0, 1.0, 0.0])
    assert s.search_vector("ns", np.array([0.0, 1.0, 0]), 3) == []


def test_meta_keeps_the_vector_size_across_a_plan_without_vectors():
    s = _vector_store()  # five chunks of 3 dims
    assert _meta(s)["vectorDims"] == 3
    _sync(s, "ns", [FileInput(p, f"text {p}", 1) for p in list(VECS)[:4]])  # e.md deleted: no new chunk
    assert _meta(s) == {"model": "m", "chunkTokens": 400, "chunkOverlap": 80, "vectorDims": 3,
                        "ftsTokenizer": "unicode61"}
    assert s.counts("ns") == {"files": 4, "chunks": 4}


def test_apply_requires_one_vector_per_new_chunk():
    s = _store()
    for n in (0, 2):
        plan = s.plan_sync("ns", [FileInput("a.md", "alpha", 1)], "m")
        plan.vectors = np.ones((n, 3), dtype=np.float32)
        with pytest.raises(ValueError, match="one vector per new chunk"):
            s.apply(plan, 1)


def test_a_failed_apply_rolls_back_and_the_store_stays_usable():
    s = _store()
    _sync(s, "ns", [FileInput("a.md", "alpha", 1)])
    plan = s.plan_sync("ns", [FileInput("a.md", "alpha", 1), FileInput("b.md", "beta", 1)], "m")
    dup = plan.new_chunks[0]
    plan.new_chunks.append(ChunkRow(dup.id, "c.md", "memory", 1, 1, "h", "gamma", ()))  # same id: INSERT fails
    with pytest.raises(sqlite3.IntegrityError):
        s.apply(plan, 2)
    assert s.counts("ns") == {"files": 1, "chunks": 1}  # nothing of the failed plan
    _sync(s, "ns", [FileInput("a.md", "alpha", 1), FileInput("b.md", "beta", 1)])
    assert s.counts("ns") == {"files": 2, "chunks": 2}


def test_first_chunk_of_a_file_is_its_earliest():
    s = _store(chunk_tokens=8, overlap_tokens=0)  # 32 characters a chunk
    text = "\n".join(f"line {i:02d} " + "x" * 20 for i in range(1, 6))
    _sync(s, "ns", [FileInput("long.md", text, 1)])
    rows = sorted(s.chunk_rows("ns").values(), key=lambda r: r.start_line)
    assert len(rows) == 5 and s.first_chunks("ns")["long.md"] is rows[0] and rows[0].start_line == 1


def _namespaces(s) -> int:
    return s._conn.execute("SELECT COUNT(*) FROM namespaces").fetchone()[0]


def test_reads_and_empty_plans_never_create_a_namespace():
    s = _store()
    assert s.counts("nope") == {"files": 0, "chunks": 0} and _namespaces(s) == 0
    assert s.search_body_rows("nope", '"x"', 5) == [] and _namespaces(s) == 0
    assert s.search_path_rows("nope", '"x"') == [] and _namespaces(s) == 0
    assert s.plan_sync("nope", [], "m").empty and _namespaces(s) == 0
    s.apply(SyncPlan("nope", "m"), 1)
    assert _namespaces(s) == 0
    assert s.drop_namespace("nope") == 0 and _namespaces(s) == 0


def test_vector_size_survives_a_namespace_that_lost_its_vectors():
    s = _vector_store()  # 3 dims
    _sync(s, "ns", [FileInput(p, f"text {p}", 1) for p in VECS] + [FileInput("f.md", "no vector", 1)])  # mixed
    _sync(s, "ns", [FileInput(p, f"text {p}", 1) for p in VECS])  # f.md deleted, nothing new
    assert _meta(s)["vectorDims"] == 3


def test_sync_plan_empty():
    assert SyncPlan("n", "m").empty
    assert not SyncPlan("n", "m", files_delete=["x.md"]).empty
    assert not SyncPlan("n", "m", files_upsert=[FileInput("a.md", "a", 1)]).empty


def test_drop_namespace_removes_its_tables():
    s = _store()
    _sync(s, "ns", [FileInput("a.md", "alpha", 1), FileInput("b.md", "beta", 1)])
    assert s.drop_namespace("ns") == 2
    assert _namespaces(s) == 0
    assert s._conn.execute("SELECT COUNT(*) FROM sqlite_master WHERE name LIKE 'ns1_%'").fetchone()[0] == 0
    _sync(s, "ns", [FileInput("c.md", "gamma", 1)])  # the same name again starts empty
    assert s.counts("ns") == {"files": 1, "chunks": 1}


@pytest.mark.parametrize("limit", [0, -1])
def test_keyword_reads_with_no_room(limit):
    s = _store()
    _sync(s, "ns", [FileInput("a.md", "alpha", 1), FileInput("b.md", "alpha beta", 1)])
    assert s.search_body_rows("ns", '"alpha"', limit) == []
    assert s.search_keyword("ns", '"alpha"', limit, "m", lambda r: -r) == []
    assert len(s.search_body_rows("ns", '"alpha"', 1)) == 1 and len(s.search_keyword("ns", '"alpha"', 1, None, abs)) == 1
    assert s.search_body_rows("ns", '"unterminated', 5) == []  # FTS5 rejects it: no rows, no error


def test_v5_chunker_per_entry_only_for_memory_source_root_files():
    text = "- alpha fact\n- beta fact"
    s = _store(chunker=dyn("v5"), per_entry_paths=("MEMORY.md",))
    _sync(s, "ns", [FileInput("MEMORY.md", text, 1, source=dyn("memory"))])
    assert sorted((r.start_line, r.end_line) for r in s.chunk_rows("ns").values()) == [(1, 1), (2, 2)]
    s2 = _store(chunker="v5", per_entry_paths=("MEMORY.md",))
    _sync(s2, "ns", [FileInput("MEMORY.md", text, 1, source="sessions")])  # not the memory source: one chunk
    assert sorted((r.start_line, r.end_line) for r in s2.chunk_rows("ns").values()) == [(1, 2)]
    s1 = _store(per_entry_paths=("MEMORY.md",))  # the early chunker has no per-entry mode
    _sync(s1, "ns", [FileInput("MEMORY.md", text, 1)])
    assert sorted((r.start_line, r.end_line) for r in s1.chunk_rows("ns").values()) == [(1, 2)]
    with pytest.raises(ValueError, match="unknown chunker 'v9'"):
        _store(chunker="v9")


def test_constructor_defaults_and_file_storage(tmp_path, monkeypatch):
    s = IndexStore()
    assert (s.chunk_tokens, s.overlap_tokens, s.snippet_max_chars, s.chunker, s.fts_tokenizer, s.memory_roots_only,
            s.per_entry_paths) == (400, 80, 700, "v1", "unicode61", False, ())
    assert s.path == ":memory:" and s.disk_bytes() == 0
    nested = tmp_path / "a" / "b" / "idx.sqlite"
    f = IndexStore(nested)  # missing parents are created
    IndexStore(tmp_path / "a" / "b" / "other.sqlite")  # an existing parent is fine
    assert f._conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    _sync(f, "ns", [FileInput("a.md", "alpha", 1)])
    assert f.disk_bytes() > 0
    monkeypatch.chdir(tmp_path)
    rel = IndexStore("rel/idx.sqlite")  # a relative path sorts after ":memory:"; it is still a file
    _sync(rel, "ns", [FileInput("a.md", "alpha", 1)])
    assert rel.disk_bytes() > 0
    with pytest.raises(dataclasses.FrozenInstanceError):
        FileInput("a.md", "a", 1).path = "b.md"  # type: ignore[misc]
    # by default every file is indexed, not only OpenClaw's memory roots
    _sync(s, "ns", [FileInput("notes/x.md", "xenon", 1)])
    assert s.counts("ns")["files"] == 1


def test_more_chunks_than_small_ints():
    # 300 one-chunk files (above CPython's small-int cache): the vector matrix is built and searched
    s = _store()
    files = [FileInput(f"m{i:03d}.md", f"note {i}", 1) for i in range(300)]
    _sync(s, "ns", files, lambda c: [1.0, 0.0] if c.path == "m299.md" else [0.0, 1.0])
    hits = s.search_vector("ns", np.array([1.0, 0.0]), 300)
    assert len(hits) == 300 and hits[0].path == "m299.md" and hits[0].vector_score == 1.0
