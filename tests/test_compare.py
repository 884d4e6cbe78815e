"""`memrig compare` (issue 29): two runs of the same seed report no change and exit 0; a run with a weakened backend
reports the drop and, with --fail-on, exits 1; configuration changes are listed; unpaired runs combine intervals.

Hand-worked numbers (MADial fixture, 10 probes, recall@5 = 1 when the gold memory is returned):
- weakened: mine finds all 10 in A and 4 in B: paired differences six -1 and four 0, Δ = -0.6, exact sign-flip
  p = 2/2^6 = 0.031; the bootstrap interval of the mean difference lies below 0 (all resampled means <= 0, and
  P(no -1 drawn in 10) = 0.4^10 ~ 1e-4 is far below 2.5%);
- unpaired: A's probes all 0, B's (other probe ids) all 1, 10 each: Wilson intervals [0, z²/(n+z²)] and
  [n/(n+z²), 1] with z² = 3.8415, half-width 0.13877 each; combined sqrt(2)·0.13877 = 0.19625 around Δ = 1.
"""

from __future__ import annotations

import json
import math

import pytest

from services.cli import main as cli_main
from services.coordinator.compare import (
    CompareError,
    compare_metric,
    compare_runs,
    config_diff,
    discover,
    parse_fail_on,
    render_markdown,
)
from tests.run_fixtures import (
    bench_all_dir,
    cortex_sample,
    describe,
    madial_run,
    madial_sample,
    write_suite_run,
)

HITS = {"openclaw-real": {0, 1}, "bm25": set(range(5)), "mine": set(range(10))}


def run_cli(*args) -> int:
    with pytest.raises(SystemExit) as e:
        cli_main(list(args))
    return int(e.value.code)


@pytest.fixture
def runs(tmp_path):
    lat_a = [1.0 + i for i in range(10)]
    lat_b = [1.2 + i for i in range(10)]  # a little machine noise: +0.2 ms, inside the 1 ms tie threshold
    a = madial_run(tmp_path / "a", HITS, latencies={b: lat_a for b in HITS})
    same = madial_run(tmp_path / "same", HITS, latencies={b: lat_b for b in HITS})
    weak = madial_run(tmp_path / "weak", {**HITS, "mine": set(range(4))}, latencies={b: lat_b for b in HITS},
                      configs={"mine": {"top_k": 2}}, git_sha="bbbb")
    return a, same, weak


def test_same_seed_runs_report_no_change_and_exit_0(runs, capsys):
    a, same, _ = runs
    res = compare_runs(a, same, fail_on=["headline"])
    assert res["changed"] == [] and res["timing_changed"] == [] and res["regressions"] == []
    assert res["exit_status"] == 0 and res["config_changes"] == []
    rows = res["suites"]["madial"]["rows"]
    assert all(r["paired"] for r in rows) and {r["backend"] for r in rows} == set(HITS)
    quality = [r for r in rows if not r["timing"]]
    assert all(r["delta"] == 0 and r["ci"] == [0.0, 0.0] and r["p"] == 1.0 for r in quality)
    md = render_markdown(res)
    assert "**No change** beyond their intervals" in md and "exit status 0" in md
    assert run_cli("compare", str(a), str(same), "--fail-on", "headline") == 0
    assert "**No change**" in capsys.readouterr().out


def test_a_weakened_backend_is_reported_and_fails_the_gate(runs, capsys):
    a, _, weak = runs
    res = compare_runs(a, weak, fail_on=["headline"])
    r5 = next(r for r in res["changed"] if r["backend"] == "mine" and r["metric"] == "recall@5")
    assert r5["paired"] and r5["mean_a"] == 1.0 and r5["mean_b"] == pytest.approx(0.4)
    assert r5["delta"] == pytest.approx(-0.6) and r5["ci"][1] < 0 and r5["direction"] == "worse"
    assert r5["p"] == pytest.approx(2 / 64, abs=0.006)
    assert {r["backend"] for r in res["changed"]} == {"mine"}  # bm25 and native did not move
    # the headline is recall at the 1,000-token budget; the fixture shows the rank-1 memory whole, so it moves as R@5
    assert [(r["suite"], r["backend"], r["metric"]) for r in res["regressions"]] == [
        ("madial", "mine", "shown@1000")]
    assert res["exit_status"] == 1
    changes = {c["key"]: (c["a"], c["b"]) for c in res["config_changes"]}
    assert changes == {"git_sha": ("aaaa", "bbbb"), "backend mine.config.top_k": (None, 2)}
    md = render_markdown(res)
    assert "**Regression** on --fail-on headline: exit status 1." in md
    assert "| madial | mine | recall@5 | 100.0% | 40.0% | −60.0 pts [" in md
    assert "| madial | mine | shown@1000 | 100.0% | 40.0% | −60.0 pts [" in md
    assert run_cli("compare", str(a), str(weak), "--fail-on", "headline") == 1
    assert run_cli("compare", str(a), str(weak)) == 0  # without a gate: a report, never a failure
    # the gate can be limited to backends that did not move, or name another metric
    assert run_cli("compare", str(a), str(weak), "--fail-on", "recall@5", "--backends", "bm25") == 0
    assert run_cli("compare", str(a), str(weak), "--fail-on", "madial:mrr") == 1
    out = a.parent / "cmp.json"
    assert run_cli("compare", str(a), str(weak), "--fail-on", "any", "--json", "--out", str(out)) == 1
    assert json.loads(out.read_text())["exit_status"] == 1
    capsys.readouterr()


def test_timing_is_apart_and_gates_only_when_named(tmp_path):
    a = madial_run(tmp_path / "a", HITS, latencies={b: [1.0] * 10 for b in HITS})
    slow = madial_run(tmp_path / "slow", HITS, latencies={"mine": [51.0] * 10})
    res = compare_runs(a, slow, fail_on=["any"])
    assert res["changed"] == [] and res["exit_status"] == 0
    [t] = res["timing_changed"]
    assert (t["backend"], t["metric"], t["delta"], t["direction"]) == ("mine", "latency_ms", 50.0, "worse")
    assert compare_runs(a, slow, fail_on=["latency_ms"])["exit_status"] == 1


def test_tokens_are_compared_lower_is_better(tmp_path):
    a = madial_run(tmp_path / "a", HITS, tokens={"mine": 100.0})
    b = madial_run(tmp_path / "b", HITS, tokens={"mine": 90.0})
    changed = {r["metric"]: r for r in compare_runs(a, b)["changed"]}
    assert set(changed) == {"token_spend", "budget_tokens"}  # tokens injected, and shown at the budget (both < 1,000)
    r = changed["token_spend"]
    assert (r["metric"], r["delta"], r["direction"], r["higher_is_better"]) == ("token_spend", -10.0, "better", False)
    assert (changed["budget_tokens"]["delta"], changed["budget_tokens"]["direction"]) == (-10.0, "better")


def test_unpaired_runs_combine_the_two_intervals():
    z2 = 1.959963984540054 ** 2
    r = compare_metric("x", {f"a{i}": 0.0 for i in range(10)}, {f"b{i}": 1.0 for i in range(10)}, True, "rate",
                       None, "conversation", 0)
    half = math.sqrt(2) * (z2 / (10 + z2)) / 2
    assert not r["paired"] and r["p"] is None and r["delta"] == 1.0
    assert r["ci"] == pytest.approx([1 - half, 1 + half]) and half == pytest.approx(0.19625, abs=1e-5)
    assert r["changed"] and r["direction"] == "better"
    # 8 of 10 probes in common is enough to pair (80%); 7 is not
    va = {f"p{i}": 1.0 for i in range(10)}
    assert compare_metric("x", va, {f"p{i}": 1.0 for i in range(8)} | {"q1": 1.0, "q2": 1.0}, True, "rate", None,
                          "c", 0)["paired"]
    assert not compare_metric("x", va, {f"p{i}": 1.0 for i in range(7)} | {"q1": 1.0, "q2": 1.0, "q3": 1.0}, True,
                              "rate", None, "c", 0)["paired"]
    assert compare_metric("x", va, {"p1": None}, True, "rate", None, "c", 0) is None


def test_an_interval_without_the_permutation_test_is_not_a_change():
    """4 of 48 probes drop: the bootstrap interval's top lies below 0 (no drop among 48 draws has probability
    (44/48)^48 = 0.015 < 2.5%), but the exact sign-flip p is 2/2^4 = 0.125."""
    va = {f"p{i:02d}": 1.0 for i in range(48)}
    vb = {**va, **{f"p{i:02d}": 0.0 for i in range(4)}}
    r = compare_metric("pass", va, vb, True, "rate", None, "question", 3)
    assert r["ci"][1] < 0 and r["p"] == pytest.approx(0.125, abs=0.01) and not r["changed"]


def test_few_clusters_are_named_in_the_report(tmp_path):
    res = {"a": "A", "b": "B", "changed": [], "timing_changed": [], "compared": 1, "fail_on": [], "regressions": [],
           "config_changes": [], "suites_only_in": {"a": [], "b": []},
           "suites": {"locomo": {"rows": [{"paired": True, "units": 4, "timing": False, "condition": "x"}],
                                 "clustered": True, "conditions_only_in": {"a": [], "b": []}}}}
    assert "locomo: with 4 independent units the paired test cannot go below p = 0.125" in render_markdown(res)


def test_a_difference_inside_the_tie_threshold_is_not_a_change():
    r = compare_metric("t", {f"p{i}": 100.0 for i in range(10)}, {f"p{i}": 100.8 for i in range(10)}, False, "tokens",
                       None, "c", 0)
    assert r["ci"] == pytest.approx([0.8, 0.8]) and not r["changed"]  # 0.8 < the 1-token threshold


def test_config_diff_ignores_ports_and_run_bookkeeping():
    a = {"run_id": "x", "started_at": "t1", "git_sha": "aaa", "seed": 0, "llm": {"model": "m", "base_url": "u1"},
         "backends": {"cortex": {"status": "ok", "describe": {"version": "1", "embedder": "minilm",
                                                               "config": {"base_url": "http://127.0.0.1:36211", "k": 1}}}}}
    b = {**a, "run_id": "y", "started_at": "t2", "llm": {"model": "m", "base_url": "u2"},
         "backends": {"cortex": {"status": "ok", "describe": {"version": "2", "embedder": "wordllama",
                                                               "config": {"base_url": "http://127.0.0.1:41999", "k": 1}}}}}
    assert config_diff(a, b) == [{"key": "backend cortex.embedder", "a": "minilm", "b": "wordllama"},
                                 {"key": "backend cortex.version", "a": "1", "b": "2"}]


def test_bench_all_dirs_are_compared_suite_by_suite_with_mock_marks(tmp_path):
    def cortex(path, hits_mine):
        conds = {"OpenClaw native": ["compaction", "backend:openclaw-real"], "compacted + mine": ["compaction", "backend:mine"]}
        hit = {c: [(i < hits_mine) if c.endswith("mine") else True for i in range(8)] for c in conds}
        samples = [cortex_sample(c, ctx, i, hit[c][i], 3 if hit[c][i] else 1) for c, ctx in conds.items() for i in range(8)]
        return write_suite_run(path, "cortex-v1", samples, {b: describe(b) for b in ("openclaw-real", "mine")})

    for name, hits in (("A", 8), ("B", 0)):
        out = tmp_path / name
        cortex(out / "cortex-v1", hits)
        madial_run(out / "madial", HITS)
        bench_all_dir(out, {"cortex-v1": "succeeded", "madial": "succeeded"}, ["openclaw-real", "mine"])
    assert set(discover(tmp_path / "A")) == {"cortex-v1", "madial"}
    res = compare_runs(tmp_path / "A", tmp_path / "B", fail_on=["cortex-v1:headline"])
    [hit] = [r for r in res["changed"] if r["metric"] == "hit"]
    assert (hit["suite"], hit["backend"], hit["condition"], hit["delta"]) == ("cortex-v1", "mine", "compacted + mine", -1.0)
    assert res["exit_status"] == 1 and res["regressions"][0]["gate"] == "cortex-v1:headline"
    judge = next(r for r in res["changed"] if r["metric"] == "judge_score")
    assert judge["mock"] and judge["delta"] == -2.0  # 3 on a hit, 1 otherwise
    assert "| cortex-v1 | mine (compacted + mine) | judge_score (llm-mock) | 3.000 | 1.000 | −2.000 [" in render_markdown(res)
    assert not next(r for r in res["changed"] if r["metric"] == "hit")["mock"]
    assert compare_runs(tmp_path / "A", tmp_path / "B", fail_on=["madial:headline"])["exit_status"] == 0


@pytest.mark.parametrize("spec,needle", [("nosuch", "'nosuch' matches no metric"), ("locomo:headline", "matches no"),
                                         (":x", "expected headline")])
def test_bad_fail_on_is_an_error_not_a_pass(runs, spec, needle, capsys):
    a, same, _ = runs
    with pytest.raises(CompareError, match=needle):
        compare_runs(a, same, fail_on=[spec])
    assert run_cli("compare", str(a), str(same), "--fail-on", spec) == 2
    assert needle.split("'")[0] in capsys.readouterr().err


def test_bad_paths_and_backends_are_named(runs, tmp_path, capsys):
    a, same, _ = runs
    with pytest.raises(CompareError, match="not a directory"):
        compare_runs(a, tmp_path / "missing")
    (tmp_path / "empty").mkdir()
    with pytest.raises(CompareError, match="neither a suite run"):
        compare_runs(a, tmp_path / "empty")
    with pytest.raises(CompareError, match="--backends: 'nosuch'"):
        compare_runs(a, same, backends=["nosuch"])
    assert parse_fail_on(["headline,madial:mrr", "any"]) == [(None, "headline"), ("madial", "mrr"), (None, "any")]


def test_suites_only_in_one_run_are_listed(tmp_path):
    a, b = tmp_path / "A", tmp_path / "B"
    madial_run(a / "madial", HITS)
    madial_run(b / "madial", HITS)
    samples = [madial_sample("mine", i, True) for i in range(3)]
    write_suite_run(a / "extra", "madial", samples, {"mine": describe("mine")})
    bench_all_dir(a, {"madial": "succeeded", "extra": "succeeded"}, ["mine"])
    bench_all_dir(b, {"madial": "succeeded"}, ["mine"])
    res = compare_runs(a, b)
    assert res["suites_only_in"] == {"a": ["extra"], "b": []}
    assert "Suites only in run A: extra." in render_markdown(res)


@pytest.mark.slow
def test_two_real_bench_all_runs_of_one_seed_compare_clean(tmp_path):
    """`memrig bench-all` twice (octybot, three backends, in-process, seed 0): each report opens with the verdict,
    and compare finds no quality or token change and exits 0 even when gated on every metric."""
    import os
    import subprocess
    import sys

    def bench(out, *extra):
        r = subprocess.run([sys.executable, "-m", "services.cli", "bench-all", "--suites", "octybot", "--backends",
                            "none,bm25,openclaw", "--no-costs", "--in-process", "--out", str(out), *extra],
                           capture_output=True, text=True, timeout=600, env={**os.environ, "MEMRIG_EMBEDDER": "hash"})
        assert r.returncode == 0, r.stderr[-2000:]
        head = (out / "report.md").read_text().split("\n")[:40]
        assert head[0] == f"# Verdict ({out.name})" and any(x.startswith("| **bm25** |") for x in head)
        assert json.loads((out / "verdict.json").read_text())["suites"]["octybot"]["baseline"]["backend"] == "openclaw"
        return out

    # the second run measures everything again (--fresh): reusing the first's stored results would compare a run
    # with a copy of itself
    a, b = bench(tmp_path / "a"), bench(tmp_path / "b", "--fresh")
    assert "reused from" not in (b / "octybot" / "report.md").read_text()
    res = compare_runs(a, b, fail_on=["any"])
    assert res["changed"] == [] and res["exit_status"] == 0 and res["compared"] > 0
    assert run_cli("compare", str(a), str(b), "--fail-on", "any") == 0
