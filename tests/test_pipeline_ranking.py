"""Pipeline tests: each ranking stage that changes what a backend returns, exercised through the real search
path (not the stage's maths alone, which the unit tests cover), so a search path that skips the stage fails.

- OpenClaw (`openclaw-late` preset, pinned by name): temporal decay reorders a dated daily log below an
  evergreen file; MMR moves a near-duplicate below a diverse hit.
- cortex-mock `search.search`: the graph channel brings in a fact only an entity links; the temporal channel
  lifts the in-window fact above a better lexical match (fast mode, where RRF is the final order); RRF scores
  are the normalised reciprocal-rank sums; supersession demotes an outdated fact in the full-mode rerank.

Vectors are hand-set (a fake embedder / a hand-built index), so every score below is computed by hand.
"""

from __future__ import annotations

from datetime import UTC, datetime

import numpy as np
import pytest

from services.adapters.base import BackendContext
from services.adapters.client import InProcessBackendClient
from services.adapters.openclaw.backend import OpenClawBackend
from services.common.types import Document, IngestBatch, RetrieveQuery
from services.cortex_mock import search as cm_search
from services.cortex_mock.snapshot import EntityRow, Fact, TenantIndex
from services.cortex_mock.text import content_tokens, normalise
from tests.fixtures_ranking import REF, MarkerEmbedder

# ------------------------------------------------------------------------------------------------------
# OpenClaw


@pytest.fixture(autouse=True)
def _cache_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("MEMRIG_CACHE_DIR", str(tmp_path / "cache"))


async def _openclaw(docs, vectors) -> tuple[OpenClawBackend, InProcessBackendClient]:
    ctx = BackendContext(embedder_name="hash")
    b = OpenClawBackend({"preset": "openclaw-late"}, ctx)
    b._embedder = MarkerEmbedder(vectors)
    c = InProcessBackendClient(b)
    await c.ingest("ns", IngestBatch(documents=tuple(docs)))
    return b, c


async def test_openclaw_decay_reorders_the_search_results():
    """Dated log (30 days old at REF → multiplier exactly 0.5) with the better vector (cos 1) vs an evergreen
    file with cos 0.8 and the same text score t. Undecayed: 0.7 + 0.3t > 0.56 + 0.3t (dated first). Decayed:
    0.35 + 0.15t < 0.56 + 0.3t (evergreen first), and 0.35 + 0.15t >= minScore 0.35 keeps it in the list."""
    docs = [Document("old", "alpha deploy one", path="memory/2026-01-03.md"),
            Document("ever", "alpha deploy two", path="memory/notes.md")]
    b, c = await _openclaw(docs, {"one": (1.0, 0.0, 0.0), "two": (0.8, 0.6, 0.0)})
    assert b.params["decay_enabled"] and b.params["mmr_enabled"]
    res, _ = await c.retrieve("ns", RetrieveQuery("alpha", top_k=6, reference_time=REF))
    mems = res.memories
    assert [m.attributes["path"] for m in mems] == ["memory/notes.md", "memory/2026-01-03.md"]
    old, ever = mems[1], mems[0]
    assert old.attributes["decay"] == "0.500000" and ever.attributes["decay"] == "1.000000"
    t = old.channel_scores["text"]
    assert ever.channel_scores["text"] == pytest.approx(t) and 0 < t < 1
    assert old.channel_scores["vector"] == pytest.approx(1.0) and ever.channel_scores["vector"] == pytest.approx(0.8)
    assert old.channel_scores["hybrid"] == pytest.approx(0.5 * (0.7 * 1.0 + 0.3 * t))
    assert ever.channel_scores["hybrid"] == pytest.approx(0.7 * 0.8 + 0.3 * t)


async def test_openclaw_mmr_moves_a_near_duplicate_down():
    """A and B are the same text in two evergreen files (score 0.7 + 0.3t, tie broken by path: A first); C is
    different (cos 0.8: 0.56 + 0.3t); D shares no query word (cos 0.1: 0.07) and anchors the min-max range.
    Without MMR: A, B, C. With λ = 0.7 after A: B = 0.7·1 − 0.3·Jaccard(A,B)=1 → 0.4; C = 0.7·relC − 0.3·(1/5)
    with relC = (0.49 + 0.3t)/(0.63 + 0.3t) ≥ 0.778 → ≥ 0.484. So A, C, B; D stays below minScore."""
    docs = [Document("a", "alpha port one", path="memory/a.md"),
            Document("b", "alpha port one", path="memory/b.md"),
            Document("c", "alpha cache two", path="memory/c.md"),
            Document("d", "zulu yankee three", path="memory/d.md")]
    b, c = await _openclaw(docs, {"one": (1.0, 0.0, 0.0), "two": (0.8, 0.6, 0.0),
                                  "three": (0.1, 0.0, float(np.sqrt(0.99)))})
    res, _ = await c.retrieve("ns", RetrieveQuery("alpha", top_k=6, reference_time=REF))
    assert [m.attributes["path"] for m in res.memories] == ["memory/a.md", "memory/c.md", "memory/b.md"]
    # the contract's score is the running minimum; OpenClaw's own score ("hybrid") is not monotonic after MMR
    hy = [m.channel_scores["hybrid"] for m in res.memories]
    assert hy[0] == pytest.approx(hy[2]) and hy[1] < hy[2]
    assert [m.score for m in res.memories] == pytest.approx([hy[0], hy[1], hy[1]])


# ------------------------------------------------------------------------------------------------------
# cortex-mock search pipeline over a hand-built index


def _fact(i: int, content: str, occurred: datetime | None = None, superseded_by: str | None = None) -> Fact:
    return Fact(id=f"f{i}", content=content, source="extraction", confidence=0.9, session_id="s1", speaker="user",
                fact_type="fact", occurred_at=occurred, occurred_iso=occurred.isoformat() if occurred else None,
                attr_key="", attr_value="", superseded_by=superseded_by, metadata={},
                tokens=content_tokens(content), norm=normalise(content), created_at=0.0)


def _index(facts: list[Fact], emb: list[tuple[float, float, float]],
           mentions: list[tuple[int, str]] = ()) -> TenantIndex:
    postings: dict[str, dict[int, int]] = {}
    for i, f in enumerate(facts):
        for t in f.tokens:
            postings.setdefault(t, {})[i] = postings.setdefault(t, {}).get(i, 0) + 1
    names = sorted({e for _, e in mentions})
    ents = [EntityRow(id=f"e-{n}", name=n, key=n, etype="concept", aliases=[]) for n in names]
    return TenantIndex(
        rev=1, facts=facts, fact_pos={f.id: i for i, f in enumerate(facts)},
        emb=np.asarray(emb, dtype=np.float32), q_emb=np.zeros((0, 3), np.float32),
        postings={t: (np.fromiter(d, np.int64), np.fromiter(d.values(), np.float64)) for t, d in postings.items()},
        doc_len=np.asarray([float(len(f.tokens)) for f in facts]),
        entities=ents, entity_by_key={e.key: i for i, e in enumerate(ents)},
        entity_by_id={e.id: i for i, e in enumerate(ents)},
        m_fact=np.asarray([f for f, _ in mentions], np.int64),
        m_ent=np.asarray([names.index(e) for _, e in mentions], np.int64),
        m_visible=np.zeros(len(mentions), np.float64))


Q = np.array([1.0, 0.0, 0.0])
NOW = datetime(2026, 2, 11, 12, tzinfo=UTC)  # a Wednesday: "last week" = Mon 2 Feb .. Mon 9 Feb


def _ids(out) -> list[str]:
    return [r["node_id"] for r in out.results]


def test_cortex_graph_channel_brings_in_an_entity_linked_fact():
    """f0 matches the query lexically and semantically and mentions entity 'orion'; f1 matches nothing (cos 0,
    no shared token) but also mentions 'orion'; f2 is unrelated. Only spreading activation f0 → orion → f1
    puts f1 in any channel, so full mode returns [f0, f1] and a graph-less pipeline [f0]."""
    facts = [_fact(0, "kafka retention setting"), _fact(1, "weekly report owner"), _fact(2, "lunch menu")]
    idx = _index(facts, [(1, 0, 0), (0, 1, 0), (0, 0, 1)], mentions=[(0, "orion"), (1, "orion")])
    out = cm_search.search(idx, Q, cm_search.SearchParams("kafka retention", top_k=5, mode="full", debug=True),
                           now_ts=NOW.timestamp())
    assert _ids(out) == ["f0", "f1"]
    assert out.channels_used == ["bm25", "semantic", "question", "graph"]
    # seed f0 = normalised RRF 2/3; hop 1: 2/3 / deg 1 x 0.5 = 1/3 on orion; hop 2: 1/3 / deg 2 x 0.5 = 1/12 each
    graph = out.debug["channels"]["graph"]["top"]
    assert [(g["node_id"], g["score"]) for g in graph] == [("f0", pytest.approx(1 / 12, abs=1e-6)),
                                                           ("f1", pytest.approx(1 / 12, abs=1e-6))]
    fast = cm_search.search(idx, Q, cm_search.SearchParams("kafka retention", top_k=5, mode="fast"),
                            now_ts=NOW.timestamp())
    assert _ids(fast) == ["f0"]  # no graph in fast mode


def test_cortex_temporal_channel_and_rrf_scores_in_fast_mode():
    """f0 (old, 2025-10-01) and f1 (2026-02-04, inside last week) both say 'deploy api'; f0 also has 'service'
    so it wins BM25, and its vector is closer (cos 1 vs 0.9). Channels bm25 / semantic / question / temporal
    (n = 4 lists). f0: 1/61 + 1/61; f1: 1/62 + 1/62 + 1/61 (rank 1 in temporal; f0's proximity
    exp(-gap/7) is below 0.05). Normalised by 4/61: f1 = (2/62 + 1/61)·61/4 = 0.741935…, f0 = 0.5."""
    facts = [_fact(0, "deploy api service", datetime(2025, 10, 1, tzinfo=UTC)),
             _fact(1, "deploy api", datetime(2026, 2, 4, tzinfo=UTC))]
    idx = _index(facts, [(1, 0, 0), (0.9, float(np.sqrt(1 - 0.81)), 0)])
    q = "deploy api service last week"
    out = cm_search.search(idx, Q, cm_search.SearchParams(q, top_k=5, mode="fast", reference=NOW, debug=True),
                           now_ts=NOW.timestamp())
    assert out.channels_used == ["bm25", "semantic", "question", "temporal"]
    assert [c["node_id"] for c in out.debug["channels"]["bm25"]["top"]] == ["f0", "f1"]
    assert [c["node_id"] for c in out.debug["channels"]["temporal"]["top"]] == ["f1"]
    assert _ids(out) == ["f1", "f0"]
    assert [r["score"] for r in out.results] == pytest.approx([(2 / 62 + 1 / 61) * 61 / 4, 0.5], abs=1e-6)
    # without a time phrase there is no temporal channel: plain RRF over 3 lists puts f0 first
    out2 = cm_search.search(idx, Q, cm_search.SearchParams("deploy api service", top_k=5, mode="fast",
                                                           reference=NOW), now_ts=NOW.timestamp())
    assert _ids(out2) == ["f0", "f1"]
    assert [r["score"] for r in out2.results] == pytest.approx([2 / 3, (2 / 62) * 61 / 3], abs=1e-6)


def test_cortex_supersession_demotes_the_outdated_fact():
    """Same vector for both (cos 1). Query 'cache ttl 300 seconds' (4 content tokens): f0 'cache ttl is 300
    seconds' covers 4/4 → cross-score 0.5·1 + 0.5·1 = 1.0, but f1 superseded it → ×0.5 = 0.5; f1 'cache ttl is
    600 seconds' covers 3/4 → 0.875. Full mode returns f1 first; without demotion f0 would lead."""
    facts = [_fact(0, "cache ttl is 300 seconds", superseded_by="f1"), _fact(1, "cache ttl is 600 seconds")]
    idx = _index(facts, [(1, 0, 0), (1, 0, 0)])
    out = cm_search.search(idx, Q, cm_search.SearchParams("cache ttl 300 seconds", top_k=5, mode="full",
                                                          debug=True), now_ts=NOW.timestamp())
    assert _ids(out) == ["f1", "f0"]
    assert out.results[1]["metadata"]["superseded"] is True
    assert out.debug["rerank"]["superseded_demoted"] == 1
    # the score is cross-score (demoted) + 0.01 × normalised RRF
    s1, s0 = (r["score"] for r in out.results)
    assert 0.875 < s1 <= 0.885 and 0.5 < s0 <= 0.51
