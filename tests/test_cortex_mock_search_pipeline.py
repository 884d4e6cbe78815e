"""cortex-mock's retrieval pipeline (services/cortex_mock/search.py) over hand-built indexes, every expectation
computed by hand: the request filters, each channel's threshold and depth, the question channel's best question
per fact, graph seeds and query-named entity boosts, the recency pool, the rerank depth and clamp, the packing
window, the debug block, the result shape and the stage timings (a fake clock that only moves inside the
stage functions, so the figures are exact and no assertion is about real time). Found by `make mutation`
(test_pipeline_ranking.py shows each stage changing the order; these pin the rest of the path)."""

from __future__ import annotations

import math
from datetime import UTC, datetime
from typing import Any

import numpy as np
import pytest

from services.cortex_mock import ranking
from services.cortex_mock import search as cm_search
from services.cortex_mock.search import SearchParams, search
from services.cortex_mock.snapshot import EntityRow, Fact, TenantIndex
from services.cortex_mock.text import content_tokens, normalise

NOW = datetime(2026, 2, 11, 12, tzinfo=UTC)  # a Wednesday
NOW_TS = NOW.timestamp()
Q = np.array([1.0, 0.0, 0.0])


def _fact(i: int | str, content: str, *, occurred: datetime | None = None, superseded_by: str | None = None,
          md: dict[str, Any] | None = None, confidence: float = 0.9, session: str | None = "s1",
          source: str = "extraction", fact_type: str = "fact", n_tokens: int = 5, speaker: str = "user") -> Fact:
    return Fact(id=f"f{i}", content=content, source=source, confidence=confidence, session_id=session,
                speaker=speaker, fact_type=fact_type, occurred_at=occurred,
                occurred_iso=occurred.isoformat() if occurred else None, attr_key="", attr_value="",
                superseded_by=superseded_by, metadata=dict(md or {}), tokens=content_tokens(content),
                norm=normalise(content), created_at=0.0, n_tokens=n_tokens)


def _index(facts: list[Fact], emb, mentions=(), visible=None, questions=()) -> TenantIndex:
    """mentions: (fact position, entity name); visible: when each mention becomes visible (default 0);
    questions: (owning fact position, 3-d vector)."""
    postings: dict[str, dict[int, int]] = {}
    for i, f in enumerate(facts):
        for t in f.tokens:
            postings.setdefault(t, {})[i] = postings.setdefault(t, {}).get(i, 0) + 1
    names = sorted({e for _, e in mentions})
    ents = [EntityRow(id=f"e-{n}", name=n, key=n, etype="concept", aliases=[]) for n in names]
    return TenantIndex(
        rev=7, facts=facts, fact_pos={f.id: i for i, f in enumerate(facts)},
        emb=np.asarray(emb, dtype=np.float32),
        q_emb=np.asarray([v for _, v in questions], dtype=np.float32).reshape(len(questions), 3),
        q_owner=np.asarray([o for o, _ in questions], dtype=np.int64),
        q_text=[f"q{i}?" for i in range(len(questions))],
        postings={t: (np.fromiter(d, np.int64), np.fromiter(d.values(), np.float64)) for t, d in postings.items()},
        doc_len=np.asarray([float(len(f.tokens)) for f in facts]),
        entities=ents, entity_by_key={e.key: i for i, e in enumerate(ents)},
        entity_by_id={e.id: i for i, e in enumerate(ents)},
        m_fact=np.asarray([f for f, _ in mentions], np.int64),
        m_ent=np.asarray([names.index(e) for _, e in mentions], np.int64),
        m_visible=np.asarray(visible if visible is not None else [0.0] * len(mentions), np.float64))


def _ids(out) -> list[str]:
    return [r["node_id"] for r in out.results]


def _run(idx, query, **kw):
    kw.setdefault("top_k", 10)
    kw.setdefault("mode", "fast")
    return search(idx, Q, SearchParams(query, **kw), now_ts=NOW_TS)


# -- filters ------------------------------------------------------------------------------------------------
def _filter_index() -> TenantIndex:
    facts = [
        _fact(0, "alpha one", session="s1-a", confidence=0.9,
              md={"source_origin": "chat", "derivation_mode": "direct", "user_id": "u1"}),
        _fact(1, "alpha two", session="s2", confidence=0.5, fact_type="preference",
              md={"session_ids": ["s2-x", "s1-b"], "source_origin": "code", "derivation_mode": "inferred",
                  "user_id": "u2"}),
        _fact(2, "alpha three", session=None, confidence=0.7, source="reflection", md={"user_id": "u1"}),
        _fact(3, "alpha four", session="s3", confidence=0.69, md={"source_origin": "chat"}),
    ]
    return _index(facts, [(1, 0, 0)] * 4)


@pytest.mark.parametrize("kw,expect", [
    ({}, {"f0", "f1", "f2", "f3"}),
    ({"session_filter": "s1"}, {"f0", "f1"}),  # prefix of the session id, or of any of session_ids
    ({"session_filter": "s3"}, {"f3"}),
    ({"min_confidence": 0.7}, {"f0", "f2"}),  # 0.7 itself passes
    ({"min_confidence": 0.0}, {"f0", "f1", "f2", "f3"}),
    ({"fact_type": "preference"}, {"f1"}),
    ({"fact_type": "reflection"}, {"f2"}),  # matches the source too
    ({"include_origins": ["chat", "code"]}, {"f0", "f1", "f3"}),
    ({"exclude_origins": ["chat"]}, {"f1", "f2"}),
    ({"derivation_mode": "inferred"}, {"f1"}),
    ({"user_id": "u1"}, {"f0", "f2"}),
    ({"user_id": "nobody"}, set()),
    ({"session_filter": "s1", "min_confidence": 0.7}, {"f0"}),
    ({"user_id": "u1", "exclude_origins": ["chat"]}, {"f2"}),
])
def test_filters_select_the_facts(kw, expect):
    assert set(_ids(_run(_filter_index(), "alpha", **kw))) == expect


# -- channels: thresholds, depth, questions -----------------------------------------------------------------
def test_semantic_and_question_thresholds_and_best_question_per_fact():
    # No shared token with the query (no bm25). Vectors: f0 cos .25 (above SEMANTIC_MIN .2), f1 cos .15 (below);
    # questions: f1 owns cos .4 and .9 (best .9), f2 owns cos .35 (above QUESTION_MIN .3), f3 owns .25 (below).
    def v(c):
        return (c, math.sqrt(1 - c * c), 0.0)

    facts = [_fact(i, f"zulu {w}") for i, w in enumerate(["one", "two", "three", "four"])]
    idx = _index(facts, [v(0.25), v(0.15), (0, 1, 0), (0, 0, 1)],
                 questions=[(1, v(0.4)), (2, v(0.35)), (1, v(0.9)), (3, v(0.25))])
    out = _run(idx, "alpha", debug=True)
    ch = out.debug["channels"]
    assert ch["bm25"]["candidates"] == 0
    assert [(c["node_id"], c["score"]) for c in ch["semantic"]["top"]] == [("f0", pytest.approx(0.25, abs=1e-6))]
    assert [(c["node_id"], c["score"]) for c in ch["question"]["top"]] == [
        ("f1", pytest.approx(0.9, abs=1e-6)), ("f2", pytest.approx(0.35, abs=1e-6))]
    assert out.debug["index"] == {"rev": 7, "facts": 4, "questions": 4, "entities": 0}
    # fast mode: three lists; f0 and f1 rank 1 in one list each (tie by content: "zulu one" < "zulu two"), f2 rank 2
    assert _ids(out) == ["f0", "f1", "f2"]
    assert [r["score"] for r in out.results] == pytest.approx([1 / 3, 1 / 3, (1 / 62) * 61 / 3], abs=1e-6)


def _many(n: int, tokens: list[int] | None = None) -> TenantIndex:
    """n facts that all match "alpha" equally (same length, same vector): the tie rank (content order) decides."""
    facts = [_fact(i, f"alpha item{i:02d}", n_tokens=(tokens[i] if tokens else 1)) for i in range(n)]
    return _index(facts, [(1, 0, 0)] * n)


def test_channel_depth_rerank_depth_and_fusion_debug():
    idx = _many(60)
    out = _run(idx, "alpha", top_k=5, debug=True)
    dbg = out.debug
    assert {ch: v["candidates"] for ch, v in dbg["channels"].items()} == {"bm25": 50, "semantic": 50, "question": 0}
    assert [c["rank"] for c in dbg["channels"]["bm25"]["top"]] == list(range(1, 11))
    assert [c["node_id"] for c in dbg["channels"]["semantic"]["top"]] == [f"f{i}" for i in range(10)]
    assert dbg["fusion"] == {"method": "rrf", "k": 60, "lists": 3, "candidates": 50, "in_multiple_channels": 50}
    assert dbg["rerank"] == {"applied": False, "candidates": 0, "superseded_demoted": 0}
    assert _ids(out) == [f"f{i}" for i in range(5)]
    # fast-mode score: normalised RRF; f_i is rank i+1 in two of three lists
    assert [r["score"] for r in out.results] == pytest.approx([2 / (61 + i) * 61 / 3 for i in range(5)], abs=1e-6)
    full = _run(idx, "alpha", top_k=5, mode="full", debug=True)
    assert full.debug["rerank"] == {"applied": True, "candidates": 30, "superseded_demoted": 0}
    assert full.debug["fusion"]["lists"] == 4  # no entities: the graph channel is empty but still a list
    assert full.channels_used == ["bm25", "semantic", "question", "graph"]
    assert _run(idx, "alpha", top_k=11, mode="full", debug=True).debug["rerank"]["candidates"] == 33
    assert _run(_many(20), "alpha", top_k=5, mode="full", debug=True).debug["rerank"]["candidates"] == 20


def test_full_mode_rerank_score_is_clamped_at_one():
    # "alpha itemNN" vs query "alpha itemNN": coverage 1, cosine 1 -> cross-score 1.0 (+ 0.01 x RRF, clamped)
    idx = _many(3)
    out = _run(idx, "alpha item01", mode="full")
    assert _ids(out)[0] == "f1" and out.results[0]["score"] == 1.0
    # the others cover 1/2 of the query: 0.5·0.5 + 0.5·1 = 0.75, plus 0.01 × their normalised RRF
    assert all(0.75 < r["score"] < 0.76 for r in out.results[1:])
    assert out.coverage == "high"


def test_packing_window_is_four_times_top_k_but_at_least_20():
    # token counts (budget 10): f0, f19, f20, f23 and f24.. take 1 token; f1..f18, f21, f22 take 1000. Packing
    # only sees the first max(4 × top_k, 20) ranked items: 20 for top_k 2 and 3, 24 for top_k 6.
    tokens = [1] + [1000] * 18 + [1, 1, 1000, 1000, 1] + [1] * 6
    idx = _many(30, tokens)
    out = _run(idx, "alpha", top_k=2, token_budget=10, debug=True)
    assert _ids(out) == ["f0", "f19"]
    assert out.debug["packing"] == {"budget_tokens": 10, "used_tokens": 2, "returned": 2, "skipped_over_budget": 18}
    assert _ids(_run(idx, "alpha", top_k=3, token_budget=10)) == ["f0", "f19"]  # f20 is the 21st
    out = _run(idx, "alpha", top_k=6, token_budget=10, debug=True)
    assert _ids(out) == ["f0", "f19", "f20", "f23"]  # f24 is the 25th
    assert out.debug["packing"] == {"budget_tokens": 10, "used_tokens": 4, "returned": 4,
                                    "skipped_over_budget": 20}


def test_temporal_threshold_and_reference_from_now():
    # "yesterday" = 10 Feb (1 day, scale 2 days). f0 inside (1.0); f1 5 days after the window (exp(-2.5) = .082,
    # above TEMPORAL_MIN .05); f2 7 days before it (exp(-3.5) = .030, below); f3 has no time (0).
    facts = [_fact(0, "alpha one", occurred=datetime(2026, 2, 10, 9, tzinfo=UTC)),
             _fact(1, "alpha two", occurred=datetime(2026, 2, 16, tzinfo=UTC)),
             _fact(2, "alpha three", occurred=datetime(2026, 2, 3, tzinfo=UTC)),
             _fact(3, "alpha four"),
             _fact(4, "zulu five", occurred=datetime(2026, 2, 10, 15, tzinfo=UTC))]
    idx = _index(facts, [(0, 1, 0)] * 5)
    out = _run(idx, "alpha yesterday", debug=True)  # no reference: the window is resolved against now_ts
    tmp = out.debug["channels"]["temporal"]["top"]
    # a range window selects on its own: f4 matches no other channel but is inside the window
    assert [(c["node_id"], c["score"]) for c in tmp] == [("f0", 1.0), ("f4", 1.0),
                                                         ("f1", pytest.approx(math.exp(-2.5), abs=1e-6))]
    assert "f4" in _ids(out)
    assert out.debug["temporal"] == {"start": "2026-02-10T00:00:00Z", "end": "2026-02-11T00:00:00Z",
                                     "phrase": "yesterday", "kind": "range"}
    assert out.channels_used == ["bm25", "semantic", "question", "temporal"]


def test_recency_orders_only_facts_another_channel_found():
    # "current": the temporal channel ranks by age, but only facts bm25 / semantic / question selected; the
    # newest fact f2 matches nothing (cos 0, no shared token) and stays out.
    facts = [_fact(0, "cache ttl 300", occurred=datetime(2026, 1, 1, tzinfo=UTC)),
             _fact(1, "cache ttl 600", occurred=datetime(2026, 2, 1, tzinfo=UTC)),
             _fact(2, "lunch menu", occurred=datetime(2026, 2, 10, tzinfo=UTC))]
    idx = _index(facts, [(1, 0, 0), (1, 0, 0), (0, 1, 0)])
    out = _run(idx, "current cache ttl", debug=True, reference=NOW)
    assert [c["node_id"] for c in out.debug["channels"]["temporal"]["top"]] == ["f1", "f0"]
    # fused: f0 = 2/61 + 1/62 (first in bm25 and semantic by content order) > f1 = 2/62 + 1/61
    assert _ids(out) == ["f0", "f1"]
    # lexical coverage leaves the time phrase out: "cache ttl" both covered -> 0.5 + 0.5 × cos 1 = 1.0
    assert [r["query_alignment"] for r in out.results] == [1.0, 1.0]
    # a query that is only the time phrase keeps it (else nothing would be covered)
    idx2 = _index([_fact(0, "latest build green"), _fact(1, "old build red")], [(0, 1, 0), (0, 1, 0)])
    out2 = _run(idx2, "latest", reference=NOW)
    assert _ids(out2) == ["f0"] and out2.results[0]["query_alignment"] == 0.5 and out2.coverage == "partial"


# -- graph: seeds, entity boost, visibility -------------------------------------------------------------------
def test_graph_seeds_are_the_ten_best_fused_facts():
    # f00..f10 match the query (fused order = content order); ga is linked through entity "east" to f09 (the 10th
    # seed), gb through "west" to f10 (11th, not a seed). Only ga gets activation.
    facts = [_fact(f"{i:02d}", f"alpha item{i:02d}") for i in range(11)]
    facts += [_fact("ga", "zulu one"), _fact("gb", "zulu two")]
    idx = _index(facts, [(1, 0, 0)] * 11 + [(0, 1, 0)] * 2,
                 mentions=[(9, "east"), (11, "east"), (10, "west"), (12, "west")])
    out = _run(idx, "alpha", mode="full", top_k=20, debug=True)
    graph = [c["node_id"] for c in out.debug["channels"]["graph"]["top"]]
    assert graph == ["f09", "fga"]
    assert "fga" in _ids(out) and "fgb" not in _ids(out)


def test_query_named_entity_is_boosted_and_hidden_mentions_ignored():
    # f0 matches "kafka" and mentions orion; f1 mentions orion only; f2 mentions zeta (not in the query); the
    # f1-orion... edge visible only after NOW is not used; "the" is an entity without content tokens (no boost).
    # f0 seed: normalised RRF over 3 lists = (2/61) / (3/61) = 2/3; orion: 2/3 / deg 1 x .5 + boost 1 = 4/3;
    # back to its 2 visible facts: 4/3 / 2 x .5 = 1/3 each.
    facts = [_fact(0, "kafka retention"), _fact(1, "weekly report"), _fact(2, "lunch menu"),
             _fact(3, "parking lot")]
    idx = _index(facts, [(1, 0, 0), (0, 1, 0), (0, 1, 0), (0, 1, 0)],
                 mentions=[(0, "orion"), (1, "orion"), (2, "zeta"), (3, "orion"), (3, "the")],
                 visible=[0.0, 0.0, 0.0, NOW_TS + 60, 0.0])
    out = _run(idx, "kafka orion", mode="full", debug=True)
    graph = out.debug["channels"]["graph"]["top"]
    assert [(c["node_id"], c["score"]) for c in graph] == [("f0", 0.333333), ("f1", 0.333333)]  # 6 decimals
    assert out.debug["fusion"]["lists"] == 4 and out.debug["fusion"]["in_multiple_channels"] == 1
    assert _ids(out) == ["f0", "f1"]


# -- results, empty index, timings -------------------------------------------------------------------------------
def test_result_shape_and_rounding():
    facts = [_fact(0, "alpha deploy", occurred=datetime(2026, 2, 1, tzinfo=UTC), confidence=0.123456,
                   md={"speaker": "assistant", "message_ids": ["m1"], "session_ids": ["s1"], "mention_count": 3,
                       "source_origin": "chat", "derivation_mode": 5, "entity_refs": ["Deploy"]}),
             _fact(1, "alpha build", source="reflection", superseded_by="f0", speaker="bot",
                   md={"source_fact_ids": ["f0"]})]
    idx = _index(facts, [(1, 0, 0), (0.8, 0.6, 0)])
    out = _run(idx, "alpha deploy green", mode="fast")
    r0, r1 = out.results
    assert r0 == {
        "node_id": "f0", "type": "FACT", "content": "alpha deploy", "score": 0.666667, "source": "extraction",
        "confidence": 0.1235, "query_alignment": 0.8333,
        "metadata": {"speaker": "assistant", "fact_type": "fact", "entity_refs": ["Deploy"],
                     "occurred_at": "2026-02-01T00:00:00+00:00", "session_id": "s1", "message_ids": ["m1"],
                     "session_ids": ["s1"], "mention_count": 3, "superseded": False, "superseded_by": None,
                     "source_origin": "chat"}}
    # f0 is first in bm25 and semantic: normalised RRF (2/61) / (3/61) = 2/3
    assert r1["metadata"] == {"speaker": "bot", "fact_type": "fact", "entity_refs": [], "occurred_at": None,
                              "session_id": "s1", "message_ids": [], "session_ids": [], "mention_count": 1,
                              "superseded": True, "superseded_by": "f0", "source_fact_ids": ["f0"]}
    # coverage 2/3 and cosine 1 -> 1/3 + 1/2; coverage 1/3 and cosine .8 -> 1/6 + 0.4 (4 decimals)
    assert r1["query_alignment"] == 0.5667
    assert out.relevance == pytest.approx([5 / 6, 1 / 6 + 0.4])
    assert out.coverage == "high"


def test_empty_index():
    idx = _index([], np.zeros((0, 3)))
    out = search(idx, Q, SearchParams("what happened yesterday", debug=True), now_ts=NOW_TS)
    assert (out.results, out.coverage, out.channels_used) == ([], "none", ["bm25", "semantic", "question", "temporal"])
    assert out.debug == {"channels": {}, "fusion": {"candidates": 0}}
    assert search(idx, Q, SearchParams("alpha"), now_ts=NOW_TS).debug is None


class _FakeTime:
    """perf_counter moves only when a wrapped stage function runs; time() is NOW."""

    def __init__(self):
        self.t = 1000.0

    def perf_counter(self) -> float:
        return self.t

    def time(self) -> float:
        return NOW_TS


def _advancing(clock: _FakeTime, fn, step: float):
    def wrapped(*a, **kw):
        clock.t += step
        return fn(*a, **kw)
    return wrapped


@pytest.fixture
def fake_clock(monkeypatch):
    clock = _FakeTime()
    monkeypatch.setattr(cm_search, "time", clock)
    for name, step in (("bm25_scores", 1.0), ("top_ranked", 0.01), ("rrf_fuse", 0.2), ("demote", 0.05),
                       ("pack", 0.00123456)):
        monkeypatch.setattr(cm_search.ranking, name, _advancing(clock, getattr(ranking, name), step))
    for name in ("top_rows", "top_groups"):  # the semantic and question channels (quantized.py)
        monkeypatch.setattr(cm_search, name, _advancing(clock, getattr(cm_search, name), 0.01))
    monkeypatch.setattr(cm_search, "spread_activation", _advancing(clock, cm_search.spread_activation, 4.0))
    monkeypatch.setattr(cm_search, "proximity_all", _advancing(clock, cm_search.proximity_all, 1.0))
    return clock


def test_stage_timings(fake_clock):
    facts = [_fact(0, "alpha one", occurred=datetime(2026, 2, 10, tzinfo=UTC)), _fact(1, "alpha two")]
    idx = _index(facts, [(1, 0, 0), (1, 0, 0)], questions=[(0, (1, 0, 0))])
    out = search(idx, Q, SearchParams("alpha yesterday", mode="full", debug=True))  # now from the fake time()
    # bm25: scores 1 s + top_ranked 10 ms; temporal: proximity of all facts 1 s + 10 ms; graph: spread 4 s + top_ranked
    # 10 ms + the second fusion 200 ms; fusion: the first rrf_fuse only; rerank: 2 demotions x 50 ms
    # semantic: top_rows 10 ms; question: top_groups 10 ms
    assert out.timings_ms == {"bm25": 1010.0, "semantic": 10.0, "question": 10.0, "temporal": 1010.0,
                              "graph": 4210.0, "fusion": 200.0, "rerank": 100.0,
                              "packing": pytest.approx(1.235, abs=1e-9)}
    assert out.debug["timings_ms"] == out.timings_ms
    assert _ids(out) == ["f0", "f1"]  # "yesterday" resolved against the fake now: f0 is inside the window
    fast = search(idx, Q, SearchParams("alpha", mode="fast"))
    assert fast.timings_ms == {"bm25": 1010.0, "semantic": 10.0, "question": 10.0, "fusion": 200.0, "rerank": 0.0,
                               "packing": pytest.approx(1.235, abs=1e-9)}


def test_spread_activation_splits_over_a_fact_with_two_entities():
    # f0 mentions e0 and e1, f1 mentions e0; seed f0 = 1. Hop 1: each edge of f0 carries 1/2 x .5 = .25.
    # Hop 2: e0 (degree 2) gives .25/2 x .5 = .0625 to f0 and f1; e1 (degree 1) gives .25 x .5 = .125 to f0.
    act = cm_search.spread_activation(2, 2, np.array([0, 0, 1]), np.array([0, 1, 0]), np.array([1.0, 0.0]))
    assert act.tolist() == pytest.approx([0.1875, 0.0625])
    act = cm_search.spread_activation(2, 2, np.array([0, 0, 1]), np.array([0, 1, 0]), np.array([1.0, 0.0]),
                                      decay=1.0)
    assert act.tolist() == pytest.approx([0.75, 0.25])


def test_default_token_budget_is_2000():
    # 1000 + 1000 fills the default budget exactly; the third fact (1 token) no longer fits
    facts = [_fact(i, f"alpha item{i}", n_tokens=n) for i, n in enumerate([1000, 1000, 1])]
    idx = _index(facts, [(1, 0, 0)] * 3)
    out = search(idx, Q, SearchParams("alpha", mode="fast", debug=True), now_ts=NOW_TS)
    assert _ids(out) == ["f0", "f1"] and out.debug["packing"]["budget_tokens"] == 2000
    assert out.debug["packing"]["used_tokens"] == 2000


def test_full_mode_given_as_a_parsed_string():
    # a mode parsed from a request body is an equal string but not the interned literal: compared by value
    idx = _many(40)
    full = "".join(["fu", "ll"])
    out = search(idx, Q, SearchParams("alpha item03", top_k=2, mode=full, debug=True), now_ts=NOW_TS)
    assert out.debug["rerank"] == {"applied": True, "candidates": 30, "superseded_demoted": 0}
    assert _ids(out)[0] == "f3" and out.results[0]["score"] == 1.0
    assert out.coverage == "high"  # from the rerank score 1.0 (full mode)
    assert out.channels_used == ["bm25", "semantic", "question", "graph"]


def test_coverage_label_comes_from_the_rerank_score_in_full_mode():
    # f0 'alpha one' (superseded) vs query 'alpha one': cross-score 1.0 demoted to 0.5, + 0.01 x RRF -> 'partial';
    # its relevance (undemoted) is 1.0, which would say 'high'
    idx = _index([_fact(0, "alpha one", superseded_by="f9")], [(1, 0, 0)])
    out = search(idx, Q, SearchParams("alpha one", mode="full"), now_ts=NOW_TS)
    assert out.relevance == [1.0] and 0.5 < out.results[0]["score"] < 0.52 and out.coverage == "partial"
    fast = search(idx, Q, SearchParams("alpha one", mode="fast"), now_ts=NOW_TS)
    assert fast.coverage == "high"  # fast mode labels by relevance
    parsed_full = "".join(["fu", "ll"])  # as parsed from a request: equal to "full", not the interned literal
    assert search(idx, Q, SearchParams("alpha one", mode=parsed_full), now_ts=NOW_TS).coverage == "partial"


def test_default_top_k_is_5():
    out = search(_many(10), Q, SearchParams("alpha", mode="fast"), now_ts=NOW_TS)
    assert _ids(out) == [f"f{i}" for i in range(5)]


def test_filters_compare_parsed_strings_by_value():
    # values parsed from a request are equal strings but not the interned literals in the stored metadata
    def parsed(s: str) -> str:
        return "".join(list(s))

    idx = _filter_index()
    assert _ids(_run(idx, "alpha", derivation_mode=parsed("inferred"))) == ["f1"]
    assert set(_ids(_run(idx, "alpha", fact_type=parsed("fact")))) == {"f0", "f2", "f3"}
    assert set(_ids(_run(idx, "alpha", include_origins=[parsed("chat")]))) == {"f0", "f3"}


def test_rerank_head_is_three_times_top_k_past_30():
    # full mode reranks only the first max(30, 3 x top_k) fused facts; nothing past them is returned. Tokens
    # (budget 10): f0 and f30.. take 1, f1..f29 take 1000. top_k 11: head 33 -> f0, f30, f31, f32 fit.
    tokens = [1] + [1000] * 29 + [1] * 10
    out = _run(_many(40, tokens), "alpha", top_k=11, token_budget=10, mode="full")
    assert _ids(out) == ["f0", "f30", "f31", "f32"]


def test_reflection_source_compared_by_value():
    # a source read back from storage is an equal string, not the interned literal
    f = _fact(0, "alpha one", source="".join(["reflec", "tion"]), md={"source_fact_ids": ["f7"]})
    out = _run(_index([f], [(1, 0, 0)]), "alpha")
    assert out.results[0]["metadata"]["source_fact_ids"] == ["f7"]


def test_empty_output_defaults_to_no_temporal_channel():
    out = cm_search.empty_output(SearchParams("alpha"))
    assert (out.results, out.coverage, out.channels_used, out.debug) == ([], "none", ["bm25", "semantic", "question"],
                                                                         None)


def test_full_mode_coverage_is_the_top_result_not_the_last():
    # f1 'alpha one' scores 1.0 (clamped); f0, the same text but superseded, 0.5 + 0.01 x RRF: 'high' from the top
    idx = _index([_fact(0, "alpha one", superseded_by="f1"), _fact(1, "alpha one")], [(1, 0, 0), (1, 0, 0)])
    out = search(idx, Q, SearchParams("alpha one", mode="full"), now_ts=NOW_TS)
    assert _ids(out) == ["f1", "f0"] and out.results[1]["score"] < 0.52 and out.coverage == "high"


def test_query_that_is_exactly_an_entity_name_boosts_it():
    # no channel but the graph finds anything: no seeds, so orion's activation is its boost 1; f0 gets 1 / 1 x .5
    idx = _index([_fact(0, "weekly report"), _fact(1, "lunch menu")], [(0, 1, 0), (0, 0, 1)],
                 mentions=[(0, "orion")])
    out = search(idx, Q, SearchParams("orion", mode="full", debug=True), now_ts=NOW_TS)
    assert [(c["node_id"], c["score"]) for c in out.debug["channels"]["graph"]["top"]] == [("f0", 0.5)]
    assert _ids(out) == ["f0"]


def test_graph_seeds_follow_the_fused_score_not_the_content_order():
    # Only the semantic channel finds f00..f10 (cos .5 + .04 i), so the fused order is f10, f09, .., f00, the
    # reverse of the content order; the ten seeds are f10..f01. gb (linked to f10 via west) gets activation,
    # ga (linked to f00 via east) does not.
    def v(c):
        return (c, math.sqrt(1 - c * c), 0.0)

    facts = [_fact(f"{i:02d}", f"zulu item{i:02d}") for i in range(11)] + [_fact("ga", "yankee one"),
                                                                          _fact("gb", "yankee two")]
    idx = _index(facts, [v(0.5 + 0.04 * i) for i in range(11)] + [(0, 0, 1)] * 2,
                 mentions=[(0, "east"), (11, "east"), (10, "west"), (12, "west")])
    out = _run(idx, "omega", mode="full", top_k=20, debug=True)
    assert [c["node_id"] for c in out.debug["channels"]["semantic"]["top"]][:2] == ["f10", "f09"]
    assert [c["node_id"] for c in out.debug["channels"]["graph"]["top"]] == ["fgb", "f10"]  # equal: by content


def test_spread_activation_over_a_single_edge():
    # f0 -> e0: e0 = 1 / 1 x .5; back: .5 / 1 x .5 = .25
    assert cm_search.spread_activation(2, 1, np.array([0]), np.array([0]), np.array([1.0, 0.0])).tolist() == [0.25, 0]


def test_nothing_matches_nothing_packed():
    idx = _index([_fact(0, "alpha one")], [(0, 1, 0)])
    out = _run(idx, "omega", debug=True)
    assert out.results == [] and out.coverage == "none"
    assert out.debug["packing"] == {"budget_tokens": 2000, "used_tokens": 0, "returned": 0, "skipped_over_budget": 0}


def test_only_reflections_list_their_source_facts():
    # ingest sources are conversation | text | reflection ("text" sorts after "reflection")
    facts = [_fact(i, f"alpha {s}", source=s, md={"source_fact_ids": ["f9"]})
             for i, s in enumerate(("text", "conversation", "reflection"))]
    out = _run(_index(facts, [(1, 0, 0)] * 3), "alpha")
    got = {r["source"]: r["metadata"].get("source_fact_ids") for r in out.results}
    assert got == {"text": None, "conversation": None, "reflection": ["f9"]}
