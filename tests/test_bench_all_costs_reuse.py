"""bench-all's cost scenarios reused like a suite result (services/coordinator/bench_all._run_costs): stored under a
key of their code and packages, copied on an unchanged rerun with where and when they were measured, measured again
when their code changes or under --fresh, never read when torn."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from services.coordinator import bench_all, reuse

RUN_RIG = object()  # stands for bench-all's Rig: _run_costs only passes it on


@pytest.fixture
def measured(monkeypatch, tmp_path):
    """run_costs replaced by a recorder that writes a costs.json and checks it was handed the run's rig; the store
    under tmp_path."""
    monkeypatch.setenv("MEMRIG_STATE_DIR", str(tmp_path / "state"))
    calls: list[Path] = []

    async def fake_run_costs(out, rig, quick=True, metrics_port=None):
        assert rig is RUN_RIG  # the run's rig, not one of its own
        out = Path(out)
        out.mkdir(parents=True, exist_ok=True)
        (out / "costs.json").write_text(json.dumps({"p50_ms": 12.5}))
        (out / ".run").mkdir(exist_ok=True)
        calls.append(out)
        return {"p50_ms": 12.5}

    import services.cost_scenarios.scenarios as cs

    monkeypatch.setattr(cs, "run_costs", fake_run_costs)
    return calls


def test_an_unchanged_rerun_copies_the_stored_costs(tmp_path, measured):
    first = asyncio.run(bench_all._run_costs(tmp_path / "r1" / "costs", RUN_RIG, "on"))
    assert first["state"] == "ok" and "reused" not in first and len(measured) == 1
    second = asyncio.run(bench_all._run_costs(tmp_path / "r2" / "costs", RUN_RIG, "on"))
    assert len(measured) == 1  # not measured again
    assert second["results"] == {"p50_ms": 12.5} and second["reused"].startswith(f"reused from {tmp_path / 'r1'}")
    assert json.loads((tmp_path / "r2" / "costs" / "costs.json").read_text()) == {"p50_ms": 12.5}
    assert not (tmp_path / "r2" / "costs" / ".run").exists()  # the process directory is not stored


def test_fresh_a_code_change_or_a_torn_entry_measure_again(tmp_path, measured, monkeypatch):
    asyncio.run(bench_all._run_costs(tmp_path / "r1" / "costs", RUN_RIG, "on"))
    asyncio.run(bench_all._run_costs(tmp_path / "r2" / "costs", RUN_RIG, "store"))  # --fresh: measured, stored
    assert len(measured) == 2
    key, _ = bench_all.costs_key()
    (reuse.cache_root() / "costs" / key / "meta.json").write_text("{")  # torn
    asyncio.run(bench_all._run_costs(tmp_path / "r3" / "costs", RUN_RIG, "on"))
    assert len(measured) == 3
    real = reuse.file_sha
    plugin = str(reuse.PROJECT_ROOT / "services" / "turn_sim" / "plugin.py")
    monkeypatch.setattr(reuse, "file_sha", lambda p: "edited" if str(p) == plugin else real(p))
    assert bench_all.costs_key()[0] != key
    asyncio.run(bench_all._run_costs(tmp_path / "r4" / "costs", RUN_RIG, "on"))
    assert len(measured) == 4
    # the scenarios' own code and the drills they run are in the key too
    for rel in ("services/cost_scenarios/scenarios.py", "services/drills/runner.py"):
        edited = str(reuse.PROJECT_ROOT / rel)
        monkeypatch.setattr(reuse, "file_sha", lambda p, edited=edited: "edited" if str(p) == edited else real(p))
        assert bench_all.costs_key()[0] != key, rel
    asyncio.run(bench_all._run_costs(tmp_path / "r5" / "costs", RUN_RIG, "off"))  # reuse off: neither read nor stored
    assert len(measured) == 5


def test_a_plot_drawn_from_the_same_values_is_copied_not_drawn_again(tmp_path, monkeypatch):
    """report_html.cached_plot: the same arguments give the cached picture without drawing; other values draw."""
    from services.coordinator import report_html

    monkeypatch.setenv("MEMRIG_STATE_DIR", str(tmp_path))
    drawn: list[str] = []

    @report_html.cached_plot
    def picture(title, values):
        drawn.append(title)
        return f"data:image/png;base64,{title}{values}"

    assert picture("a", [1, 2]) == picture("a", [1, 2]) == "data:image/png;base64,a[1, 2]"
    assert drawn == ["a"]
    assert picture("a", [1, 3]).endswith("[1, 3]") and drawn == ["a", "a"]
    assert len(list((tmp_path / "plot-cache").glob("*.txt"))) == 2
