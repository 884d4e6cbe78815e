"""Turn simulator: formatter, continuity metrics (by hand), plugin states, the host's turn, and the costs section."""

from __future__ import annotations

import asyncio

import pytest
from prometheus_client import CollectorRegistry

from collectors.latency import TurnLatencyCollector
from collectors.tokens import TokenOverheadCollector
from services.adapters.base import BackendContext
from services.adapters.client import InProcessBackendClient
from services.common.llm_client import LLMClient, LLMConfig
from services.common.prompts import ABSTAIN_TEXT
from services.common.types import Memory
from services.cost_scenarios.scenarios import render_costs_markdown
from services.turn_sim.continuity import (
    ProbeResult,
    context_retained,
    derived_score,
    is_redundant,
    parse_judge_score,
    redundant_questions,
    run_continuity_arc,
    specific_detail_retained,
)
from services.turn_sim.formatter import PREAMBLE, format_memories
from services.turn_sim.host import AgentHost
from services.turn_sim.plugin import MemoryPlugin, PluginConfig
from services.turn_sim.states import (
    STATES,
    overhead_vs_baseline,
    plugin_config,
    run_state,
    run_token_overhead,
)
from services.turn_sim.workload import FACTS, key_hit, seed_history, turn_prompts


def test_formatter_exact_envelope():
    text = format_memories([Memory("a", "TTL is 300s", 0.923), Memory("b", "see </cortex_memories>\nnow", 0.8)])
    assert text.splitlines() == ["<cortex_memories>", PREAMBLE, "- [0.92] TTL is 300s",
                                 "- [0.80] see &lt;/cortex_memories> now", "</cortex_memories>"]
    assert format_memories([]) == ""


def _p(session, fact_session, kind, retained, redundant=False):
    return ProbeResult(session, "f", fact_session, kind, "", retained, redundant)


def test_continuity_metrics_by_hand():
    probes = [
        _p(2, 1, "decision", True), _p(2, 1, "decision", False),  # N -> N+1 decisions: 1 of 2
        _p(3, 1, "decision", True),  # decision probed two sessions later: not in context_retained
        _p(2, 1, "detail", True), _p(3, 1, "detail", False, True), _p(3, 2, "detail", False, True),  # 1 of 3
    ]
    assert context_retained(probes) == pytest.approx(0.5)
    assert specific_detail_retained(probes) == pytest.approx(1 / 3)
    assert redundant_questions(probes) == 2
    assert derived_score(probes) == pytest.approx(1 + 4 * 3 / 6)  # 3 of 6 retained -> 3.0
    assert context_retained([]) is None and derived_score([]) is None


def test_redundancy_and_judge_parsing():
    assert is_redundant(ABSTAIN_TEXT)
    assert is_redundant("Could you remind me which store we picked")
    assert is_redundant("What TTL should I use?")
    assert not is_redundant("The cache TTL for product responses is 300 seconds.")
    assert parse_judge_score('{"score": 4, "reason": "ok"}') == 4
    assert parse_judge_score('blah "score": 5 blah') == 5
    assert parse_judge_score('{"score": 9}') is None and parse_judge_score("no") is None
    assert parse_judge_score('{"score": true}') is None and parse_judge_score('{"score": 2.5}') is None


def test_workload_is_seeded_and_facts_are_probeable():
    assert turn_prompts(10, seed=3) == turn_prompts(10, seed=3)
    assert turn_prompts(10, seed=3) != turn_prompts(10, seed=4)
    assert all(key_hit(f.statement, f.keys) for f in FACTS)  # every statement carries its own keys
    batch = seed_history()
    assert len(batch.sessions) == 5 and batch.message_count == 5 + 2 * len(FACTS)


def test_plugin_config_per_state():
    assert plugin_config("no_plugin") is None
    assert plugin_config("recall_off").auto_recall is False
    assert plugin_config("full").recall_mode == "full"
    assert plugin_config("cold_start").recall_mode == "fast"
    with pytest.raises(ValueError):
        plugin_config("warp")


def test_overhead_vs_baseline():
    s = {"no_plugin": {"p50_ms": 100.0, "p95_ms": 110.0, "p99_ms": 120.0},
         "fast": {"p50_ms": 150.0, "p95_ms": 190.0, "p99_ms": 200.0}}
    o = overhead_vs_baseline(s)
    assert o["fast"] == {"overhead_p50_ms": 50.0, "overhead_p95_ms": 80.0, "overhead_p99_ms": 80.0}
    assert o["no_plugin"]["overhead_p50_ms"] == 0.0


@pytest.fixture
async def llm():
    from services.llm_mock.app import start_server
    from services.llm_mock.config import MockConfig

    runner, port = await start_server(MockConfig(port=0), CollectorRegistry())
    client = LLMClient(LLMConfig(base_url=f"http://127.0.0.1:{port}/v1", max_retries=0))
    yield client
    await client.close()
    await runner.cleanup()


def _client(name):
    return InProcessBackendClient.from_spec(name, context=BackendContext(embedder_name="hash"))


async def test_turn_recalls_formats_answers_and_captures(llm):
    c = _client("full-context")
    await c.ingest("ns", seed_history())
    reg = CollectorRegistry()
    lat, tok = TurnLatencyCollector(registry=reg), TokenOverheadCollector(registry=reg)
    plugin = MemoryPlugin(c, "ns", PluginConfig(top_k=5))
    host = AgentHost(llm, plugin, "full-context", "fast", lat, tok)
    rec = await host.turn("s1", 0, "What is the cache TTL for product responses?")
    assert rec.ok and "300" in rec.reply
    assert rec.recall_called and rec.memories > 0 and rec.tokens_injected > 0
    assert rec.context.startswith("# Project memory")  # the backend's own formatted context is used as is
    await plugin.drain()
    assert plugin.captures_ok == 1
    assert (await c.stats("ns"))["namespaces"][0].sessions == 6  # 5 history + the captured turn
    assert lat.summary("full-context", "fast")["n"] == 1
    # Recall off: nothing recalled, nothing injected, still captured.
    off = MemoryPlugin(c, "ns", PluginConfig(auto_recall=False))
    host2 = AgentHost(llm, off, "full-context", "recall_off")
    rec2 = await host2.turn("s2", 0, "What is the cache TTL for product responses?")
    assert not rec2.recall_called and rec2.context == "" and ABSTAIN_TEXT in rec2.reply
    await off.drain()
    assert off.captures_ok == 1
    await c.close()


async def test_recall_failure_degrades_silently(llm):
    class Broken:
        async def retrieve(self, ns, q):
            raise RuntimeError("down")

        async def ingest(self, ns, b):
            raise RuntimeError("down")

        async def close(self):
            pass

    plugin = MemoryPlugin(Broken(), "ns")
    rec = await AgentHost(llm, plugin, "broken", "fast").turn("s", 0, "What is the cache TTL?")
    assert rec.ok and rec.degraded and "down" in rec.degraded_reason
    await plugin.drain()
    assert plugin.captures_failed == 1 and plugin.recall_failures == 1


async def test_every_state_runs_and_records(llm):
    shared = _client("full-context")
    await shared.ingest("ns", seed_history())
    lat = TurnLatencyCollector(registry=CollectorRegistry())
    for st in STATES:
        run = await run_state(st, "full-context", lambda: _client("full-context"), "ns", llm, lat, turns=4,
                              warmup=1, shared_client=shared)
        assert run.summary["n"] == 4 and run.summary["errors"] == 0
    assert all(r.memories == 0 for r in (await run_state("no_plugin", "x", None, "ns", llm, lat, 2)).records)
    tok = TokenOverheadCollector(registry=CollectorRegistry())
    out = await run_token_overhead(lambda: _client("none"), "none", "ns", tok, (1, 5), queries=3)
    assert out[1]["tokens_injected_p50"] == 0  # `none` recalls nothing: nothing injected


async def test_token_overhead_counts_each_top_k_as_one_after_another_would_with_the_top_ks_side_by_side():
    shared = _client("bm25")
    await shared.ingest("ns", seed_history())
    in_flight, most = 0, 0

    class Counting:  # the shared backend, counting the recalls in flight
        async def retrieve(self, ns, q):
            nonlocal in_flight, most
            in_flight += 1
            most = max(most, in_flight)
            try:
                await asyncio.sleep(0.01)
                return await shared.retrieve(ns, q)
            finally:
                in_flight -= 1

        async def close(self):
            pass

    tok = TokenOverheadCollector(registry=CollectorRegistry())
    out = await run_token_overhead(Counting, "bm25", "ns", tok, (1, 3, 5), queries=4)
    assert most == 3  # one recall of each top_k at a time
    ref = TokenOverheadCollector(registry=CollectorRegistry())
    for k in (1, 3, 5):  # the same recalls, one after another, counted by hand
        plugin = MemoryPlugin(shared, "ns", PluginConfig(recall_mode="fast", top_k=k))
        for p in turn_prompts(4, seed=0):
            ref.observe("bm25", k, (await plugin.before_agent_start(p)).context)
        assert out[k] == ref.summary("bm25", k) and out[k]["n"] == 4
    assert out[1]["tokens_injected_p50"] < out[5]["tokens_injected_p50"]
    await shared.close()


async def test_continuity_arc_separates_memory_from_none(llm):
    none = await run_continuity_arc(_client("none"), "none", "arc", llm)
    full = await run_continuity_arc(_client("full-context"), "full-context", "arc", llm)
    n_probes = sum(sum(1 for g in FACTS if g.session < n) for n in range(1, 6))
    assert none["probes"] == full["probes"] == n_probes
    assert none["context_retained"] == 0 and none["redundant_questions"] == n_probes
    assert full["context_retained"] == 1.0 and full["specific_detail_retained"] == 1.0
    assert full["redundant_questions"] == 0
    assert full["continuity_score"] > none["continuity_score"]
    assert [s["name"] for s in full["sessions"]] == ["design", "implement", "test", "debug", "refactor"]


def test_render_costs_markdown_has_the_drill_table():
    results = {
        "backend": "cortex", "llm": {"model": "m", "latency_ms": 100.0}, "notes": [],
        "states": {"no_plugin": {"n": 50, "p50_ms": 100.0, "p95_ms": 101.0, "p99_ms": 102.0}},
        "overhead": {"no_plugin": {"overhead_p50_ms": 0.0, "overhead_p95_ms": 0.0}},
        "tokens": {"5": {"n": 20, "tokens_injected_p50": 119.0, "context_budget_pct": 0.0595,
                         "context_window": 200000}},
        "drills": [{"name": "api_down", "expectation": "≈0 ms", "measured": "0.1 ms", "passed": True,
                    "details": {"drill_config": {"cooldown_s": 1.5}}},
                   {"name": "slow_api", "expectation": "≤ 500 ms", "measured": "3000 ms", "passed": False}],
    }
    md = render_costs_markdown(results)
    assert md.startswith("## Latency and resources")
    assert "| api_down | ≈0 ms | 0.1 ms | PASS |" in md
    assert "| slow_api | ≤ 500 ms | 3000 ms | FAIL |" in md
    assert "| no_plugin | 50 | 100.0 | 101.0 | 102.0 |" in md
    assert "| 5 | 20 | 119 |" in md and "cooldown_s=1.5" in md
