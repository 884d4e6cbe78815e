"""cortex-mock pure functions with hand-computed expectations: ranking math, temporal phrases, extraction,
supersession rules, auth and validation."""

from __future__ import annotations

import math
from datetime import UTC, datetime

import numpy as np
import pytest

from services.cortex_mock import ranking
from services.cortex_mock.app import AuthError, authenticate
from services.cortex_mock.config import MockConfig
from services.cortex_mock.engine import CortexEngine, decode_payload, encode_payload, maturity
from services.cortex_mock.extract import (
    analyse_sentence,
    detect_entities,
    extract_attribute,
    extract_switch,
    keep_sentence,
    normalise_value,
)
from services.cortex_mock.ingest import antonym_values, attributes_match, negation_conflict
from services.cortex_mock.search import spread_activation
from services.cortex_mock.store import tenant_id_for_key
from services.cortex_mock.temporal import find_time_window, proximity
from services.cortex_mock.text import split_sentences, tokenize
from services.cortex_mock.validation import (
    RequestInvalid,
    parse_ingest_conversation,
    parse_recall,
    parse_retrieve,
)

REF = datetime(2026, 3, 11, 15, 0, tzinfo=UTC)  # a Wednesday


def d(y, m, day):
    return datetime(y, m, day, tzinfo=UTC)


# -- ranking ------------------------------------------------------------------------------------------------
def test_bm25_golden():
    # docs: d0 = [cache, ttl], d1 = [cache, redis, session]; query "ttl".
    postings = {"cache": (np.array([0, 1]), np.array([1.0, 1.0])), "ttl": (np.array([0]), np.array([1.0])),
                "redis": (np.array([1]), np.array([1.0])), "session": (np.array([1]), np.array([1.0]))}
    s = ranking.bm25_scores(["ttl"], postings, np.array([2.0, 3.0]))
    # idf = ln(1 + (2-1+.5)/(1+.5)) = ln 2; tf part = 2.2 / (1 + 1.2*(.25 + .75*2/2.5)) = 2.2/2.02
    assert s[0] == pytest.approx(math.log(2) * 2.2 / 2.02)
    assert s[1] == 0.0
    # a repeated query term counts once
    assert ranking.bm25_scores(["ttl", "ttl"], postings, np.array([2.0, 3.0]))[0] == pytest.approx(s[0])


def test_rrf_golden_and_normalised():
    docs, scores = ranking.rrf_fuse([[7, 9], [9]])
    assert docs.tolist() == [7, 9]
    assert scores[0] == pytest.approx(1 / 61)
    assert scores[1] == pytest.approx(1 / 62 + 1 / 61)
    assert ranking.rrf_normalised(2 / 61, 2) == pytest.approx(1.0)


def test_top_ranked_ties_and_threshold():
    assert ranking.top_ranked(np.array([0.5, 0.9, 0.5, 0.1]), 3, 0.2) == [1, 0, 2]
    assert ranking.top_ranked(np.array([]), 3) == []


def test_pack_budget():
    assert ranking.pack([10, 50, 5, 30], budget=40, limit=3) == ([0, 2], 15)
    assert ranking.pack([100], budget=40, limit=5) == ([0], 100)  # the first item is always kept
    assert ranking.pack([1, 1, 1], budget=40, limit=2) == ([0, 1], 2)


def test_cross_score_coverage_and_labels():
    assert ranking.lexical_coverage(["cache", "ttl"], ["the", "cache"]) == 0.5
    assert ranking.cross_score(0.5, 0.8) == pytest.approx(0.65)
    assert ranking.cross_score(1.0, -0.3) == pytest.approx(0.5)
    assert ranking.demote(0.8, True) == pytest.approx(0.4)
    assert [ranking.coverage_label(x) for x in (0.6, 0.59, 0.35, 0.2, 0.1, None)] == [
        "high", "partial", "partial", "low", "none", "none"]


def test_spread_activation_golden():
    # f0 -> e0 <- f1; seed f0 with 1.0: e0 = 1/1 * .5 = .5; each fact = .5/2 * .5 = .125
    act = spread_activation(2, 1, np.array([0, 1]), np.array([0, 0]), np.array([1.0, 0.0]))
    assert act.tolist() == pytest.approx([0.125, 0.125])
    act = spread_activation(2, 1, np.array([0, 1]), np.array([0, 0]), np.array([1.0, 0.0]), np.array([1.0]))
    assert act.tolist() == pytest.approx([0.375, 0.375])
    assert spread_activation(3, 0, np.zeros(0, np.int64), np.zeros(0, np.int64), np.ones(3)).tolist() == [0, 0, 0]


# -- temporal -----------------------------------------------------------------------------------------------
@pytest.mark.parametrize("text,start,end", [
    ("what did we do yesterday", d(2026, 3, 10), d(2026, 3, 11)),
    ("deploys last week", d(2026, 3, 2), d(2026, 3, 9)),
    ("3 days ago", d(2026, 3, 8), d(2026, 3, 9)),
    ("on 2026-01-05 we", d(2026, 1, 5), d(2026, 1, 6)),
    ("in March 2025", d(2025, 3, 1), d(2025, 4, 1)),
    ("last monday", d(2026, 3, 9), d(2026, 3, 10)),
    ("on March 4", d(2026, 3, 4), d(2026, 3, 5)),
    ("last month", d(2026, 2, 1), d(2026, 3, 1)),
])
def test_time_windows(text, start, end):
    w = find_time_window(text, REF)
    assert (w.start, w.end, w.kind) == (start, end, "range")


def test_month_in_the_future_means_last_year_and_recency():
    assert find_time_window("in March", d(2026, 2, 1)).start == d(2025, 3, 1)
    w = find_time_window("what is the current cache TTL", REF)
    assert w.kind == "recency" and w.phrase == "current"
    assert find_time_window("what is the cache TTL", REF) is None


def test_proximity():
    w = find_time_window("yesterday", REF)
    assert proximity(d(2026, 3, 10), w, REF) == 1.0
    assert proximity(d(2026, 3, 13), w, REF) == pytest.approx(math.exp(-1))  # 2 days out, scale 2
    rec = find_time_window("latest", REF)
    assert proximity(REF, rec, REF) == 1.0
    assert proximity(d(2026, 2, 9), rec, REF) == pytest.approx(math.exp(-(30 + 15 / 24) / 30))
    assert proximity(None, w, REF) == 0.0


# -- extraction ---------------------------------------------------------------------------------------------
def test_tokenize_keeps_code_tokens():
    assert tokenize("Edit config.yaml, run snake_case --fix; caches!") == ["edit", "config.yaml", "run", "snake_case",
                                                                          "fix", "cache"]
    assert split_sentences("First one. Second one!\n- third item") == ["First one.", "Second one!", "third item"]


def test_entities():
    ents = {(e.name, e.type) for e in detect_entities(
        "Alice prefers tabs in `config.yaml` and runs OpenClaw with --verbose on k8s; the TTL is low.")}
    assert {("Alice", "named"), ("config.yaml", "code"), ("OpenClaw", "tool"), ("--verbose", "code"),
            ("Kubernetes", "tool"), ("TTL", "term")} <= ents
    assert detect_entities("Deploy the thing now.") == []
    k8s = next(e for e in detect_entities("We run k8s") if e.name == "Kubernetes")
    assert k8s.aliases == ["k8s"]


def test_attribute_switch_and_values():
    assert extract_attribute("The cache TTL is 300s.") == ("cache ttl", "300s")
    assert extract_attribute("We bumped the cache TTL to 10 minutes because of load.") == ("cache ttl", "600s")
    assert extract_attribute("The problem is in the parser module somewhere.") == ("", "")
    assert extract_switch("We migrated from MySQL to Postgres last week.") == ("mysql", "postgres")
    assert extract_switch("We replaced Jest with Vitest.") == ("jest", "vitest")
    assert extract_switch("We no longer use Redis for sessions.") == ("redis", "")
    assert [normalise_value(v) for v in ("300 seconds", "5 minutes", "600s", "Postgres")] == [
        "300s", "300s", "600s", "postgres"]


def test_sentence_analysis_and_filters():
    f = analyse_sentence("Yesterday we deployed the Arclight API to Fargate.", "user", REF, ["m7"])
    assert f.fact_type == "event" and f.occurred_at == d(2026, 3, 10) and f.message_ids == ["m7"]
    assert {"Arclight API", "Fargate"} <= set(f.entity_refs)
    assert f.questions and all(q.endswith("?") for q in f.questions)
    assert analyse_sentence("We decided to use pnpm for the monorepo.", "user", REF, []).fact_type == "decision"
    assert not keep_sentence("Thanks, sounds good!")
    assert not keep_sentence("Should we use Redis for this?")
    assert keep_sentence("We use Redis for the session cache.")


def test_supersession_rules():
    assert attributes_match("cache ttl", "ttl") and attributes_match("ttl", "cache ttl")
    assert not attributes_match("cache ttl", "cache size")
    assert not attributes_match("redis ttl", "cache ttl")
    assert antonym_values("enabled", "disabled") and not antonym_values("300s", "600s")
    a, b = frozenset({"we", "use", "redis"}), frozenset({"we", "don", "t", "use", "redis"})  # as tokenized
    assert negation_conflict(a, False, b, True)
    assert not negation_conflict(a, False, b, False)


# -- auth, validation, config -------------------------------------------------------------------------------
def test_authenticate():
    for bad in (None, "", "  "):
        with pytest.raises(AuthError) as e:
            authenticate(bad, [])
        assert e.value.status == 401
    with pytest.raises(AuthError) as e:
        authenticate("k", ["a", "b"])
    assert e.value.status == 403
    assert authenticate("a", ["a", "b"]) == tenant_id_for_key("a")
    assert authenticate("anything", []) == tenant_id_for_key("anything") != tenant_id_for_key("other")


def test_config_keys_from_env(monkeypatch):
    monkeypatch.setenv("MEMRIG_CORTEX_API_KEYS", "k1, k2,")
    assert MockConfig.from_env().api_keys == ["k1", "k2"]


def _errors(fn, body):
    with pytest.raises(RequestInvalid) as e:
        fn(body)
    return {(tuple(x["loc"]), x["type"]) for x in e.value.errors}


def test_validation_errors_name_the_field():
    assert _errors(parse_retrieve, {}) == {(("body", "query"), "missing")}
    assert _errors(parse_retrieve, {"query": "x" * 2001}) == {(("body", "query"), "string_too_long")}
    assert _errors(parse_retrieve, {"query": "q", "mode": "slow", "top_k": True, "debug": "yes"}) == {
        (("body", "mode"), "enum"), (("body", "top_k"), "int_type"), (("body", "debug"), "bool_type")}
    assert _errors(parse_retrieve, {"query": "q", "top_k": 0}) == {(("body", "top_k"), "greater_than_equal")}
    assert _errors(parse_retrieve, {"query": "q", "reference_date": "someday"}) == {
        (("body", "reference_date"), "datetime_parsing")}
    assert _errors(parse_retrieve, [1, 2]) == {(("body",), "dict_type"), (("body", "query"), "missing")}
    assert _errors(parse_recall, {"query": "q", "limit": 51}) == {(("body", "limit"), "less_than_equal")}
    assert _errors(parse_ingest_conversation, {"messages": [{"role": "user"}, "x"]}) == {
        (("body", "messages", 0, "content"), "missing"), (("body", "messages", 1), "dict_type"),
        (("body", "messages", 1, "role"), "missing"), (("body", "messages", 1, "content"), "missing")}
    assert _errors(parse_ingest_conversation, {"messages": [{"role": "user", "content": "hi"}],
                                               "message_ids": ["a", "b"]}) == {(("body", "message_ids"), "value_error")}
    ok = parse_retrieve({"query": "q" * 2000, "reference_date": "2026-03-01"})
    assert ok["top_k"] == 5 and ok["mode"] == "full" and ok["reference_date"] == d(2026, 3, 1)


def test_payload_roundtrip_and_maturity():
    body = {"reference_date": REF, "messages": [{"timestamp": d(2026, 1, 1), "content": "x"}], "n": 1}
    assert decode_payload(encode_payload(body)) == body
    assert [maturity(n) for n in (0, 19, 20, 199, 200)] == [("cold", 1), ("cold", 1), ("warming", 2),
                                                            ("warming", 2), ("mature", 3)]


def test_latency_jitter_is_seeded(tmp_path):
    def seq(seed):
        e = CortexEngine(MockConfig(data_dir=str(tmp_path), latency_full_ms=100, latency_sigma=0.5, seed=seed))
        return [e.added_latency_ms("full") for _ in range(5)]

    assert seq(1) == seq(1) != seq(2)
    e = CortexEngine(MockConfig(data_dir=str(tmp_path), latency_fast_ms=40))
    assert e.added_latency_ms("fast") == 40 and e.added_latency_ms("full") == 0


async def test_incremental_index_matches_full_rebuild(tmp_path):
    """The writer extends its snapshot after each ingest; the result must equal a reload from SQLite."""
    e = CortexEngine(MockConfig(data_dir=str(tmp_path), embedder="hash"))
    batches = [
        ("The cache TTL is 300s. We use Redis for sessions on k8s.", "2026-01-01"),
        ("We raised the cache TTL to 600s. We run Kubernetes in eu-west-1.", "2026-01-05"),
        ("We use Redis for sessions on k8s. We migrated from Redis to Valkey for sessions.", "2026-01-09"),
        ("We don't use Redis for sessions on k8s.", "2026-01-10"),
    ]
    for text, ref in batches:
        await e.ingest_text("t", {"text": text, "session_id": ref, "reference_date": datetime.fromisoformat(ref)
                                  .replace(tzinfo=UTC)})
    st = e.store("t")
    builds = st.index_builds
    inc = st.index(e.embedder)
    assert st.index_builds == builds  # served from the incremental snapshot
    full = st._build(st.rev(), e.embedder)
    assert inc.rev == full.rev
    key = lambda f: (f.id, f.content, f.superseded_by, f.confidence, f.tokens, f.occurred_iso, f.session_id)  # noqa: E731
    assert [key(f) for f in inc.facts] == [key(f) for f in full.facts]
    assert [f.metadata for f in inc.facts] == [f.metadata for f in full.facts]
    assert np.allclose(inc.emb, full.emb) and np.allclose(inc.q_emb, full.q_emb)
    assert inc.q_text == full.q_text and inc.q_owner.tolist() == full.q_owner.tolist()
    assert inc.doc_len.tolist() == full.doc_len.tolist()

    def post(ix):
        return {t: sorted(zip(i.tolist(), tf.tolist(), strict=True)) for t, (i, tf) in ix.postings.items()}

    assert post(inc) == post(full)
    assert [(x.id, x.name, x.etype, x.aliases) for x in inc.entities] == [
        (x.id, x.name, x.etype, x.aliases) for x in full.entities]

    def mentions(ix):
        return sorted(zip(ix.m_fact.tolist(), ix.m_ent.tolist(), ix.m_visible.tolist(), strict=True))

    assert mentions(inc) == mentions(full)
    assert sum(f.superseded_by is not None for f in full.facts) >= 2
