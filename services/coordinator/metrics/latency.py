"""Latency summaries: exact percentiles with numpy (linear interpolation), in milliseconds."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from services.coordinator.metrics.registry import metric


def percentile(values: Sequence[float], q: float) -> float | None:
    """The q-th percentile (0-100) by linear interpolation between closest ranks; None for no values."""
    if len(values) == 0:
        return None
    return float(np.percentile(np.asarray(values, dtype=np.float64), q))


@metric("latency_p50_ms", higher_is_better=False, unit="ms")
def latency_p50_ms(values_ms: Sequence[float]) -> float | None:
    """50th percentile of per-call latency in ms (numpy linear interpolation)."""
    return percentile(values_ms, 50)


@metric("latency_p95_ms", higher_is_better=False, unit="ms")
def latency_p95_ms(values_ms: Sequence[float]) -> float | None:
    """95th percentile of per-call latency in ms."""
    return percentile(values_ms, 95)


@metric("latency_p99_ms", higher_is_better=False, unit="ms")
def latency_p99_ms(values_ms: Sequence[float]) -> float | None:
    """99th percentile of per-call latency in ms."""
    return percentile(values_ms, 99)


def latency_summary(values_ms: Sequence[float]) -> dict[str, float | None]:
    return {
        "n": len(values_ms),
        "p50_ms": latency_p50_ms(values_ms),
        "p95_ms": latency_p95_ms(values_ms),
        "p99_ms": latency_p99_ms(values_ms),
        "mean_ms": float(np.mean(values_ms)) if len(values_ms) else None,
    }
