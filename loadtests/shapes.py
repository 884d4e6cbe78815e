"""Locust LoadTestShapes for step, spike and soak runs (stage tables in loadtests/stages.py).

Locust takes every LoadTestShape subclass it finds in a locustfile's namespace, so the locustfiles bind at most
one: `selected_shape()` returns the class named by `MEMRIG_LOAD_SHAPE` (parameters from JSON
`MEMRIG_LOAD_SHAPE_PARAMS`), or None to use `-u/-r/-t`. Only the master (or local runner) runs the shape.
"""

from __future__ import annotations

from locust import LoadTestShape

from loadtests.stages import Stage, stages_for, stages_from_env, tick_for


class _StagedShape(LoadTestShape):
    abstract = True
    kind = ""
    stages: list[Stage] = []

    def tick(self):
        return tick_for(self.stages, self.get_run_time())


class StepShape(_StagedShape):
    """Users added in plateaus, to find where latency or failures start climbing."""

    abstract = True
    kind = "step"
    stages = stages_for("step")


class SpikeShape(_StagedShape):
    """Base load, a short burst of many users, then base load (does it recover?)."""

    abstract = True
    kind = "spike"
    stages = stages_for("spike")


class SoakShape(_StagedShape):
    """Constant users for a long time (leaks, drift, queue growth)."""

    abstract = True
    kind = "soak"
    stages = stages_for("soak")


_BY_KIND = {"step": StepShape, "spike": SpikeShape, "soak": SoakShape}


def selected_shape() -> type[LoadTestShape] | None:
    chosen = stages_from_env()
    if chosen is None:
        return None
    kind, stages = chosen
    base = _BY_KIND[kind]
    # A concrete subclass carrying the env's stage table; `abstract = False` makes locust pick it up.
    return type(f"{base.__name__}FromEnv", (base,), {"abstract": False, "stages": stages})
