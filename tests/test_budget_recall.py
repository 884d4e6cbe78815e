"""Recall at a context budget (services/coordinator/metrics/budget.py): hand-computed cases.

cl100k facts used below (checked by the first test): "hello world" is two tokens, "hello" and " world"; " a" is one
token, so " a" * n is n tokens.
"""

from __future__ import annotations

import re

import pytest

from services.common.tokens import count_tokens
from services.coordinator.metrics import budget as B
from services.coordinator.metrics.registry import get_metric
from services.coordinator.suites.locomo import LocomoSuite


def test_token_cut_positions():
    assert count_tokens("hello world") == 2
    assert B.chars_within("hello world", [1, 2, 5]) == (2, [5, 11, 11])
    assert B.chars_within(" a" * 10, [3, 0]) == (10, [6, 0])
    assert B.chars_within("", [3]) == (0, [0])


def _rec(ctx, memories, context_spans=()):
    return {"formatted_context": ctx, "memories": memories, "context_spans": list(context_spans)}


def test_one_message_document_wholly_inside_credits_its_message():
    rec = _rec("Relevant memories:\n- hello world", [{"text": "hello world", "evidence_ids": ["D1:1"]}])
    acc = B.account(rec, (2, 1000))
    # "Relevant memories:\n- " is more than 2 tokens: at 2 nothing of the memory is shown
    assert acc["claimed"] == {"2": [], "1000": ["D1:1"]}
    assert acc["unlocated"] == 0 and acc["tokens"] == count_tokens(rec["formatted_context"])
    assert acc["shown_tokens"] == {"2": 2, "1000": acc["tokens"]}


def test_a_memory_cut_by_the_budget_credits_only_when_half_of_it_is_shown():
    text = " a" * 10  # 10 tokens, 20 characters
    rec = _rec(text, [{"text": text, "evidence_ids": ["m"]}])
    assert B.account(rec, (4, 5, 6))["claimed"] == {"4": [], "5": ["m"], "6": ["m"]}  # 8/20 < half; 10/20 = half


def test_a_truncated_snippet_credits_only_the_messages_it_shows_enough_of():
    # a chunk of three messages whose snippet stops inside the third: lines "u1", "u2 ...", cut
    snippet = "alpha beta\ngamma delta\nepsi"
    spans = [{"evidence_id": "D1:1", "start": 0, "end": 10},   # "alpha beta": all of a 10-char message
             {"evidence_id": "D1:2", "start": 11, "end": 22},  # "gamma delta": all of an 11-char message
             {"evidence_id": "D1:3", "start": 23, "end": 27}]  # "epsi" of a 30-char message: 4/30 shown
    rec = _rec(snippet, [{"text": snippet, "evidence_ids": ["D1:1", "D1:2", "D1:3"], "evidence_spans": spans}])
    chars = {"D1:1": 10, "D1:2": 11, "D1:3": 30}
    assert B.account(rec, (1000,), chars)["claimed"] == {"1000": ["D1:1", "D1:2"]}
    # without the corpus lengths a span is measured against itself: the cut message would count
    assert B.account(rec, (1000,))["claimed"] == {"1000": ["D1:1", "D1:2", "D1:3"]}
    # rank-based recall would credit all three: evidence_ids are unchanged
    assert rec["memories"][0]["evidence_ids"] == ["D1:1", "D1:2", "D1:3"]


def test_spans_are_carried_to_where_the_memory_sits_in_the_injected_text():
    ctx = "[1] f.md#L1-L2\nhello world"
    m = {"text": "hello world", "evidence_ids": ["a", "b"],
         "evidence_spans": [{"evidence_id": "a", "start": 0, "end": 5}, {"evidence_id": "b", "start": 6, "end": 11}]}
    text, spans, unlocated = B.locate(_rec(ctx, [m]))
    assert unlocated == 0 and [(s.evidence_id, text[s.start:s.end]) for s in spans] == [("a", "hello"),
                                                                                         ("b", "world")]
    cut = len("[1] f.md#L1-L2\nhello")  # the budget ends right after "hello"
    assert B.credited(spans, cut, {"a": 5, "b": 5}) == {"a"}


def test_context_spans_when_given_are_authoritative_and_unfound_memories_are_counted():
    ctx = "notes: hello world"
    rec = _rec(ctx, [{"text": "not in the context", "evidence_ids": ["x"]}],
               [{"evidence_id": "n1", "start": 7, "end": 18}])
    acc = B.account(rec, (1000,))
    assert acc["claimed"] == {"1000": ["n1"]} and acc["unlocated"] == 0
    rec["context_spans"] = []
    acc = B.account(rec, (1000,))
    assert acc["claimed"] == {"1000": []} and acc["unlocated"] == 1


def test_a_zero_length_span_cites_a_message_the_snippet_does_not_show():
    m = {"text": "hello world", "evidence_ids": ["a", "b"],
         "evidence_spans": [{"evidence_id": "a", "start": 0, "end": 11}, {"evidence_id": "b", "start": 0, "end": 0}]}
    assert B.account(_rec("hello world", [m]), (1000,))["claimed"] == {"1000": ["a"]}


def test_repeated_texts_are_found_in_rank_order():
    ctx = "- same\n- same"
    rec = _rec(ctx, [{"text": "same", "evidence_ids": ["first"]}, {"text": "same", "evidence_ids": ["second"]}])
    _, spans, _ = B.locate(rec)
    assert [(s.evidence_id, s.start) for s in spans] == [("first", 2), ("second", 9)]


@pytest.mark.parametrize("spans,field", [
    ([{"evidence_id": "", "start": 0, "end": 1}], "memories[0].evidence_spans[0].evidence_id"),
    ([{"evidence_id": "a", "start": -1, "end": 1}], "memories[0].evidence_spans[0].start"),
    ([{"evidence_id": "a", "start": 0, "end": 1}, {"evidence_id": "a", "start": 3, "end": 2}],
     "memories[0].evidence_spans[1].end"),
    ([{"evidence_id": "a", "start": 0, "end": 6}], "memories[0].evidence_spans[0].end"),
])
def test_a_span_that_does_not_fit_names_its_field(spans, field):
    rec = _rec("hello", [{"text": "hello", "evidence_ids": ["a"], "evidence_spans": spans}])
    with pytest.raises(B.SpanError, match="^" + re.escape(field) + ": ") as e:
        B.account(rec)
    assert e.value.field == field
    with pytest.raises(B.SpanError, match=r"^context_spans\[0\]\.end: 9 is past the end of the text \(5"):
        B.check_record(_rec("hello", [], [{"evidence_id": "a", "start": 0, "end": 9}]))


def test_recall_area_and_probe_values():
    assert B.recall_at_budget(["a", "b", "z"], ["a", "b", "c", "d"]) == 0.5
    assert B.recall_at_budget(["a"], []) is None
    # log2 ladder 250..4000 is 4 doublings: trapezoids (0+.5)/2 + (.5+1)/2 + 1 + 1 = 3, over 4
    assert B.budget_auc([0.0, 0.5, 1.0, 1.0, 1.0]) == pytest.approx(0.75)
    assert B.budget_auc([0.0, None, 1.0, 1.0, 1.0]) is None
    acc = {"tokens": 1800, "grader": 2,
           "shown": {"250": [], "500": ["a"], "1000": ["a"], "2000": ["a", "b"], "4000": ["a", "b"]},
           "claimed": {str(b): ["a", "b"] for b in B.BUDGETS}}
    v = B.probe_values(acc, ["a", "b"])
    assert v["claimed_recall@250"] == 1.0  # the backend's word, beside: never the credit
    assert [v[f"budget_recall@{b}"] for b in B.BUDGETS] == [0.0, 0.5, 0.5, 1.0, 1.0]
    assert v["budget_recall_auc"] == pytest.approx((0.25 + 0.5 + 0.75 + 1.0) / 4)
    assert v["budget_tokens"] == 1000.0  # min(headline budget, 1,800 injected)
    assert get_metric("budget_recall@1000").higher_is_better and not get_metric("budget_tokens").higher_is_better


def _sample(cond, pid, acc, gold):
    return {"condition": cond, "condition_context": [f"backend:{cond}"], "probe_id": pid, "category": "4",
            "evidence_ids": gold, "retrievals": {cond: {"memories": [], "latency_ms": 1.0, "budget": acc}},
            "context_tokens": 10}


def test_locomo_scores_the_budget_headline_from_the_samples():
    full = {"tokens": 900, "grader": 2, "shown": {str(b): ["D1:1", "D1:2"] for b in B.BUDGETS}}
    half = {"tokens": 300, "grader": 2, "shown": {str(b): (["D1:1"] if b >= 500 else []) for b in B.BUDGETS}}
    rows = [_sample("bm25", "conv-1:q1", full, ["D1:1", "D1:2"]), _sample("cortex", "conv-1:q1", half, ["D1:1", "D1:2"])]
    pv = LocomoSuite({}, seed=0).per_probe(rows)
    assert pv.values["bm25"]["budget_recall@1000"] == {"conv-1:q1": 1.0}
    assert pv.values["cortex"]["budget_recall@1000"] == {"conv-1:q1": 0.5}
    assert pv.values["cortex"]["budget_recall@250"] == {"conv-1:q1": 0.0}
    assert LocomoSuite.retrieval_headline == "shown@1000"


@pytest.mark.slow  # takes seconds (plots, a real library's model, or 1,000 rounds)
def test_report_html_draws_the_recall_budget_curve():
    from services.coordinator.report_html import recall_curves

    metrics = {"conditions": {c: {"overall": {f"budget_recall@{b}": {"mean": v * b / 4000} for b in B.BUDGETS}}
                              for c, v in (("bm25", 1.0), ("openclaw-real", 0.5))}}
    (title, img), = recall_curves(metrics)
    assert title == "Recall at a context budget (share of gold evidence shown)"
    assert img.startswith("data:image/png;base64,")
