"""Same seed and data -> identical metrics.json and report tables (timings aside), through the real runner
with concurrent probes (so samples.jsonl is written in a different order each time), over the backends whose
rankings are deterministic: the IR baselines and full-context."""

from __future__ import annotations

import json
import random

import pytest

from services.coordinator.determinism import quality_differences, quality_view
from services.coordinator.results import RunDir
from services.coordinator.runner import RunConfig, finalize, run_suite
from services.coordinator.suites.locomo import LocomoSuite
from tests.fixtures_suites import mini_locomo

pytestmark = pytest.mark.slow

BACKENDS = ["bm25", "dense", "hybrid", "full-context"]


def test_quality_view_blanks_timings_and_recounts_scorecard():
    m = {"conditions": {"x": {"latency": {"p50_ms": 3.2}, "overall": {"latency_ms": {"mean": 4.0, "ci": [3, 5]},
                                                                    "f1": {"mean": 0.5}}}},
         "comparisons": {"x": {"baseline": "y", "comparisons": [
             {"metric": "f1", "winner": "b"}, {"metric": "latency_ms", "winner": "a"}],
             "scorecard": {"wins": 1, "losses": 1, "ties": 0, "n/a": 0, "metrics": 2, "verdict": "tie"}}}}
    q = quality_view(m)
    assert q["conditions"]["x"]["latency"] == {"p50_ms": None}
    assert q["conditions"]["x"]["overall"]["latency_ms"] == {"mean": None, "ci": [None, None]}
    assert q["conditions"]["x"]["overall"]["f1"] == {"mean": 0.5}
    assert q["comparisons"]["x"]["scorecard"] == {"wins": 1, "losses": 0, "ties": 0, "n/a": 0, "metrics": 1,
                                                  "verdict": "b"}
    assert m["conditions"]["x"]["latency"]["p50_ms"] == 3.2  # the input is not modified


async def test_two_runs_identical_and_sample_order_irrelevant(tmp_path):
    root = mini_locomo(tmp_path)
    outs = []
    for i in range(2):
        out = tmp_path / f"run{i}"
        cfg = RunConfig(suite="locomo", backends=BACKENDS, out_dir=str(out), seed=7, in_process=True,
                        concurrency=4, options={"data_dir": str(root), "full": True, "answer": False})
        outcome = await run_suite(cfg)
        assert outcome.state == "succeeded", outcome.failures
        outs.append(out)
    assert quality_differences(*outs) == []
    views = [quality_view(json.loads((o / "metrics.json").read_text())) for o in outs]
    assert json.dumps(views[0], sort_keys=True) == json.dumps(views[1], sort_keys=True)
    suite = LocomoSuite({"data_dir": str(root), "full": True, "answer": False}, seed=7)
    assert suite.render(views[0]) == suite.render(views[1])
    assert "hybrid" in views[0]["conditions"]

    # reorder samples.jsonl: re-scoring gives the very same metrics.json, timings included
    before = (outs[0] / "metrics.json").read_text()
    lines = (outs[0] / "samples.jsonl").read_text().splitlines()
    random.Random(1).shuffle(lines)
    (outs[0] / "samples.jsonl").write_text("\n".join(lines) + "\n")
    finalize(RunDir(outs[0]))
    assert (outs[0] / "metrics.json").read_text() == before


def test_tree_differences_name_each_place_by_its_path():
    from services.coordinator.determinism import tree_differences

    a = {"m": {"bm25": [0.5, 0.25], "dense": 1}, "only_a": True}
    b = {"m": {"bm25": [0.5, 0.75], "dense": 1}, "n": [1, 2, 3]}
    assert tree_differences(a, b, "metrics") == [
        "metrics.m.bm25[1]: 0.25 != 0.75", "metrics.n: None != [1, 2, 3]", "metrics.only_a: True != None"]
    assert tree_differences({"x": [1]}, {"x": [1, 2]}, "") == [".x: [1] != [1, 2]"]  # a length change is one
    assert tree_differences(a, b, "metrics", limit=1) == ["metrics.m.bm25[1]: 0.25 != 0.75"]
    assert tree_differences(a, a, "metrics") == []
