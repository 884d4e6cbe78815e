"""Latency summaries (services/coordinator/metrics/latency.py) by hand: numpy's linear interpolation between
closest ranks, the registered direction (lower is better, in ms), and None for no values."""

from __future__ import annotations

import pytest

from services.coordinator.metrics.latency import (
    latency_p50_ms,
    latency_p95_ms,
    latency_p99_ms,
    latency_summary,
    percentile,
)
from services.coordinator.metrics.registry import get_metric

VALUES = [40.0, 10.0, 30.0, 20.0]  # sorted 10, 20, 30, 40: rank position = q/100 × (n − 1) = q × 0.03


def test_percentiles_by_linear_interpolation():
    # p50: position 1.5 -> 20 + 0.5 × 10 = 25; p95: 2.85 -> 30 + 0.85 × 10 = 38.5; p99: 2.97 -> 39.7
    assert latency_p50_ms(VALUES) == pytest.approx(25.0)
    assert latency_p95_ms(VALUES) == pytest.approx(38.5)
    assert latency_p99_ms(VALUES) == pytest.approx(39.7)
    assert percentile(VALUES, 0) == 10.0 and percentile(VALUES, 100) == 40.0
    assert percentile([7.0], 95) == 7.0


def test_summary_and_empty():
    s = latency_summary(VALUES)
    assert s == pytest.approx({"n": 4, "p50_ms": 25.0, "p95_ms": 38.5, "p99_ms": 39.7, "mean_ms": 25.0})
    assert latency_summary([]) == {"n": 0, "p50_ms": None, "p95_ms": None, "p99_ms": None, "mean_ms": None}
    assert percentile([], 50) is None


def test_registered_lower_is_better_in_ms():
    for name, fn in (("latency_p50_ms", latency_p50_ms), ("latency_p95_ms", latency_p95_ms),
                     ("latency_p99_ms", latency_p99_ms)):
        m = get_metric(name)
        assert m.higher_is_better is False and m.unit == "ms" and m.fn is fn
