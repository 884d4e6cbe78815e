"""A run plan: which suites run over which backends with which options, into which directory, and the one loop
that runs it. The CLI builds the plan from its flags (services/commands/bench.py: bench-all through
services/coordinator/bench_all.py `plan`, bench-local through services/coordinator/bench_local.py `plan`); the
loop is the same for both.

The command-line values every run command shares are parsed here too, once: a comma-separated list (`parse_csv`),
`--option key=value` (`parse_options`: the value read as JSON when it is JSON, else kept as text; a pair without
`=` is a ValidationError naming --option) and `--target backend=HOST:PORT` (`parse_targets`).

The loop runs each suite in its own directory under the plan's `out`, starting backends once through one Rig
(stopped by PID at the end); a suite whose data is absent (SuiteUnavailable) is skipped with the reason, one that
raises is recorded as failed with its traceback, and the others run on. Each suite's entry in the index
(report.json `suites`) is

    succeeded / partial / failed run:  {"state", "dir", "failures", "duration_s"} (+ "reused": {backend: "reused
                                       from RUN, measured at TIME"} when a stored result stood in for a backend)
    skipped (SuiteUnavailable):        {"state": "skipped", "reason", "duration_s"}
    raised:                            {"state": "failed", "reason", "traceback", "duration_s"}

plus what the plan puts in `SuitePlan.entry` first (bench-local: the backends, why any was replaced, and `dir`,
which a failed suite keeps so its partial run is read; a skipped one drops it).
"""

from __future__ import annotations

import dataclasses
import json
import time
import traceback
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from services.common.types import ValidationError


def parse_csv(s: str | None) -> list[str]:
    """"a, b,,c" -> ["a", "b", "c"]."""
    return [x.strip() for x in (s or "").split(",") if x.strip()]


def parse_options(pairs: list[str] | None) -> dict[str, Any]:
    """`--option key=value` pairs as {key: value}: the value as JSON when it parses (numbers, true/false, lists),
    else the text itself."""
    out: dict[str, Any] = {}
    for p in pairs or []:
        if "=" not in p:
            raise ValidationError("--option", f"expected key=value, got {p!r}")
        k, v = p.split("=", 1)
        try:
            out[k] = json.loads(v)
        except json.JSONDecodeError:
            out[k] = v
    return out


def parse_targets(values: list[str] | None) -> dict[str, str]:
    """`--target backend=HOST:PORT` (repeatable) as {backend: address}."""
    targets = {}
    for t in values or []:
        name, _, addr = t.partition("=")
        if not name or not addr:
            raise ValidationError("--target", f"expected backend=HOST:PORT, got {t!r}")
        targets[name] = addr
    return targets


def suite_options(options: dict[str, Any], suite: str) -> dict[str, Any]:
    """The `suite.key` entries of a multi-suite run's options, for that suite, without the prefix."""
    return {k.split(".", 1)[1]: v for k, v in options.items() if k.startswith(suite + ".")}


@dataclass
class SuitePlan:
    """One suite of a plan: its backends, its options, the LLM role choices (services/common/llm_roles.py; empty:
    as the environment says) and what its index entry starts with."""

    suite: str
    backends: list[str]
    options: dict[str, Any] = field(default_factory=dict)
    llm_roles: dict[str, str] = field(default_factory=dict)
    entry: dict[str, Any] = field(default_factory=dict)


def run_settings(**settings: Any):
    """The run settings every suite of a plan shares (seed, resume, concurrency, lanes, judge_passes, embedder,
    targets, in_process, settle_timeout_s): a RunConfig (services/coordinator/runner.py) with no suite yet, so the
    settings and their defaults have one home. An unknown setting is a TypeError naming it."""
    from services.coordinator.runner import RunConfig

    return RunConfig(suite="", backends=[], **settings)


@dataclass
class RunPlan:
    """A multi-suite run. `kind` names it in messages and run ids ("bench-all", "bench-local"); `run` holds the run
    settings (`run_settings`), the same for every suite: each suite's RunConfig is `run` with the suite's name,
    backends, options, LLM roles and directory put in."""

    kind: str
    out: Path
    suites: list[SuitePlan]
    run: Any = field(default_factory=run_settings)  # RunConfig

    def run_config(self, s: SuitePlan):
        return dataclasses.replace(self.run, suite=s.suite, backends=list(s.backends), out_dir=str(self.out / s.suite),
                                   options=dict(s.options), targets=dict(self.run.targets), llm_roles=dict(s.llm_roles))


SuiteRunner = Callable[..., Awaitable[Any]]  # run_suite(cfg, progress, rig=...) -> RunOutcome


async def run_plan(plan: RunPlan, run_suite: SuiteRunner, progress: Any, rig: Any,
                   around: Callable[[SuitePlan], Any] | None = None) -> dict[str, dict[str, Any]]:
    """Run every suite of the plan in order; returns {suite: index entry} (the module docstring's shapes).
    `run_suite` is services/coordinator/runner.py's (passed in, so a test can stand in for it); `rig` the Rig the
    backends start in (None: in-process). `around(suite_plan)`, when given, is called before each suite and returns
    a function called with the finished entry (bench-local counts the response cache around each suite)."""
    from services.coordinator.suites.base import SuiteUnavailable

    entries: dict[str, dict[str, Any]] = {}
    for s in plan.suites:
        after = around(s) if around is not None else None
        ts = time.monotonic()
        entry = dict(s.entry)
        try:
            outcome = await run_suite(plan.run_config(s), progress, rig=rig)
            entry.update(state=outcome.state, dir=s.suite, failures=outcome.failures)
            if getattr(outcome, "reused", None):  # backends whose stored result stood in (services/coordinator/reuse.py)
                entry["reused"] = dict(outcome.reused)
        except SuiteUnavailable as e:
            entry.pop("dir", None)  # nothing ran: no run directory to read
            entry.update(state="skipped", reason=str(e))
            print(f"[{plan.kind}] {s.suite} skipped: {e}", flush=True)
        except Exception as e:  # one suite failing must not sink the others
            entry.update(state="failed", reason=f"{type(e).__name__}: {e}", traceback=traceback.format_exc()[-2000:])
            print(f"[{plan.kind}] {s.suite} failed: {e}", flush=True)
        entry["duration_s"] = time.monotonic() - ts
        if after is not None:
            after(entry)
        entries[s.suite] = entry
    return entries
