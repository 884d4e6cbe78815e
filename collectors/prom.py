"""Get-or-create Prometheus metrics per registry.

Collectors are built more than once per process (one per run, one per test); prometheus_client refuses a second
metric with the same name in one registry, so every collector asks here and shares the first instance.
Metrics are remembered per registry object (weakly), never by id(): a registry that was garbage-collected can
leave its id to a new one, which must not inherit metrics registered with the dead one.
"""

from __future__ import annotations

import threading
import weakref
from typing import Any

from prometheus_client import REGISTRY, CollectorRegistry

_LOCK = threading.Lock()
_METRICS: weakref.WeakKeyDictionary[CollectorRegistry, dict[str, Any]] = weakref.WeakKeyDictionary()


def get_metric(cls: type, name: str, documentation: str, labelnames: tuple[str, ...] = (),
               registry: CollectorRegistry | None = None, **kwargs: Any):
    reg = REGISTRY if registry is None else registry
    with _LOCK:
        known = _METRICS.setdefault(reg, {})
        m = known.get(name)
        if m is None:
            m = cls(name, documentation, labelnames, registry=reg, **kwargs)
            known[name] = m
        return m
