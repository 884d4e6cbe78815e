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


def test_registered_retrieval_metrics_are_rates_where_higher_is_better():
    from services.coordinator.metrics.registry import get_metric

    for name, fn in (("mrr", r.reciprocal_rank), ("recall_at_1", r.recall_at_1), ("recall_at_3", r.recall_at_3),
                     ("recall_at_5", r.recall_at_5), ("recall_at_k", r.recall_at_k),
                     ("precision_at_5", r.precision_at_5), ("ndcg_at_5", r.ndcg_at_5),
                     ("retrieval_hit_rate", r.retrieval_hit_rate), ("relevance_density", r.relevance_density),
                     ("evidence_recall_at_k", r.evidence_recall_at_k), ("recall_any_at_k", r.recall_any_at_k),
                     ("recall_all_at_k", r.recall_all_at_k), ("ndcg_any_at_k", r.ndcg_any_at_k),
                     ("memory_recall_at_k", r.memory_recall_at_k), ("evidence_mrr", r.evidence_mrr)):
        m = get_metric(name)
        assert (m.higher_is_better, m.unit) == (True, "rate"), name
        assert m.fn is fn, name


def test_relevance_flags_skip_blank_expected_and_missing_text():
    # "" and "  " would match every text; they are dropped, so nothing is relevant
    assert r.relevance_flags(["abc", "a b"], ["", "  "]) == [False, False]
    assert r.relevance_flags([None, "The PORT is 4000"], ["Port"]) == [False, True]


def test_hit_precision_and_ndcg_at_small_k():
    assert r.hit_at_k([True], 0) == 0.0
    assert r.precision_at_k([True, False, True], 2) == 0.5
    assert r.precision_at_k([True, False, True], 3) == pytest.approx(2 / 3)
    # three relevant, k = 2: DCG = 1 (rank 1); IDCG = 1 + 1/log2(3) (the ideal list is cut to k too)
    assert r.ndcg_at_k([True, False, True, True], 2) == pytest.approx(1 / (1 + 1 / math.log2(3)))
    # DCG = 1/log2(4) at rank 3; ideal [1] = 1
    assert r.ndcg_at_k([False, False, True], 3) == pytest.approx(0.5)


def test_relevance_density_dedups_caps_and_skips_blanks():
    # "ab" and "AB" are one expected string: 2 keyword chars of 4
    assert r.relevance_density(["xxab"], ["ab", "AB"]) == 0.5
    # overlapping expected strings can count a char twice: (2 + 1) / 2 is capped at 1
    assert r.relevance_density(["ab"], ["ab", "b"]) == 1.0
    # "ab" once, "b" twice: (2 + 2) / 6
    assert r.relevance_density(["ab xyb"], ["ab", "b"]) == pytest.approx(4 / 6)
    # a blank expected string is no keyword (" " occurs once in "a b")
    assert r.relevance_density(["a b"], [" ", ""]) == 0.0
    # a missing text adds no characters: 2 of 2
    assert r.relevance_density([None, "ab"], ["ab"]) == 1.0


def test_evidence_recall_mrr_and_cutoffs():
    ranked = ["s2", "s1", "s3"]
    assert r.evidence_recall_at_k(ranked, ["s1", "s3"], 1) == 0.0
    assert r.evidence_recall_at_k(ranked, ["s1", "s3"], 2) == 0.5
    assert r.evidence_recall_at_k(ranked, ["s1", "s3"], 3) == 1.0
    assert r.evidence_recall_at_k(ranked, [], 3) is None
    assert r.recall_all_at_k(ranked, [], 3) is None
    assert r.recall_all_at_k(ranked, ["s2"], 1) == 1.0
    assert r.recall_any_at_k(ranked, ["s9"], 3) == 0.0
    assert r.evidence_mrr(ranked, ["s9"]) == 0.0
    assert r.evidence_mrr(ranked, ["s2"]) == 1.0
    assert r.evidence_mrr(ranked, []) is None


def test_ndcg_any_ideal_from_corpus_count_and_repeats():
    ranked = ["x", "g1"]
    gold = {"g1", "g2", "g3"}
    # DCG = 0 + 1/log2(2) = 1; ideal with |gold| = 3 ones: 1 + 1 + 1/log2(3)
    assert r.ndcg_any_at_k(ranked, gold, 5) == pytest.approx(1 / (2 + 1 / math.log2(3)))
    # ideal cut to k = 2: [1, 1] = 2
    assert r.ndcg_any_at_k(ranked, gold, 2) == pytest.approx(0.5)
    # the corpus holds one gold id: ideal [1] = 1 (the corpus wins over n_gold_in_corpus)
    assert r.ndcg_any_at_k(ranked, gold, 5, n_gold_in_corpus=3, corpus=["g1", "y"]) == 1.0
    assert r.ndcg_any_at_k(ranked, gold, 5, n_gold_in_corpus=2) == pytest.approx(0.5)
    # the ideal never holds fewer ones than were found: n = 0 but one hit -> ideal [1]
    assert r.ndcg_any_at_k(ranked, gold, 5, n_gold_in_corpus=0) == 1.0
    # a gold id repeated in the ranking counts once: rel [0, 1, 0] -> DCG 1; ideal [1, 1] = 2
    assert r.ndcg_any_at_k(["x", "g1", "g1"], {"g1", "g2"}, 3) == pytest.approx(0.5)
    # rank 4 weighs 1/log2(4)
    assert r.ndcg_any_at_k(["a", "b", "c", "g"], {"g"}, 4) == pytest.approx(0.5)
    assert r.ndcg_any_at_k(["a"], set(), 4) is None
    # no gold id in the corpus and none found: an empty ideal scores 0 (no division by zero)
    assert r.ndcg_any_at_k(["a"], {"g"}, 4, corpus=["a"]) == 0.0
    assert r.ndcg_any_at_k(["a"], {"g"}, 0) == 0.0
    # the same for the substring NDCG and the turn->session ideal (gold session without corpus turns)
    assert r.lme_turn2session_at_k(["A:1"], ["B:1"], ["A:1"], 1, _session) == (0.0, 0.0, 0.0)


def _session(t: str) -> str:
    return t.split(":")[0]


def test_lme_turn2session_grows_the_cutoff_to_k_sessions():
    corpus = ["A:1", "A:2", "B:1", "C:1", "C:2", "D:1"]
    # Z:9 is outside the corpus and the second A:1 a repeat: sessions ranked A, A, B, C, D
    ranking = ["A:1", "A:2", "Z:9", "A:1", "B:1", "C:1", "D:1"]
    # k = 2: the cut-off grows to 3 turns (sessions A, B): no gold session
    assert r.lme_turn2session_at_k(ranking, ["C:1"], corpus, 2, _session) == (0.0, 0.0, 0.0)
    # k = 3: 4 turns (A, A, B, C); rel [0, 0, 0, 1] -> DCG 1/log2(4) = 0.5; one gold turn in the corpus: ideal 1
    assert r.lme_turn2session_at_k(ranking, ["C:1"], corpus, 3, _session) == pytest.approx((1.0, 1.0, 0.5))
    # gold C:2 instead: the ranked C:1 lacks has_answer, so it maps to a `noans` session, not to gold session C
    # (the official renaming); the old rule (every turn of C maps to C) gave (1, 1, 0.25) here
    assert r.lme_turn2session_at_k(ranking, ["C:2"], corpus, 3, _session) == (0.0, 0.0, 0.0)
    # gold turns C:1 and D:1: D is not in the top 4; ideal 2 ones = 1 + 1/log2(2) = 2
    got = r.lme_turn2session_at_k(ranking, ["C:1", "D:1"], corpus, 3, _session)
    assert got == pytest.approx((1.0, 0.0, 0.5 / 2))
    # k = 10 past the ranking: every session is in, rel [0, 0, 0, 1, 1] -> 0.5 + 1/log2(5)
    got = r.lme_turn2session_at_k(ranking, ["C:1", "D:1"], corpus, 10, _session)
    assert got == pytest.approx((1.0, 1.0, (0.5 + 1 / math.log2(5)) / 2))
    assert r.lme_turn2session_at_k(ranking, [], corpus, 3, _session) is None
    # k = 1, the top session is the gold one: all = 1 (the top equals the gold set); ideal min(1, 1) ones = 1
    assert r.lme_turn2session_at_k(["C:1", "A:1"], ["C:1"], corpus, 1, _session) == (1.0, 1.0, 1.0)


def test_lme_turn2session_stops_growing_at_the_end_of_the_ranking():
    # sessions A, A, B with k = 3: the ranking ends before 3 sessions, so the cut-off stays 3 and the ideal
    # (4 gold turns in the corpus, all of session B) is cut to 3 ones: 1 + 1 + 1/log2(3); DCG = 1/log2(3) at rank 3
    corpus = ["A:1", "A:2", "B:1", "B:2", "B:3", "B:4"]
    got = r.lme_turn2session_at_k(["A:1", "A:2", "B:1"], ["B:1", "B:2", "B:3", "B:4"], corpus, 3, _session)
    assert got == pytest.approx((1.0, 1.0, (1 / math.log2(3)) / (2 + 1 / math.log2(3))))


def test_memory_recall_at_k_modes():
    ev = [["a", "b"], ["c"], ["d", "a"]]
    gold = {"a", "c", "x"}
    assert r.memory_recall_at_k(ev, gold, 1) == pytest.approx(1 / 3)
    assert r.memory_recall_at_k(ev, gold, 2) == pytest.approx(2 / 3)
    assert r.memory_recall_at_k(ev, gold, 0) == 0.0
    assert r.memory_recall_at_k(ev, gold, 2, mode="any") == 1.0
    assert r.memory_recall_at_k(ev, {"x"}, 3, mode="any") == 0.0
    assert r.memory_recall_at_k(ev, gold, 3, mode="all") == 0.0
    assert r.memory_recall_at_k(ev, {"a", "c"}, 2, mode="all") == 1.0
    assert r.memory_recall_at_k(ev, {"a", "c"}, 1, mode="all") == 0.0
    assert r.memory_recall_at_k(ev, [], 1) is None
    # "all" compares counts by value, also past CPython's cached small ints
    many = [str(i) for i in range(300)]
    assert r.memory_recall_at_k([many], many, 1, mode="all") == 1.0
    # the mode is compared by value: a mode string built at run time (not the interned literal) works too
    assert r.memory_recall_at_k(ev, gold, 2, mode="".join(["an", "y"])) == 1.0
    assert r.memory_recall_at_k(ev, gold, 2, mode="".join(["al", "l"])) == 0.0


def test_mean_skips_none():
    assert r.mean([1.0, None, 2.0]) == 1.5
    assert r.mean([None]) is None
    assert r.mean([]) is None


def test_fixed_cutoffs_are_exactly_1_3_and_5():
    # a relevant result exactly at the cut-off counts; one just past it does not
    assert r.recall_at_1([True, False]) == 1.0 and r.recall_at_1([False, True]) == 0.0
    assert r.recall_at_3([False, False, True]) == 1.0 and r.recall_at_3([False] * 3 + [True]) == 0.0
    assert r.recall_at_5([False] * 4 + [True]) == 1.0 and r.recall_at_5([False] * 5 + [True]) == 0.0
    assert r.precision_at_5([True] * 4 + [False, True]) == pytest.approx(0.8)
    assert r.precision_at_5([False] * 5 + [True]) == 0.0
    assert r.ndcg_at_5([False] * 4 + [True]) == pytest.approx(1 / math.log2(6))
    assert r.ndcg_at_5([False] * 5 + [True]) == 0.0


def test_lme_turn2session_large_k_counts_sessions_by_value():
    # 400 one-turn sessions, k = 300: the cut-off stays at 300 turns, so gold session S350 is not retrieved
    # (past CPython's cached small ints the session count must be compared by value, not identity)
    turns = [f"S{i}:1" for i in range(400)]
    assert r.lme_turn2session_at_k(turns, ["S350:1"], turns, 300, _session) == (0.0, 0.0, 0.0)
    assert r.lme_turn2session_at_k(turns, ["S299:1"], turns, 300, _session)[:2] == (1.0, 1.0)


@pytest.mark.parametrize("mode", ["abc", "ALL", ""])
def test_memory_recall_refuses_an_unknown_mode(mode):
    from services.coordinator.metrics.retrieval import memory_recall_at_k

    with pytest.raises(ValueError, match=f"mode: {mode!r}; expected"):
        memory_recall_at_k([["a"]], ["a"], 1, mode)
    with pytest.raises(ValueError, match="mode:"):
        memory_recall_at_k([], [], 1, mode)  # checked before the no-gold shortcut
