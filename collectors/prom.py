"""Get-or-create Prometheus metrics per registry.

Collectors are built more than once per process (one per run, one per test); prometheus_client refuses a second
metric with the same name in one registry, so every collector asks here and shares the first instance.
"""

from __future__ import annotations

import threading
from typing import Any

from prometheus_client import REGISTRY, CollectorRegistry

_LOCK = threading.Lock()
_METRICS: dict[tuple[int, str], Any] = {}


def get_metric(cls: type, name: str, documentation: str, labelnames: tuple[str, ...] = (),
               registry: CollectorRegistry | None = None, **kwargs: Any):
    reg = REGISTRY if registry is None else registry
    key = (id(reg), name)
    with _LOCK:
        m = _METRICS.get(key)
        if m is None:
            m = cls(name, documentation, labelnames, registry=reg, **kwargs)
            _METRICS[key] = m
        return m
