"""Generator scaling of `make load-bench` (loadtests/locust_scaling.py): the arithmetic of the ratios on crafted
runs, the report section with both curves, and one real distributed run (slow: it starts locust processes;
locust is never imported here)."""

from __future__ import annotations

import pytest

from loadtests.capacity_report import render_generator_scaling, scaling_curves
from loadtests.locust_scaling import measure, percentile_ms, processes_for, summarise_run, with_ratios


def run(workers: int, rps: float) -> dict:
    return {"workers": workers, "users": 32, "requests": int(rps * 10), "failures": 0, "duration_s": 10.0,
            "rps": rps, "p50_ms": 3.0, "p99_ms": 11.0, "exit_code": 0, "load_avg_1m": [1.0, 2.0]}


def test_ratios_to_one_worker_and_per_worker_efficiency():
    rows = with_ratios([run(1, 1000.0), run(2, 1500.0), run(4, 1600.0)])
    assert [r["ratio_to_1"] for r in rows] == [1.0, 1.5, 1.6]
    assert [r["per_worker_efficiency"] for r in rows] == [1.0, 0.75, 0.4]  # 1.5 / 2, 1.6 / 4
    assert with_ratios([run(2, 10.0)])[0]["ratio_to_1"] is None  # no 1-worker run to divide by


def test_rate_over_the_runs_own_span_and_percentiles_from_the_histogram():
    counts = {1.0: 500, 2.0: 400, 9.0: 95, 40.0: 5}  # 1,000 requests
    r = summarise_run(2, 32, {"requests": 900, "failures": 3}, 4.5, counts, 0, (0.5, 1.25))
    assert r["rps"] == 200.0 and r["failures"] == 3 and r["load_avg_1m"] == [0.5, 1.25]
    # nearest rank: the 500th request is at 1 ms, the 990th at 9 ms (900 at or below 2 ms, 995 at or below 9)
    assert r["p50_ms"] == 1.0 and r["p99_ms"] == 9.0
    assert percentile_ms(counts, 50.1) == 2.0 and percentile_ms(counts, 99.6) == 40.0
    assert percentile_ms({}, 50) is None
    assert summarise_run(1, 32, {}, None, {}, 1, (0, 0))["rps"] is None


def test_processes_for_a_rate():
    assert processes_for(1000, 320) == 4  # 3.125 rounded up
    assert processes_for(960, 320) == 3  # exactly 3
    assert processes_for(10, 320) == 1
    assert processes_for(1000, None) is None and processes_for(1000, 0) is None


def test_report_gives_both_curves_as_ratios():
    r = {"scaling": {1: {"max_sustained_rps": 100.0}, 2: {"max_sustained_rps": 150.0},
                     4: {"max_sustained_rps": 160.0}},
         "generator_scaling": {"cpu_count": 2, "users": 32, "duration_s": 10, "label": "closed model",
                               "runs": with_ratios([run(1, 1000.0), run(2, 1500.0), run(4, 1600.0)])}}
    curves = scaling_curves(r)
    assert [x["ratio_to_1"] for x in curves["server_processes"]] == [1.0, 1.5, 1.6]
    md = "\n".join(render_generator_scaling(r))
    assert "| 2 | 1500.0 | 1.5 | 0.75 | 3.0 | 11.0 | 0 | 1.0 → 2.0 |" in md
    assert "| 4 | 160.0 | 1.6 |" in md
    assert render_generator_scaling({"scaling": r["scaling"]}) == []


@pytest.mark.slow
def test_a_real_distributed_run_against_the_trivial_target(tmp_path):
    res = measure([1, 2], 4, 3, tmp_path)
    one, two = res["runs"]
    assert (one["workers"], two["workers"]) == (1, 2)
    for x in (one, two):
        assert x["exit_code"] == 0 and x["failures"] == 0 and x["requests"] > 100 and x["rps"] > 0
        assert x["p50_ms"] is not None and x["p99_ms"] >= x["p50_ms"]
    assert one["ratio_to_1"] == 1.0 and two["ratio_to_1"] == round(two["rps"] / one["rps"], 2)
