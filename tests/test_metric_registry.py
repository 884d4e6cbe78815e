"""The metric registry: every metric the reports can show, its direction (which decides who wins a comparison
and which way a delta is good) and its unit, pinned by hand."""

from __future__ import annotations

from services.coordinator.metrics import budget, judge, latency, memory_state, qa, retrieval, shown, tokens
from services.coordinator.metrics.registry import all_metrics, get_metric

# name: (higher is better, unit, defining module)
EXPECTED = {
    "abstained_rate": (False, "rate", judge), "generic_rate": (True, "rate", judge),
    "grounded_rate": (True, "rate", judge), "hallucination_rate": (False, "rate", judge),
    "judge_mean": (True, "score", judge),
    "accuracy": (True, "rate", memory_state), "adversarial_hit_rate": (True, "rate", memory_state),
    "change_awareness": (True, "rate", memory_state), "current_state_accuracy": (True, "rate", memory_state),
    "null_false_positive_rate": (False, "rate", memory_state),
    "old_memory_recall_at_5": (True, "rate", memory_state),
    "binary_j": (True, "rate", qa), "exact_match": (True, "rate", qa), "locomo_f1": (True, "rate", qa),
    "token_f1": (True, "rate", qa),
    "efficiency_ratio": (True, "ratio", tokens), "token_spend": (False, "tokens", tokens),
    "latency_p50_ms": (False, "ms", latency), "latency_p95_ms": (False, "ms", latency),
    "latency_p99_ms": (False, "ms", latency),
    "evidence_mrr": (True, "rate", retrieval), "evidence_recall_at_k": (True, "rate", retrieval),
    "memory_recall_at_k": (True, "rate", retrieval), "mrr": (True, "rate", retrieval),
    "ndcg_any_at_k": (True, "rate", retrieval), "ndcg_at_5": (True, "rate", retrieval),
    "precision_at_5": (True, "rate", retrieval), "recall_all_at_k": (True, "rate", retrieval),
    "recall_any_at_k": (True, "rate", retrieval), "recall_at_1": (True, "rate", retrieval),
    "recall_at_3": (True, "rate", retrieval), "recall_at_5": (True, "rate", retrieval),
    "recall_at_k": (True, "rate", retrieval), "relevance_density": (True, "rate", retrieval),
    "retrieval_hit_rate": (True, "rate", retrieval),
    # per-probe headline indicators, registered for their direction (services/coordinator/baseline.py)
    "hit": (True, "rate", retrieval), "pass": (True, "rate", retrieval), "doc_hit": (True, "rate", retrieval),
    "uncontained": (False, "rate", retrieval), "f1_cats_1_4": (True, "rate", qa), "qa_accuracy": (True, "rate", qa),
    "judge_score": (True, "score", judge),
    # recall at a context budget
    **{f"budget_recall@{b}": (True, "rate", budget) for b in (250, 500, 1000, 2000, 4000)},
    **{f"claimed_recall@{b}": (True, "rate", budget) for b in (250, 500, 1000, 2000, 4000)},
    **{f"answer_terms@{b}": (True, "rate", shown) for b in (250, 500, 1000, 2000, 4000)},
    **{f"shown@{b}": (True, "rate", shown) for b in (250, 500, 1000, 2000, 4000)},
    "budget_recall_auc": (True, "rate", budget), "budget_tokens": (False, "tokens", budget),
    "budget_unlocated": (False, "count", budget),
    # figures registered under the formula that computes them: cut-off families (`<name>@K` covers `<name>@5`), the
    # primary message's rank, Octybot's pass by kind, LoCoMo's F1 over every category, per-probe tokens and latency
    **{f"{n}@K": (True, "rate", retrieval) for n in (
        "turn_recall", "session_recall", "recall", "memory_recall", "turn_recall_any", "session_recall_any",
        "recall_any", "primary_hit", "turn_recall_all", "session_recall_all", "turn_ndcg_any", "session_ndcg_any",
        "t2s_recall_any", "t2s_recall_all", "t2s_ndcg_any", "turn_memory_recall_all", "session_memory_recall_all")},
    "primary_mrr": (True, "rate", retrieval), "retrieval_pass": (True, "rate", retrieval),
    "store_pass": (True, "rate", retrieval), "f1": (True, "rate", qa), "context_tokens": (False, "tokens", tokens),
    "latency_ms": (False, "ms", latency),
}


def test_every_metric_with_its_direction_and_unit():
    got = all_metrics()
    assert sorted(got) == sorted(EXPECTED)
    for name, (higher, unit, module) in EXPECTED.items():
        m = got[name]
        assert (m.higher_is_better, m.unit) == (higher, unit), name
        assert m.fn.__module__ == module.__name__, name
        assert get_metric(name) is m


def test_efficiency_ratio_edges():
    assert tokens.efficiency_ratio(10, 0.5) == 20.0  # a system spending under one token on average still counts
    assert tokens.efficiency_ratio(10, -1) is None  # a negative spend is not a measurement
    assert tokens.efficiency_ratio(10, 0) is None
    assert tokens.efficiency_ratio(0, 4) == 0.0


def test_memory_state_metrics_at_their_cut_offs_and_with_blank_keywords():
    from services.coordinator.metrics import memory_state as ms

    five = ["a", "b", "c", "d", "Mom lives in Portland"]
    assert ms.old_memory_recall(five, ["Portland"]) == 1.0  # rank 5 is inside Recall@5
    assert ms.old_memory_recall(five[:4] + ["e", "Portland"], ["Portland"]) == 0.0  # rank 6 is not
    assert ms.old_memory_recall(five[1:], ["Portland"]) == 1.0  # rank 4
    assert ms.adversarial_hit(five, ["Portland"]) == 1.0  # the default k is 5
    assert ms.adversarial_hit(five, ["Portland"], k=4) == 0.0
    assert ms.adversarial_hit(five, ["   ", ""]) is None  # blank expected strings: N/A, not a hit
    assert ms.change_aware(["the port is 8080"], ["   "], ["8080"]) == 0.0  # a blank keyword matches nothing
    assert ms.null_false_positive(["we use Redis"], ["redis"]) == 1.0
    assert ms.null_false_positive(["we use Redis"], ["kafka"]) == 0.0


def test_registry_rules():
    import dataclasses

    import pytest

    from services.coordinator.metrics import registry

    m = get_metric("mrr")
    assert m.formula == (m.fn.__doc__ or "").strip() and not m.formula.startswith((" ", "\n"))
    with pytest.raises(dataclasses.FrozenInstanceError):
        m.name = "x"  # type: ignore[misc]
    with pytest.raises(KeyError, match="unknown metric 'nope'"):
        get_metric("nope")
    # a cut-off family covers every k, and only whole numbers after the @
    assert get_metric("session_recall@7") is get_metric("session_recall@K")
    with pytest.raises(registry.UnknownMetric, match="unknown metric 'session_recall@x'"):
        get_metric("session_recall@x")
    # direction: the registry's; a suite's declaration only for a name the registry does not hold; else an error
    assert registry.direction("token_spend") == (False, "tokens") and registry.direction("turn_recall@5") == (True, "rate")
    assert registry.direction("stale", {"stale": (False, "rate")}) == (False, "rate")
    with pytest.raises(ValueError, match="metric 'mrr': the suite says higher_is_better=False"):
        registry.direction("mrr", {"mrr": (False, "rate")})
    with pytest.raises(registry.UnknownMetric, match="metric 'made_up' is not in the metric registry"):
        registry.direction("made_up")
    copy = all_metrics()
    copy.pop("mrr")
    assert "mrr" in all_metrics()
    with pytest.raises(ValueError, match="metric 'mrr' registered twice"):
        registry.metric("mrr", True)(lambda: None)
    assert registry.Metric("x", True, lambda: None).unit == "" and registry.Metric("x", True, lambda: 0).formula == ""

    @registry.metric("test_only_metric_unit_default", higher_is_better=False)
    def _f():
        """  the formula  """

    try:
        got = get_metric("test_only_metric_unit_default")
        assert (got.higher_is_better, got.unit, got.formula, got.fn) == (False, "", "the formula", _f)
    finally:
        registry.METRICS.pop("test_only_metric_unit_default")


def test_loading_skips_a_missing_metric_module_but_not_a_broken_one(monkeypatch, tmp_path):
    import sys

    import pytest

    from services.coordinator.metrics import registry

    # a fresh registry: every metric module is imported again and registers itself
    monkeypatch.setattr(registry, "METRICS", {})
    pkg = sys.modules["services.coordinator.metrics"]
    for m in registry._MODULES:
        monkeypatch.setattr(pkg, m.rsplit(".", 1)[1], sys.modules[m])  # restored afterwards, as sys.modules is
        monkeypatch.delitem(sys.modules, m)
    monkeypatch.setattr(registry, "_MODULES", (*registry._MODULES, "services.coordinator.metrics.not_installed"))
    assert get_metric("mrr").higher_is_better is True and len(all_metrics()) == len(EXPECTED)
    # a metric module that exists but needs a missing library: that error is not swallowed
    # (its name sorts after the missing one's, and before: neither order may hide the error)
    (tmp_path / "memrig_zz_broken_metrics.py").write_text("import memrig_aa_no_such_library\n")
    (tmp_path / "memrig_aa_broken_metrics.py").write_text("import memrig_zz_no_such_library\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    for mod, missing in (("memrig_zz_broken_metrics", "memrig_aa_no_such_library"),
                         ("memrig_aa_broken_metrics", "memrig_zz_no_such_library")):
        monkeypatch.setattr(registry, "_MODULES", (mod,))
        with pytest.raises(ModuleNotFoundError, match=missing):
            get_metric("mrr")
