"""Every drill, every criterion it claims, shown failing on its own (and all holding when the adapter is right),
in the quick set: the drills run on a simulated clock against a simulated proxy and adapter, so a whole drill
takes milliseconds and nothing here depends on how fast the machine is.

The simulated adapter follows the Cortex plugin's documented policy (reference/peers.md §2.5, §2.7, as
tests/test_drills.py's fake does over real HTTP): a recall budget (`recall_timeout_ms`), a cold-start gate that
opens after `cold_start_failures` consecutive failures for `cold_start_cooldown_ms`, and a RetryQueue capped at
`retry_queue_capacity` (0 = no cap). The simulated proxy applies the faults the drills switch on (reset,
http_error, rate_limit, outage, latency) and counts requests; latency advances the simulated clock. Each case
changes one thing (a mis-configured knob, a slow gated path, growing RSS, a plugin that lets errors escape) and
asserts exactly which criteria fail.
"""

from __future__ import annotations

import asyncio
import re
from typing import Any

import pytest

from services.common.types import Memory, RetrieveResult
from services.drills.base import AdapterKnobs, DrillConfig, DrillContext, failed_criteria
from services.drills.catalog import DRILLS
from services.drills.runner import run_drills
from services.turn_sim.plugin import MemoryPlugin


class SimClock:
    def __init__(self) -> None:
        self.t = 1000.0

    def __call__(self) -> float:
        return self.t

    async def sleep(self, seconds: float) -> None:
        self.t += max(0.0, seconds)
        await asyncio.sleep(0)


class SimProxy:
    """The admin API surface the drills use, and the fault decisions for the simulated adapter's calls."""

    def __init__(self, clock: SimClock, error_latency_ms: float = 0.0):
        self.clock = clock
        self.faults: dict[str, dict[str, Any]] = {}
        self.requests = 0
        self.error_latency_s = error_latency_ms / 1000.0

    async def add_fault(self, name, type, *, stage=None, toxicity=1.0, match=None, attributes=None, max_hits=None):
        self.faults[name] = {"type": type, "match": match or {}, "attributes": attributes or {},
                             "added": self.clock()}
        return {"name": name}

    async def remove(self, name, missing_ok=False):
        if name not in self.faults and not missing_ok:
            raise KeyError(name)
        self.faults.pop(name, None)

    async def reset(self, seed=None):
        self.faults.clear()

    async def populate(self, faults):
        for f in faults:
            await self.add_fault(f["name"], f["type"], match=f.get("match"), attributes=f.get("attributes"))
        return faults

    async def status(self):
        return {"requests": self.requests}

    async def close(self):
        pass

    def call(self, path: str) -> tuple[bool, float]:
        """(ok, seconds the answer takes)."""
        self.requests += 1
        delay = 0.0
        for f in self.faults.values():
            rx = f["match"].get("path_regex")
            if rx and not re.search(rx, path):
                continue
            a = f["attributes"]
            if f["type"] == "latency":
                delay += a["latency_ms"] / 1000.0
            elif f["type"] in ("reset", "http_error", "rate_limit"):
                return False, delay + self.error_latency_s
            elif f["type"] == "outage" and self.clock() < f["added"] + a["duration_s"]:
                return False, delay + self.error_latency_s
        return True, delay


class SimCortexClient:
    """The adapter under test, as a backend client (retrieve / ingest / stats / close)."""

    def __init__(self, proxy: SimProxy, clock: SimClock, cfg: dict[str, Any], gated_cost_ms: float = 0.0):
        self.proxy, self.clock, self.cfg = proxy, clock, cfg
        self.gated_cost_s = gated_cost_ms / 1000.0
        self.failures = 0
        self.cold_until = 0.0
        self.queue: list[Any] = []

    async def retrieve(self, namespace, query):
        if self.clock() < self.cold_until:
            self.clock.t += self.gated_cost_s
            return RetrieveResult(degraded=True, degraded_reason="cold-start gate open"), 0
        ok, took = self.proxy.call("/v1/retrieve")
        budget = self.cfg["recall_timeout_ms"] / 1000.0
        if took > budget:
            self.clock.t += budget
            ok = False
        else:
            self.clock.t += took
        if not ok:
            self.failures += 1
            if self.failures >= self.cfg["cold_start_failures"]:
                self.cold_until = self.clock() + self.cfg["cold_start_cooldown_ms"] / 1000.0
                self.failures = 0
            return RetrieveResult(degraded=True, degraded_reason="api failed"), 0
        self.failures = 0
        return RetrieveResult(memories=[Memory("m1", "The cache TTL is 300 seconds.", 0.9),
                                        Memory("m2", "Redis is the cache store.", 0.8)]), 0

    async def ingest(self, namespace, batch):
        ok, _ = self.proxy.call("/v1/jobs/ingest")
        if not ok:
            cap = self.cfg["retry_queue_capacity"]
            self.queue.append(batch)
            while cap > 0 and len(self.queue) > cap:
                self.queue.pop(0)

    async def stats(self, namespace=""):
        return {"counters": {"retry_queue_depth": len(self.queue)}}

    async def close(self):
        pass


class LeakyPlugin(MemoryPlugin):
    """A plugin that lets a failed recall reach the agent as an exception instead of degrading silently."""

    async def before_agent_start(self, prompt):
        out = await super().before_agent_start(prompt)
        if out.degraded:
            raise RuntimeError(f"recall failed: {out.reason}")
        return out


def _growing_rss(step_mb: float):
    n = [0]

    def read() -> int:
        n[0] += 1
        return int(200 * 2 ** 20 + n[0] * step_mb * 2 ** 20)

    return read


def _ctx(overrides=None, gated_cost_ms=0.0, rss_step_mb=0.0, leaky=False, error_latency_ms=0.0) -> DrillContext:
    clock = SimClock()
    proxy = SimProxy(clock, error_latency_ms)

    def make_client(cfg):
        return SimCortexClient(proxy, clock, cfg, gated_cost_ms)

    return DrillContext(proxy, make_client, "ns", DrillConfig(), AdapterKnobs(), overrides or {}, seed=7,
                        clock=clock, sleep=clock.sleep, rss_reader=_growing_rss(rss_step_mb),
                        plugin_factory=LeakyPlugin if leaky else None)


CLAIMED = {
    "api_down": {"api_calls_after_gate", "overhead", "no_error_reaches_agent"},
    "slow_api": {"overhead", "no_error_reaches_agent"},
    "sustained_failures": {"queue_cap", "rss_growth"},
    "recovery": {"recall_after_outage", "no_error_reaches_agent"},
    "error_bursts": {"no_error_reaches_agent", "overhead", "recall_after_bursts"},
    "rate_limit_storm": {"no_error_reaches_agent", "overhead", "queue_cap"},
}

# (drill, what is wrong, context kwargs, the criteria that must fail)
BROKEN_CASES = [
    ("api_down", "gate disabled", {"overrides": {"cold_start_failures": 10 ** 6}}, {"api_calls_after_gate"}),
    ("api_down", "gated path costs 5 ms", {"gated_cost_ms": 5.0}, {"overhead"}),
    ("api_down", "errors escape", {"leaky": True}, {"no_error_reaches_agent"}),
    ("slow_api", "timeout budget huge", {"overrides": {"recall_timeout_ms": 10_000}}, {"overhead"}),
    ("slow_api", "errors escape", {"leaky": True}, {"no_error_reaches_agent"}),
    ("sustained_failures", "queue cap off", {"overrides": {"retry_queue_capacity": 0}}, {"queue_cap"}),
    ("sustained_failures", "RSS grows 5 MB per sample", {"rss_step_mb": 5.0}, {"rss_growth"}),
    ("recovery", "cooldown far longer than the outage", {"overrides": {"cold_start_cooldown_ms": 60_000}},
     {"recall_after_outage"}),
    ("recovery", "errors escape", {"leaky": True}, {"no_error_reaches_agent"}),
    ("error_bursts", "timeout budget huge", {"overrides": {"recall_timeout_ms": 10_000}}, {"overhead"}),
    ("error_bursts", "cooldown far longer", {"overrides": {"cold_start_cooldown_ms": 60_000}},
     {"recall_after_bursts"}),
    ("error_bursts", "errors escape", {"leaky": True}, {"no_error_reaches_agent"}),
    ("rate_limit_storm", "queue cap off", {"overrides": {"retry_queue_capacity": 0}}, {"queue_cap"}),
    ("rate_limit_storm", "429s take 2 s and the budget is huge",
     {"overrides": {"recall_timeout_ms": 10_000}, "error_latency_ms": 2000.0}, {"overhead"}),
    ("rate_limit_storm", "errors escape", {"leaky": True}, {"no_error_reaches_agent"}),
]


def test_every_claimed_criterion_has_a_failing_case():
    for name, claimed in CLAIMED.items():
        shown = set().union(*(fail for d, _, _, fail in BROKEN_CASES if d == name))
        assert shown == claimed, name
    assert set(CLAIMED) == set(DRILLS)


async def test_every_drill_passes_with_a_correct_adapter_on_the_simulated_clock():
    results = await run_drills(_ctx(), seed_first=False)
    assert [r.name for r in results] == list(DRILLS)
    for r in results:
        assert set(r.details["criteria"]) == CLAIMED[r.name], r.name
        assert r.passed and failed_criteria(r) == set(), (r.name, r.measured)


@pytest.mark.parametrize("name,why,kw,fails", BROKEN_CASES, ids=[f"{c[0]}: {c[1]}" for c in BROKEN_CASES])
async def test_drill_criterion_fails_on_its_own(name, why, kw, fails):
    r = await DRILLS[name](_ctx(**kw))
    assert not r.passed
    assert failed_criteria(r) == fails, r.measured


async def test_figures_on_the_simulated_clock():
    """Hand-checked numbers: slow_api with a 500 ms budget caps every turn at exactly 500 ms (gate open after 3:
    the 4th turn costs 0); api_down makes exactly 3 API calls before the gate; sustained_failures with RSS
    +5 MB per sample reports +5 MB × (samples − 1) of growth."""
    r = await DRILLS["slow_api"](_ctx())
    assert r.details["overhead_ms"] == pytest.approx([500.0, 500.0, 500.0, 0.0])
    ctx = _ctx()
    r = await DRILLS["api_down"](ctx)
    assert ctx.admin.requests == 3 and r.details["api_calls_after_gate"] == 0
    r = await DRILLS["sustained_failures"](_ctx(rss_step_mb=5.0))
    n = len(r.details["rss_mb"])
    assert n == 14  # one before, one every 10 of 120 captures, one after the drain
    assert r.details["rss_growth_mb"] == pytest.approx(5.0 * (n - 1))
    assert r.details["queue_depths"][-1] == 100
    assert r.details["rss_slope_bytes_per_s"]["n"] == n  # its unit is checked in tests/test_resources_units.py
