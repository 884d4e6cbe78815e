"""The one rule that picks what every backend is compared with: used by every suite's scorecard, the verdict and
`memrig power`.

A backend's role comes from its registry entry (services/adapters/registry.py ROLES), never from its name. The
baseline is OpenClaw native: the strongest condition whose backend is OpenClaw itself (role `native`, any profile) on
the given metric, in the metric's own direction (the metric registry's `higher_is_better`; an unregistered metric is
an error); only when OpenClaw itself did not run, the strongest of the port (`native-port`). Ties go to the plain
name (no `[variant]`), then to name order. Without any native backend a suite's scorecard may fall back to a control
(`full-context`, then `compacted`, then the first condition by name) and says so; the verdict does not call a
control "OpenClaw native" (`is_native`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from services.adapters.registry import role_of
from services.coordinator.metrics.registry import direction as registry_direction

NATIVE_ROLES = ("native", "native-port")
CONTROL_ORDER = ("full-context", "compacted")


def direction(metric: str) -> bool:
    """higher_is_better of a metric, from the metric registry (registry.direction); an unregistered one is an error
    naming it."""
    return registry_direction(metric)[0]


def means_of(per_cond: Mapping[str, Mapping[str, Mapping[str, float | None]]], metric: str) -> dict[str, float | None]:
    """{condition: mean of metric over its probes with a value (None when none has one)}."""
    out: dict[str, float | None] = {}
    for c, vals in per_cond.items():
        xs = [float(v) for v in (vals.get(metric) or {}).values() if v is not None]
        out[c] = sum(xs) / len(xs) if xs else None
    return out


def is_native(backend: str | None) -> bool:
    return role_of(backend) in NATIVE_ROLES


def choose(conditions: Iterable[str], backend_of: Mapping[str, str] | None = None,
           means: Mapping[str, float | None] | None = None, metric: str | None = None,
           fallback_to_control: bool = True) -> tuple[str | None, str]:
    """(baseline condition, the rule that chose it, in words). `backend_of` maps a condition to its backend (a
    condition missing from it is its own backend's name); `means` holds each condition's mean on `metric`."""
    conds = sorted(set(conditions))
    backend = dict(backend_of or {})
    hib = direction(metric) if metric else True
    for role in NATIVE_ROLES:
        natives = [c for c in conds if role_of(backend.get(c, c)) == role]
        if not natives:
            continue
        scored = [c for c in natives if means is not None and means.get(c) is not None]
        if scored:
            best = sorted(scored, key=lambda c: (-means[c] if hib else means[c], "[" in c, c))[0]  # type: ignore[index]
            return best, (f"the strongest OpenClaw native condition on {metric} (mean over the probes, "
                          f"{'higher' if hib else 'lower'} is better), OpenClaw itself before the port")
        plain = [c for c in natives if "[" not in c]
        return (plain or natives)[0], "OpenClaw native (no values to rank its profiles by)"
    if not fallback_to_control:
        return None, "no OpenClaw native backend ran"
    for ctl in CONTROL_ORDER:
        hit = [c for c in conds if backend.get(c, c) == ctl]
        if hit:
            return hit[0], ("no OpenClaw native profile ran, so the first control that ran (full-context, then "
                            "compacted), else the first condition by name")
    return (conds[0], "no OpenClaw native profile or control ran: the first condition by name") if conds else (
        None, "no condition ran")
