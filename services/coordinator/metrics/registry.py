"""The metric registry: one home for every metric, each with `higher_is_better` and its formula.

A metric is a pure function registered with `@metric(name, higher_is_better=...)`; its docstring states the
formula. Reports and the scorecard look metrics up here to know which direction is better.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Metric:
    name: str
    higher_is_better: bool
    fn: Callable[..., Any]
    unit: str = ""  # "rate", "tokens", "ms", "score", ...

    @property
    def formula(self) -> str:
        return (self.fn.__doc__ or "").strip()


METRICS: dict[str, Metric] = {}


def metric(name: str, higher_is_better: bool, unit: str = ""):
    def deco(fn: Callable[..., Any]) -> Callable[..., Any]:
        if name in METRICS:
            raise ValueError(f"metric {name!r} registered twice")
        METRICS[name] = Metric(name, higher_is_better, fn, unit)
        return fn

    return deco


def get_metric(name: str) -> Metric:
    _load_all()
    if name not in METRICS:
        raise KeyError(f"unknown metric {name!r}")
    return METRICS[name]


def all_metrics() -> dict[str, Metric]:
    _load_all()
    return dict(METRICS)


_MODULES = (
    "services.coordinator.metrics.judge",
    "services.coordinator.metrics.latency",
    "services.coordinator.metrics.retrieval",
    "services.coordinator.metrics.qa",
    "services.coordinator.metrics.memory_state",
    "services.coordinator.metrics.tokens",
    "services.coordinator.metrics.budget",
)


def _load_all() -> None:
    import importlib

    for m in _MODULES:
        try:
            importlib.import_module(m)
        except ModuleNotFoundError as e:
            if e.name != m:
                raise
