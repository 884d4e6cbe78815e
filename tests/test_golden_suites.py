"""Golden suite-level tables: crafted samples whose every quoted number was computed by hand.

Each suite's `score` is a pure function of samples (the dicts the runner writes to samples.jsonl), so these
tests build the samples directly, score them, and assert the point estimates a report would quote: LoCoMo's
headline F1 over categories 1-4 with category 5 apart, turn- and session-level recall@k; LongMemEval's
recall_any / recall_all / ndcg_any with abstention questions skipped; MADial recall, primary hit and MRR;
Cortex V1's condition × category judge table and per-backend retrieval table. Intervals are not pinned here
(the bootstrap is the statistics module's business); only means, counts and rates.

The samples, with the hand computations written next to each so a reader can re-derive them, are in
tests/fixtures_golden.py (the suite pipeline tests reuse them).
"""

from __future__ import annotations

import math

import pytest

from services.coordinator.suites.cortex_v1 import CortexV1Suite
from services.coordinator.suites.locomo import LocomoSuite
from services.coordinator.suites.longmemeval import LongMemEvalSuite
from services.coordinator.suites.madial import MadialSuite
from tests.fixtures_golden import LME_SAMPLES, MADIAL_SAMPLES, cv1_samples, locomo_samples


def _suite(cls, **opts):
    s = cls(opts, seed=0)
    s._info = {}  # load() info is irrelevant to scoring; do not touch the real data directory
    return s


def _mean(m: dict, cond: str, metric: str) -> float | None:
    return m["conditions"][cond]["overall"][metric]["mean"]


# ------------------------------------------------------------------------------------------------------
# LoCoMo


def test_locomo_headline_f1_leaves_category_5_out():
    m = _suite(LocomoSuite).score(locomo_samples())
    o = m["conditions"]["openclaw"]["overall"]
    # cats 1-4: (0.5 + 0.8 + 1.0 + 0.5 + 0.0) / 5
    assert o["f1_cats_1_4"]["mean"] == pytest.approx(2.8 / 5) and o["f1_cats_1_4"]["n"] == 5
    # all categories (category 5 scored 1 by the official rule): 3.8 / 6
    assert o["f1"]["mean"] == pytest.approx(3.8 / 6) and o["f1"]["n"] == 6
    by = m["conditions"]["openclaw"]["by_category"]
    assert {c: by[c]["f1"]["mean"] for c in by} == pytest.approx(
        {"1": 0.5, "2": 0.8, "3": 1.0, "4": 0.25, "5": 1.0})
    assert by["5"]["f1_cats_1_4"]["n"] == 0
    # exact match, cats 1-4, compares with the whole gold (q3's "hiking; also camping" too): none match
    assert o["exact_match"]["mean"] == 0.0 and o["exact_match"]["n"] == 5


def test_locomo_turn_and_session_recall_at_k():
    m = _suite(LocomoSuite).score(locomo_samples())
    o = m["conditions"]["openclaw"]["overall"]
    # per probe (q1, q2, q3, q4, q5); q6 has no gold and is skipped
    turn = {1: [0, 0, 1, 0, 1], 3: [0.5, 0, 1, 0, 1], 5: [1, 1, 1, 0, 1], 10: [1, 1, 1, 0, 1]}
    sess = {1: [0.5, 0, 1, 0, 1], 3: [1, 0, 1, 0, 1], 5: [1, 1, 1, 0, 1], 10: [1, 1, 1, 0, 1]}
    anyk = {1: [0, 0, 1, 0, 1], 3: [1, 0, 1, 0, 1], 5: [1, 1, 1, 0, 1], 10: [1, 1, 1, 0, 1]}
    for k in (1, 3, 5, 10):
        assert o[f"turn_recall@{k}"]["mean"] == pytest.approx(sum(turn[k]) / 5), k
        assert o[f"session_recall@{k}"]["mean"] == pytest.approx(sum(sess[k]) / 5), k
        assert o[f"turn_recall_any@{k}"]["mean"] == pytest.approx(sum(anyk[k]) / 5), k
        assert o[f"turn_recall@{k}"]["n"] == 5
    # the literal table: turn 0.4 / 0.5 / 0.8 / 0.8, session 0.5 / 0.6 / 0.8 / 0.8
    assert [o[f"session_recall@{k}"]["mean"] for k in (1, 3, 5, 10)] == pytest.approx([0.5, 0.6, 0.8, 0.8])
    assert [o[f"turn_recall@{k}"]["mean"] for k in (1, 3, 5, 10)] == pytest.approx([0.4, 0.5, 0.8, 0.8])
    assert o["token_spend"]["mean"] == pytest.approx(35.0)  # 10..60
    assert m["conditions"]["openclaw"]["latency"]["p50_ms"] == pytest.approx(3.5)


def test_locomo_rendered_headline_quotes_the_numbers():
    suite = _suite(LocomoSuite)
    md = suite.render(suite.score(locomo_samples()))
    row = next(line for line in md.splitlines() if line.startswith("| openclaw | 6 |"))
    assert row.split("|")[3].strip() == "—"  # recall at the budget: these samples carry no budget account
    assert row.split("|")[4].strip().startswith("0.560")  # F1 (cats 1-4)
    assert row.split("|")[6].strip().startswith("0.800")  # turn R@5


def test_locomo_comparison_uses_paired_headline():
    # a second condition identical except q4 answered right: cats 1-4 go from 2.8/5 to 3.3/5
    a = locomo_samples("openclaw")
    b = locomo_samples("mine")
    b[3]["answer"] = "blue car"
    m = _suite(LocomoSuite).score(a + b)
    assert _mean(m, "mine", "f1_cats_1_4") == pytest.approx(3.3 / 5)
    comp = {c["metric"]: c for c in m["comparisons"]["mine"]["comparisons"]}
    assert m["baseline"] == "openclaw"
    assert comp["f1_cats_1_4"]["delta"] == pytest.approx(0.1)
    assert comp["f1_cats_1_4"]["n"] == 5


# ------------------------------------------------------------------------------------------------------
# LongMemEval


def test_longmemeval_recall_and_ndcg_skip_abstention():
    m = _suite(LongMemEvalSuite).score(LME_SAMPLES)
    o = m["conditions"]["openclaw"]["overall"]
    ndcg3 = (1.0 + (1.0 + 1.0 / math.log2(3)) / 2.0) / 2.0  # q1 1, q2 0.81546
    for level in ("turn", "session"):  # both levels rank the same way in these samples
        assert o[f"{level}_recall_any@1"]["mean"] == pytest.approx(0.5)
        assert o[f"{level}_recall_any@3"]["mean"] == pytest.approx(1.0)
        assert o[f"{level}_recall_all@1"]["mean"] == pytest.approx(0.0)
        assert o[f"{level}_recall_all@3"]["mean"] == pytest.approx(1.0)
        assert o[f"{level}_ndcg_any@1"]["mean"] == pytest.approx(0.5)
        for k in (3, 5, 10, 50):
            assert o[f"{level}_ndcg_any@{k}"]["mean"] == pytest.approx(ndcg3), (level, k)
        assert o[f"{level}_recall_any@5"]["n"] == 2  # q3_abs and q4 skipped
    assert ndcg3 == pytest.approx(0.907732, abs=1e-6)
    # QA accuracy counts every judged question, abstention included: 3 of 4
    assert o["qa_accuracy"]["mean"] == pytest.approx(0.75) and o["qa_accuracy"]["n"] == 4
    by = m["conditions"]["openclaw"]["by_type"]
    assert by["multi-session"]["qa_accuracy"]["mean"] == pytest.approx(1.0)
    assert by["temporal-reasoning"]["session_ndcg_any@5"]["mean"] == pytest.approx(
        (1.0 + 1.0 / math.log2(3)) / 2.0)


# ------------------------------------------------------------------------------------------------------
# MADial


def test_madial_recall_primary_and_mrr():
    m = _suite(MadialSuite).score(MADIAL_SAMPLES)
    o = m["conditions"]["openclaw"]["overall"]
    assert o["recall@1"]["mean"] == pytest.approx(1.5 / 3)
    assert o["recall@3"]["mean"] == pytest.approx(2 / 3)
    assert o["recall_any@1"]["mean"] == pytest.approx(2 / 3)
    assert o["primary_hit@1"]["mean"] == pytest.approx(1 / 3)
    assert o["primary_hit@3"]["mean"] == pytest.approx(2 / 3)
    assert o["mrr"]["mean"] == pytest.approx(2 / 3)
    assert o["primary_mrr"]["mean"] == pytest.approx((1 / 3 + 0 + 1) / 3)
    assert o["mrr"]["n"] == 3
    # tokens are counts: a constant 7 is a point, not a Wilson interval; a rate of 1 on one dialogue is Wilson
    assert o["token_spend"]["ci"] == [7.0, 7.0] and not o["token_spend"]["method"].startswith("Wilson")
    one = _suite(MadialSuite).score(MADIAL_SAMPLES[2:])["conditions"]["openclaw"]["overall"]["recall@1"]
    assert one["method"].startswith("Wilson") and one["ci"][0] == pytest.approx(1 / (1 + 1.96 ** 2), abs=1e-4)


# ------------------------------------------------------------------------------------------------------
# Cortex V1


def test_cortex_v1_condition_by_category_table():
    m = CortexV1Suite().score(cv1_samples())
    comp, oc = m["conditions"]["compacted"], m["conditions"]["OpenClaw native"]
    assert comp["mean"] == pytest.approx(9 / 5) and oc["mean"] == pytest.approx(11 / 5)
    assert (comp["grounded"], comp["generic"], comp["abstained"], comp["hallucinated"]) == pytest.approx(
        (0.4, 0.2, 0.2, 0.2))
    assert (oc["grounded"], oc["generic"], oc["abstained"], oc["hallucinated"]) == pytest.approx((0.4, 0.4, 0.2, 0.0))
    assert {c: comp["by_category"][c]["mean"] for c in "ABCD"} == pytest.approx({"A": 2, "B": 2, "C": 0, "D": 3})
    assert {c: oc["by_category"][c]["mean"] for c in "ABCD"} == pytest.approx({"A": 3, "B": 2, "C": 2, "D": 1})
    assert comp["by_category"]["A"]["n"] == 2
    assert comp["compaction_drops_mean"] == pytest.approx(0.5) and oc["compaction_drops_mean"] == pytest.approx(2.5)
    assert oc["context_tokens_mean"] == pytest.approx(302.0)
    assert m["delta_vs_compacted"]["OpenClaw native"] == pytest.approx(0.4)
    assert m["delta_vs_compacted"]["compacted"] == 0.0


def test_cortex_v1_retrieval_table():
    r = CortexV1Suite().score(cv1_samples())["retrieval"]["openclaw"]
    assert r["hit_rate"] == pytest.approx(0.6)
    assert r["by_category"] == pytest.approx({"A": 1.0, "B": 0.0, "C": 1.0, "D": 0.0})
    assert r["latency"]["p50_ms"] == pytest.approx(30.0) and r["latency"]["p95_ms"] == pytest.approx(48.0)
    assert r["server_latency"]["p50_ms"] == pytest.approx(15.0)
    assert r["empty_rate"] == pytest.approx(0.2) and r["degraded"] == 1 and r["calls"] == 5
    md = CortexV1Suite().render(CortexV1Suite().score(cv1_samples()))
    assert "| **Mean score (0-3)** | 1.80 | 2.20 |" in md
    assert "| C: Preference/convention (1) | 0.00 | 2.00 |" in md
    assert "| openclaw | 60.0% | 100.0% | 0.0% | 100.0% | 0.0% | 30.0 | 48.0 | 15.0 | 20.0% | 1 | 5 |" in md
