"""`memrig report OUT --merge A --merge B`: one suite's runs of other backends, measured apart, reported together.
The MADial runs are tests/test_verdict.py's (native finds probes 0-1, bm25 0-4, mine all ten): split into two
runs at two commits, the merge must give the verdict the single run gives (mine - native +0.8, p = 2/2^8), and
say which commit each backend comes from; runs that were not made the same way are refused, naming the field."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from services.coordinator.merge import MergeError, merge_runs
from services.coordinator.verdict import BETTER, suite_verdict
from tests.run_fixtures import madial_run

HITS = {"openclaw-real": {0, 1}, "bm25": set(range(5)), "mine": set(range(10))}


def _split(tmp_path, **b_kw):
    a = madial_run(tmp_path / "a", {k: HITS[k] for k in ("openclaw-real", "bm25")}, git_sha="1111111",
                   extra={"ingest": {"bm25": {"namespaces": {"archive": {"settled": True, "messages": 5}}}},
                          "duration_s": 100.0})
    b = madial_run(tmp_path / "b", {"mine": HITS["mine"]}, git_sha=b_kw.pop("git_sha", "2222222"),
                   extra={"duration_s": 20.0, **b_kw.pop("extra", {})}, **b_kw)
    return a, b


def test_the_merge_gives_the_verdict_of_one_run_and_names_each_commit(tmp_path):
    a, b = _split(tmp_path)
    whole = suite_verdict(madial_run(tmp_path / "whole", HITS))
    out = merge_runs([a, b], tmp_path / "merged")
    v = suite_verdict(out)
    for backend in HITS:
        assert v["backends"][backend]["value"] == whole["backends"][backend]["value"]
    nat = v["backends"]["mine"]["vs_native"]
    assert nat["delta"] == pytest.approx(0.8) and nat["p"] == pytest.approx(2 / 256, abs=0.005)
    assert nat["word"] == BETTER and nat["p"] == whole["backends"]["mine"]["vs_native"]["p"]
    run = json.loads((out / "run.json").read_text())
    assert run["git_sha"] == "1111111 (openclaw-real, bm25); 2222222 (mine)"
    assert [(m["dir"], m["git_sha"], m["backends"]) for m in run["merged_from"]] == [
        (str(a), "1111111", ["openclaw-real", "bm25"]), (str(b), "2222222", ["mine"])]
    assert run["ingest"] == {"bm25": {"namespaces": {"archive": {"settled": True, "messages": 5}}}}
    assert run["duration_s"] == 120.0 and run["duration_all_s"] == 120.0 and run["run_id"] == "merged"
    lines = (out / "samples.jsonl").read_text().splitlines()
    assert len(lines) == 30  # ten probes x three backends, each once
    md = (out / "report.md").read_text()
    assert "`1111111 (openclaw-real, bm25); 2222222 (mine)`" in md


@pytest.mark.parametrize("field, change", [
    ("seed", {"seed": 1}),
    ("options", {"extra": {"options": {"top_k": 5}}}),
    ("embedder", {"extra": {"embedder": "wordllama"}}),
    ("llm", {"llm": {"model": "qwen", "base_url": "http://127.0.0.1:1/v1", "offline_mock": False}}),
])
def test_runs_made_differently_are_refused_naming_the_field(tmp_path, field, change):
    a, b = _split(tmp_path, **change)
    with pytest.raises(MergeError, match=rf"b/run.json: {field}: "):
        merge_runs([a, b], tmp_path / "merged")
    assert not (tmp_path / "merged").exists()


def test_a_backend_or_a_sample_in_two_runs_is_refused(tmp_path):
    a, _ = _split(tmp_path)
    again = madial_run(tmp_path / "again", {"bm25": HITS["bm25"]}, extra={"duration_s": 5.0})
    with pytest.raises(MergeError, match="backends: bm25: measured in both"):
        merge_runs([a, again], tmp_path / "m1")
    with pytest.raises(MergeError, match="at least two"):
        merge_runs([a], tmp_path / "m2")
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "x").write_text("")
    with pytest.raises(MergeError, match="not an empty directory"):
        merge_runs([a, again], tmp_path / "full")
    with pytest.raises(MergeError, match="not a suite run directory"):
        merge_runs([a, tmp_path / "nowhere"], tmp_path / "m3")


def test_the_time_over_every_sitting_is_summed_when_every_run_knows_it(tmp_path):
    # a: one sitting of 100 s; b: resumed, sittings of 30 and 50 s before its last 20 s
    a, b = _split(tmp_path, extra={"duration_s": 20.0, "sittings_s": [30.0, 50.0], "duration_all_s": 100.0})
    run = json.loads((merge_runs([a, b], tmp_path / "m1") / "run.json").read_text())
    assert [m["duration_all_s"] for m in run["merged_from"]] == [100.0, 100.0]
    assert run["duration_s"] == 120.0 and run["duration_all_s"] == 200.0 and "sittings_s" not in run
    # a sitting killed without a word: that run's total, and so the merge's, unknown
    c = madial_run(tmp_path / "c", {"mine": HITS["mine"]}, extra={"duration_s": 20.0, "sittings_s": [None]})
    run = json.loads((merge_runs([a, c], tmp_path / "m2") / "run.json").read_text())
    assert run["merged_from"][1]["duration_all_s"] is None and "duration_all_s" not in run
    # resumed before run.json kept its sittings: only the last sitting's duration is known
    d = madial_run(tmp_path / "d", {"mine": HITS["mine"]}, extra={"duration_s": 20.0, "resumed": True})
    run = json.loads((merge_runs([a, d], tmp_path / "m3") / "run.json").read_text())
    assert run["merged_from"][1]["duration_all_s"] is None and "duration_all_s" not in run


def test_runs_at_one_commit_are_named_once_on_the_git_line(tmp_path):
    a, b = _split(tmp_path, git_sha="1111111")
    c = madial_run(tmp_path / "c", {"dense": HITS["bm25"]}, git_sha="3333333", extra={"duration_s": 1.0})
    run = json.loads((merge_runs([a, c, b], tmp_path / "merged") / "run.json").read_text())
    assert run["git_sha"] == "1111111 (openclaw-real, bm25, mine); 3333333 (dense)"
    assert [m["git_sha"] for m in run["merged_from"]] == ["1111111", "3333333", "1111111"]


def test_a_run_interrupted_or_not_finished_is_refused(tmp_path):
    a, _ = _split(tmp_path)
    stopped = madial_run(tmp_path / "stopped", {"mine": HITS["mine"]},
                         extra={"duration_s": 5.0, "interrupted": {"at": "2026-11-30T05:25:00+00:00", "samples_ok": 4}})
    with pytest.raises(MergeError, match="stopped/run.json: interrupted: the run was interrupted at "
                                         "2026-11-30T05:25:00"):
        merge_runs([a, stopped], tmp_path / "m1")
    running = madial_run(tmp_path / "running", {"mine": HITS["mine"]})
    with pytest.raises(MergeError, match="running/run.json: duration_s: missing: the run has not finished"):
        merge_runs([a, running], tmp_path / "m2")
    assert not (tmp_path / "m1").exists() and not (tmp_path / "m2").exists()


def test_samples_graded_by_another_grader_version_are_refused(tmp_path):
    a, b = _split(tmp_path)
    lines = [json.loads(x) for x in (b / "samples.jsonl").read_text().splitlines()]
    for s in lines:
        s["retrievals"]["mine"]["budget"]["grader"] = 1
    (b / "samples.jsonl").write_text("".join(json.dumps(s) + "\n" for s in lines))
    with pytest.raises(MergeError, match="budget.grader: the samples were graded by different grader versions"):
        merge_runs([a, b], tmp_path / "merged")


@pytest.mark.slow  # a memrig process
def test_memrig_report_merge_on_the_command_line(tmp_path):
    a, b = _split(tmp_path)
    r = subprocess.run([sys.executable, "-m", "services.cli", "report", str(tmp_path / "m"), "--merge", str(a),
                        "--merge", str(b)], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    assert f"merged 2 runs: {tmp_path / 'm' / 'report.md'}" in r.stdout
    bad = subprocess.run([sys.executable, "-m", "services.cli", "report", str(tmp_path / "m"), "--merge", str(a),
                          "--merge", str(b)], capture_output=True, text=True, timeout=300)
    assert bad.returncode == 2 and "not an empty directory" in bad.stderr
