"""The drills. Each plays recall turns (the plugin's `before_agent_start`, whose time is the turn overhead) and
captures (`agent_end`) against the adapter under test while faults are switched through the proxy's admin API,
then checks its expectation. Timelines are seeded (`admin.reset(seed)`) so a run replays.

| drill | fault | expected |
| api_down | every request reset | ≈0 ms overhead and no API call once the gate opened after 3 failures |
| slow_api | +3 s on recall | overhead capped at recallTimeoutMs |
| sustained_failures | 503 on every capture, 100+ captures | RetryQueue ≤ 100, RSS stable |
| recovery | outage (configurable, seed: 30 s) | recall works on the first turn after the outage ends |
| error_bursts | bursts of 5xx and 3 s stalls | no error reaches the agent; overhead ≤ budget; recall back after |
| rate_limit_storm | 429 + Retry-After on everything | no error reaches the agent; overhead ≤ budget; queue ≤ 100 |

Each drill names its criteria (`details["criteria"]`, criterion -> held) and passes when all of them held, so a
test can show every claimed criterion failing on its own (tests/test_drills_criteria.py). Time is read from
`ctx.clock` and waits go through `ctx.sleep`, so the drills also run on a simulated clock.
"""

from __future__ import annotations

from collections.abc import Callable

from collectors.resources import ResourceSampler, slope_ci
from services.common.percentiles import percentile
from services.drills.base import DrillContext, DrillFn, DrillResult, verdict
from services.turn_sim.plugin import MemoryPlugin, PluginConfig
from services.turn_sim.workload import FACTS

RECALL_PATHS = r"^/v1/(retrieve|recall)"
CAPTURE_PATHS = r"^/v1/(jobs/)?(ingest|remember)"
PROBES = [f.probe for f in FACTS]


def _p(xs: list[float], q: float) -> float | None:
    return percentile(xs, q)


class _Turns:
    """Recall turns on one plugin, recording hook time, memories and exceptions that escaped."""

    def __init__(self, ctx: DrillContext, client, name: str):
        self.ctx = ctx
        make = ctx.plugin_factory or MemoryPlugin
        self.plugin = make(client, ctx.namespace, PluginConfig(recall_mode="fast", top_k=5))
        self.name = name
        self.rows: list[dict] = []
        self.n = 0

    async def recall(self, tag: str = "") -> dict:
        prompt = PROBES[self.n % len(PROBES)]
        self.n += 1
        clock = self.ctx.clock
        t0 = clock()
        raised = ""
        try:
            out = await self.plugin.before_agent_start(prompt)
            mems, degraded = out.memories, out.degraded
        except Exception as e:  # the plugin must never let this happen
            mems, degraded, raised = 0, True, f"{type(e).__name__}: {e}"[:200]
        t1 = clock()
        row = {"turn": self.n, "tag": tag, "overhead_ms": (t1 - t0) * 1000.0, "memories": mems,
               "degraded": degraded, "raised": raised, "t": t1}
        self.rows.append(row)
        if self.ctx.sink is not None:
            self.ctx.sink.write("drill_turn", drill=self.name, **row)
        return row

    def capture(self, i: int) -> None:
        self.plugin.agent_end(f"drill-{self.name}", f"c{i}", [("user", f"Remember drill item {i}: value {i * 7}."),
                                                              ("assistant", f"Noted item {i}.")])

    async def close(self) -> None:
        await self.plugin.drain(timeout_s=5.0)
        await self.plugin.client.close()


async def _requests_seen(ctx: DrillContext) -> int:
    return int((await ctx.admin.status())["requests"])


def _cfg(ctx: DrillContext) -> dict:
    return {"drill_config": ctx.config.to_json(), "overrides": dict(ctx.overrides), "seed": ctx.seed}


# ---------------------------------------------------------------------------------------------------------------
async def api_down(ctx: DrillContext) -> DrillResult:
    c = ctx.config
    turns = _Turns(ctx, ctx.client(), "api_down")
    try:
        await ctx.admin.add_fault("api_down", "reset", attributes={})
        for _ in range(c.gate_failures):
            await turns.recall("opening")
        seen = await _requests_seen(ctx)
        after = [await turns.recall("gated") for _ in range(6)]
        calls_after = await _requests_seen(ctx) - seen
    finally:
        await ctx.admin.remove("api_down", missing_ok=True)
        await turns.close()
    oh = [r["overhead_ms"] for r in after]
    p95 = _p(oh, 95)
    raised = sum(1 for r in turns.rows if r["raised"])
    passed, crit = verdict({"api_calls_after_gate": calls_after == 0,
                            "overhead": p95 is not None and p95 <= c.near_zero_ms,
                            "no_error_reaches_agent": raised == 0})
    return DrillResult("api_down", f"≈0 ms overhead (p95 ≤ {c.near_zero_ms:g} ms) and no API call once the gate "
                       f"opened after {c.gate_failures} failures",
                       f"p95 overhead after gate {p95:.2f} ms; API calls after gate {calls_after}", p95, passed,
                       {"criteria": crit, "overhead_ms_after_gate": oh, "api_calls_after_gate": calls_after,
                        "raised": raised,
                        "opening_overhead_ms": [r["overhead_ms"] for r in turns.rows[:c.gate_failures]], **_cfg(ctx)})


async def slow_api(ctx: DrillContext) -> DrillResult:
    c = ctx.config
    turns = _Turns(ctx, ctx.client(), "slow_api")
    try:
        await ctx.admin.add_fault("slow_api", "latency", match={"path_regex": RECALL_PATHS},
                                  attributes={"latency_ms": c.slow_api_ms})
        rows = [await turns.recall("slow") for _ in range(c.gate_failures + 1)]
    finally:
        await ctx.admin.remove("slow_api", missing_ok=True)
        await turns.close()
    worst = max(r["overhead_ms"] for r in rows)
    limit = c.recall_timeout_ms + c.slack_ms
    raised = sum(1 for r in rows if r["raised"])
    passed, crit = verdict({"overhead": worst <= limit, "no_error_reaches_agent": raised == 0})
    return DrillResult("slow_api", f"turn overhead capped at recallTimeoutMs = {c.recall_timeout_ms} ms "
                       f"(+{c.slack_ms:g} ms slack) with the API {c.slow_api_ms} ms slow",
                       f"max overhead {worst:.0f} ms", worst, passed,
                       {"criteria": crit, "overhead_ms": [r["overhead_ms"] for r in rows], "raised": raised,
                        **_cfg(ctx)})


async def sustained_failures(ctx: DrillContext) -> DrillResult:
    c = ctx.config
    client = ctx.client()
    turns = _Turns(ctx, client, "sustained_failures")
    sampler = ResourceSampler("drill_sustained", interval_s=3600, sink=ctx.sink, trace_heap=False,
                              rss_reader=ctx.rss_reader, clock=ctx.clock)
    sampler.set_phase("sustained_failures")
    depths: list[int] = []
    try:
        await ctx.admin.add_fault("capture_down", "http_error", match={"path_regex": CAPTURE_PATHS},
                                  attributes={"status": 503})
        sampler.sample()
        for i in range(c.failed_captures):
            turns.capture(i)
            if i % 10 == 9:
                await turns.plugin.drain(timeout_s=5.0)
                d = await ctx.queue_depth(client)
                if d is not None:
                    depths.append(d)
                sampler.sample()
        await turns.plugin.drain(timeout_s=5.0)
        await ctx.sleep(0.2)
        d = await ctx.queue_depth(client)
        if d is not None:
            depths.append(d)
        sampler.sample()
    finally:
        await ctx.admin.remove("capture_down", missing_ok=True)
        await turns.close()
    rss = [s["rss_bytes"] for s in sampler.samples]
    growth_mb = (rss[-1] - rss[0]) / 2 ** 20
    est = slope_ci([s["t_s"] for s in sampler.samples], rss)  # bytes per second of ctx.clock
    qmax = max(depths) if depths else None
    passed, crit = verdict({"queue_cap": qmax is not None and qmax <= c.queue_cap,
                            "rss_growth": growth_mb <= c.rss_growth_limit_mb})
    return DrillResult("sustained_failures", f"{c.failed_captures} failed captures: RetryQueue ≤ {c.queue_cap}, "
                       f"RSS stable (growth ≤ {c.rss_growth_limit_mb:g} MB)",
                       f"max queue {qmax if qmax is not None else 'n/a'}; RSS growth {growth_mb:+.1f} MB",
                       float(qmax) if qmax is not None else None, passed,
                       {"criteria": crit, "queue_depths": depths, "rss_mb": [r / 2 ** 20 for r in rss],
                        "rss_growth_mb": growth_mb, "rss_slope_bytes_per_s": est.to_json(),
                        "captures_failed": turns.plugin.captures_failed,
                        "queue_depth_observable": qmax is not None, **_cfg(ctx)})


async def recovery(ctx: DrillContext) -> DrillResult:
    c = ctx.config
    turns = _Turns(ctx, ctx.client(), "recovery")
    try:
        await ctx.admin.add_fault("outage", "outage", attributes={"duration_s": c.outage_s, "mode": "error",
                                                                   "status": 503})
        t_start = ctx.clock()
        for _ in range(c.gate_failures + 1):  # trip the gate, then one gated turn
            await turns.recall("outage")
        await ctx.sleep(max(0.0, t_start + c.outage_s + 0.05 - ctx.clock()))
        first = await turns.recall("after")
        since_end_s = first["t"] - (t_start + c.outage_s)
    finally:
        await ctx.admin.remove("outage", missing_ok=True)
        await turns.close()
    raised = sum(1 for r in turns.rows if r["raised"])
    passed, crit = verdict({"recall_after_outage": first["memories"] > 0 and not first["degraded"],
                            "no_error_reaches_agent": raised == 0})
    return DrillResult("recovery", f"recall works on the first turn after a {c.outage_s:g} s outage ends "
                       f"(gate cooldown {c.cooldown_s:g} s; seed: 30 s / 30 s)",
                       f"first turn after the outage: {first['memories']} memories"
                       f"{' (degraded)' if first['degraded'] else ''}, {first['overhead_ms']:.0f} ms",
                       float(first["memories"]), passed,
                       {"criteria": crit, "first_turn": first, "seconds_after_outage_end": since_end_s,
                        "raised": raised,
                        "outage_turns": turns.rows[:-1], **_cfg(ctx)})


async def error_bursts(ctx: DrillContext) -> DrillResult:
    """Two bursts, each: two 5xx answers, one stall of `slow_api_ms`, one clean turn (a fixed, seeded sequence, so
    a stall always lands before the gate can open and the budget is always exercised)."""
    c = ctx.config
    turns = _Turns(ctx, ctx.client(), "error_bursts")
    err = {"name": "burst_5xx", "type": "http_error", "match": {"path_regex": RECALL_PATHS},
           "attributes": {"statuses": {"500": 1, "502": 1, "503": 1}}}
    stall = {"name": "burst_stall", "type": "latency", "match": {"path_regex": RECALL_PATHS},
             "attributes": {"latency_ms": c.slow_api_ms}}
    burst: list[dict] = []
    try:
        for _ in range(2):
            for phase in ([err], [err], [stall], []):
                await ctx.admin.reset(seed=ctx.seed)
                if phase:
                    await ctx.admin.populate(phase)
                burst.append(await turns.recall(phase[0]["name"] if phase else "clean"))
        await ctx.admin.reset(seed=ctx.seed)
        await ctx.sleep(c.cooldown_s + 0.05)  # let a gate opened by the burst close again
        after = await turns.recall("after")
    finally:
        await ctx.admin.reset(seed=ctx.seed)
        await turns.close()
    oh = [r["overhead_ms"] for r in burst]
    p95 = _p(oh, 95)
    raised = sum(1 for r in turns.rows if r["raised"])
    limit = c.recall_timeout_ms + c.slack_ms
    passed, crit = verdict({"no_error_reaches_agent": raised == 0, "overhead": p95 is not None and p95 <= limit,
                            "recall_after_bursts": after["memories"] > 0 and not after["degraded"]})
    return DrillResult("error_bursts", f"bursts of 5xx and {c.slow_api_ms} ms stalls: no error reaches the agent, "
                       f"p95 overhead ≤ {c.recall_timeout_ms} ms (+slack), recall back after the bursts",
                       f"p95 overhead {p95:.0f} ms; {sum(r['degraded'] for r in burst)}/{len(burst)} degraded; "
                       f"errors raised {raised}; after the bursts {after['memories']} memories", p95, passed,
                       {"criteria": crit, "overhead_ms": oh, "tags": [r["tag"] for r in burst], "raised": raised,
                        "after": after,
                        **_cfg(ctx)})


async def rate_limit_storm(ctx: DrillContext) -> DrillResult:
    c = ctx.config
    client = ctx.client()
    turns = _Turns(ctx, client, "rate_limit_storm")
    depths: list[int] = []
    try:
        await ctx.admin.add_fault("storm_429", "rate_limit",
                                  attributes={"rate_per_s": 1.0, "burst": 1, "retry_after_s": 2})
        rows = []
        for i in range(c.failed_captures):
            turns.capture(i)
            if i % 20 == 19:
                rows.append(await turns.recall("storm"))
                await turns.plugin.drain(timeout_s=5.0)
                d = await ctx.queue_depth(client)
                if d is not None:
                    depths.append(d)
        await turns.plugin.drain(timeout_s=5.0)
    finally:
        await ctx.admin.remove("storm_429", missing_ok=True)
        await turns.close()
    oh = [r["overhead_ms"] for r in rows]
    p95 = _p(oh, 95)
    qmax = max(depths) if depths else None
    raised = sum(1 for r in rows if r["raised"])
    limit = c.recall_timeout_ms + c.slack_ms
    passed, crit = verdict({"no_error_reaches_agent": raised == 0, "overhead": p95 is not None and p95 <= limit,
                            "queue_cap": qmax is None or qmax <= c.queue_cap})
    return DrillResult("rate_limit_storm", f"429 + Retry-After on every call: no error reaches the agent, p95 "
                       f"overhead ≤ {c.recall_timeout_ms} ms (+slack), RetryQueue ≤ {c.queue_cap}",
                       f"p95 overhead {f'{p95:.0f} ms' if p95 is not None else 'n/a'}; "
                       f"max queue {qmax if qmax is not None else 'n/a'}; "
                       f"errors raised {raised}", p95, passed,
                       {"criteria": crit, "overhead_ms": oh, "queue_depths": depths, "raised": raised,
                        **_cfg(ctx)})


DRILLS: dict[str, DrillFn] = {
    "api_down": api_down,
    "slow_api": slow_api,
    "sustained_failures": sustained_failures,
    "recovery": recovery,
    "error_bursts": error_bursts,
    "rate_limit_storm": rate_limit_storm,
}


def names() -> list[str]:
    return list(DRILLS)


def get(name: str) -> Callable:
    if name not in DRILLS:
        raise KeyError(f"unknown drill {name!r}; known: {', '.join(DRILLS)}")
    return DRILLS[name]
