"""The Quaid-style backend: scoring maths on hand-computed cases, ingestion evidence, access tracking, conformance."""

from __future__ import annotations

import math
from datetime import UTC, datetime, timedelta

import numpy as np
import pytest

from services.adapters.base import BackendContext
from services.adapters.client import InProcessBackendClient
from services.adapters.quaid import scoring
from services.adapters.quaid.backend import QuaidBackend
from services.adapters.quaid.fts import build_fts_query
from services.adapters.registry import get_spec
from services.common import prompts
from services.common.types import IngestBatch, Message, RetrieveQuery, Session
from services.conformance import render
from tests.fixtures_conformance import conformance_in_process
from tests.inprocess_llm import InProcessMockLLM

T0 = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)


def backend(**cfg) -> tuple[QuaidBackend, InProcessMockLLM]:
    b = QuaidBackend(cfg, BackendContext(embedder_name="hash"))
    llm = InProcessMockLLM()
    b.context._llm = llm
    return b, llm


# ---------------------------------------------------------------------------------------------- scoring maths
@pytest.mark.parametrize("query, intent", [
    ("When did we switch to Postgres?", "WHEN"),
    ("Why did we choose Zod over Joi?", "WHY"),
    ("Who owns the billing service?", "WHO"),
    ("Where does Caroline live now?", "WHERE"),
    ("How is Melanie related to Caroline?", "RELATION"),
    ("What is my favourite editor theme?", "PREFERENCE"),
    ("What port does the API listen on?", "PROJECT"),
    ("Tell me about lunch", "GENERAL"),
])
def test_intent_classifier(query, intent):
    assert scoring.classify_intent(query) == intent


def test_fusion_weights_by_intent():
    assert scoring.fusion_weights("WHO") == scoring.fusion_weights("WHERE") == scoring.fusion_weights("RELATION") \
        == (0.5, 0.5)
    assert scoring.fusion_weights("WHEN") == (0.4, 0.6)
    assert scoring.fusion_weights("PREFERENCE") == scoring.fusion_weights("WHY") == (0.8, 0.2)
    assert scoring.fusion_weights("PROJECT") == (0.6, 0.4)
    assert scoring.fusion_weights("GENERAL") == scoring.fusion_weights("anything else") == (0.7, 0.3)


def test_weighted_rrf_hand_computed():
    # WHEN (0.4/0.6): a = .4/61 + .6/62, b = .4/62, c = .4/63 + .6/61
    fused = scoring.rrf_fuse(["a", "b", "c"], ["c", "a"], 0.4, 0.6)
    by = {f.id: f for f in fused}
    assert by["a"].rrf == pytest.approx(0.4 / 61 + 0.6 / 62)  # 0.016234796
    assert by["b"].rrf == pytest.approx(0.4 / 62)  # 0.006451613
    assert by["c"].rrf == pytest.approx(0.4 / 63 + 0.6 / 61)  # 0.016185272
    assert [f.id for f in fused] == ["a", "c", "b"]
    assert (by["c"].semantic_rank, by["c"].fts_rank) == (3, 1) and by["b"].fts_rank is None


def test_intent_weights_flip_the_order():
    # an FTS-only hit x vs the top semantic hit a: x = wf/61, a = ws/61
    when = scoring.rrf_fuse(["a", "b"], ["x"], *scoring.fusion_weights("WHEN"))
    pref = scoring.rrf_fuse(["a", "b"], ["x"], *scoring.fusion_weights("PREFERENCE"))
    assert [f.id for f in when][:2] == ["x", "a"]  # 0.6/61 > 0.4/61
    assert [f.id for f in pref][:2] == ["a", "b"]  # 0.8/61, 0.8/62 > 0.2/61
    assert when[0].rrf == pytest.approx(0.6 / 61)


@pytest.mark.parametrize("rank0, q", [(0, 0.7), (5, 0.6), (10, 0.5), (15, 0.4), (20, 0.4), (100, 0.4)])
def test_fts_only_quality(rank0, q):
    assert scoring.fts_only_quality(rank0) == pytest.approx(q)


def test_composite_parts_hand_computed():
    assert scoring.recency_score(0) == 1.0
    assert scoring.recency_score(45) == pytest.approx(0.5)
    assert scoring.recency_score(90) == 0.0 and scoring.recency_score(400) == 0.0
    assert scoring.recency_score(-3) == 1.0  # a future-dated fact counts as new
    assert scoring.frequency_score(0) == 0.0
    assert scoring.frequency_score(5) == pytest.approx(math.log(6) / math.log(51))  # 0.45571
    assert scoring.frequency_score(50) == pytest.approx(1.0) and scoring.frequency_score(500) == 1.0
    # .6·0.8 + .2·0.5 + .15·0.45571 + .05·0.5 = 0.48 + 0.1 + 0.0683565 + 0.025
    assert scoring.composite_score(0.8, 0.5, math.log(6) / math.log(51), 0.5) == pytest.approx(0.6733565, abs=1e-6)
    assert scoring.composite_score(1, 1, 1, 1) == pytest.approx(1.0)


def test_min_similarity_filter_and_broadening():
    assert scoring.broaden_filter([0.65, 0.5, 0.2]) == ([0], pytest.approx(0.6), 1)
    assert scoring.broaden_filter([0.5, 0.44, 0.46]) == ([0, 2], pytest.approx(0.45), 2)  # 0.6 × 0.75
    assert scoring.broaden_filter([0.31, 0.2]) == ([0], pytest.approx(0.3), 3)  # 0.6 × 0.5
    assert scoring.broaden_filter([0.2, 0.1]) == ([], pytest.approx(0.3), 0)
    assert scoring.broaden_filter([0.7, 0.61, 0.59], min_similarity=0.6)[0] == [0, 1]


def test_mmr_keeps_the_top_and_prefers_diverse():
    v = np.array([[1.0, 0.0], [1.0, 0.0], [0.0, 1.0]])
    # second pick: cand1 = .7·.85 − .3·1 = 0.295; cand2 = .7·.5 − .3·0 = 0.35 → cand2
    assert scoring.mmr_select([0.9, 0.85, 0.5], v, 2) == [0, 2]
    assert scoring.mmr_select([0.9, 0.85, 0.5], v, 3) == [0, 2, 1]
    # the top result is kept first even when it is not the first candidate
    assert scoring.mmr_select([0.5, 0.9, 0.85], v[[2, 0, 1]], 1) == [1]
    assert scoring.mmr_select([0.9, 0.85], v[:2], 2, lam=1.0) == [0, 1]
    assert scoring.mmr_select([], np.zeros((0, 2)), 3) == []


def test_fts_query_is_or_of_content_tokens():
    assert build_fts_query("How often does the staging password rotate?") == \
        '"how" OR "often" OR "staging" OR "password" OR "rotate"'
    assert build_fts_query("the a of") is None


# ---------------------------------------------------------------------------------------------- backend
def _session(sid: str, texts: list[str], day: int = 0) -> Session:
    return Session(sid, T0 + timedelta(days=day),
                   tuple(Message(f"{sid}-m{i}", "user" if i % 2 == 0 else "assistant", t) for i, t in enumerate(texts)))


async def test_ingestion_extracts_facts_with_evidence_ids():
    b, llm = backend()
    c = InProcessBackendClient(b)
    s = _session("s1", ["Hi there, how is it going?", "The API listens on port 3001 behind nginx.",
                        "We decided to cache sessions in Redis with a TTL of 300 seconds because of load."])
    await c.ingest("ns", IngestBatch(sessions=(s,)))
    assert llm.tasks() == ["extraction"]
    assert llm.calls[0][1][0]["content"] == prompts.FACT_EXTRACTION_SYSTEM
    facts = {f.text: f.evidence_ids for f in b._ns["ns"].facts}
    assert facts["The API listens on port 3001 behind nginx."] == ("s1-m1",)
    assert any(ev == ("s1-m2",) and "300 seconds" in t for t, ev in facts.items())
    # re-ingesting the same session adds nothing new (no LLM call for no new messages)
    await c.ingest("ns", IngestBatch(sessions=(s,)))
    assert len(llm.calls) == 1 and len(b._ns["ns"].facts) == 2
    st = await b.namespace_stats("ns")
    assert (st.sessions, st.messages, st.items) == (1, 3, 2)


async def test_retrieve_scores_access_tracking_and_recency():
    b, _ = backend()
    c = InProcessBackendClient(b)
    await c.ingest("ns", IngestBatch(sessions=(_session("s1", ["The API listens on port 3001 behind nginx.",
                                                               "The frontend build uses Vite 5 with SWC."]),)))
    q = RetrieveQuery("Which port does the API listen on?", top_k=1, reference_time=T0 + timedelta(days=45))
    r1, _ = await c.retrieve("ns", q)
    m = r1.memories[0]
    assert "3001" in m.text and m.evidence_ids == ["s1-m0"]
    cs = m.channel_scores
    assert cs["recency"] == pytest.approx(0.5)  # the fact dates from the session start, 45 of 90 days ago
    assert cs["frequency"] == 0.0
    assert cs["composite"] == pytest.approx(0.6 * cs["relevance"] + 0.2 * cs["recency"] + 0.05 * 0.5)
    assert m.attributes["intent"] == "PROJECT"
    r2, _ = await c.retrieve("ns", q)
    assert r2.memories[0].channel_scores["frequency"] == pytest.approx(math.log(2) / math.log(51))
    assert b._ns["ns"].facts[0].access_count == 2
    assert r2.formatted_context.startswith("## Quaid memory recall\n- [2026-03-02] The API listens on port 3001")


async def test_unknown_namespace_and_reset():
    b, _ = backend()
    c = InProcessBackendClient(b)
    r, _ = await c.retrieve("nope", RetrieveQuery("anything?"))
    assert r.memories == []
    await c.ingest("ns", IngestBatch(sessions=(_session("s1", ["The API listens on port 3001."]),)))
    await b.reset("ns")
    r, _ = await c.retrieve("ns", RetrieveQuery("Which port does the API use?"))
    assert r.memories == [] and b.fts.search("ns", "port", 5) == []


def test_registered_not_default_and_describe_lists_constants():
    spec = get_spec("quaid")
    assert spec.module == "services.adapters.quaid" and spec.default is False
    d = backend()[0].describe_config()
    assert d["rrf_k"] == 60 and d["min_similarity"] == 0.6 and d["mmr_lambda"] == 0.7
    assert d["fusion_weights"]["WHEN"] == [0.4, 0.6] and d["composite_weights"]["frequency"] == 0.15
    assert ("recall", "exact") in QuaidBackend.capabilities


async def test_conformance_passes_in_process():
    b, _ = backend()
    results = await conformance_in_process(b)
    assert not [r for r in results if r.status == "FAIL"], render(results, "quaid")
    assert not [r for r in results if r.status == "N/A"], render(results, "quaid")
