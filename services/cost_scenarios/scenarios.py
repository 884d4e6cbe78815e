"""The costs benchmark: turn latency per plugin state, tokens injected, resources, continuity and failure drills.

`run_costs(out_dir, rig, quick=True)` is the one entry point `make bench-all` calls, with the run's Rig
(services.launcher.Rig; `python -m services.cost_scenarios` makes one of its own). It starts what it needs in that
rig under keys of its own (llm-mock/costs, cortex-mock/costs, fault-proxy/costs: a run's llm-mock and cortex-mock
have other settings) and stops exactly those by PID at the end, drives the `cortex` backend in this process
through the memrig backend API (so the collectors see the plugin's own work: its event loop, its RSS, its HTTP
calls), writes `samples.jsonl`, `costs.json` and PNG plots into `out_dir`, and returns the results.
`render_costs_markdown(results)` renders the report's "Latency and resources" section.

cortex-mock embeds with this process's embedder (MEMRIG_EMBEDDER, else the rig's default), not one the caller's rig
was given for its suites: the figures, and bench-all's reuse key of them, do not depend on the run's embedder.

When the cortex adapter cannot be loaded, the overhead states run on `fallback_backend` and the drills are
reported as skipped with the reason.
"""

from __future__ import annotations

import asyncio
import json
import os
import platform
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from collectors.event_loop import EventLoopMonitor
from collectors.latency import TurnLatencyCollector
from collectors.network import NetworkCounter
from collectors.resources import ResourceSampler, _t_quantile
from collectors.samples import SampleSink
from collectors.tokens import DEFAULT_CONTEXT_WINDOW, TokenOverheadCollector
from services.adapters.base import BackendContext
from services.adapters.client import InProcessBackendClient
from services.common.embeddings import DEFAULT_EMBEDDER
from services.common.llm_client import LLMClient, LLMConfig
from services.common.tokens import count_tokens, tokenizer_name
from services.launcher import SERVICES, Rig
from services.turn_sim.continuity import run_continuity_arc
from services.turn_sim.host import AgentHost
from services.turn_sim.plugin import MemoryPlugin, PluginConfig
from services.turn_sim.states import STATES, overhead_vs_baseline, run_state, run_token_overhead
from services.turn_sim.workload import seed_history, turn_prompts

CORTEX_KNOBS_KW = {"recall_timeout_ms": "recall_timeout_ms", "gate_failures": "cold_start_window",
                   "cooldown_ms": "cold_start_cooldown_ms", "queue_cap": "retry_queue_capacity",
                   "queue_depth_counter": "queue_pending"}


@dataclass
class CostsConfig:
    quick: bool = True
    backend: str = "cortex"
    fallback_backend: str = "full-context"
    turns_per_state: int = 50
    active_turns: int = 10
    sustained_turns: int = 50
    # A leak is reported only when the whole CI of the RSS slope lies above this (allocator and cache noise).
    leak_tolerance_mb_per_min: float = 1.0
    idle_s: float = 5.0
    sample_interval_s: float = 0.5
    event_loop_window_s: float = 10.0
    token_queries: int = 20
    top_ks: tuple[int, ...] = (1, 5, 10, 20)
    context_window: int = DEFAULT_CONTEXT_WINDOW
    llm_latency_ms: float = 100.0
    llm_completion_tokens: int | None = None
    cortex_mock_args: list[str] = field(default_factory=lambda: ["--latency-fast-ms", "100",
                                                                  "--latency-full-ms", "400"])
    recall_timeout_ms: int = 2000
    continuity_backends: tuple[str, ...] = ("none", "cortex")
    drills: bool = True
    seed: int = 0

    @classmethod
    def for_mode(cls, quick: bool) -> CostsConfig:
        if quick:
            return cls()
        # Full: the seed's durations (idle 5 min, 5 s sampling, minute windows) and more turns.
        return cls(quick=False, turns_per_state=200, sustained_turns=500, idle_s=300.0, sample_interval_s=5.0, event_loop_window_s=60.0,
                   token_queries=60)


def _cortex_available() -> str:
    try:
        from services.adapters.registry import get_spec

        get_spec("cortex").load_class()
        return ""
    except Exception as e:  # pragma: no cover - only in partial checkouts
        return f"{type(e).__name__}: {e}"


def _client_factory(backend: str, base_cfg: dict[str, Any]):
    def make(extra: dict[str, Any] | None = None):
        ctx = BackendContext(embedder_name=os.environ.get("MEMRIG_TURN_SIM_EMBEDDER") or None)
        return InProcessBackendClient.from_spec(backend, {**base_cfg, **(extra or {})}, ctx)
    return make


# The rig keys of the services the cost scenarios start (the part before "/" is their Prometheus job), in the
# order they are stopped: the proxy before the cortex-mock behind it.
KEYS = {"fault-proxy": "fault-proxy/costs", "cortex-mock": "cortex-mock/costs", "llm-mock": "llm-mock/costs"}


def _own_embedder() -> str:
    """The embedder cortex-mock used when the cost scenarios had a rig of their own: this process's."""
    return os.environ.get("MEMRIG_EMBEDDER") or ("remote" if os.environ.get("MEMRIG_EMBED_BASE_URL")
                                                 else DEFAULT_EMBEDDER)


async def _start(rig: Rig, name: str, args: list[str]) -> str:
    spec = SERVICES[name]
    return (await rig.start(KEYS[name], spec.module, ["--port", "0", *args], spec.url_template)).url


async def _start_services(rig: Rig, cfg: CostsConfig) -> dict[str, str]:
    llm_args = ["--latency-ms", str(cfg.llm_latency_ms)]
    if cfg.llm_completion_tokens is not None:
        llm_args += ["--completion-tokens-override", str(cfg.llm_completion_tokens)]
    urls = {"llm-mock": await _start(rig, "llm-mock", llm_args)}
    if cfg.backend.startswith("cortex") and not _cortex_available():
        # the config's own --embedder, if any, comes last and wins
        urls["cortex-mock"] = await _start(rig, "cortex-mock", ["--embedder", _own_embedder(), *cfg.cortex_mock_args])
        urls["fault-proxy"] = await _start(rig, "fault-proxy", ["--seed", str(cfg.seed), "--upstream",
                                                                urls["cortex-mock"]])
    return urls


def _stop_services(rig: Rig) -> None:
    for key in KEYS.values():
        rig.stop(key)


async def run_costs(out_dir: Path, rig: Rig, quick: bool = True, config: CostsConfig | None = None,
                    metrics_port: int | None = None) -> dict[str, Any]:
    """The cost scenarios into `out_dir`, their services started in the caller's `rig` and stopped again."""
    cfg = config or CostsConfig.for_mode(quick)
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    sink = SampleSink(out_dir / "samples.jsonl")
    results: dict[str, Any] = {"config": {k: (list(v) if isinstance(v, tuple) else v) for k, v in vars(cfg).items()},
                               "machine": {"cores": os.cpu_count(), "python": platform.python_version()},
                               "tokenizer": tokenizer_name(), "notes": []}
    t_start = time.perf_counter()
    metrics_runner, target = None, None
    if metrics_port is not None:
        from services.common import prom_targets
        from services.common.metrics_http import start_metrics_server

        metrics_runner, bound = await start_metrics_server(port=metrics_port)
        results["metrics_port"] = bound
        target = prom_targets.write_target("turn-sim", "turn-sim", bound)  # scraped through file_sd
    latency = TurnLatencyCollector(sink)
    tokens = TokenOverheadCollector(cfg.context_window, sink)
    loop_mon = EventLoopMonitor(interval_s=0.02, window_s=cfg.event_loop_window_s, sink=sink)
    resources = ResourceSampler(interval_s=cfg.sample_interval_s, sink=sink)
    net = NetworkCounter(sink=sink)
    net.install()
    llm = None
    try:
        urls = await _start_services(rig, cfg)
        results["services"] = urls
        backend = cfg.backend
        why_not = _cortex_available() if backend.startswith("cortex") else ""
        base_cfg: dict[str, Any] = {}
        if why_not:
            results["notes"].append(f"backend {backend!r} unavailable ({why_not}); using {cfg.fallback_backend!r}")
            backend = cfg.fallback_backend
        elif backend.startswith("cortex"):
            base_cfg = {"base_url": urls["fault-proxy"], "mode": "query", "recall_timeout_ms": cfg.recall_timeout_ms}
        results["backend"] = backend
        make_client = _client_factory(backend, base_cfg)
        llm = LLMClient(LLMConfig(base_url=urls["llm-mock"], max_retries=0))
        results["llm"] = {**llm.config.identity(), "latency_ms": cfg.llm_latency_ms}

        # Load the cl100k tables before measuring: the first count blocks the loop for seconds (the event-loop
        # collector showed it), which is start-up cost, not per-turn cost.
        count_tokens("warm up")
        # Same for the leak check's t quantile: importing scipy.stats mid-run stalls the loop and adds its RSS to
        # the phase it happens in (the event-loop and RSS collectors show both).
        _t_quantile(0.975, 10)
        await loop_mon.start()
        await resources.start()
        # -- idle ---------------------------------------------------------------------------------
        resources.set_phase("idle")
        loop_mon.set_phase("idle")
        await asyncio.sleep(cfg.idle_s)
        # -- seed the namespace the turns recall from ------------------------------------------------
        ns = "turn-sim"
        shared = make_client()
        await shared.reset(ns)
        await shared.ingest(ns, seed_history())
        settle = await shared.settle(ns, 120.0)
        results["seed_settle"] = {"settled": settle.settled, "items_indexed": settle.items_indexed}
        # -- active: 10 turns --------------------------------------------------------------------------
        resources.set_phase("active")
        loop_mon.set_phase("active")
        resources.sample()
        plugin = MemoryPlugin(shared, ns, PluginConfig(recall_mode="fast"))
        host = AgentHost(llm, plugin, backend, "active")
        for i, p in enumerate(turn_prompts(cfg.active_turns, seed=cfg.seed + 1)):
            await host.turn("active-session", i, p, record_latency=False)
        await plugin.drain()
        resources.sample()
        # -- the overhead states ------------------------------------------------------------------------
        resources.set_phase("states")
        loop_mon.set_phase("states")
        states: dict[str, dict] = {}
        for st in STATES:
            run = await run_state(st, backend, make_client, ns, llm, latency, cfg.turns_per_state, seed=cfg.seed,
                                  shared_client=shared)
            states[st] = run.summary | {"wall_s": run.wall_s}
        resources.sample()
        results["states"] = states
        results["overhead"] = overhead_vs_baseline(states)
        # -- sustained: one homogeneous stretch of fast-mode turns for the leak check ---------------------------
        resources.set_phase("sustained")
        loop_mon.set_phase("sustained")
        resources.sample()
        plugin = MemoryPlugin(shared, ns, PluginConfig(recall_mode="fast"))
        host = AgentHost(llm, plugin, backend, "sustained")
        for i, p in enumerate(turn_prompts(cfg.sustained_turns, seed=cfg.seed + 2)):
            await host.turn(f"sustained-{i // 10}", i, p, record_latency=False)
        await plugin.drain()
        resources.sample()
        tol = cfg.leak_tolerance_mb_per_min * 2 ** 20 / 60
        results["leak_check"] = resources.leak_check("sustained", method="t", tolerance_bytes_per_s=tol)
        results["leak_check_bootstrap"] = resources.leak_check("sustained", method="bootstrap",
                                                               tolerance_bytes_per_s=tol, seed=cfg.seed)
        # -- tokens injected per top_k ------------------------------------------------------------------
        resources.set_phase("tokens")
        loop_mon.set_phase("tokens")
        tok = await run_token_overhead(make_client, backend, ns, tokens, cfg.top_ks, cfg.token_queries, cfg.seed)
        results["tokens"] = {str(k): v for k, v in tok.items()}
        await shared.close()
        # -- continuity arc ------------------------------------------------------------------------------
        resources.set_phase("continuity")
        loop_mon.set_phase("continuity")
        # The arcs run side by side (their own namespaces): they score what is retained, not how long a turn takes.
        async def arc_of(b: str) -> dict[str, Any]:
            c = _client_factory(b, base_cfg if b == backend else {})()
            try:
                arc = await run_continuity_arc(c, b, f"arc-{b}", llm)
                sink.write("continuity", **{k: v for k, v in arc.items() if k != "sessions"})
                return {k: v for k, v in arc.items() if k != "probe_rows"}
            except Exception as e:
                return {"error": f"{type(e).__name__}: {e}"[:300]}
            finally:
                await c.close()

        arcs = [b for b in cfg.continuity_backends if not (b.startswith("cortex") and b != backend)]
        results["continuity"] = dict(zip(arcs, await asyncio.gather(*(arc_of(b) for b in arcs)), strict=True))
        # -- drills ----------------------------------------------------------------------------------
        resources.set_phase("drills")
        loop_mon.set_phase("drills")
        if cfg.drills and backend.startswith("cortex"):
            results["drills"] = await _run_cortex_drills(urls, backend, base_cfg, sink, cfg.seed)
        else:
            results["drills"] = []
            results["notes"].append("drills skipped: they need the cortex adapter behind the fault proxy")
        # -- wrap up ------------------------------------------------------------------------------------
        resources.set_phase("end")
        await resources.stop()
        await loop_mon.stop()
        results["resources"] = {ph: resources.summary(ph) for ph in
                                ("idle", "active", "states", "sustained", "tokens", "continuity", "drills")}
        results["event_loop"] = {ph: loop_mon.summary(ph) for ph in
                                 ("idle", "active", "states", "sustained", "tokens", "continuity", "drills")}
        results["event_loop"]["windows"] = len(loop_mon.windows)
        results["network"] = {"total": net.total(), "by_host_method_status": net.snapshot()}
        net.write_summary()
        results["plots"] = _plots(out_dir, results, latency, resources, loop_mon, backend)
    finally:
        net.uninstall()
        await resources.stop()
        await loop_mon.stop()
        if llm is not None:
            await llm.close()
        _stop_services(rig)
        if metrics_runner is not None:
            from services.common import prom_targets

            prom_targets.remove_target(target)
            await metrics_runner.cleanup()
        sink.close()
    results["wall_s"] = time.perf_counter() - t_start
    (out_dir / "costs.json").write_text(json.dumps(results, indent=2, default=str))
    return results


async def _run_cortex_drills(urls: dict[str, str], backend: str, base_cfg: dict[str, Any], sink, seed: int
                             ) -> list[dict]:
    import logging

    from services.drills.base import AdapterKnobs, DrillConfig, DrillContext
    from services.drills.runner import run_drills
    from services.fault_proxy.admin_client import FaultProxyAdmin

    # The drills overflow the RetryQueue on purpose; its per-drop warnings would flood the console.
    logging.getLogger("memrig.cortex").setLevel(logging.ERROR)
    admin = FaultProxyAdmin(urls["fault-proxy"])
    make = _client_factory(backend, base_cfg)
    ctx = DrillContext(admin, make, "drills", DrillConfig(), AdapterKnobs(**CORTEX_KNOBS_KW), {}, seed=seed,
                       sink=sink)
    try:
        return [r.to_json() for r in await run_drills(ctx)]
    finally:
        await admin.close()


# ------------------------------------------------------------------------------------------------------------
def _plots(out_dir: Path, results: dict, latency: TurnLatencyCollector, resources: ResourceSampler,
           loop_mon: EventLoopMonitor, backend: str) -> list[str]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    files = []
    # 1. turn latency per state
    fig, ax = plt.subplots(figsize=(7, 3.5))
    data = [[v * 1000 for v in latency.values(backend, st)] for st in STATES]
    ax.boxplot(data, showfliers=True)
    ax.set_xticks(range(1, len(STATES) + 1), STATES)
    ax.set_ylabel("turn latency (ms)")
    ax.set_title(f"Turn latency per plugin state ({backend})")
    fig.tight_layout()
    fig.savefig(out_dir / "turn_latency.png", dpi=100)
    plt.close(fig)
    files.append("turn_latency.png")
    # 2. RSS and heap over time
    fig, ax = plt.subplots(figsize=(7, 3.5))
    ts = [s["t_s"] for s in resources.samples]
    ax.plot(ts, [s["rss_bytes"] / 2 ** 20 for s in resources.samples], label="RSS (MB)")
    hs = [(s["t_s"], s["heap_current_bytes"] / 2 ** 20) for s in resources.samples if s["heap_current_bytes"]]
    if hs:
        ax.plot([h[0] for h in hs], [h[1] for h in hs], label="tracemalloc heap (MB)")
    ax.set_xlabel("seconds")
    ax.set_ylabel("MB")
    ax.legend()
    ax.set_title("Agent host footprint")
    fig.tight_layout()
    fig.savefig(out_dir / "resources.png", dpi=100)
    plt.close(fig)
    files.append("resources.png")
    # 3. tokens injected per top_k
    tok = results.get("tokens", {})
    if tok:
        fig, ax = plt.subplots(figsize=(6, 3.5))
        ks = list(tok)
        ax.bar(ks, [tok[k]["tokens_injected_p50"] or 0 for k in ks])
        ax.set_xlabel("top_k")
        ax.set_ylabel("tokens injected (p50)")
        ax.set_title("prependContext size (cl100k)")
        fig.tight_layout()
        fig.savefig(out_dir / "tokens_injected.png", dpi=100)
        plt.close(fig)
        files.append("tokens_injected.png")
    # 4. event-loop delay windows
    if loop_mon.windows:
        fig, ax = plt.subplots(figsize=(7, 3.5))
        ax.plot([w["p99_ms"] for w in loop_mon.windows], marker="o", label="p99")
        ax.plot([w["max_ms"] for w in loop_mon.windows], marker=".", label="max")
        ax.set_xlabel(f"window (~{loop_mon.window_s:g} s each)")
        ax.set_ylabel("event-loop delay (ms)")
        ax.legend()
        fig.tight_layout()
        fig.savefig(out_dir / "event_loop_delay.png", dpi=100)
        plt.close(fig)
        files.append("event_loop_delay.png")
    return files


# ------------------------------------------------------------------------------------------------------------
def _f(v: Any, nd: int = 1) -> str:
    if v is None:
        return "–"
    if isinstance(v, float):
        return f"{v:.{nd}f}"
    return str(v)


def render_costs_markdown(results: dict[str, Any]) -> str:
    b = results.get("backend", "?")
    llm = results.get("llm", {})
    out = ["## Latency and resources", ""]
    out.append(f"Backend `{b}` driven in-process by the turn simulator (recall hook → `<cortex_memories>` "
               f"prependContext → LLM → auto-capture). LLM: `{llm.get('model', '?')}` with "
               f"{_f(llm.get('latency_ms'), 0)} ms injected latency (offline mock: absolute turn times are the "
               f"mock's; the overhead columns are what the plugin adds). Percentiles are exact over the raw turns.")
    for n in results.get("notes", []):
        out.append(f"\n> Note: {n}")
    out += ["", "### Turn latency per plugin state", "",
            "| state | turns | p50 ms | p95 ms | p99 ms | recall p50 ms | overhead p50 ms | overhead p95 ms | "
            "degraded | errors |", "|---|---|---|---|---|---|---|---|---|---|"]
    oh = results.get("overhead", {})
    for st, s in results.get("states", {}).items():
        o = oh.get(st, {})
        out.append(f"| {st} | {s.get('n')} | {_f(s.get('p50_ms'))} | {_f(s.get('p95_ms'))} | {_f(s.get('p99_ms'))} | "
                   f"{_f(s.get('recall_p50_ms'), 2)} | {_f(o.get('overhead_p50_ms'))} | "
                   f"{_f(o.get('overhead_p95_ms'))} | {s.get('degraded', 0)} | {s.get('errors', 0)} |")
    tok = results.get("tokens", {})
    if tok:
        any_t = next(iter(tok.values()))
        out += ["", f"### Tokens injected per turn ({results.get('tokenizer', 'cl100k')}; context window "
                    f"{any_t.get('context_window')} tokens)", "",
                "| top_k | queries | tokens_injected_p50 | p95 | max | context_budget_pct |", "|---|---|---|---|---|---|"]
        for k, t in tok.items():
            out.append(f"| {k} | {t.get('n')} | {_f(t.get('tokens_injected_p50'), 0)} | "
                       f"{_f(t.get('tokens_injected_p95'), 0)} | {_f(t.get('tokens_injected_max'))} | "
                       f"{_f(t.get('context_budget_pct'), 3)} |")
    res = results.get("resources", {})
    if res:
        out += ["", "### Resource footprint (agent host process)", "",
                "| phase | samples | RSS mean MB | RSS max MB | heap mean MB | heap peak MB |", "|---|---|---|---|---|---|"]
        for ph, r in res.items():
            out.append(f"| {ph} | {r.get('n')} | {_f(r.get('rss_mb_mean'))} | {_f(r.get('rss_mb_max'))} | "
                       f"{_f(r.get('heap_mb_mean'))} | {_f(r.get('heap_peak_mb'))} |")
        lc = results.get("leak_check")
        if lc:
            mb = 2 ** 20
            out.append(f"\nLeak check (sustained phase, RSS least-squares slope, {int(lc['confidence'] * 100)}% "
                       f"{lc['method']} CI): {lc['slope'] / mb * 60:+.2f} MB/min "
                       f"[{lc['lo'] / mb * 60:+.2f}, {lc['hi'] / mb * 60:+.2f}] over {lc['n']} samples; "
                       f"tolerance {lc['tolerance_bytes_per_s'] * 60 / mb:.2f} MB/min → **{lc['verdict']}**.")
    el = results.get("event_loop", {})
    if el:
        out += ["", "### Event-loop delay (timer overshoot of the agent host's loop)", "",
                "| phase | samples | p50 ms | p99 ms | max ms |", "|---|---|---|---|---|"]
        for ph, e in el.items():
            if isinstance(e, dict) and e.get("n"):
                out.append(f"| {ph} | {e['n']} | {_f(e.get('p50_ms'), 2)} | {_f(e.get('p99_ms'), 2)} | "
                           f"{_f(e.get('max_ms'), 2)} |")
    net = results.get("network")
    if net:
        out.append(f"\nNetwork calls made by the agent host (aiohttp trace, cumulative): {net['total']}.")
    cont = results.get("continuity", {})
    if cont:
        out += ["", "### Multi-session continuity (design → implement → test → debug → refactor)", "",
                "| backend | context_retained | specific_detail_retained | redundant_questions | continuity_score "
                "(1–5) |", "|---|---|---|---|---|"]
        for name, c in cont.items():
            if "error" in c:
                out.append(f"| {name} | error: {c['error']} | | | |")
                continue
            out.append(f"| {name} | {_f(c.get('context_retained'), 2)} | {_f(c.get('specific_detail_retained'), 2)} |"
                       f" {c.get('redundant_questions')} / {c.get('probes')} | {_f(c.get('continuity_score'), 2)} "
                       f"({c.get('continuity_score_source')}) |")
    drills = results.get("drills", [])
    out += ["", "### Failure drills", ""]
    if drills:
        out += ["| scenario | expectation | measured | result |", "|---|---|---|---|"]
        for d in drills:
            out.append(f"| {d['name']} | {d['expectation']} | {d['measured']} | "
                       f"{'PASS' if d['passed'] else 'FAIL'} |")
        cfg0 = drills[0].get("details", {}).get("drill_config")
        if cfg0:
            out.append("\nDrill settings: " + ", ".join(f"{k}={v}" for k, v in cfg0.items()) +
                       " (outage and cooldown shortened from the seed's 30 s so the drills run in seconds).")
    else:
        out.append("No drills ran (see notes).")
    plots = results.get("plots", [])
    if plots:
        out += ["", " ".join(f"![{p}]({p})" for p in plots)]
    return "\n".join(out) + "\n"
