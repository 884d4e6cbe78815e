"""`make mutation`'s bookkeeping (tests/mutation/run.py), on crafted cosmic-ray dump rows: the kill rate per
module, timeouts counted as killed, equivalent mutants left out with their reason, the plan's paths checked,
and the cosmic-ray config it writes. Running cosmic-ray itself is `make mutation`'s job, not a test's."""

from __future__ import annotations

import re
import tomllib

import pytest

from tests.mutation.run import (
    ModuleResult,
    annotation_spans,
    cosmic_ray_config,
    equivalent_keys,
    in_spans,
    load_plan,
    render,
    select,
    tally,
)

DIFF_EQ = "--- a\n+++ b\n@@ -1 +1 @@\n-    return x * 1.0\n+    return x / 1.0\n"
DIFF_SURV = "--- a\n+++ b\n@@ -5 +5 @@\n-    if n < 3:\n+    if n <= 3:\n"


def _row(job: int, op: str, outcome: str | None, diff: str = "", output: str = "") -> list:
    item = {"job_id": str(job), "mutations": [{"module_path": "m.py", "operator_name": op, "occurrence": job,
                                                "start_pos": [10 + job, 4], "end_pos": [10 + job, 9],
                                                "definition_name": "f"}]}
    res = None if outcome is None else {"worker_outcome": "normal", "test_outcome": outcome, "diff": diff,
                                        "output": output}
    return [item, res]


def test_tally_kill_rate_timeouts_equivalents_and_pending():
    eq = equivalent_keys([{"module": "m.py", "operator": "core/ReplaceBinaryOperator_Mul_Div",
                           "changed": "return x * 1.0\nreturn x / 1.0", "reason": "multiplying or dividing by 1"}])
    rows = [_row(1, "core/NumberReplacer", "killed"),
            _row(2, "core/NumberReplacer", "killed", output="timeout"),
            _row(3, "core/ReplaceBinaryOperator_Mul_Div", "survived", DIFF_EQ),
            _row(4, "core/ReplaceComparisonOperator_Lt_LtE", "survived", DIFF_SURV),
            _row(5, "core/NumberReplacer", "incompetent"),
            _row(6, "core/NumberReplacer", None)]
    r = ModuleResult("m.py", ["tests/test_x.py"])
    tally(r, rows, eq)
    assert (r.mutants, r.killed, r.timeouts, r.survived, r.equivalent, r.incompetent, r.pending) == (6, 2, 1, 1, 1, 1, 1)
    assert r.kill_rate == pytest.approx(2 / 3)  # killed / (killed + survived)
    assert [s["line"] for s in r.survivors] == [14] and r.equivalents[0]["reason"] == "multiplying or dividing by 1"
    md = render([r], 0.9, 120.0)
    assert "| m.py | 6 | 2 | 1 | 1 | 1 | 1 | 0 | 0 | 66.7% (below target) |" in md
    assert "+    if n <= 3:" in md and "Total 2.0 min" in md


def test_no_scored_mutant_has_no_rate_and_errors_are_not_measured():
    assert ModuleResult("m.py", []).kill_rate is None
    r = ModuleResult("m.py", ["t"], error="baseline failed", baseline_ok=False)
    assert "| m.py | 0 | 0 | 0 | 0 | 0 | 0 | 0 | 0 | not measured |" in render([r], 0.9, 1.0)


def test_annotation_spans_only_under_pep_563():
    src = ("from __future__ import annotations\n"
           "def f(x: int | None, y=1) -> float | None:\n"
           "    z: dict[str, int | None] = {}\n"
           "    return x | y\n")
    spans = annotation_spans(src)
    assert in_spans((2, 11), spans)  # the '|' in x's annotation
    assert in_spans((2, 35), spans)  # the return annotation's '|'
    assert in_spans((3, 19), spans)  # the local variable's annotation
    assert not in_spans((4, 13), spans)  # `x | y` is code, evaluated
    assert annotation_spans(src.replace("from __future__ import annotations\n", "")) == []


def test_operator_filtered_mutants_are_skipped_not_scored():
    r = ModuleResult("m.py", ["t"])
    item = _row(1, "core/ReplaceBinaryOperator_Add_BitOr", None)[0]
    tally(r, [[item, {"worker_outcome": "skipped", "test_outcome": None, "output": "Filtered operator"}],
              [item, {"worker_outcome": "skipped", "test_outcome": None, "output": "annotation (not evaluated)"}],
              _row(2, "core/NumberReplacer", "KILLED")], {})
    assert (r.mutants, r.skipped, r.annotations, r.killed, r.kill_rate) == (3, 1, 1, 1, 1.0)


def test_plan_lists_existing_modules_and_tests_and_selects_by_substring():
    defaults, modules, _ = load_plan()
    paths = [m["path"] for m in modules]
    for needed in ("services/coordinator/stats.py", "services/cortex_mock/search.py", "services/fault_proxy/engine.py",
                   "loadtests/open_loop.py", "collectors/resources.py", "services/drills/catalog.py"):
        assert needed in paths
    assert defaults["target"] == 0.9
    assert [m["path"] for m in select(modules, "open_loop")] == ["loadtests/open_loop.py"]
    with pytest.raises(SystemExit):
        select(modules, "no/such/module.py")


def test_cosmic_ray_config_round_trips():
    cfg = tomllib.loads(cosmic_ray_config("collectors/resources.py", 'python -m pytest -m "not slow" t.py', 60,
                                          [r"core/ReplaceBinaryOperator_\w+_(Pow|Mod)$"]))
    cr = cfg["cosmic-ray"]
    assert cr["module-path"] == "collectors/resources.py" and cr["timeout"] == 60.0
    assert cr["test-command"] == 'python -m pytest -m "not slow" t.py' and cr["distributor"]["name"] == "local"
    assert cr["filters"]["operators-filter"]["exclude-operators"] == [r"core/ReplaceBinaryOperator_\w+_(Pow|Mod)$"]
    defaults = load_plan()[0]
    rx = re.compile("|".join(defaults["exclude-operators"]))
    assert rx.match("core/ReplaceBinaryOperator_Add_BitOr") and rx.match("core/ReplaceBinaryOperator_Mul_Pow")
    assert not rx.match("core/ReplaceBinaryOperator_Add_Sub") and not rx.match("core/NumberReplacer")


def test_plan_equivalents_match_cosmic_ray_diffs():
    """The latency.py mutant the first run reported (diff as cosmic-ray prints it) is recognised as equivalent."""
    diff = ("--- mutation diff ---\n--- a/services/coordinator/metrics/latency.py\n"
            "+++ b/services/coordinator/metrics/latency.py\n@@ -11,7 +11,7 @@\n \n"
            " def percentile(values: Sequence[float], q: float) -> float | None:\n"
            "-    if len(values) == 0:\n+    if len(values) <= 0:\n         return None\n")
    row = _row(1, "core/ReplaceComparisonOperator_Eq_LtE", "survived", diff)
    r = ModuleResult("services/coordinator/metrics/latency.py", ["t"])
    tally(r, [row], equivalent_keys(load_plan()[2]))
    assert (r.equivalent, r.survived) == (1, 0) and "never negative" in r.equivalents[0]["reason"]


def test_rerun_survivors_only_for_the_same_complete_source():
    from tests.mutation.run import rerun_set

    prev = ModuleResult("m.py", ["t"], mutants=10, killed=8, survived=1, equivalent=1, source_sha256="abc",
                        commit="c1", survivors=[{"operator": "core/NumberReplacer", "occurrence": 3}],
                        equivalents=[{"operator": "core/ReplaceComparisonOperator_Lt_LtE", "occurrence": 0}])
    assert rerun_set(prev, "abc") == {("core/NumberReplacer", 3), ("core/ReplaceComparisonOperator_Lt_LtE", 0)}
    assert rerun_set(prev, "def") is None  # the module changed: its mutants are not the same
    assert rerun_set(None, "abc") is None
    for broken in ({"pending": 1}, {"incompetent": 1}, {"error": "baseline failed"}, {"mutants": 0}):
        assert rerun_set(ModuleResult(**{**prev.__dict__, **broken}), "abc") is None


def test_carried_mutants_count_as_killed_and_are_reported():
    from tests.mutation.run import CARRIED

    rows = [_row(1, "core/NumberReplacer", "killed"), _row(2, "core/NumberReplacer", "survived", DIFF_SURV)]
    rows.append([rows[0][0] | {"job_id": "3"}, {"worker_outcome": "skipped", "output": CARRIED}])
    r = ModuleResult("m.py", ["tests/test_x.py"], carried_from="c1")
    tally(r, rows, {})
    assert (r.mutants, r.killed, r.carried, r.survived, r.skipped) == (3, 2, 1, 1, 0)
    assert "| 1 from c1 |" in render([r], 0.9, 60.0)


def test_merge_reports_later_files_win_and_missing_modules_fail(tmp_path):
    import json
    from dataclasses import asdict

    from tests.mutation.run import merge_reports

    def report(name, *rows):
        f = tmp_path / name
        f.write_text(json.dumps({"seconds": 60.0, "modules": [asdict(r) for r in rows]}))
        return f

    a = report("a.json", ModuleResult("m1.py", ["t"], mutants=10, killed=5, survived=5),
               ModuleResult("m2.py", ["t"], mutants=4, killed=4))
    b = report("b.json", ModuleResult("m1.py", ["t"], mutants=10, killed=9, survived=1))
    out = tmp_path / "out"
    assert merge_reports([a, b], out, 0.9, ["m2.py", "m1.py"]) == 0  # m1 90% (b wins), m2 100%
    got = json.loads((out / "report.json").read_text())
    assert [(m["path"], m["kill_rate"]) for m in got["modules"]] == [("m2.py", 1.0), ("m1.py", 0.9)]
    assert "Total 2.0 min" in (out / "report.md").read_text()
    assert merge_reports([b, a], out, 0.9, ["m2.py", "m1.py"]) == 1  # a wins: m1 at 50%
    assert merge_reports([b], out, 0.9, ["m2.py", "m1.py"]) == 1  # m2 not measured


def test_a_rate_just_below_the_target_is_not_rounded_up_to_it():
    from tests.mutation.run import format_rate

    assert format_rate(448 / 498, 0.9) == "89.96% (below target)"  # 0.8996 would print as 90.0%
    assert format_rate(0.9, 0.9) == "90.0%"
    assert format_rate(0.943, 0.9) == "94.3%"
    assert format_rate(0.721, 0.9) == "72.1% (below target)"
