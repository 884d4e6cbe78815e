"""The Octybot suite's numbers by hand (services/coordinator/suites/octybot.py): pass when every expected string
is in the retrieved context (hyphens and whitespace normalised, memory texts included), N/A queries apart,
retrieval and store-then-retrieve rates, tokens, latency, failures, the baseline, and the rendered tables,
character for character (the bootstrap intervals aside)."""

from __future__ import annotations

import pytest

from services.coordinator.suites.octybot import OctybotSuite, normalise, passes


def sample(cond, pid, cat, kind, expected, ctx="", texts=(), tokens=0, latency=None):
    rec = {"formatted_context": ctx, "memories": [{"text": t} for t in texts]}
    if latency is not None:
        rec["latency_ms"] = latency
    return {"condition": cond, "probe_id": pid, "category": cat, "expected": list(expected), "meta": {"kind": kind},
            "retrievals": {cond: rec}, "context_tokens": tokens}


SAMPLES = [
    sample("openclaw", "R01", "entity", "retrieval", ["Berg", "ppc specialist"], "Jonas  Berg is a PPC\nspecialist",
           tokens=10, latency=4.0),  # whitespace collapsed: both strings in
    sample("openclaw", "R02", "entity", "retrieval", ["Northgate"], "", ["northgate budget"], 0, 6.0),  # memory text
    sample("openclaw", "R33", "multi-hop", "retrieval", ["a\u2013b"], "A-B plan", tokens=5, latency=2.0),  # en dash
    sample("openclaw", "R36", "edge", "retrieval", [], "", ["something"], 5),  # N/A, returned something
    sample("openclaw", "R37", "edge", "retrieval", [], "", (), 0),  # N/A, returned nothing
    sample("openclaw", "S01", "store", "store", ["alt text", "writer"], "alt text by the designer", tokens=20,
           latency=8.0),  # "writer" missing: fails
    sample("cortex", "R01", "entity", "retrieval", ["Berg", "ppc specialist"], "berg ppc specialist", tokens=3,
           latency=1.0),
    sample("cortex", "S01", "store", "store", ["alt text", "writer"], "Alt Text by the writer", tokens=3, latency=3.0),
]


def test_pass_rule():
    assert normalise("A\u2011B\u00a0 C\n") == "a-b c"
    assert passes("x", []) is None and passes("Alpha beta", ["ALPHA", "beta"]) is True and passes("a", ["b"]) is False


@pytest.fixture(scope="module")
def scored():
    suite = OctybotSuite(seed=0)
    return suite, suite.score(SAMPLES)


def test_tables_by_hand(scored):
    _, out = scored
    o, c = out["conditions"]["openclaw"], out["conditions"]["cortex"]
    means = {k: (round(v["mean"], 6) if v["mean"] is not None else None) for k, v in o["overall"].items()}
    # passes R01 R02 R33, fails S01, R36 R37 N/A; tokens (10 + 0 + 5 + 5 + 0 + 20) / 6; latency 4 6 2 8
    assert means == {"pass": 0.75, "retrieval_pass": 1.0, "store_pass": 0.0, "token_spend": 6.666667,
                     "latency_ms": 5.0}
    assert (o["overall"]["pass"]["n"], o["overall"]["retrieval_pass"]["n"], o["overall"]["store_pass"]["n"]) == (4, 3, 1)
    assert (o["n"], o["na_queries"], o["na_returned_something"], o["failed"]) == (6, 2, 1, ["S01"])
    assert {k: v["mean"] for k, v in o["by_category"].items()} == {"edge": None, "entity": 1.0, "multi-hop": 1.0,
                                                                   "store": 0.0}
    assert (o["latency"]["n"], o["latency"]["p50_ms"]) == (4, 5.0)
    assert {k: v["mean"] for k, v in c["overall"].items()} == {"pass": 1.0, "retrieval_pass": 1.0, "store_pass": 1.0,
                                                               "token_spend": 3.0, "latency_ms": 2.0}
    assert (c["na_queries"], c["failed"]) == (0, [])
    assert out["baseline"] == "openclaw"
    assert [x["metric"] for x in out["comparisons"]["cortex"]["comparisons"]] == [
        "pass", "retrieval_pass", "store_pass", "token_spend", "latency_ms"]


def test_render_by_hand(scored):
    suite, out = scored
    lines = suite.render(out).split("\n")
    i = lines.index("| backend | overall pass | retrieval (40) | store→retrieve (10) | N/A queries returning something "
                    "| ctx tokens | p50 ms |")
    # all-pass rates get Wilson intervals (z = 1.96): 2 of 2, lower bound 2/(2 + z²); 1 of 1, 1/(1 + z²)
    assert lines[i + 2] == ("| cortex | 100.0% [34.2%, 100.0%] | 100.0% [20.7%, 100.0%] | 100.0% [20.7%, 100.0%] "
                            "| 0/0 | 3 | 2.0 |")
    cells = lines[i + 3].split(" | ")
    assert cells[0] == "| openclaw" and cells[1].startswith("75.0% [") and cells[3] == "0.0% [0.0%, 79.3%]"  # 0 of 1: z²/(1 + z²)
    assert cells[4:] == ["1/2", "7", "5.0 |"]
    j = lines.index("| category | cortex | openclaw |")
    assert lines[j + 2:j + 12] == [
        "| Entity lookups (R01-R06) | 100.0% | 100.0% |", "| Client/project details (R07-R10) | — | — |",
        "| Tool/process usage (R11-R16) | — | — |", "| Workflows (R17-R19) | — | — |",
        "| Events/status (R20-R23) | — | — |", "| Instructions (R24-R28) | — | — |",
        "| Comparisons/analytics (R29-R32) | — | — |", "| Multi-hop (R33-R35) | — | 100.0% |",
        "| Edge cases (R36-R40) | — | — |", "| Store then retrieve (S01-S10) | 100.0% | 0.0% |"]
    assert "Failed: cortex: none; openclaw: S01" in lines


def test_corpus_sessions_and_probes():
    from datetime import UTC, datetime, timedelta

    from services.coordinator.suites import octybot as O

    seed_s, store_s = O.build_sessions()
    start = datetime(2026, 2, 2, 9, 0, tzinfo=UTC)
    assert [s.started_at for s in seed_s] == [start + timedelta(days=d) for d, _ in O.D.SESSIONS]
    last = max(d for d, _ in O.D.SESSIONS)  # the store sessions follow, one a day from last + 2
    assert [s.started_at for s in store_s] == [start + timedelta(days=last + 2 + k) for k in range(len(O.D.STORE))]
    s1 = seed_s[1]  # session 1: user statements, each acknowledged in turn (ACKS[(i + j) % 4])
    assert [m.id for m in s1.messages[:4]] == ["oc-s01-m0", "oc-s01-m1", "oc-s01-m2", "oc-s01-m3"]
    assert [m.content for m in s1.messages[1::2]] == [O.ACKS[(1 + j) % 4] for j in range(len(s1.messages) // 2)]
    assert [m.content for m in s1.messages[::2]] == list(O.D.SESSIONS[1][1])
    st = store_s[0]
    assert (st.session_id, [m.role for m in st.messages], st.messages[1].content) == (
        "oc-S01", ["user", "assistant"], "Saved.")
    data = O.OctybotSuite(seed=0).load()
    ref = store_s[-1].started_at + timedelta(days=1)
    assert data.info["sessions"] == 24 and data.info["retrieval_queries"] == 40 and data.info["store_cases"] == 10
    assert all(p.reference_time == ref and p.namespace == "agency" for p in data.probes)
    assert [p.meta["kind"] for p in data.probes].count("store") == 10 and data.probes[0].id == "R01"
    s01 = next(p for p in data.probes if p.id == "S01")
    assert (s01.category, s01.meta["store_kind"], s01.meta["stored"]) == ("store", O.D.STORE[0][1], O.D.STORE[0][2])
    assert O.OctybotSuite.defaults == {"top_k": 6, "mode": "fast"}


def test_run_probe_passes_on_context_and_memories():
    import asyncio

    from services.coordinator.suites.base import Condition, Probe

    class Ctx:
        async def retrieve(self, backend, probe):
            return {"formatted_context": "hello world", "memories": [{"text": "Head of SEO"}]}

    probe = Probe(id="R01", question="Who is Peter?", category="entity", expected=["head of seo", "hello"],
                  namespace="agency")
    out = asyncio.run(OctybotSuite().run_probe(Ctx(), probe, Condition("x", ("backend:a", "backend:b"), False)))
    assert (out["passed"], out["context_tokens"], list(out["retrievals"])) == (True, 2, ["a"])


def test_direction_of_every_compared_metric(scored):
    _, out = scored
    flags = {x["metric"]: x["higher_is_better"] for x in out["comparisons"]["cortex"]["comparisons"]}
    assert flags == {"pass": True, "retrieval_pass": True, "store_pass": True, "token_spend": False,
                     "latency_ms": False}


def test_samples_read_back_from_json_score_the_same(scored):
    import json

    suite, out = scored
    assert suite.score(json.loads(json.dumps(SAMPLES))) == out


def test_a_probe_of_no_known_kind_and_missing_tokens():
    """No kind (or an unknown one): counted in the overall pass only; no context_tokens: 0 tokens."""
    rows = [sample("x", "Q1", "entity", None, ["a"], "a"), sample("x", "Q2", "entity", "other", ["a"], "a"),
            sample("x", "Q3", "entity", "zzz", ["a"], "b")]
    del rows[0]["meta"]["kind"]
    del rows[1]["context_tokens"]
    o = OctybotSuite(seed=0).score(rows)["conditions"]["x"]["overall"]
    assert (o["pass"]["n"], o["pass"]["mean"]) == (3, pytest.approx(2 / 3))
    assert o["retrieval_pass"]["n"] == 0 and o["store_pass"]["n"] == 0
    assert o["token_spend"]["mean"] == 0.0


def test_the_scorecard_is_rendered_only_when_compared(scored):
    suite, out = scored
    assert "#### Scorecard: cortex vs openclaw" in suite.render(out).split("\n")
    alone = suite.score([s for s in SAMPLES if s["condition"] == "cortex"])
    assert not any(line.startswith("#### ") for line in suite.render(alone).split("\n"))
