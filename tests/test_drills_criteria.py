"""Every drill, every criterion it claims, shown failing on its own (and all holding when the adapter is right),
in the quick set: the drills run on a simulated clock against a simulated proxy and adapter, so a whole drill
takes milliseconds and nothing here depends on how fast the machine is.

The simulated adapter follows the Cortex plugin's policy (Ubundi/openclaw-cortex, src/features/recall/handler.ts and
src/internal/retry-queue.ts, as tests/test_drills.py's fake does over real HTTP): a recall budget
(`recall_timeout_ms`), a cold-start gate that opens after `cold_start_failures` consecutive failures for
`cold_start_cooldown_ms`, and a RetryQueue capped at `retry_queue_capacity` (0 = no cap). The simulated proxy applies
the faults the drills switch on (reset, http_error, rate_limit, outage, latency) and counts requests; latency advances
the simulated clock. Each case changes one thing (a mis-configured knob, a slow gated path, growing RSS, a plugin that
lets errors escape) and asserts exactly which criteria fail.
"""

from __future__ import annotations

import asyncio
import re
from typing import Any

import pytest

from collectors.samples import SampleSink
from services.common.types import Memory, RetrieveResult
from services.drills.base import AdapterKnobs, DrillConfig, DrillContext, failed_criteria
from services.drills.catalog import DRILLS, get, names
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

    def __init__(self, proxy: SimProxy, clock: SimClock, cfg: dict[str, Any], gated_cost_ms: float = 0.0,
                 empty_recall: bool = False):
        self.proxy, self.clock, self.cfg = proxy, clock, cfg
        self.gated_cost_s = gated_cost_ms / 1000.0
        self.empty_recall = empty_recall  # the API answers, but with no memories (as if it lost them)
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
        if self.empty_recall:
            return RetrieveResult(), 0
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


def _ctx(overrides=None, gated_cost_ms=0.0, rss_step_mb=0.0, leaky=False, error_latency_ms=0.0,
         empty_recall=False) -> DrillContext:
    clock = SimClock()
    proxy = SimProxy(clock, error_latency_ms)

    def make_client(cfg):
        return SimCortexClient(proxy, clock, cfg, gated_cost_ms, empty_recall)

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
    ("recovery", "the API answers with no memories", {"empty_recall": True}, {"recall_after_outage"}),
    ("error_bursts", "timeout budget huge", {"overrides": {"recall_timeout_ms": 10_000}}, {"overhead"}),
    ("error_bursts", "cooldown far longer", {"overrides": {"cold_start_cooldown_ms": 60_000}},
     {"recall_after_bursts"}),
    ("error_bursts", "errors escape", {"leaky": True}, {"no_error_reaches_agent"}),
    ("error_bursts", "the API answers with no memories", {"empty_recall": True}, {"recall_after_bursts"}),
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


# ------------------------------------------------------------------------------------------------ exact figures
class ScriptedClient:
    """A backend whose every recall answers after a scripted time (seconds, one per call, the last one repeated)
    with `memories` memories, and whose capture queue keeps at most `retry_queue_capacity` batches."""

    def __init__(self, clock: SimClock, cfg: dict[str, Any], costs_s: list[float], memories: int = 1):
        self.clock, self.cfg, self.costs, self.memories = clock, cfg, list(costs_s), memories
        self.calls = 0
        self.queue: list[Any] = []

    async def retrieve(self, namespace, query):
        self.clock.t += self.costs[min(self.calls, len(self.costs) - 1)]
        self.calls += 1
        return RetrieveResult(memories=[Memory(f"m{i}", f"fact {i}", 0.9) for i in range(self.memories)]), 0

    async def ingest(self, namespace, batch):
        self.queue = (self.queue + [batch])[-self.cfg["retry_queue_capacity"]:]

    async def stats(self, namespace=""):
        return {"counters": {"retry_queue_depth": len(self.queue)}}

    async def close(self):
        pass


def _scripted_ctx(costs_s: list[float], config: DrillConfig | None = None, memories: int = 1,
                  rss_step_mb: float = 0.0) -> DrillContext:
    clock = SimClock()
    return DrillContext(SimProxy(clock), lambda cfg: ScriptedClient(clock, cfg, costs_s, memories), "ns",
                        config or DrillConfig(), AdapterKnobs(), {}, seed=7, clock=clock, sleep=clock.sleep,
                        rss_reader=_growing_rss(rss_step_mb))


async def test_every_criterion_holds_exactly_at_its_limit():
    """Each limit is inclusive: every recall takes exactly 250 ms (binary-exact on the simulated clock) against
    a 250 ms budget with no slack and a 250 ms "near zero"; RSS grows exactly the 26 MB allowed (2 MB × 13 steps);
    the queue fills exactly to its cap; the first recall after a fault finds exactly one memory."""
    cfg = DrillConfig(recall_timeout_ms=250, near_zero_ms=250.0, slack_ms=0.0, rss_growth_limit_mb=26.0)
    for name, drill in DRILLS.items():
        r = await drill(_scripted_ctx([0.25], cfg, memories=1, rss_step_mb=2.0))
        assert r.passed and failed_criteria(r) == set(), (name, r.measured)
        if name in ("api_down", "error_bursts", "rate_limit_storm"):
            assert r.value == 250.0, name
    r = await DRILLS["sustained_failures"](_scripted_ctx([0.25], cfg, rss_step_mb=2.0))
    assert r.details["rss_growth_mb"] == 26.0 and r.value == 100.0


async def test_overhead_figure_is_the_95th_percentile_of_the_turns():
    ms = 0.001
    # api_down: 3 opening turns, then 6 gated turns of 1..6 ms -> p95 at rank 0.95 × 5 = 4.75: 5 + 0.75 = 5.75 ms
    r = await DRILLS["api_down"](_scripted_ctx([ms] * 3 + [k * ms for k in range(1, 7)]))
    assert r.details["overhead_ms_after_gate"] == pytest.approx([1, 2, 3, 4, 5, 6])
    assert r.value == pytest.approx(5.75) and failed_criteria(r) == {"overhead"}  # 5.75 ms is not ≈ 0
    # error_bursts: 8 burst turns of 10..80 ms -> rank 0.95 × 7 = 6.65: 70 + 0.65 × 10 = 76.5 ms
    r = await DRILLS["error_bursts"](_scripted_ctx([10 * k * ms for k in range(1, 10)]))
    assert r.details["overhead_ms"] == pytest.approx([10, 20, 30, 40, 50, 60, 70, 80])
    assert r.value == pytest.approx(76.5) and r.passed
    # rate_limit_storm: 6 storm turns of 10..60 ms -> rank 4.75: 50 + 0.75 × 10 = 57.5 ms
    r = await DRILLS["rate_limit_storm"](_scripted_ctx([10 * k * ms for k in range(1, 7)]))
    assert r.details["overhead_ms"] == pytest.approx([10, 20, 30, 40, 50, 60])
    assert r.value == pytest.approx(57.5) and r.passed


async def test_timeline_figures_on_the_simulated_clock():
    # error_bursts: the first stall costs the 500 ms budget and opens the gate (2 errors + 1 timeout); the second
    # burst is gated (0 ms). p95 of [0, 0, 500, 0, 0, 0, 0, 0]: rank 6.65 -> 0 + 0.65 × 500 = 325 ms. Then the
    # drill waits the 1.5 s cooldown + 50 ms: the turn after the bursts ends at 1000 + 0.5 + 1.55 s.
    r = await DRILLS["error_bursts"](_ctx())
    assert r.details["tags"] == ["burst_5xx", "burst_5xx", "burst_stall", "clean"] * 2
    assert r.details["overhead_ms"] == pytest.approx([0, 0, 500, 0, 0, 0, 0, 0])
    assert r.value == pytest.approx(325.0)
    assert r.details["after"]["t"] == pytest.approx(1002.05) and r.details["after"]["turn"] == 9
    # recovery: outage turns cost nothing here, so the drill sleeps to 50 ms past the outage's end
    r = await DRILLS["recovery"](_ctx())
    assert [t["tag"] for t in r.details["outage_turns"]] == ["outage"] * 4  # gate_failures + 1
    assert r.details["seconds_after_outage_end"] == pytest.approx(0.05) and r.value == 2.0
    # ... but when the outage turns themselves outlast a 0.75 s outage (two fail at the 500 ms budget, the next
    # two find the API back), it does not wait at all: the first turn after comes 0.25 s after the end.
    ctx = _ctx(error_latency_ms=1000.0)
    ctx.config = DrillConfig(outage_s=0.75)
    r = await DRILLS["recovery"](ctx)
    assert [t["degraded"] for t in r.details["outage_turns"]] == [True, True, False, False]
    assert r.details["seconds_after_outage_end"] == pytest.approx(0.25) and r.passed
    # sustained_failures: 13 samples at t = 0 and the last after the 0.2 s settle; RSS +5 MiB per sample, so
    # slope = Sxy / Sxx = 0.2 (y14 − ȳ) / (0.04 × 13/14) = (70/13) × 32.5 MiB = 175 MiB per second.
    r = await DRILLS["sustained_failures"](_ctx(rss_step_mb=5.0))
    assert r.details["rss_mb"] == pytest.approx([200 + 5 * k for k in range(1, 15)])
    assert r.details["rss_slope_bytes_per_s"]["slope"] == pytest.approx(175 * 2 ** 20)
    assert r.details["queue_depths"] == [10, 20, 30, 40, 50, 60, 70, 80, 90, 100, 100, 100, 100]
    assert r.value == 100.0 and r.details["queue_depth_observable"] is True
    r = await DRILLS["rate_limit_storm"](_ctx())
    assert r.details["queue_depths"] == [20, 40, 60, 80, 100, 100] and len(r.details["overhead_ms"]) == 6
    r = await DRILLS["api_down"](_ctx())
    assert len(r.details["overhead_ms_after_gate"]) == 6 and len(r.details["opening_overhead_ms"]) == 3
    assert r.details["drill_config"] == DrillConfig().to_json() and r.details["seed"] == 7
    assert r.details["overrides"] == {}


@pytest.mark.parametrize("name,raised", [("api_down", 9), ("slow_api", 4), ("recovery", 4), ("error_bursts", 8),
                                         ("rate_limit_storm", 6)])
async def test_errors_reaching_the_agent_are_counted_per_turn(name, raised):
    # every degraded turn raises with the leaky plugin: api_down 3 opening + 6 gated; slow_api 4 timed out;
    # recovery the 4 outage turns; error_bursts all 8 burst turns (degraded or gated); the storm's 6 recalls
    r = await DRILLS[name](_ctx(leaky=True))
    assert r.details["raised"] == raised
    rows = [r.details.get("first_turn")] if name == "recovery" else []
    for row in rows + r.details.get("outage_turns", []):
        if row["raised"]:
            assert row["raised"].startswith("RuntimeError: recall failed") and row["memories"] == 0
            assert row["degraded"] is True


class _QueueHidden(SimCortexClient):
    async def stats(self, namespace=""):
        raise RuntimeError("no counters")


async def test_unobservable_queue_fails_sustained_failures_but_not_the_storm():
    clock = SimClock()
    proxy = SimProxy(clock)
    ctx = DrillContext(proxy, lambda cfg: _QueueHidden(proxy, clock, cfg), "ns", seed=7, clock=clock,
                       sleep=clock.sleep, rss_reader=_growing_rss(0.0))
    r = await DRILLS["sustained_failures"](ctx)
    assert failed_criteria(r) == {"queue_cap"} and r.value is None
    assert r.details["queue_depth_observable"] is False and "max queue n/a" in r.measured
    r = await DRILLS["rate_limit_storm"](ctx)
    assert r.passed and r.details["queue_depths"] == [] and "max queue n/a" in r.measured


class RecordingProxy(SimProxy):
    def __init__(self, clock: SimClock):
        super().__init__(clock)
        self.log: list[tuple] = []

    async def add_fault(self, name, type, **kw):
        self.log.append(("add", name, type, kw.get("match") or {}, kw.get("attributes") or {}))
        return await super().add_fault(name, type, **kw)

    async def populate(self, faults):
        self.log.append(("populate", [f["name"] for f in faults]))
        return await super().populate(faults)

    async def remove(self, name, missing_ok=False):
        self.log.append(("remove", name))
        return await super().remove(name, missing_ok)

    async def reset(self, seed=None):
        self.log.append(("reset", seed))
        return await super().reset(seed)


async def test_each_drill_switches_the_faults_it_names():
    recall, capture = {"path_regex": "^/v1/(retrieve|recall)"}, {"path_regex": "^/v1/(jobs/)?(ingest|remember)"}
    expected = {
        "api_down": [("add", "api_down", "reset", {}, {}), ("remove", "api_down")],
        "slow_api": [("add", "slow_api", "latency", recall, {"latency_ms": 3000}), ("remove", "slow_api")],
        "sustained_failures": [("add", "capture_down", "http_error", capture, {"status": 503}),
                               ("remove", "capture_down")],
        "recovery": [("add", "outage", "outage", {}, {"duration_s": 2.5, "mode": "error", "status": 503}),
                     ("remove", "outage")],
        "rate_limit_storm": [("add", "storm_429", "rate_limit", {},
                              {"rate_per_s": 1.0, "burst": 1, "retry_after_s": 2}), ("remove", "storm_429")],
    }
    for name, log in expected.items():
        clock = SimClock()
        proxy = RecordingProxy(clock)
        ctx = DrillContext(proxy, lambda cfg, p=proxy, c=clock: SimCortexClient(p, c, cfg), "ns", seed=7,
                           clock=clock, sleep=clock.sleep, rss_reader=_growing_rss(0.0))
        await DRILLS[name](ctx)
        assert proxy.log == log, name
    # error_bursts: each turn on a fresh seeded timeline with that turn's faults, twice, then a clean wait
    clock = SimClock()
    proxy = RecordingProxy(clock)
    seen: list[dict] = []
    original = proxy.populate

    async def populate(faults):
        seen.extend(faults)
        return await original(faults)

    proxy.populate = populate
    ctx = DrillContext(proxy, lambda cfg: SimCortexClient(proxy, clock, cfg), "ns", seed=7, clock=clock,
                       sleep=clock.sleep, rss_reader=_growing_rss(0.0))
    await DRILLS["error_bursts"](ctx)
    burst = [("reset", 7), ("populate", ["burst_5xx"]), ("add", "burst_5xx", "http_error", recall,
                                                          {"statuses": {"500": 1, "502": 1, "503": 1}})] * 2
    burst += [("reset", 7), ("populate", ["burst_stall"]), ("add", "burst_stall", "latency", recall,
                                                            {"latency_ms": 3000})]
    burst += [("reset", 7)]
    assert proxy.log == burst * 2 + [("reset", 7), ("reset", 7)]
    assert seen[0]["attributes"] == {"statuses": {"500": 1, "502": 1, "503": 1}}


class RecordingPlugin(MemoryPlugin):
    log: list[tuple] = []

    def __init__(self, client, namespace, config):
        super().__init__(client, namespace, config)
        self.log.append(("config", config.recall_mode, config.top_k))

    async def before_agent_start(self, prompt):
        self.log.append(("recall", prompt))
        return await super().before_agent_start(prompt)

    def agent_end(self, session_id, turn_id, messages, started_at=None, success=True):
        self.log.append(("capture", session_id, turn_id, tuple(messages)))
        super().agent_end(session_id, turn_id, messages, started_at, success)

    async def drain(self, timeout_s=30.0):
        self.log.append(("drain", timeout_s))
        await super().drain(timeout_s)


async def test_turns_the_drills_play_and_what_they_record():
    from services.drills.catalog import PROBES

    RecordingPlugin.log = []
    ctx = _ctx()
    ctx.plugin_factory = RecordingPlugin
    ctx.sink = SampleSink()
    await DRILLS["slow_api"](ctx)
    assert RecordingPlugin.log == [("config", "fast", 5)] + [("recall", PROBES[i]) for i in range(4)] + \
        [("drain", 5.0)]
    RecordingPlugin.log = []
    await DRILLS["sustained_failures"](ctx)
    log = RecordingPlugin.log
    assert log[1] == ("capture", "drill-sustained_failures", "c0",
                      (("user", "Remember drill item 0: value 0."), ("assistant", "Noted item 0.")))
    assert ("capture", "drill-sustained_failures", "c3",
            (("user", "Remember drill item 3: value 21."), ("assistant", "Noted item 3."))) in log
    # a drain after every 10th capture (12), one before the settle, one on close: all bounded at 5 s
    assert [e for e in log if e[0] == "drain"] == [("drain", 5.0)] * 14
    RecordingPlugin.log = []
    await DRILLS["rate_limit_storm"](ctx)
    assert [e for e in RecordingPlugin.log if e[0] == "drain"] == [("drain", 5.0)] * 8  # 6 storm turns + 2
    # the sink got every turn of the drill that played them, in order, and every RSS sample
    turns = ctx.sink.of_kind("drill_turn")
    assert [(t["drill"], t["turn"], t["tag"]) for t in turns[:4]] == [("slow_api", i, "slow") for i in range(1, 5)]
    assert [t["drill"] for t in turns[4:]] == ["rate_limit_storm"] * 6
    assert len(ctx.sink.of_kind("resources")) == 14


async def test_a_long_exception_is_cut_to_200_characters():
    class Shouting(MemoryPlugin):
        async def before_agent_start(self, prompt):
            raise ValueError("x" * 500)

    ctx = _ctx()
    ctx.plugin_factory = Shouting
    ctx.sink = SampleSink()
    r = await DRILLS["slow_api"](ctx)
    assert r.details["raised"] == 4 and failed_criteria(r) == {"no_error_reaches_agent"}
    row = ctx.sink.of_kind("drill_turn")[0]
    assert row["raised"] == "ValueError: " + "x" * 188 and (row["memories"], row["degraded"]) == (0, True)


def test_drill_names_and_lookup():
    assert names() == ["api_down", "slow_api", "sustained_failures", "recovery", "error_bursts",
                       "rate_limit_storm"]
    assert get("recovery") is DRILLS["recovery"]
    with pytest.raises(KeyError, match="unknown drill 'nope'; known: api_down, slow_api"):
        get("nope")


async def test_storm_too_short_for_a_recall_fails_its_overhead_criterion_without_crashing():
    # a recall is played every 20th capture: 19 captures play none, so no overhead was shown to hold
    ctx = _ctx()
    ctx.config = DrillConfig(failed_captures=19)
    r = await DRILLS["rate_limit_storm"](ctx)
    assert failed_criteria(r) == {"overhead"} and r.value is None and "p95 overhead n/a" in r.measured
    ctx.config = DrillConfig(failed_captures=20)
    r = await DRILLS["rate_limit_storm"](ctx)
    assert r.passed and len(r.details["overhead_ms"]) == 1 and "p95 overhead 0 ms" in r.measured


async def test_sustained_failures_samples_rss_only_by_hand():
    """The drill's sampler is driven by hand (never started) and reads RSS only, even when tracemalloc runs."""
    import tracemalloc

    was = tracemalloc.is_tracing()
    tracemalloc.start()
    try:
        ctx = _ctx(rss_step_mb=1.0)
        ctx.sink = SampleSink()
        r = await DRILLS["sustained_failures"](ctx)
    finally:
        if not was:
            tracemalloc.stop()
    rows = ctx.sink.of_kind("resources")
    assert len(rows) == 14 and all(row["heap_current_bytes"] is None for row in rows)
    assert {row["component"] for row in rows} == {"drill_sustained"}
    assert {row["phase"] for row in rows} == {"sustained_failures"}
    assert r.details["rss_growth_mb"] == pytest.approx(13.0)


@pytest.mark.parametrize("name", ["error_bursts", "rate_limit_storm"])
async def test_overhead_limit_is_the_budget_plus_the_slack(name):
    """250 ms budget + 50 ms slack = 300 ms: recalls of 280 ms pass (they would fail a 250 − 50 ms limit),
    recalls of 310 ms do not."""
    cfg = DrillConfig(recall_timeout_ms=250, slack_ms=50.0)
    r = await DRILLS[name](_scripted_ctx([0.28], cfg))
    assert r.value == pytest.approx(280.0) and r.passed
    r = await DRILLS[name](_scripted_ctx([0.31], cfg))
    assert r.value == pytest.approx(310.0) and failed_criteria(r) == {"overhead"}


async def test_a_queue_that_stays_below_its_cap_passes():
    """50 failed captures against a cap of 100: the queue peaks at 50, under the cap, and that is a pass."""
    r = await DRILLS["sustained_failures"](_scripted_ctx([0.001], DrillConfig(failed_captures=50)))
    assert r.value == 50.0 and r.details["queue_depths"][-1] == 50
    assert r.passed and failed_criteria(r) == set()
