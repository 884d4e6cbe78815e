"""report.html pages drawn later and in other processes (report_html.deferred_pages / render_pages, bench-all's
end-of-run drawing) are the bytes render_html writes on its own, and the exact rewrites behind the scoring's speed
(stats.t_quantile and the intervals drawn from one pass of _cluster_arrays, ranked_unique, LoCoMo's session_of)
give what the code they replaced gave, on hand-made input."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from services.coordinator import report_html as rh
from services.coordinator import stats
from services.coordinator.bench_all import draw_suite_pages
from services.coordinator.metrics.retrieval import ranked_unique
from services.coordinator.suites.locomo import _SESSION_OF, session_of


def _summary(mean: float, lo: float, hi: float) -> dict:
    return {"n": 4, "mean": mean, "ci": [lo, hi], "method": "x"}


def _run_dir(path: Path) -> Path:
    """A small suite run directory: two conditions with by-category summaries and a comparison (bar charts), a
    recall@K family (a curve) and retrieve latencies (a CDF)."""
    path.mkdir(parents=True)
    conds = {}
    for i, c in enumerate(("bm25", "none")):
        conds[c] = {"overall": {f"recall@{k}": _summary(0.2 * i + 0.1 * k / 5, 0.0, 0.9) for k in (1, 3, 5)},
                    "by_category": {cat: {"recall@5": _summary(0.3 + 0.1 * i + 0.05 * j, 0.1, 0.8)}
                                    for j, cat in enumerate(("1", "2", "3"))}}
    comps = {"bm25": {"baseline": "none", "comparisons": [
        {"metric": "recall@5", "threshold": 0.005, "mean_a": 0.3, "ci_a": [0.1, 0.5], "mean_b": 0.6, "ci_b": [0.4, 0.8]}]}}
    (path / "metrics.json").write_text(json.dumps({"conditions": conds, "comparisons": comps}))
    (path / "run.json").write_text(json.dumps({"suite": "hand-made", "run_id": "run-1",
                                               "judge": {"label": "offline rubric judge"}}))
    with open(path / "samples.jsonl", "w") as f:
        for n in range(12):
            for b in ("bm25", "none"):
                f.write(json.dumps({"probe_id": f"p{n}", "condition": b, "status": "ok",
                                    "retrievals": {b: {"latency_ms": 1.5 * n + (3 if b == "none" else 0)}}}) + "\n")
    (path / "report.md").write_text("# memrig report: hand-made (run-1)\n\n| condition | recall@5 |\n|---|---|\n"
                                    "| bm25 | 0.6 |\n| none | 0.3 |\n")
    return path


@pytest.mark.slow  # draws figures, in two spawned processes
def test_pages_drawn_later_in_other_processes_are_the_same_bytes(tmp_path, monkeypatch):
    one = _run_dir(tmp_path / "one" / "run")
    others = [tmp_path / name / "run" for name in ("two", "three")]
    for d in others:
        shutil.copytree(one, d)
    monkeypatch.setenv("MEMRIG_STATE_DIR", str(tmp_path / "state-one"))
    expected = rh.render_html(one).read_bytes()
    assert expected.count(b"data:image/png;base64,") == 4  # the comparison, the category bars, the curve, the CDF

    # inside deferred_pages nothing is written; each directory is noted once, in order
    with rh.deferred_pages() as pages:
        for d in (*others, others[0]):
            assert rh.render_html(d) == d / "report.html"
    assert pages == others and not any((d / "report.html").exists() for d in others)
    assert rh._DEFERRED.get() is None  # and the deferral ends with the block

    # drawn afresh (an empty plot cache: no copy of the first page's pictures) by two worker processes
    monkeypatch.setenv("MEMRIG_STATE_DIR", str(tmp_path / "state-workers"))
    assert rh.render_pages(pages, workers=2) == {}
    assert all((d / "report.html").read_bytes() == expected for d in others)
    assert len(list((tmp_path / "state-workers" / "plot-cache").iterdir())) == 2  # the workers drew (2 bar charts)


def test_render_pages_reports_a_failed_page_and_draws_the_rest(tmp_path):
    bad = tmp_path / "bad"
    bad.mkdir()
    (bad / "run.json").write_text("{not json")
    empty = tmp_path / "empty"  # no files at all: a page with no plots
    empty.mkdir()
    errors = rh.render_pages([bad, empty], workers=1)
    assert list(errors) == [bad] and errors[bad].startswith("JSONDecodeError")
    assert (empty / "report.html").exists() and not (bad / "report.html").exists()


def test_bench_all_marks_a_suite_whose_page_failed(tmp_path):
    for name in ("good", "bad"):
        (tmp_path / name).mkdir()
    (tmp_path / "bad" / "run.json").write_text("[")
    index = {"suites": {"good": {"state": "succeeded", "dir": "good"}, "bad": {"state": "succeeded", "dir": "bad"},
                        "skipped": {"state": "skipped", "reason": "no data"}}}
    draw_suite_pages(tmp_path, index, [tmp_path / "good", tmp_path / "bad"])
    assert index["suites"]["good"] == {"state": "succeeded", "dir": "good"}
    assert index["suites"]["bad"]["state"] == "failed"
    assert index["suites"]["bad"]["reason"].startswith("report.html: JSONDecodeError")
    assert index["suites"]["skipped"] == {"state": "skipped", "reason": "no data"}


# ------------------------------------------------------------------------------------------------ exact rewrites

def _ranked_unique_loop(ids):
    """ranked_unique as it was written before: a set and a loop."""
    seen, out = set(), []
    for i in ids:
        if i not in seen:
            seen.add(i)
            out.append(i)
    return out


def test_ranked_unique_is_the_loop_it_replaced():
    cases = [[], ["D1:3"], ["D2:1", "D1:3", "D2:1", "D1:1", "D1:3", "D3:9", "D2:1"], list("abcabcxyzzyx")]
    for ids in cases:
        assert ranked_unique(iter(ids)) == _ranked_unique_loop(ids)
    assert ranked_unique(["D2:1", "D1:3", "D2:1", "D1:1"]) == ["D2:1", "D1:3", "D1:1"]  # by hand: first-seen order


def test_locomo_session_of_is_its_regex():
    for dia in ("D1:3", "D12:40", "D3:1", "x", "S1", "D7:2", "D1:3"):
        m = _SESSION_OF.match(dia)
        assert session_of(dia) == (f"S{m.group(1)}" if m else None)
    assert session_of("D12:40") == "S12" and session_of("nonsense") is None


def test_t_quantile_is_scipy_ppf_to_the_bit():
    from scipy.stats import t as student_t

    for q, df in ((0.975, 1), (0.975, 6), (0.8, 29), (0.975, 399), (0.5, 3)):
        assert stats.t_quantile(q, df) == float(student_t.ppf(q, df))
    assert stats.t_quantile(0.975, 1) == pytest.approx(12.706204736, abs=1e-9)  # the t table's 12.706


def test_interval_is_the_separate_passes_it_replaced():
    """interval() draws its interval from one pass of _cluster_arrays; it must equal what the public functions give
    (each making its own pass), exactly, and the hand-computed cluster-robust t interval."""
    from scipy.stats import t as student_t

    values = {"c1:q1": 1.0, "c1:q2": 0.0, "c2:q1": 1.0, "c2:q2": 1.0, "c2:q3": None, "c3:q1": 0.0, "c4:q1": 0.5}
    clusters = {p: p.split(":")[0] for p in values}
    got = stats.interval(values, clusters, seed=3, unit="rate")
    m, lo, hi = stats.cluster_t_interval(values, clusters)
    assert (got["mean"], got["ci"], got["units"], got["n"]) == (m, [max(0.0, lo), min(1.0, hi)], 4, 6)
    # by hand: cluster sums 1, 2, 0, 0.5 over counts 2, 2, 1, 1 -> r = 3.5 / 6; CR1 with G = 4
    r = 3.5 / 6
    resid = [1 - 2 * r, 2 - 2 * r, 0 - r, 0.5 - r]
    se = (4 / 3 * sum(x * x for x in resid)) ** 0.5 / 6
    half = float(student_t.ppf(0.975, 3)) * se
    assert got["mean"] == pytest.approx(r, abs=1e-15)
    assert got["ci"] == pytest.approx([max(0.0, r - half), min(1.0, r + half)], abs=1e-12)
    # without clusters: the percentile bootstrap over questions, as cluster_bootstrap_ci draws it with the seed
    plain = stats.interval(values, None, seed=3, unit="value")
    assert (plain["mean"], *plain["ci"]) == stats.cluster_bootstrap_ci(values, None, seed=3)
    assert plain["method"] == stats.BOOTSTRAP_PROBE and plain["units"] == 6


@pytest.mark.slow  # a fresh interpreter spawning two workers
def test_render_pages_leaves_no_process_a_run_guard_would_wait_for(tmp_path):
    """Its workers and multiprocessing's resource tracker (which ignores SIGTERM and lives until its parent exits)
    carry no run token: the guard's sweep at the end of every bench-all had waited its 5 s grace for the tracker."""
    import os
    import subprocess
    import sys

    from services.coordinator import guard

    for name in ("a", "b"):
        (tmp_path / name).mkdir()
    code = ("import sys; from services.coordinator import report_html as rh, guard; "
            f"errs = rh.render_pages([{str(tmp_path / 'a')!r}, {str(tmp_path / 'b')!r}], workers=2); "
            "from multiprocessing import resource_tracker as rt; "
            "print(errs == {}, rt._resource_tracker._pid is not None, guard.marked(sys.argv[1], {__import__('os').getpid()}))")
    env = {**os.environ, guard.ENV: "tok-render-pages", "MEMRIG_STATE_DIR": str(tmp_path / "state")}
    out = subprocess.run([sys.executable, "-c", code, "tok-render-pages"], env=env, capture_output=True, text=True,
                         cwd=Path(__file__).resolve().parents[1], timeout=120)
    # the pages are drawn, the tracker was started, and no process but the caller carries the token
    assert out.stdout.split() == ["True", "True", "[]"], out.stderr[-2000:]
    assert (tmp_path / "a" / "report.html").exists()
