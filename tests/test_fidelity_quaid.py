"""`memrig fidelity quaid`'s per-query comparison and summary, hand-computed."""

from services.studies.fidelity_quaid import compare, render, summarise


def test_compare_overlap_top1_order_and_score_diff():
    r = compare("w", "p1", "q", port=[("a", 0.9), ("b", 0.7), ("c", 0.65)], real=[("a", 0.9), ("c", 0.66)])
    assert r.overlap == 2 / 3 and r.same_top1 and not r.same_order
    assert abs(r.max_score_diff - 0.01) < 1e-9
    e = compare("w", "p2", "q", port=[], real=[])
    assert e.overlap == 1.0 and e.same_top1 and e.same_order and e.max_score_diff is None
    d = compare("w", "p3", "q", port=[("x", 0.7)], real=[("y", 0.7)])
    assert d.overlap == 0.0 and not d.same_top1 and d.max_score_diff is None


def test_summary_and_verdict():
    rows = [compare("w", "1", "q", [("a", 1.0)], [("a", 1.0)]), compare("w", "2", "q", [], [("b", 0.7)])]
    s = summarise("w", rows)
    assert (s.queries, s.overlap, s.same_top1, s.empty_port, s.empty_real) == (2, 0.5, 0.5, 0.5, 0.0)
    assert not s.passes
    md = render([s], {"quaid": "0.2.15-alpha @ 9262e69", "embedder": "hash", "top_k": {"w": 6}})
    assert "| w | 2 | 6 | 0.500 | 0.500 | 0.500 | 0.000 | 50.0% | 0.0% | FAIL |" in md
