"""Stage tables for the locust load shapes (step, spike, soak): pure, so they are tested without locust.

A table is a list of `Stage(end_s, users, spawn_rate)` with cumulative end times; at run time t the shape
uses the first stage whose end is still ahead, and stops (tick returns None) after the last one. Parameters
come from a JSON object (env `MEMRIG_LOAD_SHAPE_PARAMS`) so the same locustfile serves every shape.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from typing import Any

SHAPES = ("step", "spike", "soak")


@dataclass(frozen=True)
class Stage:
    end_s: float
    users: int
    spawn_rate: float


def step_stages(users: int = 5, step_users: int = 5, steps: int = 4, step_s: float = 30.0,
                spawn_rate: float = 5.0) -> list[Stage]:
    """`steps` plateaus: users, users+step_users, ...; each held `step_s` seconds."""
    return [Stage(step_s * (k + 1), users + k * step_users, spawn_rate) for k in range(steps)]


def spike_stages(users: int = 5, spike_users: int = 40, before_s: float = 30.0, spike_s: float = 10.0,
                 after_s: float = 30.0, spawn_rate: float = 50.0) -> list[Stage]:
    """Base load, a sudden jump (fast spawn rate), then back to base to watch recovery."""
    return [Stage(before_s, users, spawn_rate),
            Stage(before_s + spike_s, spike_users, spawn_rate),
            Stage(before_s + spike_s + after_s, users, spawn_rate)]


def soak_stages(users: int = 10, duration_s: float = 1800.0, ramp_s: float = 30.0) -> list[Stage]:
    """Ramp up over `ramp_s`, then hold `users` for `duration_s` (leaks and slow drift show up here)."""
    return [Stage(duration_s, users, max(users / max(ramp_s, 1e-9), 0.1))]


_BUILDERS = {"step": step_stages, "spike": spike_stages, "soak": soak_stages}


def stages_for(kind: str, params: dict[str, Any] | None = None) -> list[Stage]:
    if kind not in _BUILDERS:
        raise ValueError(f"shape must be one of {', '.join(SHAPES)} (got {kind!r})")
    try:
        return _BUILDERS[kind](**(params or {}))
    except TypeError as e:
        raise ValueError(f"shape params for {kind!r}: {e}") from None


def tick_for(stages: list[Stage], run_time_s: float) -> tuple[int, float] | None:
    """(users, spawn_rate) for the stage covering run_time_s; None after the last stage (stop the test)."""
    for st in stages:
        if run_time_s < st.end_s:
            return st.users, st.spawn_rate
    return None


def stages_from_env(environ: dict[str, str] | None = None) -> tuple[str, list[Stage]] | None:
    """The shape chosen by `MEMRIG_LOAD_SHAPE` (+ JSON `MEMRIG_LOAD_SHAPE_PARAMS`), or None when unset."""
    env = os.environ if environ is None else environ
    kind = env.get("MEMRIG_LOAD_SHAPE", "").strip()
    if not kind or kind == "none":
        return None
    raw = env.get("MEMRIG_LOAD_SHAPE_PARAMS", "").strip()
    try:
        params = json.loads(raw) if raw else {}
    except json.JSONDecodeError as e:
        raise ValueError(f"MEMRIG_LOAD_SHAPE_PARAMS is not JSON: {e}") from None
    return kind, stages_for(kind, params)
