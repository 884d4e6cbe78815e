"""The Quaid re-implementation (services/adapters/quaid): recall.py's rules on hand-computed cases, ingestion with
Quaid's exact dedup and evidence, access tracking, conformance. `memrig fidelity quaid` holds it to Quaid itself."""

from __future__ import annotations

import math
from datetime import UTC, datetime, timedelta

import numpy as np
import pytest

from services.adapters.base import BackendContext
from services.adapters.client import InProcessBackendClient
from services.adapters.quaid import recall as rc
from services.adapters.quaid.backend import QuaidBackend, content_hash
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


# ---------------------------------------------------------------------------------------------- recall rules
@pytest.mark.parametrize("query, intent", [
    ("When did we switch to Postgres?", "WHEN"),
    ("Why did we choose Zod over Joi?", "WHY"),
    ("Who owns the billing service?", "WHO"),
    ("Where does Caroline live now?", "WHERE"),  # where + live: 2 matches
    ("What is my favorite editor theme?", "WHAT"),  # WHAT 1, PREFERENCE 1: the first intent wins a tie
    ("Which database schema does the API use?", "PROJECT"),  # WHAT 1, PROJECT 3
    ("Tell me about lunch", "WHAT"),
    ("lunch plans", "GENERAL"),
])
def test_intent_is_the_most_matched_regex_list(query, intent):
    assert rc.classify_intent(query)[0] == intent


def test_fusion_weights_and_type_boosts():
    assert rc.fusion_weights("WHO") == rc.fusion_weights("RELATION") == (0.5, 0.5)
    assert rc.fusion_weights("WHEN") == (0.4, 0.6) and rc.fusion_weights("WHY") == (0.8, 0.2)
    assert rc.fusion_weights("WHAT") == rc.fusion_weights("GENERAL") == (0.7, 0.3)
    assert rc.classify_intent("who is she")[1] == {"Person": 1.3, "Fact": 1.0}


def test_key_tokens_letters_first_three_chars_no_stopwords_at_most_eight():
    assert rc.key_tokens("What is the API's port 3001 in my-app?") == ["api", "port", "my-app"]
    assert len(rc.key_tokens(" ".join(f"word{c}" for c in "abcdefghij"))) == 8


def _node(i, vec, **kw) -> rc.Node:
    return rc.Node(i, f"fact {i} text", np.asarray(vec, np.float32), "2026-03-02T09:00:00+00:00", kw.pop("acc", NOW),
                   **kw)


NOW = datetime(2026, 5, 1, 12, 0)


def test_composite_parts_hand_computed():
    n = _node("a", [1, 0])
    assert rc.composite(n, 0.8, "GENERAL", False, NOW) == pytest.approx(0.6 * 0.8 + 0.2 + 0.025)
    assert rc.composite(n, 0.8, "WHEN", False, NOW) == pytest.approx(0.705 + 0.05)  # a dated fact
    assert rc.composite(n, 0.8, "GENERAL", True, NOW) == pytest.approx(0.5 * 0.8 + 0.35 + 0.025)  # prefer fresh
    old = _node("b", [1, 0], acc=NOW - timedelta(days=45, hours=23), access_count=10, confirmation_count=3,
                storage_strength=20.0)
    want = 0.6 * 0.8 + 0.2 * 0.5 + 0.15 * math.log(11) / math.log(51) + 0.025 + 0.03 + 0.03  # whole days: 45
    assert rc.composite(old, 0.8, "GENERAL", False, NOW) == pytest.approx(want)
    assert rc.composite(old, 1.7, "GENERAL", False, NOW) == rc.composite(old, 1.0, "GENERAL", False, NOW)  # cap 1
    assert rc.composite(_node("c", [1, 0], confidence=12.0), 1.0, "GENERAL", False, NOW) == 1.0  # composite cap


def test_mmr_keeps_the_first_and_prefers_diverse():
    f = [rc.Found(_node("a", [1, 0]), 0.9), rc.Found(_node("b", [1, 0.01]), 0.85), rc.Found(_node("c", [0, 1]), 0.7)]
    # b: .7*.85 - .3*~1 = .295; c: .7*.7 - .3*0 = .49 -> c
    assert [x.node.id for x in rc.mmr(f, 2)] == ["a", "c"]


def test_recall_end_to_end_hand_computed_and_access_tracking():
    st = rc.NodeStore()
    st.add([_node("A", [1, 0]), _node("B", [0.8, 0.6]), _node("C", [0, 1])])
    q = {"zebra": np.array([1, 0], np.float32)}
    out = rc.recall(st, "zebra", 2, lambda t: q[t], now=NOW)
    # GENERAL; no FTS hit; composite A .6+.2+.025, B .6*.8+.225, C .225 (filtered < .6); top .825 >= .70
    assert [(f.node.id, f.score) for f in out] == [("A", 0.825), ("B", 0.705)]
    a = st.nodes[0]
    assert a.access_count == 1 and a.accessed_at == NOW
    assert a.storage_strength == pytest.approx(0.05 * (1 + 3 * 0.4 * (1 - 0.825)))
    again = rc.recall(st, "zebra", 1, lambda t: q[t], now=NOW)
    bonus = 0.15 * math.log(2) / math.log(51) + min(0.03, a.storage_strength * 0.003)
    assert again[0].score == round(0.825 - 0.05 * 0 + bonus, 3) == 0.852


def test_fts_only_hits_get_quaids_rank_quality_and_pass_only_above_threshold():
    st = rc.NodeStore()
    st.add([rc.Node("k", "Kubernetes cluster runs on three nodes", np.array([0, 1], np.float32), None, NOW)])
    # semantic cosine 0 (kept: fewer than min_results pass 0.3); FTS rank 1. Quality stays the cosine 0: filtered.
    assert rc.recall(st, "kubernetes", 3, lambda t: np.array([1, 0], np.float32), now=NOW, retry=False) == []


# ---------------------------------------------------------------------------------------------- backend
def _session(sid: str, texts: list[str], day: int = 0) -> Session:
    return Session(sid, T0 + timedelta(days=day),
                   tuple(Message(f"{sid}-m{i}", "user" if i % 2 == 0 else "assistant", t) for i, t in enumerate(texts)))


async def test_ingestion_extracts_facts_with_evidence_and_quaids_exact_dedup():
    b, llm = backend()
    c = InProcessBackendClient(b)
    fact = "The API listens on port 3001 behind nginx."
    await c.ingest("ns", IngestBatch(sessions=(_session("s1", ["Hi there, how is it going?", fact]),)))
    assert llm.tasks() == ["extraction"]
    assert llm.calls[0][1][0]["content"] == prompts.FACT_EXTRACTION_SYSTEM
    await c.ingest("ns", IngestBatch(sessions=(_session("s2", [fact.upper()]),)))
    nodes = {n.text: n for n in b._ns["ns"].nodes}
    n = nodes[fact]
    assert content_hash(fact) == content_hash("  " + fact.upper())  # lower-cased, whitespace collapsed
    assert n.evidence_ids == ("s1-m1", "s2-m0") and n.confirmation_count == 1
    assert n.confidence == pytest.approx(0.52) and n.storage_strength == pytest.approx(0.03)
    st = await b.namespace_stats("ns")
    assert (st.sessions, st.messages) == (2, 3) and st.items == len(nodes)


async def test_retrieve_rounds_scores_and_tracks_access():
    b, _ = backend()
    c = InProcessBackendClient(b)
    fact = "The API listens on port 3001 behind nginx."
    await c.ingest("ns", IngestBatch(sessions=(_session("s1", [fact]),)))
    r1, _ = await c.retrieve("ns", RetrieveQuery(fact, top_k=1))
    m = r1.memories[0]
    # query = the fact: cosine 1 (hash embedder), intent PROJECT (api), Fact boost 1.0: .6 + .2 + .025
    assert m.text == fact and m.evidence_ids == ["s1-m0"] and m.score == 0.825
    r2, _ = await c.retrieve("ns", RetrieveQuery(fact, top_k=1))
    ss = 0.05 * (1 + 3 * 0.4 * (1 - 0.825))
    assert r2.memories[0].score == round(0.825 + 0.15 * math.log(2) / math.log(51) + ss * 0.003, 3)
    assert r2.formatted_context == "## Quaid memory recall\n- " + fact


async def test_unknown_namespace_and_reset():
    b, _ = backend()
    c = InProcessBackendClient(b)
    r, _ = await c.retrieve("nope", RetrieveQuery("anything?"))
    assert r.memories == []
    await c.ingest("ns", IngestBatch(sessions=(_session("s1", ["The API listens on port 3001."]),)))
    await b.reset("ns")
    r, _ = await c.retrieve("ns", RetrieveQuery("The API listens on port 3001."))
    assert r.memories == []


def test_registered_not_default_and_describe_lists_constants():
    spec = get_spec("quaid")
    assert spec.module == "services.adapters.quaid" and spec.default is False
    d = backend()[0].describe_config()
    assert d["rrf_k"] == 60 and d["min_similarity"] == 0.6 and d["mmr_lambda"] == 0.7
    assert d["fusion_weights"]["WHEN"] == [0.4, 0.6] and d["multi_pass_gate"] == 0.7


async def test_conformance_passes_in_process():
    # Quaid's installed threshold (composite >= 0.6) filters every hash-embedder hit of a paraphrased question; the
    # contract checks run at a lower retrieval.minSimilarity (a Quaid config value), the pipeline unchanged.
    b, _ = backend(min_similarity=0.2)
    results = await conformance_in_process(b)
    assert not [r for r in results if r.status == "FAIL"], render(results, "quaid")
