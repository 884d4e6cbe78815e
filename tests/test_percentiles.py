"""One percentile rule (services/common/percentiles.py), hand-computed, and the report keys built from it."""

from __future__ import annotations

import pytest

from services.common.percentiles import percentile, pname, summary


def test_linear_interpolation_between_order_statistics():
    # [1, 2, 3, 4]: rank q/100 * 3; p50 -> 1.5 -> 2.5; p95 -> 2.85 -> 3.85; p99 -> 2.97 -> 3.97
    assert percentile([4, 1, 3, 2], 50) == 2.5
    assert percentile([4, 1, 3, 2], 95) == pytest.approx(3.85)
    assert percentile([4, 1, 3, 2], 99, scale=1000) == pytest.approx(3970.0)
    assert percentile([], 50) is None
    assert pname(99.9) == "999" and pname(50) == "50"


def test_summary_block_and_empty_block():
    assert summary([0.001, 0.003], (50, 99), scale=1000.0) == {
        "n": 2, "p50_ms": pytest.approx(2.0), "p99_ms": pytest.approx(2.98), "mean_ms": pytest.approx(2.0),
        "max_ms": pytest.approx(3.0)}
    assert summary([], (50,), stats=("mean",)) == {"n": 0, "p50_ms": None, "mean_ms": None}


def test_the_reports_keep_their_keys():
    from collectors.event_loop import window_summary
    from collectors.latency import percentile_summary
    from collectors.tokens import token_summary
    from services.coordinator.metrics.latency import latency_summary
    from services.perf.stats import percentiles_ms

    assert percentile_summary([0.01, 0.03]) == {"n": 2, "p50_ms": pytest.approx(20.0), "p95_ms": pytest.approx(29.0),
                                                "p99_ms": pytest.approx(29.8), "mean_ms": pytest.approx(20.0),
                                                "max_ms": pytest.approx(30.0)}
    assert list(window_summary([0.001])) == ["n", "p50_ms", "p99_ms", "max_ms", "mean_ms"]
    assert latency_summary([10.0, 20.0]) == {"n": 2, "p50_ms": 15.0, "p95_ms": pytest.approx(19.5),
                                             "p99_ms": pytest.approx(19.9), "mean_ms": 15.0}
    assert percentiles_ms([1_000_000, 3_000_000]) == {"p50": 2.0, "p90": pytest.approx(2.8),
                                                      "p99": pytest.approx(2.98), "mean": 2.0, "n": 2}
    assert list(percentiles_ms([1])) == ["p50", "p90", "p99", "mean", "n"] and percentiles_ms([]) == {}
    t = token_summary([100, 300], context_window=1000)
    assert (t["tokens_injected_p50"], t["tokens_injected_max"], t["context_budget_pct"]) == (200.0, 300, 20.0)
