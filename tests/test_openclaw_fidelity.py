"""The fidelity comparison's arithmetic and cause attribution, by hand."""

from __future__ import annotations

import pytest

from services.studies.fidelity import (
    Hit,
    agreement,
    cause,
    compare,
    render,
    summarise,
)
from services.studies.paired import parse_options


def h(path, s, e, score=0.5, v=0.4, t=0.2):
    return Hit(path, s, e, score, v, t)


A, B, C = h("MEMORY.md", 3, 3), h("memory/2026-01-01.md", 1, 4), h("memory/2026-01-02.md", 1, 2)
CHUNKS = {A.key, B.key, C.key}


def test_agreement():
    assert agreement([], []) == 1.0
    assert agreement([A], []) == 0.0
    assert agreement([A, B], [B, A]) == 1.0
    assert agreement([A, B], [A, C]) == 0.5
    assert agreement([A], [A, B, C]) == pytest.approx(1 / 3)


def test_cause_in_priority_order():
    assert cause([A, B], [A, B], CHUNKS) is None
    assert cause([], [A], CHUNKS) == "selection"
    assert cause([A], [h("MEMORY.md", 3, 4)], CHUNKS) == "chunking"
    assert cause([A], [h("MEMORY.md", 3, 3, v=0.41), C], CHUNKS) == "vector-score"
    assert cause([A], [h("MEMORY.md", 3, 3, t=0.25), C], CHUNKS) == "text-score"
    assert cause([A], [h("MEMORY.md", 3, 3, score=0.6), C], CHUNKS) == "final-score"
    # identical lists agree, whatever their scores (those show in the max score difference)
    assert cause([A], [h("MEMORY.md", 3, 3, score=0.6)], CHUNKS) is None
    assert cause([A, B], [B, A], CHUNKS) == "order"
    assert cause([A, B], [A, C], CHUNKS) == "membership"
    # within tolerance (float32 through JSON) is not a difference
    assert cause([A, B], [h("MEMORY.md", 3, 3, v=0.4 + 5e-5), C], CHUNKS) == "membership"


def test_summary_and_verdict():
    rows = [compare("w", "p1", "q", None, [A], [A], CHUNKS),  # agree
            compare("w", "p2", "q", None, [], [B], CHUNKS),  # selection; port empty
            compare("w", "p3", "q", None, [A, B], [B, A], CHUNKS),  # order
            compare("w", "p4", "q", None, [A], [h("MEMORY.md", 3, 3, score=0.8), C], CHUNKS)]  # final-score
    s = summarise("w", rows)
    assert s.queries == 4
    assert s.agreement == pytest.approx((1 + 0 + 1 + 0.5) / 4)
    assert s.same_order_rate == pytest.approx(1 / 4)
    assert s.max_score_diff == pytest.approx(0.3)
    assert (s.empty_rate_port, s.empty_rate_real) == (0.25, 0.0)
    assert s.causes == {"selection": 1, "final-score": 1, "order": 1}
    assert not s.passes  # 0.625 < 0.95
    ok = summarise("w", [compare("w", f"p{i}", "q", None, [A], [A], CHUNKS) for i in range(50)]
                   + [compare("w", "x", "q", None, [A, B], [A, C], CHUNKS)])
    assert ok.agreement == pytest.approx(50.5 / 51) and ok.agreement >= 0.95 and ok.passes
    bad_empty = summarise("w", [compare("w", f"p{i}", "q", None, [A], [A], CHUNKS) for i in range(97)]
                          + [compare("w", f"e{i}", "q", None, [], [], CHUNKS) for i in range(3)])
    assert bad_empty.passes  # both empty on the same 3% agrees: the difference is 0 points
    one_side = summarise("w", [compare("w", f"p{i}", "q", None, [A], [A], CHUNKS) for i in range(97)]
                         + [compare("w", f"e{i}", "q", None, [], [A], CHUNKS) for i in range(3)])
    assert one_side.agreement == pytest.approx(0.97) and not one_side.passes  # 3 points of empty-rate difference
    md = render([s], {"preset": "openclaw", "openclaw": "2026.9.6", "embedder": "x", "top_k": {"w": 10},
                      "profiles": ["default"]})
    assert "| w | 4 | 10 | 0.625 | 0.250 | 0.3000 | 25.0% | 0.0% | FAIL | selection 1, final-score 1, order 1 |" in md
    assert "top-6" not in md and "| workspace | queries | top-k | agreement |" in md


def test_parse_options():
    assert parse_options(["locomo.conversations=1", "arclight.categories=FR"]) == {
        "locomo": {"conversations": 1}, "arclight": {"categories": "FR"}}
    with pytest.raises(ValueError, match="suite.key=value"):
        parse_options(["conversations=1"])


def test_sensitivity_cells_by_hand():
    from services.common.types import Memory
    from services.studies.sensitivity import cell, probe_outcome

    m1 = Memory(id="a", text="The dev server runs on port 3001", score=0.5, evidence_ids=["s1-m0"])
    m2 = Memory(id="b", text="pnpm", score=0.4, evidence_ids=["s2-m3"])
    assert probe_outcome([], ["3001"], ["s1-m0"]) == (True, False, False)
    assert probe_outcome([m1, m2], ["PORT 3001"], ["s9"]) == (False, True, False)
    assert probe_outcome([m2], [], ["s2-m3"]) == (False, None, True)
    c = cell("openclaw-real", "w", "minilm", 0.25, [(True, False, False), (False, True, None), (False, False, True),
                                                     (False, None, None)], top_k=10)
    assert (c.queries, c.empty_rate, c.hit_rate, c.recall_any, c.top_k) == (4, 0.25, pytest.approx(1 / 3), 0.5, 10)
    from services.studies.sensitivity import render as srender

    md = srender([c], {"openclaw": "2026.9.6", "preset": "openclaw"})
    assert "| w | openclaw-real | minilm | 0.25 | 10 | 4 | 25.0% | 33.3% | 50.0% |" in md and "recall_any@k" in md


def test_overlap_is_the_share_of_the_larger_result_both_hold():
    from services.studies.paired import overlap

    assert overlap([], []) == 1.0
    assert overlap(["a"], []) == 0.0
    assert overlap(["a", "b", "c", "d"], ["b", "a"]) == 2 / 4  # order-free; the larger side is the denominator
    assert overlap(["a", "b"], ["b", "c", "a"]) == 2 / 3
