"""Observability: a real Prometheus scrapes a short run of the rig, and every dashboard panel's PromQL returns data.

Skips (with the reason) when the `prometheus` binary is absent; `.ci/run` installs it with apt.
"""

from __future__ import annotations

import asyncio
import json
import re
import shutil
import socket
from pathlib import Path

import aiohttp
import pytest
import yaml

from services import observe
from services.common import process, prom_targets

REPO = Path(__file__).resolve().parents[1]
DASHBOARDS = sorted((REPO / "deploy" / "grafana" / "dashboards").glob("*.json"))
# The dashboards a turn-simulator run feeds (the locust dashboard needs a locust run: tested with loadtests/).
RUN_DASHBOARDS = ("memrig-costs", "memrig-faults")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def panel_queries(uids: tuple[str, ...] = RUN_DASHBOARDS) -> list[tuple[str, str, str]]:
    out = []
    for f in DASHBOARDS:
        d = json.loads(f.read_text())
        if d["uid"] not in uids:
            continue
        for p in d["panels"]:
            for t in p["targets"]:
                out.append((d["uid"], p["title"], t["expr"]))
    return out


def concrete(expr: str) -> str:
    """Grafana's variables made concrete: a rate window covering the whole short run, every backend."""
    return expr.replace("$__rate_interval", "5m").replace("$backend", ".*")


# -- static checks (no binary needed) -------------------------------------------------------------------------
def test_dashboards_use_the_provisioned_datasource_uid_and_stable_uids():
    ds = yaml.safe_load((REPO / "deploy/grafana/provisioning/datasources/prometheus.yaml").read_text())
    uid = ds["datasources"][0]["uid"]
    uids = set()
    for f in DASHBOARDS:
        d = json.loads(f.read_text())
        assert d["id"] is None and d["uid"] not in uids, f"{f.name}: id must be null and uid unique"
        uids.add(d["uid"])
        for p in d["panels"]:
            assert p["datasource"] == {"type": "prometheus", "uid": uid}
            for t in p["targets"]:
                assert t["datasource"]["uid"] == uid
    assert {"memrig-costs", "memrig-faults"} <= uids
    titles = " ".join(t for _, t, _ in panel_queries()).lower()
    for needed in ("p50", "p95", "p99", "rss", "heap", "event-loop", "tokens injected", "faults", "queue depth"):
        assert needed in titles, needed


def test_prometheus_config_has_only_the_file_sd_job():
    # Every rig process is on a free port and announces itself in the targets directory; static jobs on the
    # default ports were DOWN whenever the rig ran on port 0 (issue 15), so there are none.
    cfg = yaml.safe_load((REPO / "deploy/prometheus/prometheus.yml").read_text())
    assert [j["job_name"] for j in cfg["scrape_configs"]] == ["rig"]
    assert cfg["scrape_configs"][0]["file_sd_configs"][0]["files"] == ["targets/*.json"]
    assert not any("static_configs" in j for j in cfg["scrape_configs"])


def test_render_prometheus_config_makes_file_sd_absolute(tmp_path):
    text = observe.render_prometheus_config((REPO / "deploy/prometheus/prometheus.yml").read_text(), tmp_path)
    cfg = yaml.safe_load(text)
    rig = next(j for j in cfg["scrape_configs"] if j["job_name"] == "rig")
    assert rig["file_sd_configs"][0]["files"] == [f"{tmp_path}/*.json"]


def test_grafana_provisioning_rendered(tmp_path):
    dst = observe.render_grafana_provisioning(tmp_path / "prov", "http://127.0.0.1:9999")
    assert "http://127.0.0.1:9999" in (dst / "datasources/prometheus.yaml").read_text()
    prov = yaml.safe_load((dst / "dashboards/memrig.yaml").read_text())
    assert Path(prov["providers"][0]["options"]["path"]) == REPO / "deploy/grafana/dashboards"


# -- the real thing ----------------------------------------------------------------------------------------------
async def _query(session: aiohttp.ClientSession, base: str, expr: str) -> list:
    async with session.get(f"{base}/api/v1/query", params={"query": expr}) as r:
        body = await r.json()
    assert body["status"] == "success", (expr, body)
    return body["data"]["result"]


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("prometheus") is None,
                    reason="[requires:prometheus] prometheus binary not installed (apt-get install -y prometheus; .ci/run does it)")
async def test_prometheus_scrapes_a_short_run_and_every_panel_has_data(tmp_path):
    from prometheus_client import REGISTRY

    from collectors.event_loop import EventLoopMonitor
    from collectors.latency import TurnLatencyCollector
    from collectors.network import NetworkCounter
    from collectors.resources import ResourceSampler
    from collectors.tokens import TokenOverheadCollector
    from services.adapters.client import InProcessBackendClient
    from services.common.llm_client import LLMClient, LLMConfig
    from services.common.metrics_http import start_metrics_server
    from services.cost_scenarios.scenarios import CORTEX_KNOBS_KW
    from services.drills.base import AdapterKnobs, DrillConfig, DrillContext
    from services.drills.runner import run_drills
    from services.fault_proxy.admin_client import FaultProxyAdmin
    from services.launcher import Rig
    from services.turn_sim.states import STATES, run_state, run_token_overhead
    from services.turn_sim.workload import seed_history

    rig = Rig(tmp_path / "run")
    sim_target = None
    metrics_runner, sim_port = await start_metrics_server(port=0, registry=REGISTRY)
    prom = None
    net = NetworkCounter("turn_sim_test")
    mon = EventLoopMonitor("turn_sim_test", interval_s=0.02, window_s=5)
    res = ResourceSampler("turn_sim_test", interval_s=0.5)
    try:
        llm_p = await rig.start_service("llm-mock", extra=["--latency-ms", "5"])
        await rig.start_service("cortex-mock", extra=["--embedder", "hash"])
        proxy = await rig.start_service("fault-proxy")
        prom_port = _free_port()
        # No target is configured by hand: the launcher wrote one file_sd file per process it started, this
        # process writes the turn simulator's, and Prometheus runs the deploy config (scrape interval shortened).
        sim_target = prom_targets.write_target("turn-sim", "turn-sim", sim_port)
        jobs = ("llm-mock", "cortex-mock", "fault-proxy", "turn-sim")
        cfg = yaml.safe_load(observe.render_prometheus_config(
            (REPO / "deploy/prometheus/prometheus.yml").read_text(), prom_targets.targets_dir()))
        cfg["global"] = {"scrape_interval": "1s", "evaluation_interval": "1s"}
        cfg["scrape_configs"][0]["file_sd_configs"][0]["refresh_interval"] = "1s"
        prom = await asyncio.to_thread(observe.start_prometheus, tmp_path / "prom", prom_port, yaml.safe_dump(cfg))
        base = f"http://127.0.0.1:{prom_port}"

        # A short run: every state, tokens per top_k, two drills (faults, queue), through the real processes.
        net.install()
        await mon.start()
        await res.start()
        base_cfg = {"base_url": proxy.url, "mode": "query", "recall_timeout_ms": 1000}

        def make_client(extra=None):
            return InProcessBackendClient.from_spec("cortex", {**base_cfg, **(extra or {})})

        shared = make_client()
        await shared.reset("obs")
        await shared.ingest("obs", seed_history())
        await shared.settle("obs", 60)
        llm = LLMClient(LLMConfig(base_url=llm_p.url, max_retries=0))
        latency = TurnLatencyCollector()
        tokens = TokenOverheadCollector()
        for st in STATES:
            await run_state(st, "cortex", make_client, "obs", llm, latency, turns=3, warmup=0, shared_client=shared,
                            tokens=tokens if st in ("fast", "full") else None)
        await run_token_overhead(make_client, "cortex", "obs", tokens, (1, 5), queries=3)
        ctx = DrillContext(FaultProxyAdmin(proxy.url), lambda c: make_client(c), "obs-drills",
                           DrillConfig(recall_timeout_ms=300, slow_api_ms=1000), AdapterKnobs(**CORTEX_KNOBS_KW))
        drills = await run_drills(ctx, ["api_down", "slow_api"])
        assert all(d.error == "" for d in drills), [d.error for d in drills]
        await ctx.admin.close()
        await shared.close()
        await llm.close()
        await asyncio.sleep(3)  # a few more scrapes after the last event

        async with aiohttp.ClientSession() as s:
            # Every job was scraped successfully (a busy process may miss a 1 s scrape now and then).
            seen: dict[str, str] = {}
            for _ in range(30):  # a loaded machine can delay a target's first scrape; wait for it, boundedly
                up = await _query(s, base, "max_over_time(up[5m])")
                seen = {r["metric"]["job"]: r["value"][1] for r in up}
                if seen == {j: "1" for j in jobs}:
                    break
                await asyncio.sleep(1)
            assert seen == {j: "1" for j in jobs}
            missing = []
            for uid, title, expr in panel_queries():
                result = []
                for _ in range(10):
                    result = await _query(s, base, concrete(expr))
                    if result:
                        break
                    await asyncio.sleep(1)
                if not result:
                    missing.append(f"{uid} / {title}: {expr}")
            assert not missing, "panels without data:\n" + "\n".join(missing)
            # The turn-latency panels carry every plugin state.
            states = await _query(s, base, concrete(panel_queries()[0][2]))
            assert {r["metric"]["state"] for r in states} >= set(STATES)
    finally:
        net.uninstall()
        await res.stop()
        await mon.stop()
        if prom is not None:
            process.stop(prom)
        rig.stop_all()
        prom_targets.remove_target(sim_target)
        await metrics_runner.cleanup()


def test_panel_queries_are_valid_promql_shapes():
    for _, _, expr in panel_queries():
        assert expr.count("(") == expr.count(")")
        assert re.search(r"memrig_|process_", expr)
