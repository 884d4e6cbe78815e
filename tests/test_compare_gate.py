"""`memrig compare` as a CI gate (issue 37): whatever it cannot compare is a non-zero exit naming the file, suite or
backend, never a pass and never a traceback.

Exit status 2 = bad input (missing, unreadable or malformed run files; unknown suite; no suite in common); 3 = the
comparison is incomplete (a backend or suite with ok samples in one run and failing or missing in the other,
errored probes, torn lines whose sample is lost). Each case below passed (exit 0) or raised a traceback before.
"""

from __future__ import annotations

import json

import pytest

from services.cli import main as cli_main
from services.coordinator.compare import CompareError, compare_runs, render_markdown
from services.coordinator.results import RunDir
from tests.run_fixtures import (
    bench_all_dir,
    cortex_sample,
    describe,
    madial_run,
    madial_sample,
    write_suite_run,
)

HITS = {"bm25": set(range(5)), "mine": set(range(10))}
CORTEX_CONDS = {"OpenClaw native": ["compaction", "backend:openclaw-real"],
                "compacted + cortex": ["compaction", "backend:cortex"]}


def run_cli(*args) -> int:
    with pytest.raises(SystemExit) as e:
        cli_main(list(args))
    return int(e.value.code)


def cortex_run(path, cortex_error: bool = False):
    """Cortex V1, 8 probes, two conditions; with cortex_error every cortex sample has status error, as a run
    whose cortex backend went down leaves them."""
    samples = []
    for cond, ctx in CORTEX_CONDS.items():
        for i in range(8):
            s = cortex_sample(cond, ctx, i, True, 3)
            if cortex_error and cond.endswith("cortex"):
                s = {k: v for k, v in s.items() if k not in ("retrievals", "answer", "judge")}
                s.update(status="error", error="backend cortex unavailable: connection refused")
            samples.append(s)
    return write_suite_run(path, "cortex-v1", samples, {b: describe(b) for b in ("openclaw-real", "cortex")})


def test_a_backend_whose_every_sample_errored_in_b_fails_the_gate(tmp_path, capsys):
    a, b = cortex_run(tmp_path / "a"), cortex_run(tmp_path / "b", cortex_error=True)
    res = compare_runs(a, b, fail_on=["headline"])
    [p] = res["problems"]
    assert p.startswith("cortex-v1: cortex (compacted + cortex): 8 ok sample(s) in run A, every one of its 8 "
                        "sample(s) in run B errored (e.g. 'backend cortex unavailable: connection refused')")
    assert res["exit_status"] == 3 and res["regressions"] == []
    md = render_markdown(res)
    assert "**Incomplete**: 1 problem(s) make this comparison partial: exit status 3." in md
    assert run_cli("compare", str(a), str(b), "--fail-on", "headline") == 3
    assert "every one of its 8 sample(s) in run B errored" in capsys.readouterr().out
    # limited to that backend: the same problem, not "in neither run"
    assert run_cli("compare", str(a), str(b), "--fail-on", "headline", "--backends", "cortex") == 3
    out = capsys.readouterr()
    assert "in neither run" not in out.err and "cortex (compacted + cortex)" in out.out
    # the other backend alone is complete and unchanged
    assert run_cli("compare", str(a), str(b), "--fail-on", "headline", "--backends", "openclaw-real") == 0
    capsys.readouterr()
    # failing in the reference run is as incomplete: nothing to compare B's cortex with
    assert compare_runs(b, a)["problems"][0].startswith(
        "cortex-v1: cortex (compacted + cortex): 8 ok sample(s) in run B, every one of its 8 sample(s) in run A errored")


def test_a_backend_missing_from_b_fails_and_one_new_in_b_does_not(tmp_path):
    a = madial_run(tmp_path / "a", HITS)
    b = madial_run(tmp_path / "b", {"bm25": HITS["bm25"]})
    res = compare_runs(a, b)
    assert res["problems"] == ["madial: mine: 10 ok sample(s) in run A, none in run B"] and res["exit_status"] == 3
    assert compare_runs(b, a)["exit_status"] == 0  # mine added in B: listed as a condition only in B
    assert "madial: conditions only in run B: mine." in render_markdown(compare_runs(b, a))


def test_probes_that_errored_in_either_run_are_named(tmp_path):
    a = madial_run(tmp_path / "a", HITS)
    b = madial_run(tmp_path / "b", HITS)
    rd = RunDir(b)
    for i in (2, 7):  # appended later: the latest line per key wins, as on a rerun
        rd.append_sample({**madial_sample("mine", i, True), "status": "error", "error": "DEADLINE_EXCEEDED"})
    res = compare_runs(a, b)
    assert res["problems"] == ["madial: mine: 2 of 10 probe(s) errored in run B (e.g. 'DEADLINE_EXCEEDED'); a gate "
                               "cannot pass probes it did not see"]
    assert res["exit_status"] == 3


def test_disjoint_suites_and_unknown_suites_are_errors(tmp_path, capsys):
    a, b = cortex_run(tmp_path / "a"), madial_run(tmp_path / "b", HITS)
    with pytest.raises(CompareError, match=r"no suite in common: run A \(.*\) has cortex-v1; run B \(.*\) has madial"):
        compare_runs(a, b)
    assert run_cli("compare", str(a), str(b), "--fail-on", "headline") == 2
    assert "no suite in common" in capsys.readouterr().err
    run = json.loads((b / "run.json").read_text())
    (b / "run.json").write_text(json.dumps({**run, "suite": "nosuch"}))
    with pytest.raises(CompareError, match=r"run.json: suite: unknown suite 'nosuch'; known: .*madial"):
        compare_runs(a, b)
    assert run_cli("compare", str(a), str(b)) == 2


def test_missing_samples_are_an_error_naming_the_file(tmp_path, capsys):
    a, b = madial_run(tmp_path / "a", HITS), madial_run(tmp_path / "b", HITS)
    (b / "samples.jsonl").unlink()
    with pytest.raises(CompareError, match=r"b/samples.jsonl: missing \(run B's madial samples"):
        compare_runs(a, b)
    assert run_cli("compare", str(a), str(b), "--fail-on", "headline") == 2
    assert "samples.jsonl: missing" in capsys.readouterr().err


def test_torn_lines_are_counted_and_lost_samples_fail(tmp_path, capsys):
    a, b = madial_run(tmp_path / "a", HITS), madial_run(tmp_path / "b", HITS)
    lines = (b / "samples.jsonl").read_text().splitlines()
    assert len(lines) == 20
    torn = [ln[: len(ln) // 2] if i % 2 else ln for i, ln in enumerate(lines)]  # every second line cut in half
    (b / "samples.jsonl").write_text("\n".join(torn) + "\n")
    assert len(RunDir(b).read_samples().torn) == 10 and len(RunDir(b).read_samples().lost()) == 10
    res = compare_runs(a, b, fail_on=["headline"])
    assert res["suites"]["madial"]["torn_lines"] == {"a": 0, "b": 10}
    [p] = [x for x in res["problems"] if "torn" in x]
    assert p == (f"madial: {b / 'samples.jsonl'}: 10 torn line(s) whose sample no other line carries (line 2, 4, 6, "
                 "8, 10, 12, 14, 16, 18, 20) in run B: those samples are lost")
    assert res["exit_status"] == 3
    md = render_markdown(res)  # 5 of 10 probes left: unpaired, and the report says why
    assert "another seed or data sample" not in md
    assert "madial: the runs asked different probes (samples lost to torn lines) for bm25, mine" in md
    assert run_cli("compare", str(a), str(b), "--fail-on", "headline") == 3
    assert "10 torn line(s)" in capsys.readouterr().out


def test_a_torn_line_a_resume_rewrote_is_counted_but_harmless(tmp_path):
    a, b = madial_run(tmp_path / "a", HITS), madial_run(tmp_path / "b", HITS)
    lines = (b / "samples.jsonl").read_text().splitlines()
    (b / "samples.jsonl").write_text("\n".join(lines[:-1]) + "\n" + lines[-1][:30])  # crash mid-write of the last
    RunDir(b).append_sample(json.loads(lines[-1]))  # the resumed run writes it again, on a fresh line
    log = RunDir(b).read_samples()
    assert log.torn == [(20, "mine|d9")] and log.lost() == [] and len(log.samples) == 20
    res = compare_runs(a, b, fail_on=["headline"])
    assert res["problems"] == [] and res["exit_status"] == 0
    assert "run B's samples.jsonl has 1 torn line(s)" in render_markdown(res)


@pytest.mark.parametrize("body,needle", [("[1, 2]", "expected a JSON object, got list"),
                                         ("{", "not valid JSON"), ('"x"', "expected a JSON object, got str"),
                                         ('{"suite": 3}', "suite: missing")])
def test_malformed_run_json_is_named_not_a_traceback(tmp_path, capsys, body, needle):
    a, b = madial_run(tmp_path / "a", HITS), madial_run(tmp_path / "b", HITS)
    (b / "run.json").write_text(body)
    with pytest.raises(CompareError, match=f"b/run.json: {needle}"):
        compare_runs(a, b)
    assert run_cli("compare", str(a), str(b), "--fail-on", "headline") == 2
    err = capsys.readouterr().err
    assert "run.json" in err and "Traceback" not in err


def test_malformed_report_json_and_unreadable_samples_are_named(tmp_path):
    a = tmp_path / "A"
    madial_run(a / "madial", HITS)
    (a / "report.json").write_text("[]")
    with pytest.raises(CompareError, match=r"A/report.json: expected a JSON object, got list"):
        compare_runs(a, a)
    (a / "report.json").write_text('{"suites": {"madial": {"dir": "madial"}}}')
    b = madial_run(tmp_path / "b", HITS)
    (b / "samples.jsonl").write_text('{"key": "mine|d0", "condition": 3, "status": "ok"}\n')
    with pytest.raises(CompareError, match=r"b: not a readable madial run \("):
        compare_runs(a, b)


def test_a_suite_finished_in_a_and_failed_in_b_fails(tmp_path):
    a, b = tmp_path / "A", tmp_path / "B"
    for d in (a, b):
        madial_run(d / "madial", HITS)
    cortex_run(a / "cortex-v1")
    bench_all_dir(a, {"madial": "succeeded", "cortex-v1": "succeeded"}, ["mine"])
    idx = bench_all_dir(b, {"madial": "succeeded"}, ["mine"])
    idx["suites"]["cortex-v1"] = {"state": "failed", "reason": "RuntimeError: cortex-mock exited"}
    RunDir(b).write_json("report.json", idx)
    res = compare_runs(a, b, fail_on=["headline"])
    assert res["problems"] == [f"cortex-v1: in run A ({a / 'cortex-v1'}), not finished in run B "
                               "(failed: RuntimeError: cortex-mock exited)"]
    assert res["exit_status"] == 3
    # the reference failed it: nothing to compare it with (a suite merely absent from A is listed, not a failure:
    # tests/test_compare.py::test_suites_only_in_one_run_are_listed)
    assert compare_runs(b, a)["problems"] == [f"cortex-v1: in run B ({a / 'cortex-v1'}), not finished in run A "
                                              "(failed: RuntimeError: cortex-mock exited): nothing to compare it with"]
