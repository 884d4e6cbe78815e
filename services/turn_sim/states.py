"""Plugin states of the latency benchmark (seed 000 V2.3 "Turn Latency") and how each is built.

- no_plugin: the host has no memory plugin (pure turn time).
- recall_off: the plugin is loaded with autoRecall off (it still captures).
- fast / full: recall in that mode.
- cold_start: every turn runs on a freshly built backend client and plugin (a fresh process's empty caches and
  connection pools); the first call pays for start-up, which is included in the turn.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from collectors.latency import TurnLatencyCollector
from collectors.tokens import TokenOverheadCollector
from services.common.llm_client import LLMClient
from services.turn_sim.host import AgentHost, TurnRecord
from services.turn_sim.plugin import MemoryPlugin, PluginConfig
from services.turn_sim.workload import turn_prompts

STATES = ("no_plugin", "recall_off", "fast", "full", "cold_start")

ClientFactory = Callable[[], Any]  # () -> a backend client (fresh each call)


def plugin_config(state: str, top_k: int = 5) -> PluginConfig | None:
    if state == "no_plugin":
        return None
    if state == "recall_off":
        return PluginConfig(auto_recall=False, top_k=top_k)
    if state in ("fast", "cold_start"):
        return PluginConfig(recall_mode="fast", top_k=top_k)
    if state == "full":
        return PluginConfig(recall_mode="full", top_k=top_k)
    raise ValueError(f"unknown state {state!r}; known: {', '.join(STATES)}")


@dataclass
class StateRun:
    state: str
    records: list[TurnRecord]
    summary: dict
    wall_s: float


async def run_state(state: str, backend: str, make_client: ClientFactory, namespace: str, llm: LLMClient,
                    latency: TurnLatencyCollector, turns: int = 50, seed: int = 0, top_k: int = 5,
                    tokens: TokenOverheadCollector | None = None, warmup: int = 2,
                    shared_client: Any = None) -> StateRun:
    """Play `turns` turns in one state (after `warmup` unrecorded turns, except cold_start, which has none)."""
    cfg = plugin_config(state, top_k)
    prompts = turn_prompts(turns + warmup, seed=seed)
    records: list[TurnRecord] = []
    t0 = time.perf_counter()
    if state == "cold_start":
        for i, prompt in enumerate(prompts[warmup:]):
            client = make_client()
            plugin = MemoryPlugin(client, namespace, cfg)
            host = AgentHost(llm, plugin, backend, state, latency, tokens)
            records.append(await host.turn(f"{state}-{i}", 0, prompt))
            await plugin.close()
    else:
        own = shared_client is None and cfg is not None
        client = (make_client() if own else shared_client) if cfg is not None else None
        plugin = MemoryPlugin(client, namespace, cfg) if cfg is not None else None
        host = AgentHost(llm, plugin, backend, state, latency, tokens)
        sid = f"{state}-session"
        for i, prompt in enumerate(prompts):
            rec = await host.turn(sid, i, prompt, record_latency=i >= warmup)
            if i >= warmup:
                records.append(rec)
        if plugin is not None:
            await plugin.drain()
            if own:
                await plugin.close()
    wall = time.perf_counter() - t0
    summary = latency.summary(backend, state)
    summary["errors"] = sum(1 for r in records if not r.ok)
    summary["degraded"] = sum(1 for r in records if r.degraded)
    summary["with_memories"] = sum(1 for r in records if r.memories > 0)
    return StateRun(state, records, summary, wall)


def overhead_vs_baseline(summaries: dict[str, dict], baseline: str = "no_plugin") -> dict[str, dict]:
    """Per state: p50/p95/p99 minus the baseline's (ms). A difference of percentiles, not a percentile of
    differences: the turns are not paired."""
    base = summaries.get(baseline)
    out: dict[str, dict] = {}
    if not base or base.get("p50_ms") is None:
        return out
    for st, s in summaries.items():
        if s.get("p50_ms") is None:
            continue
        out[st] = {f"overhead_{q}_ms": s[f"{q}_ms"] - base[f"{q}_ms"] for q in ("p50", "p95", "p99")}
    return out


async def run_token_overhead(make_client: ClientFactory, backend: str, namespace: str,
                             collector: TokenOverheadCollector, top_ks=(1, 5, 10, 20), queries: int = 20,
                             seed: int = 0) -> dict[int, dict]:
    """Recall only (no LLM): tokens of prependContext per top_k over a seeded set of varied queries. The top_ks
    run side by side (each its queries in order): what is counted is the text recalled, not how long it took, and
    one after another they spent the phase waiting on the recall latency."""
    prompts = turn_prompts(queries, seed=seed)
    client = make_client()

    async def one_k(k: int) -> None:
        plugin = MemoryPlugin(client, namespace, PluginConfig(recall_mode="fast", top_k=k))
        for p in prompts:
            o = await plugin.before_agent_start(p)
            collector.observe(backend, k, o.context, memories=o.memories)

    try:
        await asyncio.gather(*(one_k(k) for k in top_ks))
    finally:
        await client.close()
    return {k: collector.summary(backend, k) for k in top_ks}


async def play(host: AgentHost, prompts: list[str], session_id: str,
               pause: Callable[[], Awaitable[None]] | None = None) -> list[TurnRecord]:
    recs = []
    for i, p in enumerate(prompts):
        recs.append(await host.turn(session_id, i, p))
        if pause is not None:
            await pause()
    return recs
