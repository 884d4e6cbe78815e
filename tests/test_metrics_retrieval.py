"""Retrieval, memory-state and token metrics on hand-computed cases (ties, empty lists, k past the end)."""

import math

import pytest

from services.coordinator.metrics import memory_state as ms
from services.coordinator.metrics import retrieval as r
from services.coordinator.metrics import tokens as tk
from services.coordinator.metrics.registry import all_metrics


def test_every_metric_has_direction_and_formula():
    for m in all_metrics().values():
        assert isinstance(m.higher_is_better, bool)
        assert m.formula, f"{m.name} has no formula docstring"


def test_relevance_flags_case_and_whitespace():
    assert r.relevance_flags(["Port  4000 here", "nothing", ""], ["port 4000"]) == [True, False, False]
    assert r.relevance_flags(["abc"], []) == [False]


def test_mrr_and_hits():
    rels = [False, False, True, True]
    assert r.reciprocal_rank(rels) == pytest.approx(1 / 3)
    assert r.reciprocal_rank([]) == 0.0
    assert r.recall_at_1(rels) == 0.0
    assert r.recall_at_3(rels) == 1.0
    assert r.recall_at_5(rels) == 1.0  # k past the end uses the whole list
    assert r.recall_at_k([True], 50) == 1.0
    assert r.recall_at_5([]) == 0.0


def test_precision_at_5_keeps_denominator():
    assert r.precision_at_5([True, False]) == pytest.approx(1 / 5)
    assert r.precision_at_5([True] * 7) == 1.0
    assert r.precision_at_5([]) == 0.0


def test_ndcg_at_5_hand_computed():
    # DCG = 1/log2(3) + 1/log2(4); IDCG = 1 + 1/log2(3)
    got = r.ndcg_at_5([False, True, True])
    want = (1 / math.log2(3) + 0.5) / (1 + 1 / math.log2(3))
    assert got == pytest.approx(want)
    assert r.ndcg_at_5([True, False]) == 1.0
    assert r.ndcg_at_5([False, False]) == 0.0
    assert r.ndcg_at_5([]) == 0.0
    # relevant result beyond k: IDCG counts it (ideal is the list sorted), DCG does not
    assert r.ndcg_at_k([False, True], 1) == 0.0


def test_hit_rate_skips_none():
    assert r.retrieval_hit_rate([True, False, None, True]) == pytest.approx(2 / 3)
    assert r.retrieval_hit_rate([None]) is None
    assert r.retrieval_hit_rate([]) is None


def test_relevance_density():
    chunk = "x" * 1590 + "0123456789"
    assert r.relevance_density([chunk], ["0123456789"]) == pytest.approx(10 / 1600)
    fact = "a" * 20 + "0123456789"
    assert r.relevance_density([fact], ["0123456789"]) == pytest.approx(1 / 3)
    assert r.relevance_density([], ["x"]) is None
    assert r.relevance_density(["", ""], ["x"]) is None
    assert r.relevance_density(["no match"], ["zzz"]) == 0.0


def test_evidence_metrics_longmemeval_tiny_case():
    ranked = ["s2", "s1", "s3"]
    gold = {"s1", "s3"}
    assert r.recall_any_at_k(ranked, gold, 1) == 0.0
    assert r.recall_all_at_k(ranked, gold, 1) == 0.0
    assert r.ndcg_any_at_k(ranked, gold, 1) == 0.0
    assert r.recall_any_at_k(ranked, gold, 2) == 1.0
    assert r.recall_all_at_k(ranked, gold, 2) == 0.0
    # LongMemEval DCG: rel1 + sum_{i>=2} rel_i/log2(i): actual [0,1] = 1, ideal [1,1] = 2
    assert r.ndcg_any_at_k(ranked, gold, 2) == pytest.approx(0.5)
    # k=3: actual 0 + 1/log2(2) + 1/log2(3); ideal [1,1] = 2
    assert r.ndcg_any_at_k(ranked, gold, 3) == pytest.approx((1 + 1 / math.log2(3)) / 2)
    assert r.recall_all_at_k(ranked, gold, 50) == 1.0
    assert r.ndcg_any_at_k([], gold, 5) == 0.0
    assert r.recall_any_at_k(ranked, set(), 5) is None
    assert r.evidence_recall_at_k(ranked, ["s1", "s9"], 5) == 0.5
    assert r.evidence_mrr(ranked, ["s3"]) == pytest.approx(1 / 3)
    assert r.ranked_unique(["a", "b", "a", "c", "b"]) == ["a", "b", "c"]


def test_memory_state_metrics():
    texts = ["Alex moved to Austin last month", "Alex lives in San Francisco"]
    assert ms.current_state_correct(texts, ["San Francisco"], ["Austin"]) == 1.0
    assert ms.current_state_correct(list(reversed(texts)), ["San Francisco"], ["Austin"]) == 0.0
    assert ms.current_state_correct(["unrelated"], ["San Francisco"], ["Austin"]) == 0.0
    # one fact naming both values is not "current only"
    assert ms.current_state_correct(["moved from San Francisco to Austin"], ["San Francisco"], ["Austin"]) == 0.0
    assert ms.change_aware(texts, ["San Francisco"], ["Austin"]) == 1.0
    assert ms.change_aware(texts[:1], ["San Francisco"], ["Austin"]) == 0.0
    assert ms.change_aware([], ["a"], ["b"]) == 0.0
    assert ms.null_false_positive([]) == 0.0
    assert ms.null_false_positive(["", "  "]) == 0.0
    assert ms.null_false_positive(["something"]) == 1.0
    assert ms.null_false_positive(["the roof is red"], forbidden=["purple"]) == 0.0
    assert ms.adversarial_hit(["x"], []) is None
    assert ms.adversarial_hit(["a", "b", "c", "d", "e", "Portland"], ["portland"]) == 0.0
    assert ms.old_memory_recall(["Mom lives in Portland"], ["Portland", "Linda"]) == 1.0


def test_composite_accuracy():
    comp = {"mrr": 0.5, "recall_at_5": 0.8, "precision_at_5": 0.4, "adversarial_hit_rate": 0.6,
            "old_memory_recall_at_5": 1.0}
    assert ms.composite_accuracy(comp) == pytest.approx(0.15 + 0.2 + 0.08 + 0.09 + 0.1)
    assert ms.composite_accuracy({}) is None
    assert ms.composite_accuracy({"mrr": 1.0}) == pytest.approx(0.3)


def test_tokens():
    assert tk.token_spend("") == 0
    assert tk.token_spend(["hello", "world"]) == tk.token_spend("hello\nworld")
    assert tk.token_spend("hello world") == 2
    assert tk.efficiency_ratio(400, 100) == 4.0
    assert tk.efficiency_ratio(400, 0) is None
    assert tk.efficiency_ratio(None, 5) is None
