"""The run plan (services/coordinator/plan.py): built by the CLI from bench-all's and bench-local's flags, run by one
loop, with the shared flag parsers; and no import arrow from the coordinator back to the CLI."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace

import pytest

from services.adapters.registry import get_spec
from services.cli import build_parser
from services.commands.bench import bench_all_plan, bench_local_plan
from services.common.types import ValidationError
from services.coordinator import bench_all, bench_local
from services.coordinator.plan import (
    RunPlan,
    SuitePlan,
    parse_csv,
    parse_options,
    parse_targets,
    run_plan,
    run_settings,
)

ROOT = Path(__file__).resolve().parent.parent


def test_parsers():
    assert parse_csv(" a, b,,c ") == ["a", "b", "c"] and parse_csv(None) == []
    assert parse_options(["locomo.conversations=0", "x=[1, 2]", "name=text", "flag=true", "e="]) == {
        "locomo.conversations": 0, "x": [1, 2], "name": "text", "flag": True, "e": ""}
    with pytest.raises(ValidationError) as e:
        parse_options(["novalue"])
    assert e.value.field == "--option" and "expected key=value, got 'novalue'" in str(e.value)
    assert parse_targets(["a=h:1"]) == {"a": "h:1"}


def test_bench_all_plan_from_cli_args(tmp_path, monkeypatch):
    monkeypatch.setattr(bench_all, "get_spec", lambda n: replace(get_spec(n), available=None))
    args = build_parser().parse_args([
        "bench-all", "--out", str(tmp_path / "r"), "--suites", "locomo,cortex-v1", "--backends", "bm25,none",
        "--option", "locomo.questions=3", "--option", "cortex-v1.limit=5", "--option", "madial.x=1",
        "--seed", "7", "--fresh", "--concurrency", "2", "--judge-passes", "3", "--embedder", "hash", "--no-costs",
        "--llm", "mock", "--target-wait-s", "1.5"])
    p = bench_all_plan(args)
    assert p.kind == "bench-all" and p.out == tmp_path / "r" and p.costs is False and p.target_wait_s == 1.5
    assert p.backends == ["bm25", "none"] and p.skipped_backends == {}
    roles = {"answerer": "mock", "judge": "mock", "flush": "mock", "compaction": "mock"}
    # BENCH_ALL_OPTIONS (every LoCoMo conversation) under the suite's own --option values; other suites' left out
    assert p.suites == [SuitePlan("locomo", ["bm25", "none"], {"conversations": 0, "questions": 3}, roles),
                        SuitePlan("cortex-v1", ["bm25", "none"], {"limit": 5}, roles)]
    cfg = p.run_config(p.suites[1])
    assert (cfg.suite, cfg.out_dir, cfg.seed, cfg.resume, cfg.concurrency, cfg.judge_passes, cfg.embedder) == (
        "cortex-v1", str(tmp_path / "r" / "cortex-v1"), 7, False, 2, 3, "hash")
    assert cfg.options == {"limit": 5} and cfg.llm_roles == roles and cfg.targets == {} and cfg.in_process is False


def test_bench_all_plan_leaves_out_unavailable_backends_but_not_targets(tmp_path, monkeypatch, capsys):
    def spec(n):
        return replace(get_spec(n), available=(lambda: (False, "not installed")) if n == "cortex" else None)

    monkeypatch.setattr(bench_all, "get_spec", spec)
    args = build_parser().parse_args(["bench-all", "--suites", "madial", "--backends", "cortex,bm25"])
    p = bench_all_plan(args)
    assert p.backends == ["bm25"] and p.skipped_backends == {"cortex": "not installed"}
    assert "[bench-all] backend cortex skipped: not installed" in capsys.readouterr().out
    assert p.out.parent.name == "results" and p.out.name.endswith("-bench-all")
    args = build_parser().parse_args(["bench-all", "--suites", "madial", "--target", "cortex=h:1"])
    assert bench_all_plan(args).backends == ["cortex"]  # a target's own host decides what it needs


def test_run_settings_have_one_home_and_reach_every_suite(tmp_path):
    """Every RunConfig setting (settle_timeout_s included, which the plan once had no copy of) goes through a plan
    unchanged; the suite's own fields are put in; an unknown setting names itself."""
    p = RunPlan("bench-all", tmp_path, [SuitePlan("a", ["x", "y"], {"k": 1}, {"judge": "mock"})],
                run=run_settings(seed=3, lanes=1, settle_timeout_s=5.0, targets={"x": "127.0.0.1:1"}))
    cfg = p.run_config(p.suites[0])
    assert (cfg.suite, cfg.backends, cfg.out_dir, cfg.options, cfg.llm_roles) == (
        "a", ["x", "y"], str(tmp_path / "a"), {"k": 1}, {"judge": "mock"})
    assert (cfg.seed, cfg.lanes, cfg.settle_timeout_s, cfg.targets) == (3, 1, 5.0, {"x": "127.0.0.1:1"})
    cfg.targets["y"] = "z"
    assert p.run.targets == {"x": "127.0.0.1:1"}  # a suite's config is its own copy
    assert RunPlan("k", tmp_path, []).run == run_settings()  # RunConfig's defaults, from RunConfig alone
    with pytest.raises(TypeError, match="no_such_setting"):
        run_settings(no_such_setting=1)


def test_bench_local_plan_from_cli_args(tmp_path, monkeypatch):
    monkeypatch.setattr(bench_local, "get_spec", lambda n: replace(get_spec(n), available=None))
    args = build_parser().parse_args(["bench-local", "--out", str(tmp_path / "o"), "--suites", "locomo",
                                      "--compare-with", str(tmp_path / "prev"), "--fresh", "--seed", "3"])
    p = bench_local_plan(args)
    assert p.kind == "bench-local" and p.compare_with == tmp_path / "prev" and p.run.concurrency == 2
    (s,) = p.suites
    assert s.suite == "locomo" and s.backends == bench_local.PROFILE["locomo"]["backends"]
    assert s.options == {"conversations": 4, "questions": 6, "judge": True} and s.llm_roles == bench_local.LOCAL_ROLES
    assert s.entry == {"backends": s.backends, "backend_notes": {}, "dir": "locomo"}
    cfg = p.run_config(s)
    assert cfg.resume is False and cfg.seed == 3 and cfg.out_dir == str(tmp_path / "o" / "locomo")
    with pytest.raises(ValidationError, match="--suites: madial not in the profile"):
        bench_local_plan(build_parser().parse_args(["bench-local", "--suites", "madial"]))


def test_one_loop_records_each_suite_by_outcome(tmp_path, capsys):
    from services.coordinator.suites.base import SuiteUnavailable

    async def fake_run_suite(cfg, progress, rig=None):
        if cfg.suite == "b":
            raise SuiteUnavailable("data not found")
        if cfg.suite == "c":
            raise RuntimeError("boom")
        return SimpleNamespace(state="partial", failures={"x": "down"})

    seen = []
    plan = RunPlan("bench-local", tmp_path, [SuitePlan("a", ["x"]), SuitePlan("b", ["x"], entry={"dir": "b"}),
                                            SuitePlan("c", ["x"], entry={"dir": "c", "backends": ["x"]})])
    entries = asyncio.run(run_plan(plan, fake_run_suite, None, None,
                                   around=lambda s: lambda e: seen.append((s.suite, e["state"]))))
    assert seen == [("a", "partial"), ("b", "skipped"), ("c", "failed")]
    assert {k: v for k, v in entries["a"].items() if k != "duration_s"} == {
        "state": "partial", "dir": "a", "failures": {"x": "down"}}
    assert {k: v for k, v in entries["b"].items() if k != "duration_s"} == {"state": "skipped",
                                                                            "reason": "data not found"}
    c = entries["c"]
    assert c["state"] == "failed" and c["reason"] == "RuntimeError: boom" and c["dir"] == "c"
    assert "RuntimeError: boom" in c["traceback"]
    assert all(e["duration_s"] >= 0 for e in entries.values())
    out = capsys.readouterr().out
    assert "[bench-local] b skipped: data not found" in out and "[bench-local] c failed: boom" in out


def test_the_coordinator_does_not_import_the_cli():
    """Importing every coordinator module that runs a plan loads no services.cli (the arrow goes CLI -> runs)."""
    code = ("import sys, services.coordinator.bench_all, services.coordinator.bench_local, "
            "services.coordinator.plan, services.coordinator.runner, services.coordinator.server; "
            "print('services.cli' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=True,
                         env={"PYTHONPATH": f"{ROOT}:{ROOT / 'proto'}", "PATH": "/usr/bin:/bin"})
    assert out.stdout.strip() == "False"
    grep = subprocess.run(["grep", "-rln", "services.cli import\\|from services import cli",
                           str(ROOT / "services" / "coordinator")], capture_output=True, text=True)
    assert grep.stdout == ""
