"""The metric registry: one home for every metric, each with `higher_is_better` and its formula.

A metric is a pure function registered with `@metric(name, higher_is_better=...)`; its docstring states the
formula. A metric read at several cut-offs is registered once as `<name>@K` and covers every `<name>@<k>` (LoCoMo's
"session_recall@5" is "session_recall@K" at k = 5). `direction` is the one place a metric's direction and unit are
read (the scorecards, the verdict, the baseline rule, intervals' units, `memrig compare`); a name the registry does
not hold is an UnknownMetric naming it, never a guessed higher-is-better rate.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from services.common.errors import InputError


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


class UnknownMetric(InputError, KeyError):
    """A metric name the registry does not hold (nor a suite declares): its direction is unknown, and a guessed one
    could turn a loss into a win. An InputError (the name is what to fix, e.g. a headline given on the command line)
    and a KeyError, as get_metric's lookups raised before."""

    status = 404

    def __init__(self, name: str, message: str):
        super().__init__("metric", message, text=message)
        self.metric = name


_AT_K = re.compile(r"^(.+)@\d+$")


def get_metric(name: str) -> Metric:
    """The registered metric of that name, or of its `<name>@K` family for a `<name>@<k>`; else UnknownMetric."""
    _load_all()
    if name in METRICS:
        return METRICS[name]
    m = _AT_K.match(name)
    if m and f"{m.group(1)}@K" in METRICS:
        return METRICS[f"{m.group(1)}@K"]
    raise UnknownMetric(name, f"unknown metric {name!r}")


def direction(name: str, declared: Mapping[str, tuple[bool, str]] | None = None) -> tuple[bool, str]:
    """(higher_is_better, unit) of a metric: the registry's; for a name it does not hold, what the suite computing it
    declares (`declared`: its ProbeValues.specs or scorecard tuples, for figures only that suite defines). A
    declaration contradicting the registry, and a name neither holds, are errors naming the metric."""
    try:
        m = get_metric(name)
    except UnknownMetric:
        if declared and name in declared:
            return declared[name]
        raise UnknownMetric(name, f"metric {name!r} is not in the metric registry (services/coordinator/metrics) and its "
                            "suite does not declare it: its direction is unknown") from None
    own = (declared or {}).get(name)
    if own is not None and own[0] != m.higher_is_better:
        raise ValueError(f"metric {name!r}: the suite says higher_is_better={own[0]}, the metric registry "
                         f"{m.higher_is_better}")
    return m.higher_is_better, m.unit or (own[1] if own else "rate")


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
