"""The verdict page (issue 29): per backend and suite, the headline metric against OpenClaw native and BM25 with
interval, permutation p and a word, plus tokens and latency; on the first screen of report.md, from the run's files.

The MADial run below is small enough to work out by hand (10 probes, the gold memory found or not):
native (openclaw-real) finds probes 0-1 (recall@5 0.2), bm25 0-4 (0.5), mine all ten (1.0).
- mine - native: +0.8 over 8 probes that differ, all the same sign: the exact sign-flip p is 2/2^8 = 0.0078;
- mine - bm25: +0.5 over 5 differing probes: exact p = 2/2^5 = 0.0625 > 0.05, so *no detectable difference*, even
  though the bootstrap interval of the difference ([0.2, 0.8]: a Binomial(10, 1/2)/10 has its 2.5% point at 0.2)
  excludes 0: the word needs both;
- bm25 - native: +0.3 over 3 probes: exact p = 2/8 = 0.25.
The permutation test samples 10,000 flips, so p is that exact value within Monte Carlo error (±0.005 here).
"""

from __future__ import annotations

import json

import pytest

from services.adapters.registry import default_backends
from services.coordinator.bench_all import DEFAULT_SUITES
from services.coordinator.run_report import rerender, strip_backend_config, write_reports
from services.coordinator.suites import common as C
from services.coordinator.suites.arclight import ArclightSuite
from services.coordinator.suites.base import ProbeValues
from services.coordinator.suites.cortex_v1 import CortexV1Suite
from services.coordinator.suites.locomo import LocomoSuite
from services.coordinator.suites.longmemeval import LongMemEvalSuite
from services.coordinator.suites.madial import MadialSuite
from services.coordinator.suites.nextjs_docs import NextjsDocsSuite
from services.coordinator.suites.octybot import OctybotSuite
from services.coordinator.suites.poisoned_memory import PoisonedMemorySuite
from services.coordinator.suites.quaid_weeks import QuaidWeeksSuite
from services.coordinator.verdict import (
    BETTER,
    SAME,
    WORSE,
    VerdictError,
    _more_units,
    backend_order,
    min_p,
    render_cell,
    render_markdown,
    resolve_baseline,
    suite_verdict,
    word,
)
from tests.run_fixtures import bench_all_dir, cortex_sample, describe, madial_run, write_suite_run

HITS = {"openclaw-real": {0, 1}, "bm25": set(range(5)), "mine": set(range(10))}


@pytest.fixture
def madial_dir(tmp_path):
    return madial_run(tmp_path / "madial", HITS, tokens={"openclaw-real": 300.0, "bm25": 100.0, "mine": 40.0},
                      latencies={"mine": [float(x) for x in range(1, 11)]})


def test_madial_verdict_by_hand(madial_dir):
    v = suite_verdict(madial_dir)
    assert v["headline"]["metric"] == "shown@1000" and v["headline"]["kind"] == "retrieval"
    assert v["baseline"] == {"condition": "openclaw-real", "backend": "openclaw-real",
                             "rule": v["baseline"]["rule"]} and "strongest" in v["baseline"]["rule"]
    rows = v["backends"]
    assert [rows[b]["value"]["mean"] for b in ("openclaw-real", "bm25", "mine")] == [0.2, 0.5, 1.0]

    nat = rows["mine"]["vs_native"]
    assert nat["delta"] == pytest.approx(0.8) and nat["n"] == 10
    assert nat["p"] == pytest.approx(2 / 256, abs=0.005) and nat["word"] == BETTER
    assert nat["ci"][0] > 0
    # the suite's own scorecard entry, verbatim: the page and the section it links to print the same numbers
    metrics = json.loads((madial_dir / "metrics.json").read_text())
    entry = next(x for x in metrics["comparisons"]["mine"]["comparisons"] if x["metric"] == "shown@1000")
    assert nat["source"] == "suite scorecard" and (nat["delta"], nat["p"], nat["ci"]) == (
        entry["delta"], entry["p"], list(entry["ci_delta"]))

    bm = rows["mine"]["vs_bm25"]
    assert bm["against"] == "bm25" and bm["delta"] == pytest.approx(0.5)
    assert bm["p"] == pytest.approx(2 / 32, abs=0.006) and bm["p"] > 0.05
    assert bm["ci"][0] == pytest.approx(0.2) and bm["word"] == SAME  # CI excludes 0, p does not: no word
    # power: differences 1 on 5 probes, 0 on 5: sd (ddof 1) sqrt(2.5 / 9), se sd / sqrt(10), 9 df
    from scipy.stats import t as student_t
    se = (2.5 / 9) ** 0.5 / 10 ** 0.5
    assert bm["mdd"] == pytest.approx((student_t.ppf(0.975, 9) + student_t.ppf(0.8, 9)) * se)
    assert round(bm["mdd"] * 100, 1) == 52.4 and bm["mdd_why"] == ""

    assert rows["bm25"]["vs_native"]["delta"] == pytest.approx(0.3)
    assert rows["bm25"]["vs_native"]["p"] == pytest.approx(0.25, abs=0.015)
    assert rows["bm25"]["vs_bm25"] is None and rows["openclaw-real"]["vs_native"] is None
    assert rows["openclaw-real"]["vs_bm25"]["delta"] == pytest.approx(-0.3)

    assert [rows[b]["tokens_per_turn"] for b in ("openclaw-real", "bm25", "mine")] == [300.0, 100.0, 40.0]
    # numpy's linear percentiles of 1..10 ms: p50 = 5.5, p95 at rank 0.95 * 9 = 8.55 -> 9 + 0.55 = 9.55
    assert rows["mine"]["retrieve_ms"]["p50"] == pytest.approx(5.5)
    assert rows["mine"]["retrieve_ms"]["p95"] == pytest.approx(9.55)
    assert v["statistics"]["min_p"] is None  # probes flipped one by one


def test_a_worse_backend_is_called_worse(tmp_path):
    d = madial_run(tmp_path / "m", {"openclaw-real": set(range(10)), "bm25": set(range(10)), "weak": set()})
    row = suite_verdict(d)["backends"]["weak"]
    assert row["vs_native"]["delta"] == pytest.approx(-1.0) and row["vs_native"]["word"] == WORSE
    assert row["vs_bm25"]["word"] == WORSE


def test_word_needs_p_interval_and_threshold():
    base = {"ci_delta": [0.1, 0.3], "p": 0.049, "winner": "b"}
    assert word(base) == BETTER
    assert word({**base, "p": 0.05}) == SAME
    assert word({**base, "ci_delta": [-0.1, 0.3]}) == SAME
    assert word({**base, "winner": "tie"}) == SAME
    assert word({"ci_delta": [-0.3, -0.1], "p": 0.01, "winner": "a"}) == WORSE
    assert word({**base, "p": None}) == SAME


def test_min_p_of_a_cluster_permutation():
    assert min_p(4, True) == 0.125 and min_p(5, True) == 0.0625 and min_p(4, False) is None
    assert min_p(0, True) is None


def test_the_weak_suite_note_names_the_option_that_runs_every_unit_its_data_holds():
    s = LocomoSuite({})
    assert s.more_units({"conversations_in_file": 7}) == ("conversations=7", 7)
    assert s.more_units({}) is None and MadialSuite({}).more_units({"conversations_in_file": 7}) is None
    run = {"data": {"conversations_in_file": 7}}
    assert _more_units(s, run, 4, True) == {"option": "conversations=7", "units": 7,
                                            "min_p": 2 / 128}
    assert _more_units(s, run, 7, True) == {"option": None, "units": 7, "min_p": 2 / 128}  # had them all
    assert _more_units(s, run, 4, False) is None and _more_units(s, {}, 4, True) is None

    def note(more):
        st = {"units": 4, "unit": "conversation", "min_p": 0.125, "more": more}
        v = {"suite": "locomo", "headline": {"label": "R@5", "unit": "rate", "higher_is_better": True,
                                             "mocked": False},
             "baseline": {"condition": "openclaw-real", "backend": "openclaw-real"}, "mocked_metrics": [],
             "bm25": {"condition": "bm25", "backend": "bm25"}, "statistics": st, "backends": {}}
        md = render_markdown({"run_id": "r", "suites": {"locomo": v}, "backends": [], "summary": {}})
        return next(x for x in md.split("\n") if "Too few independent units" in x)

    head = "- Too few independent units for p < 0.05, so no better/worse is possible: locomo (4 conversations: p ≥ 0.125; "
    assert note(_more_units(s, run, 4, True)) == head + (
        "the suite option `conversations=7` runs all 7 in its data: p ≥ 0.016).")
    assert note({"option": None, "units": 4, "min_p": 0.125}) == head + "its data holds no more conversations)."
    assert note(None) == head + "run more conversations)."


@pytest.mark.parametrize("cls,answers,judge,want", [
    (LocomoSuite, True, True, "shown@1000"), (LocomoSuite, False, True, "f1_cats_1_4"),  # F1 needs no judge
    (LocomoSuite, False, False, "f1_cats_1_4"), (LongMemEvalSuite, False, True, "shown@1000"),
    (LongMemEvalSuite, False, False, "qa_accuracy"), (CortexV1Suite, True, True, "hit"),
    (CortexV1Suite, False, True, "hit"), (CortexV1Suite, False, False, "judge_score"),
    (ArclightSuite, True, False, "hit"), (ArclightSuite, False, False, "judge_mean"),
    (MadialSuite, False, False, "shown@1000"), (OctybotSuite, False, False, "pass"),
    (QuaidWeeksSuite, True, True, "recall_at_5"), (PoisonedMemorySuite, True, True, "uncontained"),
    (NextjsDocsSuite, True, True, "doc_hit"),
])
def test_headline_follows_who_answered_and_judged(cls, answers, judge, want):
    assert cls({}).headline(answers, judge) == want


def test_mocked_metrics():
    s = LocomoSuite({})
    assert s.mocked_metrics(True, True) == {"f1", "f1_cats_1_4", "exact_match", "binary_j"}
    assert s.mocked_metrics(False, True) == {"binary_j"}
    assert s.mocked_metrics(False, False) == set()


def test_baseline_fallback_prefers_openclaw_itself_and_the_metric_direction():
    def pv_of(metric):
        return ProbeValues({"openclaw-real": {metric: {"p1": 1.0, "p2": 1.0}},
                            "openclaw-real[profile=sessions]": {metric: {"p1": 0.0, "p2": 1.0}},
                            "openclaw": {metric: {"p1": 0.0, "p2": 0.0}}, "bm25": {metric: {"p1": 0.0, "p2": 0.0}}},
                           backend_of={c: c for c in ("openclaw-real", "openclaw-real[profile=sessions]", "openclaw",
                                                      "bm25")})
    # uncontained: the registry says lower is better; hit: higher is better
    cond, rule = resolve_baseline({}, pv_of("uncontained"), "uncontained")
    assert cond == "openclaw-real[profile=sessions]" and "lower is better" in rule  # lowest of OpenClaw itself
    pv = pv_of("hit")
    assert resolve_baseline({}, pv, "hit")[0] == "openclaw-real"
    # one rule: a suite's saved choice on another metric does not override it; its words are kept when it agrees
    assert resolve_baseline({"baseline": "openclaw"}, pv, "hit")[0] == "openclaw-real"
    assert resolve_baseline({"baseline": "openclaw-real", "baseline_rule": "why"}, pv, "hit") == ("openclaw-real", "why")
    port_only = ProbeValues({"openclaw": {"hit": {"p": 1.0}}, "bm25": {"hit": {"p": 1.0}}},
                            backend_of={"openclaw": "openclaw", "bm25": "bm25"})
    assert resolve_baseline({}, port_only, "hit")[0] == "openclaw"
    assert resolve_baseline({"baseline": "bm25"}, ProbeValues({"bm25": {}}, backend_of={"bm25": "bm25"}), "hit") == \
        (None, "no OpenClaw native backend ran")


def test_an_unregistered_headline_is_an_error(tmp_path):
    from tests.run_fixtures import madial_run

    d = madial_run(tmp_path / "m", {"openclaw-real": {0}, "mine": {1}})
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(MadialSuite, "retrieval_headline", "made_up")
        with pytest.raises(VerdictError, match="suite madial: headline metric 'made_up' is not in the metric registry"):
            suite_verdict(d)


def cortex_run(path, llm=None, judge=None):
    """8 probes; hit patterns native 4/8, bm25 4/8 (other probes), mine 8/8; bare (none) 0/8; "compacted" has
    no backend and so no row."""
    conds = {"bare": ["backend:none"], "compacted": ["compaction"],
             "OpenClaw native": ["compaction", "backend:openclaw-real"], "compacted + bm25": ["compaction", "backend:bm25"],
             "compacted + mine": ["compaction", "backend:mine"]}
    hit = {"bare": lambda i: False, "compacted": lambda i: None, "OpenClaw native": lambda i: i < 4,
           "compacted + bm25": lambda i: i >= 4, "compacted + mine": lambda i: True}
    samples = [cortex_sample(c, ctx, i, hit[c](i), 3 if hit[c](i) else 1, tokens=10.0 * (k + 1))
               for k, (c, ctx) in enumerate(conds.items()) for i in range(8)]
    backends = {b: describe(b) for b in ("none", "openclaw-real", "bm25", "mine")}
    return write_suite_run(path, "cortex-v1", samples, backends, llm=llm, judge=judge)


def test_cortex_v1_verdict_reads_labels_and_uses_hits_when_mocked(tmp_path):
    v = suite_verdict(cortex_run(tmp_path / "cortex-v1"))
    assert v["headline"]["metric"] == "hit" and not v["headline"]["mocked"]
    assert {"judge_score", "grounded_rate", "hallucination_rate"} <= set(v["mocked_metrics"])
    assert v["baseline"]["condition"] == "OpenClaw native" and v["baseline"]["backend"] == "openclaw-real"
    rows = v["backends"]
    assert set(rows) == {"none", "openclaw-real", "bm25", "mine"}  # compaction alone has no backend
    assert rows["mine"]["condition"] == "compacted + mine" and rows["mine"]["value"]["mean"] == 1.0
    assert rows["mine"]["vs_native"]["delta"] == pytest.approx(0.5)
    assert rows["mine"]["vs_native"]["source"] == "computed by the verdict"
    assert rows["bm25"]["vs_native"]["delta"] == pytest.approx(0.0) and rows["bm25"]["vs_native"]["word"] == SAME
    assert rows["none"]["vs_bm25"]["delta"] == pytest.approx(-0.5)
    assert rows["mine"]["tokens_per_turn"] == 50.0 and rows["none"]["tokens_per_turn"] == 10.0
    assert rows["mine"]["retrieve_ms"]["p50"] == 2.0


def test_cortex_v1_with_a_real_model_judges_by_the_judge_score(tmp_path):
    real = {"model": "qwen", "base_url": "http://x/v1", "offline_mock": False}
    d = cortex_run(tmp_path / "cortex-v1", llm=real, judge=real)
    v = suite_verdict(d)
    assert v["headline"]["metric"] == "judge_score" and v["headline"]["kind"] == "answer"
    assert v["mocked_metrics"] == [] and v["answers_by"] == "qwen"
    # judge 3 on a hit, 1 otherwise: mine 3.0, native 2.0
    assert v["backends"]["mine"]["vs_native"]["delta"] == pytest.approx(1.0)
    report = (d / "report.md").read_text()
    assert "(llm-mock)" not in report


def test_mock_figures_are_marked_in_the_suite_sections(tmp_path):
    d = cortex_run(tmp_path / "cortex-v1")
    report = (d / "report.md").read_text()
    assert "**Mean score (0-3)** (llm-mock)" in report and "measure the mock, not the memory" in report
    assert C.mock_tag({"llm": {"offline_mock": False}, "judge": {"offline_mock": True}}, "answer") == ""
    assert C.mock_tag({"llm": {"offline_mock": False}, "judge": {"offline_mock": True}}, "judge") == " (llm-mock)"
    assert C.mock_tag({"llm": {"offline_mock": True}, "judge": {"offline_mock": False}}, "answer") == " (llm-mock)"


def test_a_suite_dir_without_metrics_is_named(tmp_path):
    (tmp_path / "x").mkdir()
    with pytest.raises(VerdictError, match="run.json"):
        suite_verdict(tmp_path / "x")
    (tmp_path / "x" / "run.json").write_text(json.dumps({"suite": "madial"}))
    with pytest.raises(VerdictError, match="metrics.json"):
        suite_verdict(tmp_path / "x")


def test_backend_order_systems_first_controls_last():
    names = ["none", "full-context", "compacted", "bm25", "dense", "hybrid", "openclaw", "openclaw-2026-02",
             "openclaw-real", "openclaw-real[profile=sessions]", "cortex", "mine"]
    assert backend_order(names) == ["cortex", "mine", "bm25", "dense", "hybrid", "openclaw", "openclaw-2026-02",
                                    "openclaw-real", "openclaw-real[profile=sessions]", "none", "full-context",
                                    "compacted"]


def _row(delta, lo, hi, p, w, against="openclaw-real"):
    return {"against": against, "delta": delta, "ci": [lo, hi], "p": p, "word": w}


def test_a_cell_states_the_minimum_detectable_difference():
    from services.coordinator.verdict import word_text

    same = {"word": SAME, "mdd": 0.0851}
    assert word_text(same, "rate") == "could not detect a difference below 8.5 points"
    assert word_text({**same, "mdd": 12.4}, "tokens") == "could not detect a difference below 12 tokens"
    assert word_text({**same, "mdd": None}, "rate") == SAME  # no power statement possible: the plain words
    assert word_text({"word": BETTER, "mdd": 0.1}, "rate") == BETTER


def test_render_cell_exact():
    v = {"suite": "madial", "headline": {"unit": "rate"}, "baseline": {"condition": "openclaw-real"},
         "backends": {
             "mine": {"condition": "mine", "value": {"mean": 1.0}, "vs_native": _row(0.8, 0.5, 1.0, 0.0079, BETTER),
                      "vs_bm25": _row(0.5, 0.2, 0.8, 0.0625, SAME, "bm25"), "tokens_per_turn": 40.0,
                      "retrieve_ms": {"p50": 5.5, "p95": 9.55}},
             "openclaw-real": {"condition": "openclaw-real", "value": {"mean": 0.2}, "vs_native": None,
                               "vs_bm25": _row(-0.3, -0.6, 0.0, 0.25, SAME, "bm25"), "tokens_per_turn": 300.0,
                               "retrieve_ms": {"p50": 120.0, "p95": 300.0}}}}
    assert render_cell(v, "mine") == ("[better](#madial) +80.0 [+50.0, +100.0] p=0.008<br>vs BM25: [no detectable "
                                      "difference](#madial) +50.0 [+20.0, +80.0] p=0.062<br>40 tok · 5.5/9.6 ms")
    assert render_cell(v, "openclaw-real") == ("[baseline](#madial) 20.0%<br>vs BM25: [no detectable difference]"
                                               "(#madial) −30.0 [−60.0, +0.0] p=0.25<br>300 tok · 120/300 ms")
    assert render_cell(v, "absent") == "—"


def test_default_run_verdict_fits_one_screen():
    """Every default suite over every default backend (plus a skipped suite and a skipped backend): <= 40 lines."""
    backends = default_backends()
    row = {"condition": "x", "value": {"mean": 0.5}, "vs_native": _row(0.1, 0.0, 0.2, 0.2, SAME),
           "vs_bm25": _row(0.1, 0.0, 0.2, 0.2, SAME, "bm25"), "tokens_per_turn": 10.0,
           "retrieve_ms": {"p50": 1.0, "p95": 2.0}}
    suites = {s: {"suite": s, "headline": {"label": "R@5", "unit": "rate", "higher_is_better": True, "mocked": False},
                  "baseline": {"condition": "openclaw-real", "backend": "openclaw-real"}, "mocked_metrics": ["f1"],
                  "bm25": {"condition": "bm25", "backend": "bm25"},
                  "answers_by": "llm-mock", "statistics": {"units": 4, "unit": "conversation", "min_p": 0.125},
                  "backends": {b: dict(row, condition=b) for b in backends}} for s in DEFAULT_SUITES}
    summary = {b: {k: {BETTER: [], WORSE: [], SAME: list(DEFAULT_SUITES)} for k in ("vs_native", "vs_bm25")}
               for b in backends}
    md = render_markdown({"run_id": "r", "suites": suites, "backends": backends, "summary": summary,
                          "answers_by_mock": True, "left_out": {"nextjs-docs": "skipped: no npm"},
                          "skipped_backends": {"mem0-oss": "not installed"}})
    lines = md.rstrip("\n").split("\n")
    assert len(lines) <= 40, len(lines)
    assert lines[0].startswith("# Verdict") and sum(1 for x in lines if x.startswith("| **")) == len(backends)
    assert "Not in the verdict: nextjs-docs" in md and "Backend mem0-oss skipped" in md
    assert "measure the mock, not the memory" in md


def two_suite_run(tmp_path):
    out = tmp_path / "run"
    madial_run(out / "madial", HITS)
    cortex_run(out / "cortex-v1")
    return out, bench_all_dir(out, {"cortex-v1": "succeeded", "madial": "succeeded", "locomo": "skipped"},
                              ["none", "bm25", "mine", "openclaw-real"])


def test_a_single_suite_report_opens_with_its_verdict(tmp_path):
    d = madial_run(tmp_path / "m", HITS)
    lines = (d / "report.md").read_text().split("\n")
    assert lines[0] == "# memrig report: madial (m)" and lines[2] == "## Verdict"
    row = next(x for x in lines if x.startswith("| **mine** |"))
    assert lines.index(row) < 14 and "[better](#madial) +80.0 [" in row
    # the credit rule and its agreement with the blind labels, next to the headline
    assert any(x.startswith("> **What was shown:**") and "credit-agreement" in x for x in lines[:12])
    assert "| **openclaw-real** | " in "\n".join(lines[:16]) and "[baseline](#madial) 20.0%" in "\n".join(lines[:16])
    assert lines.index(row) < next(i for i, x in enumerate(lines) if x.startswith("- **Answer model:**"))
    v = json.loads((d / "verdict.json").read_text())
    assert v["summary"]["mine"]["vs_native"][BETTER] == ["madial"] and v["summary"]["mine"]["vs_bm25"][SAME] == ["madial"]
    # without native and BM25 in the run, the page says what to add instead of comparing with nothing
    d2 = madial_run(tmp_path / "m2", {"mine": set(range(10)), "other": set()})
    md2 = (d2 / "report.md").read_text()
    assert ("- madial: no OpenClaw native (`openclaw-real` or the port `openclaw`) and no `bm25` in this run: its "
            "column has nothing to compare against there (add them to the run's backends).") in md2
    d3 = madial_run(tmp_path / "m3", {"mine": set(range(10)), "bm25": set()})
    assert "- madial: no OpenClaw native (`openclaw-real` or the port `openclaw`) in this run" in \
        (d3 / "report.md").read_text() and "(add it to the run's backends)" in (d3 / "report.md").read_text()


def test_report_opens_with_the_verdict_and_has_each_config_once(tmp_path):
    out, index = two_suite_run(tmp_path)
    write_reports(out, index)
    md = (out / "report.md").read_text()
    lines = md.split("\n")
    # one verdict: the suites' own (in their report.md) are not repeated in their sections, which keep the rest
    # of their header (the models, the seed, the statistics)
    assert sum(1 for x in lines if x.lstrip("#").strip() == "Verdict" or x.startswith("# Verdict")) == 1
    assert "## Verdict" in (out / "madial" / "report.md").read_text()
    assert md.count("- **Answer model:** `memrig-llm-mock`") == 2 and md.count("- **Seed:** 0") == 2
    assert "end of verdict" not in md
    head = "\n".join(lines[:40])
    assert lines[0] == "# Verdict (run)"
    assert "| **mine** |" in head and "[cortex-v1](#cortex-v1)" in head and "[better](#madial)" in head
    assert "Not in the verdict: locomo: skipped: data not found." in head
    order = [x for x in lines if x.startswith("# ")]
    assert order == ["# Verdict (run)", "# The run (run)", "# cortex-v1", "# madial",
                     "# Appendix: backend configuration"]
    # the suites' own configuration sections are gone; each backend's config is printed once for the run
    assert "Backend configuration" not in md.replace("# Appendix: backend configuration", "")
    assert md.count("**mine**: mine 0.1.0 (every suite)") == 1 and md.count("**bm25**: bm25 0.1.0") == 1
    v = json.loads((out / "verdict.json").read_text())
    assert v["summary"]["mine"]["vs_native"][BETTER] == ["madial"] and v["left_out"]["locomo"].startswith("skipped")
    page = (out / "report.html").read_text()
    body = page.split("<body>", 1)[1]
    assert body.startswith('<h1 id="verdict-run">Verdict (run)</h1>')
    assert '<a class="better" href="#madial">better</a>' in page and '<h1 id="madial">madial</h1>' in page
    assert '<table class="verdict">' in page and page.count('<table class="verdict">') == 1


def test_summary_counts_words_per_backend(tmp_path):
    out, index = two_suite_run(tmp_path)
    write_reports(out, index)
    v = json.loads((out / "verdict.json").read_text())
    # mine: better than native on madial (p 0.008), cortex-v1's 8 probes give +0.5 with 4 differing: exact p 0.125
    assert v["summary"]["mine"]["vs_native"] == {BETTER: ["madial"], WORSE: [], SAME: ["cortex-v1"]}
    md = (out / "report.md").read_text()
    assert "| **mine** | vs native: 1 better (madial), 0 worse<br>vs BM25: 0 better, 0 worse |" in md


def test_differing_configs_are_listed_per_suite(tmp_path):
    out = tmp_path / "run"
    madial_run(out / "madial", HITS, configs={"mine": {"top_k": 5}})
    madial_run(out / "madial2", HITS, configs={"mine": {"top_k": 9}})
    index = bench_all_dir(out, {"madial": "succeeded", "madial2": "succeeded"}, ["mine"])
    write_reports(out, index)
    md = (out / "report.md").read_text()
    assert "**mine**: mine 0.1.0 (madial)" in md and "**mine**: mine 0.1.0 (madial2)" in md
    assert "**bm25**: bm25 0.1.0 (every suite)" in md


@pytest.mark.slow  # takes seconds (plots, a real library's model, or 1,000 rounds)
def test_rerender_rescores_and_names_a_bad_index(tmp_path):
    out, index = two_suite_run(tmp_path)
    (out / "madial" / "metrics.json").unlink()
    rerender(out)  # re-scores the suite from its samples, then writes the reports
    assert (out / "madial" / "metrics.json").exists() and (out / "verdict.json").exists()
    (out / "report.json").write_text("{")
    with pytest.raises(ValueError, match="report.json"):
        rerender(out)
    with pytest.raises(FileNotFoundError, match="report.json"):
        rerender(tmp_path / "nothing")


@pytest.mark.slow  # takes seconds (plots)
def test_rerender_scores_a_suite_whose_scoring_failed_after_its_probes_ran(tmp_path):
    """bench-all recorded madial as failed (its scoring raised, its samples are complete): `memrig report` scores it
    from its samples and puts it back in the verdict, keeping the failure it replaces."""
    out, index = two_suite_run(tmp_path)
    index["suites"]["madial"] = {"state": "failed", "reason": "AttributeError: x", "traceback": "tb", "duration_s": 1.0}
    (out / "report.json").write_text(json.dumps(index))
    (out / "madial" / "metrics.json").unlink()
    rerender(out)
    after = json.loads((out / "report.json").read_text())["suites"]["madial"]
    assert after["state"] == "succeeded" and after["dir"] == "madial"
    assert after["rescored_after"] == {"reason": "AttributeError: x", "traceback": "tb"}
    assert "madial" in json.loads((out / "verdict.json").read_text())["suites"]


def test_strip_backend_config_keeps_what_follows():
    md = "## A\nx\n## Backend configuration\n\n**b**\n```json\n{}\n```\n## Failures\ny\n"
    assert strip_backend_config(md) == "## A\nx\n## Failures\ny\n"


def test_without_a_native_backend_the_cell_says_so(tmp_path):
    d = madial_run(tmp_path / "madial", {"bm25": set(range(5)), "mine": set(range(10))})
    v = suite_verdict(d)
    assert v["baseline"]["condition"] is None and v["backends"]["mine"]["vs_native"] is None
    assert render_cell(v, "mine").startswith("[no native baseline](#madial)<br>vs BM25: [could not detect a difference below 52.4 points]")


def test_the_run_verdict_reuses_each_suites_saved_verdict_until_its_sources_change(tmp_path, monkeypatch):
    import os

    from services.coordinator import verdict as V

    out, index = two_suite_run(tmp_path)
    fresh = V.build_verdict(out, index)
    monkeypatch.setattr(V, "suite_verdict", lambda d: (_ for _ in ()).throw(V.VerdictError(d.name, "recomputed", text=f"recomputed {d.name}")))
    assert V.build_verdict(out, index)["suites"] == fresh["suites"]  # finalize's verdict.json, not recomputed
    samples = out / "madial" / "samples.jsonl"
    later = (out / "madial" / "verdict.json").stat().st_mtime_ns + 10**9
    os.utime(samples, ns=(later, later))  # samples newer than the saved verdict: it is stale
    v = V.build_verdict(out, index)
    assert v["left_out"] == {"madial": "recomputed madial", "locomo": "skipped: data not found"}
    assert list(v["suites"]) == ["cortex-v1"]


def test_probes_jsonl_recomputes_every_verdict_cell(madial_dir):
    """probes.jsonl (runner.write_probe_values) holds the per-probe headline values the verdict used: each backend's
    mean and each paired delta against the baseline come back from it alone."""
    v = suite_verdict(madial_dir)
    metric = v["headline"]["metric"]
    rows = [json.loads(x) for x in (madial_dir / "probes.jsonl").read_text().splitlines()]
    by = {}
    for r in rows:
        by.setdefault(r["backend"], {})[r["probe_id"]] = r["values"][metric]
    assert {b: sum(x.values()) / len(x) for b, x in by.items()} == {"openclaw-real": 0.2, "bm25": 0.5, "mine": 1.0}
    nat = v["backends"]["mine"]["vs_native"]
    paired = [by["mine"][p] - by["openclaw-real"][p] for p in by["mine"]]
    assert sum(paired) / len(paired) == pytest.approx(nat["delta"]) == pytest.approx(0.8)
    assert all(set(r) == {"condition", "backend", "probe_id", "cluster", "values"} for r in rows)


def test_a_backend_searched_before_it_settled_is_named_in_the_verdict(tmp_path):
    """run.json's ingest records say where a backend's Settle ended with items pending: the verdict counts them per
    backend (a failed ingest is not counted) and its page says so, since its figures there count memory not yet
    indexed (the whole-split cortex run on BEAM, docs/results/beam.md)."""
    d = madial_run(tmp_path / "m", HITS)
    run = json.loads((d / "run.json").read_text())
    run["ingest"] = {"mine": {"namespaces": {
        "a": {"settled": False, "items_pending": 7}, "b": {"settled": True, "items_pending": 0},
        "c": {"settled": False, "items_pending": 5}, "d": {"settled": False, "items_pending": 9, "error": "x"}}},
        "bm25": {"namespaces": {"a": {"settled": True, "items_pending": 0}}}}
    (d / "run.json").write_text(json.dumps(run))
    v = suite_verdict(d)
    assert v["backends"]["mine"]["unsettled"] == {"namespaces": 2, "of": 3, "items_pending": 12}
    assert v["backends"]["bm25"]["unsettled"] is None and v["backends"]["openclaw-real"]["unsettled"] is None
    from services.coordinator.verdict import assemble

    md = render_markdown(assemble("r", {"madial": v}))
    assert ("- madial: **mine was searched before it had settled** in 2 of 3 namespaces (12 items still pending when "
            "its Settle ended)") in md
    assert "bm25 was searched before" not in md
