"""Turn latency: a Prometheus Histogram per backend and plugin state, plus exact percentiles from the raw values.

Prometheus buckets are for live dashboards; the report's p50/p95/p99 come from the raw per-turn values kept here
(exact numpy percentiles: Prometheus buckets only bound a percentile between two bucket edges).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence

from prometheus_client import CollectorRegistry, Histogram

from collectors.buckets import LATENCY_BUCKETS_S
from collectors.prom import get_metric
from collectors.samples import SampleSink
from services.common.percentiles import summary

# A turn includes an LLM call, so buckets reach 60 s (the prometheus_client defaults stop at 10 s); bounds sit on
# the rig's own delays and timeouts (collectors/buckets.py).
TURN_BUCKETS = LATENCY_BUCKETS_S


def percentile_summary(values_s: Sequence[float]) -> dict[str, float | int | None]:
    """n, mean, p50/p95/p99 and max in milliseconds (numpy's linear interpolation), None when empty."""
    return summary(values_s, (50, 95, 99), scale=1000.0)


class TurnLatencyCollector:
    """Observe one turn: total time, and the time of each phase (recall, llm, capture)."""

    def __init__(self, sink: SampleSink | None = None, registry: CollectorRegistry | None = None,
                 component: str = "turn_sim"):
        self.sink = sink
        self.component = component
        self.turns = get_metric(Histogram, "memrig_turn_latency_seconds",
                                "Agent turn time: recall hook + format + LLM call (+ capture submit)",
                                ("backend", "state"), registry, buckets=TURN_BUCKETS)
        self.phases = get_metric(Histogram, "memrig_turn_phase_seconds", "Time of one phase of an agent turn",
                                 ("backend", "state", "phase"), registry, buckets=TURN_BUCKETS)
        self._values: dict[tuple[str, str], list[float]] = defaultdict(list)
        self._phase_values: dict[tuple[str, str, str], list[float]] = defaultdict(list)

    def observe(self, backend: str, state: str, seconds: float, phases: dict[str, float] | None = None,
                **extra) -> None:
        self.turns.labels(backend, state).observe(seconds)
        self._values[(backend, state)].append(seconds)
        for phase, s in (phases or {}).items():
            self.phases.labels(backend, state, phase).observe(s)
            self._phase_values[(backend, state, phase)].append(s)
        if self.sink is not None:
            self.sink.write("turn", component=self.component, backend=backend, state=state,
                            latency_s=seconds, phases=phases or {}, **extra)

    def values(self, backend: str, state: str) -> list[float]:
        return list(self._values.get((backend, state), []))

    def phase_values(self, backend: str, state: str, phase: str) -> list[float]:
        return list(self._phase_values.get((backend, state, phase), []))

    def summary(self, backend: str, state: str) -> dict[str, float | int | None]:
        out = percentile_summary(self._values.get((backend, state), []))
        for (b, s, phase), vals in self._phase_values.items():
            if (b, s) == (backend, state):
                ps = percentile_summary(vals)
                out[f"{phase}_p50_ms"] = ps["p50_ms"]
                out[f"{phase}_p95_ms"] = ps["p95_ms"]
        return out

    def keys(self) -> list[tuple[str, str]]:
        return list(self._values)
