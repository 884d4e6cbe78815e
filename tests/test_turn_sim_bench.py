"""The costs entry point end to end at a tiny size: real llm-mock, cortex-mock and fault-proxy processes started in
the caller's rig, the cortex adapter in-process; checks the files it writes, the report section it renders, and that
it uses and stops only the processes it started."""

from __future__ import annotations

import json

import pytest

from collectors.resources import SlopeEstimate, leak_verdict
from collectors.samples import read_samples
from services.common import process
from services.cost_scenarios.scenarios import KEYS, CostsConfig, render_costs_markdown, run_costs
from services.launcher import Rig
from services.turn_sim.states import STATES


@pytest.mark.slow
async def test_run_costs_tiny(tmp_path):
    # The leak check needs >= 3 RSS samples in the sustained stretch whatever the machine's speed: 20 turns of at
    # least the LLM's 5 ms each last >= 100 ms, sampled every 20 ms.
    cfg = CostsConfig(turns_per_state=3, idle_s=0.5, active_turns=2, sustained_turns=20, token_queries=3,
                      top_ks=(1, 5), continuity_backends=("none",), drills=False, llm_latency_ms=5,
                      sample_interval_s=0.02, cortex_mock_args=["--embedder", "hash"])
    rig = Rig(tmp_path / "procs")
    try:
        # the run's own llm-mock (no injected latency), as bench-all's rig holds one when the scenarios start
        run_llm = await rig.start_service("llm-mock")
        res = await run_costs(tmp_path, rig, config=cfg)
        # their services were their own (the 5 ms llm-mock, not the run's) and are stopped; the run's is not
        assert res["services"]["llm-mock"] != run_llm.url and res["llm"]["latency_ms"] == 5
        assert set(res["services"]) == {"llm-mock", "cortex-mock", "fault-proxy"}
        assert sorted(rig.procs) == ["llm-mock"] and run_llm.alive()
        assert sorted(p.name for p in (tmp_path / "procs").glob("*.log")) == sorted(
            f"{k.replace('/', '_')}.log" for k in ("llm-mock", *KEYS.values()))
    finally:
        rig.stop_all()
    assert not process.pid_alive(run_llm.pid)
    assert res["backend"] == "cortex"
    assert set(res["states"]) == set(STATES) and all(s["n"] == 3 for s in res["states"].values())
    assert res["states"]["fast"]["with_memories"] == 3
    assert res["tokens"]["5"]["tokens_injected_p50"] > res["tokens"]["1"]["tokens_injected_p50"] > 0
    assert res["continuity"]["none"]["redundant_questions"] == res["continuity"]["none"]["probes"]
    assert res["network"]["total"] > 0
    # the verdict follows from the reported interval and the configured tolerance (bytes/s)
    lc = res["leak_check"]
    assert lc["tolerance_bytes_per_s"] == pytest.approx(cfg.leak_tolerance_mb_per_min * 2 ** 20 / 60)
    est = SlopeEstimate(lc["slope"], lc["lo"], lc["hi"], lc["n"], lc["method"], lc["confidence"])
    assert lc["verdict"] == leak_verdict(est, lc["tolerance_bytes_per_s"])
    assert lc["n"] >= 3 and lc["verdict"] != "unknown"
    kinds = {r["kind"] for r in read_samples(tmp_path / "samples.jsonl")}
    assert {"turn", "resources", "event_loop", "tokens", "continuity", "network_summary"} <= kinds
    assert json.loads((tmp_path / "costs.json").read_text())["backend"] == "cortex"
    for png in res["plots"]:
        assert (tmp_path / png).read_bytes()[:4] == b"\x89PNG"
    md = render_costs_markdown(res)
    assert "### Turn latency per plugin state" in md and "### Failure drills" in md
    assert "drills skipped" in md
