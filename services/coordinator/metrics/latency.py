"""Latency summaries: exact percentiles (services/common/percentiles.py), in milliseconds."""

from __future__ import annotations

from collections.abc import Sequence

from services.common.percentiles import percentile, summary
from services.coordinator.metrics.registry import metric


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
    """n, p50/p95/p99 and mean of per-call latencies already in ms."""
    return summary(values_ms, (50, 95, 99), stats=("mean",))


@metric("latency_ms", higher_is_better=False, unit="ms")
def retrieve_latency_ms(latency_ns: int) -> float:
    """The client-observed time of one probe's retrieve, in ms (its percentiles over probes are latency_p50_ms ...)."""
    return latency_ns / 1e6
