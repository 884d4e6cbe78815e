"""The Arclight (Cortex V1.1) suite's numbers by hand (services/coordinator/suites/arclight.py): judge scores per
condition and category, grounded/generic/abstained/hallucinated shares, context tokens, pairwise win/tie/loss,
retrieval hit rates per backend and category with latency, the baseline and its fallback, and the rendered
table, character for character (the bootstrap intervals aside)."""

from __future__ import annotations

import pytest

from services.coordinator.suites.arclight import ArclightSuite

NATIVE, X = "OpenClaw native", "OpenClaw native (cortex)"


def sample(cond, pid, cat, score, tokens, retrievals, winner=None):
    s = {"condition": cond, "probe_id": pid, "category": cat, "context_tokens": tokens, "retrievals": retrievals}
    if score is not None:
        s["judge"] = {"score": score}
    if winner is not None:
        s["pairwise"] = {"winner": winner}
    return s


SAMPLES = [
    sample(NATIVE, "F1", "F", 3, 100, {"openclaw": {"hit": True, "latency_ms": 10.0}}),
    sample(NATIVE, "R1", "R", 0, 200, {"openclaw": {"hit": False, "latency_ms": 30.0}}),
    sample(NATIVE, "E1", "E", 2, 300, {"openclaw": {"hit": None, "latency_ms": None}}),
    sample(NATIVE, "T1", "T", None, 0, {}),  # not judged
    sample(X, "F1", "F", 3, 50, {"cortex": {"hit": True, "latency_ms": 5.0}}, "b"),
    sample(X, "R1", "R", 1, 50, {"cortex": {"hit": True, "latency_ms": 7.0}}, "a"),
    sample(X, "E1", "E", 3, 50, {"cortex": {"hit": False, "latency_ms": 9.0}}, "tie"),
    sample(X, "T1", "T", 3, 50, {"cortex": {"hit": True, "latency_ms": 11.0}}, "b"),
]


@pytest.fixture(scope="module")
def scored():
    suite = ArclightSuite(seed=0)
    return suite, suite.score(SAMPLES)


def _r(d):
    return {k: (round(v, 6) if isinstance(v, float) else v) for k, v in d.items()}


def test_judge_tables_by_hand(scored):
    _, out = scored
    n, x = out["conditions"][NATIVE], out["conditions"][X]
    # native: scores 2 (E1), 3 (F1), 0 (R1); T1 was not judged
    assert _r({k: n[k] for k in ("n", "mean", "grounded", "generic", "abstained", "hallucinated")}) == {
        "n": 3, "mean": 1.666667, "grounded": 0.333333, "generic": 0.333333, "abstained": 0.0, "hallucinated": 0.333333}
    assert n["by_category"]["F"]["mean"] == 3.0 and n["by_category"]["R"]["hallucinated"] == 1.0
    assert n["by_category"]["T"]["n"] == 0 and n["by_category"]["T"]["mean"] is None
    assert n["context_tokens_mean"] == 150.0 and n["pairwise"] is None  # (100 + 200 + 300 + 0) / 4
    assert n["mean_ci"]["mean"] == pytest.approx(5 / 3)
    # cortex: 3, 3, 1, 3
    assert _r({k: x[k] for k in ("n", "mean", "grounded", "generic", "abstained", "hallucinated")}) == {
        "n": 4, "mean": 2.5, "grounded": 0.75, "generic": 0.0, "abstained": 0.25, "hallucinated": 0.0}
    assert x["pairwise"] == {"n": 4, "win": 0.5, "loss": 0.25, "tie": 0.25}
    assert x["context_tokens_mean"] == 50.0
    assert (out["baseline"], out["fallback"]) == (NATIVE, False)
    assert [c["metric"] for c in out["comparisons"][X]["comparisons"]] == [
        "judge_mean", "grounded_rate", "hallucination_rate", "context_tokens"]


def test_retrieval_tables_by_hand(scored):
    _, out = scored
    o, c = out["retrieval"]["openclaw"], out["retrieval"]["cortex"]
    assert o["hit_rate"]["mean"] == 0.5 and o["hit_rate"]["n"] == 2  # E1's unknown hit is left out
    assert {k: v["mean"] for k, v in o["by_category"].items()} == {"F": 1.0, "R": 0.0, "E": None, "S": None, "T": None}
    assert (o["latency"]["n"], o["latency"]["p50_ms"], o["latency"]["p95_ms"]) == (2, 20.0, 29.0)
    assert c["hit_rate"]["mean"] == 0.75
    assert {k: v["mean"] for k, v in c["by_category"].items()} == {"F": 1.0, "R": 1.0, "E": 0.0, "S": None, "T": 1.0}
    assert (c["latency"]["p50_ms"], c["latency"]["p95_ms"]) == (8.0, pytest.approx(10.7))


def test_render_by_hand(scored):
    suite, out = scored
    lines = suite.render(out).split("\n")
    assert lines[2] == "Scores 0-3 (3 grounded, 2 generic, 1 abstained, 0 hallucinated); judge: not recorded."
    i = lines.index(f"| Metric | {NATIVE} | {X} |")
    assert lines[i + 3:i + 15] == [
        "| Grounded (3) | 33.3% | 75.0% |", "| Generic (2) | 33.3% | 0.0% |", "| Abstained (1) | 0.0% | 25.0% |",
        "| Hallucinated (0) | 33.3% | 0.0% |", "| F: Factual (1) | 3.00 | 3.00 |", "| R: Rationale (1) | 0.00 | 1.00 |",
        "| E: Evolution (1) | 2.00 | 3.00 |", "| S: Synthesis (0) | — | — |",
        "| T: Temporal (current value) (1) | — | 3.00 |", "| Context tokens / prompt (cl100k) | 150 | 50 |",
        "| Pairwise vs base: win/tie/loss | — | 50.0%/25.0%/25.0% |", ""]
    assert lines[i + 2].startswith("| **Mean score (0-3)** [95% CI] | 1.67 [")
    j = lines.index("| backend | hit rate [CI] | F | R | E | S | T | p50 ms | p95 ms |")
    cortex, openclaw = lines[j + 2].split(" | "), lines[j + 3].split(" | ")
    assert cortex[0] == "| cortex" and cortex[1].startswith("75.0% [") and cortex[2:] == [
        "100.0%", "100.0%", "0.0%", "—", "100.0%", "8.0", "10.7 |"]
    assert openclaw[0] == "| openclaw" and openclaw[2:] == ["100.0%", "0.0%", "—", "—", "—", "20.0", "29.0 |"]
    assert not any("was not in this run" in line for line in lines)


def test_fallback_baseline_is_named_in_the_report():
    renamed = [dict(s, condition={NATIVE: "compacted", X: "compacted + cortex"}[s["condition"]]) for s in SAMPLES]
    suite = ArclightSuite(seed=0)
    out = suite.score(renamed)
    assert (out["baseline"], out["fallback"]) == ("compacted", True)
    assert list(out["comparisons"]) == ["compacted + cortex"]
    text = suite.render(out)
    assert "The openclaw backend was not in this run" in text and "*OpenClaw native* =" not in text
    only_x = suite.score([s for s in SAMPLES if s["condition"] == X])
    assert only_x["baseline"] is None and only_x["comparisons"] == {}


def test_comparison_inputs_by_hand(scored):
    _, out = scored
    # paired over the probes judged on both sides (E1, F1, R1; T1 has no native judgement), tokens over all four
    got = {c["metric"]: (c["n"], round(c["mean_a"], 6), round(c["mean_b"], 6), c["higher_is_better"])
           for c in out["comparisons"][X]["comparisons"]}
    assert got == {"judge_mean": (3, 1.666667, 2.333333, True),  # (2 + 3 + 0)/3 against (3 + 3 + 1)/3
                   "grounded_rate": (3, 0.333333, 0.666667, True),  # score 3: F1 | E1, F1
                   "hallucination_rate": (3, 0.333333, 0.0, False),  # score 0: R1 | none
                   "context_tokens": (4, 150.0, 50.0, False)}


def test_conditions_per_backend_set():
    from services.coordinator.suites.arclight import FALLBACK, openclaw_backend

    s = ArclightSuite(seed=0)
    names = [(c.name, c.context) for c in s.conditions(["openclaw-real", "openclaw", "cortex", "none", "compacted"], {})]
    assert names == [(NATIVE, ("compaction", "backend:openclaw-real")),
                     (f"{NATIVE} (openclaw)", ("compaction", "backend:openclaw")),
                     (f"{NATIVE} + cortex", ("compaction", "backend:openclaw-real", "backend:cortex"))]
    assert [(c.name, c.context) for c in s.conditions(["cortex"], {})] == [
        (FALLBACK, ("compaction",)), (f"{FALLBACK} + cortex", ("compaction", "backend:cortex"))]
    assert openclaw_backend(["x", "openclaw-late"]) == "openclaw-late" and openclaw_backend(["x"]) is None
    assert (s.retrieve_top_k("openclaw"), s.retrieve_top_k("cortex"), s.retrieve_mode("cortex-fast"),
            s.retrieve_mode("cortex")) == (6, 6, "fast", "full")
    assert ArclightSuite({"openclaw_top_k": 3, "top_k": 9}).retrieve_top_k("openclaw-real") == 3


def test_load_corpus_and_probes():
    from datetime import UTC, datetime, timedelta

    from services.coordinator.suites import arclight as A

    data = ArclightSuite(seed=0).load()
    sessions = data.corpora["arclight"].sessions
    start = datetime(2026, 1, 5, 9, 0, tzinfo=UTC)
    # session num n on day d starts at START + d days + (n mod 3) hours
    assert [s.started_at for s in sessions] == [start + timedelta(days=d, hours=n % 3) for n, d, _ in A.D.SESSIONS]
    assert sessions[0].session_id == "arc-s01" and sessions[0].messages[0].id == "arc-s01-m0"
    assert [m.role for m in sessions[0].messages[:2]] == ["user", "assistant"]
    assert data.info["sessions"] == 45 and data.info["prompts"] == 50
    assert data.info["categories"] == {"F": 15, "R": 10, "E": 10, "S": 8, "T": 7}
    ref = max(s.started_at for s in sessions) + timedelta(days=1)
    p = data.probes[0]
    assert (p.id, p.namespace, p.reference_time) == ("F01", "arclight", ref)
    src = {int(x[-2:]) for x in p.meta["source_sessions"]}
    exp = [e.lower() for e in p.expected]
    mids = [m.id for s in sessions if int(s.session_id[-2:]) in src for m in s.messages
            if any(e in m.content.lower() for e in exp)]
    assert p.evidence_ids == (mids or [m.id for s in sessions if int(s.session_id[-2:]) in src for m in s.messages])
    only = ArclightSuite({"categories": "ST", "limit": 3}).load()
    assert [q.category for q in only.probes] == ["S", "S", "S"] and only.info["prompts"] == 3


def test_run_probe_with_pairwise():
    import asyncio

    from services.coordinator.suites.base import Condition, Probe
    from services.coordinator.suites.common import stable_seed

    class Ctx:
        judge_passes = 1

        def __init__(self):
            self.calls = []

        async def answer_and_judge(self, probe, condition):
            self.calls.append(("judge", condition.name))
            return {"answer": "with X", "judge": {"score": 3}}

        async def gather_context(self, probe, condition):
            self.calls.append(("gather", condition.name, condition.context))
            return ["block"], {}

        async def answer(self, question, blocks):
            self.calls.append(("answer", blocks))
            return {"answer": "base only"}

        class judge_llm:
            replies = []

            @staticmethod
            async def chat(messages, temperature):
                from types import SimpleNamespace

                return SimpleNamespace(text="X")

    probe = Probe(id="F01", question="q?", category="F", ground_truth="gt", expected=["x"], namespace="arclight")
    cond = Condition(f"{NATIVE} + cortex", ("compaction", "backend:openclaw", "backend:cortex"))
    ctx = Ctx()
    body = asyncio.run(ArclightSuite({"pairwise": True}, seed=4).run_probe(ctx, probe, cond))
    assert ctx.calls == [("judge", cond.name), ("gather", NATIVE, ("compaction", "backend:openclaw")),
                         ("answer", ["block"])]
    assert body["judge_prompt"] == "JUDGE_SYSTEM" and (body["pairwise"]["a"], body["pairwise"]["b"]) == (NATIVE, cond.name)
    import random

    a_first = random.Random(stable_seed(4, "F01", cond.name)).random() < 0.5
    assert body["pairwise"]["winner"] == ("a" if a_first else "b")  # the judge always says X (shown first)
    plain = asyncio.run(ArclightSuite(seed=4).run_probe(Ctx(), probe, cond))
    assert "pairwise" not in plain
    base = asyncio.run(ArclightSuite({"pairwise": True}, seed=4).run_probe(Ctx(), probe, Condition(NATIVE, ("compaction",))))
    assert "pairwise" not in base


def test_evidence_and_message_ids_for_every_prompt():
    """Evidence = the source sessions' messages holding an expected keyword, all of them when none does; messages
    are numbered m0, m1, ... in order (user 2j, assistant 2j + 1)."""
    data = ArclightSuite(seed=0).load()
    sessions = {s.session_id: s for s in data.corpora["arclight"].sessions}
    for s in sessions.values():
        assert [m.id for m in s.messages] == [f"{s.session_id}-m{i}" for i in range(len(s.messages))]
        assert [m.role for m in s.messages] == ["user", "assistant"] * (len(s.messages) // 2)
    narrowed = 0
    for p in data.probes:
        msgs = [m for sid in p.meta["source_sessions"] for m in sessions[sid].messages]
        hits = [m.id for m in msgs if any(e.lower() in m.content.lower() for e in p.expected)]
        assert p.evidence_ids == (hits or [m.id for m in msgs])
        narrowed += 0 < len(hits) < len(msgs)
    assert narrowed == 7  # prompts whose keywords pick out some, not all, of their sessions' messages


def test_samples_read_back_from_json_score_the_same(scored):
    import json

    suite, out = scored
    assert suite.score(json.loads(json.dumps(SAMPLES))) == out


def test_missing_tokens_count_zero_and_render_without_a_base():
    rows = [{k: v for k, v in sample("Y", "F1", "F", 2, 0, {}).items() if k != "context_tokens"},
            sample("Z", "F1", "F", 1, 40, {})]
    suite = ArclightSuite(seed=0)
    out = suite.score(rows)
    assert out["conditions"]["Y"]["context_tokens_mean"] == 0.0 and out["baseline"] is None
    lines = suite.render(out).split("\n")
    assert lines[lines.index("| Metric | Y | Z |") + 2].startswith("| **Mean score (0-3)** [95% CI] | 2.00")
    assert not any(line.startswith("#### Scorecard") for line in lines)
    empty = suite.render({"conditions": {}, "baseline": None})
    assert "| F: Factual (0) |" in empty and "| S: Synthesis (0) |" in empty


def test_the_scorecard_is_rendered_when_compared(scored):
    suite, out = scored
    lines = suite.render(out).split("\n")
    assert f"#### Scorecard: {X} vs {NATIVE}" in lines


def test_message_numbering_with_several_pairs(monkeypatch):
    """The corpus has one exchange per session; the numbering rule is checked on a crafted two-exchange one."""
    from datetime import UTC, datetime

    from services.coordinator.suites import arclight as A

    monkeypatch.setattr(A.D, "SESSIONS", [(7, 2, [("u0", "a0"), ("u1", "a1"), ("u2", "a2")])])
    (s,) = A.build_sessions()
    assert s.session_id == "arc-s07" and s.started_at == datetime(2026, 1, 7, 10, 0, tzinfo=UTC)  # day 2, 7 % 3 h
    assert [(m.id, m.role, m.content) for m in s.messages] == [
        ("arc-s07-m0", "user", "u0"), ("arc-s07-m1", "assistant", "a0"), ("arc-s07-m2", "user", "u1"),
        ("arc-s07-m3", "assistant", "a1"), ("arc-s07-m4", "user", "u2"), ("arc-s07-m5", "assistant", "a2")]


def test_interval_kinds(scored):
    """Hit rates are rates (an all-hit category gets a Wilson interval); the 0-3 judge mean is a score (never
    Wilson, even when every prompt scored 0)."""
    _, out = scored
    f = out["retrieval"]["cortex"]["by_category"]["F"]  # 1 of 1: lower bound 1/(1 + 1.96²)
    assert f["method"].startswith("Wilson") and f["ci"][0] == pytest.approx(0.20654, abs=1e-5) and f["ci"][1] == 1.0
    zeros = ArclightSuite(seed=0).score([sample(NATIVE, p, "F", 0, 1, {}) for p in ("F1", "F2")])
    assert zeros["conditions"][NATIVE]["mean_ci"]["ci"] == [0.0, 0.0]
    assert not zeros["conditions"][NATIVE]["mean_ci"]["method"].startswith("Wilson")
