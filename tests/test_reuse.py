"""Reusing what did not change (services/coordinator/reuse.py): a suite × backend result whose key is unchanged is
copied into the new run and its backend is not started; a change of any key part measures it again; a torn entry
is ignored; --fresh reuses nothing. The runs are Octybot (retrieval only: no model is asked) over in-process
backends with the hash embedder, so every test takes about a second."""

from __future__ import annotations

import dataclasses
import json
import os
from pathlib import Path
from typing import Any

import pytest

from services.adapters import registry
from services.adapters.client import InProcessBackendClient
from services.cli import build_parser
from services.commands.bench import bench_all_plan
from services.common import llm_roles
from services.coordinator import reuse
from services.coordinator.plan import RunPlan, SuitePlan, run_plan, run_settings
from services.coordinator.runner import RunConfig, run_suite
from services.coordinator.suites import registry as suite_registry
from services.coordinator.suites.base import Condition
from services.coordinator.suites.octybot import OctybotSuite, passes
from services.coordinator.suites.registry import get_suite

NOWHERE = "http://127.0.0.1:9/v1"  # an answerer nobody calls: Octybot's conditions are retrieval only


@pytest.fixture
def started(monkeypatch) -> list[str]:
    """The backends the runner starts (in-process), in order; no llm-mock process, no report.html plots."""
    from services.coordinator import report_html

    monkeypatch.setenv("MEMRIG_LLM_BASE_URL", NOWHERE)
    monkeypatch.setattr(report_html, "render_html", lambda *a, **k: None)
    names: list[str] = []
    make = InProcessBackendClient.from_spec.__func__

    def from_spec(cls, name, *a, **k):
        names.append(name)
        return make(cls, name, *a, **k)

    monkeypatch.setattr(InProcessBackendClient, "from_spec", classmethod(from_spec))
    return names


def config(tmp_path: Path, out: str, backends=("bm25", "dense"), suite: str = "octybot", **kw: Any) -> RunConfig:
    return RunConfig(suite=suite, backends=list(backends), out_dir=str(tmp_path / out), embedder="hash",
                     in_process=True, reuse=kw.pop("reuse", "on"), **kw)


def lines(run_dir: Path) -> list[dict[str, Any]]:
    return sorted((json.loads(x) for x in (run_dir / "samples.jsonl").read_text().splitlines() if x.strip()),
                  key=lambda s: s["key"])


def outcomes(run_dir: Path) -> list[tuple[str, Any]]:
    """(key, passed) per sample: what a result says, without its timings."""
    return [(s["key"], s.get("passed")) for s in lines(run_dir)]


def run_json(run_dir: Path) -> dict[str, Any]:
    return json.loads((run_dir / "run.json").read_text())


def entries(suite: str = "octybot") -> dict[str, Path]:
    """backend -> its stored entry directory."""
    out = {}
    for meta in (reuse.cache_root() / suite).glob("*/meta.json"):
        out[json.loads(meta.read_text())["backend"]] = meta.parent
    return out


# ------------------------------------------------------------------------------------------------------
# The runner


async def test_an_unchanged_rerun_reuses_every_result_and_starts_no_backend(tmp_path, started):
    first = await run_suite(config(tmp_path, "r1"))
    assert first.state == "succeeded" and started == ["bm25", "dense"] and first.reused == {}
    stored = entries()
    assert set(stored) == {"bm25", "dense"}
    assert reuse.cache_root() == Path(os.environ["MEMRIG_STATE_DIR"]) / "results-cache"

    started.clear()
    second = await run_suite(config(tmp_path, "r2"))
    assert second.state == "succeeded" and started == []  # nothing started, nothing ingested
    assert set(second.reused) == {"bm25", "dense"}
    assert all(v.startswith(f"reused from {tmp_path / 'r1'}, measured at ") for v in second.reused.values())
    r1, r2 = tmp_path / "r1", tmp_path / "r2"
    assert lines(r2) == lines(r1)  # the same samples, copied
    a, b = run_json(r1), run_json(r2)
    assert b["ingest"] == a["ingest"] and b["prepare"] == a["prepare"]  # the cost records of then
    for name in ("bm25", "dense"):
        rec = b["backends"][name]
        assert rec["status"] == "ok" and rec["describe"] == a["backends"][name]["describe"]
        assert rec["reused"]["run_dir"] == str(r1) and rec["reused"]["key"] == a["backends"][name]["result_key"]
        assert rec["reused"]["entry"] == str(stored[name])
    assert b["reuse"]["reused"].keys() == {"bm25", "dense"} and b["reuse"]["stored"] == {}
    # the verdict and every metric are recomputed from the copied samples: the same figures
    m1, m2 = (json.loads((d / "metrics.json").read_text()) for d in (r1, r2))
    assert m2["conditions"] == m1["conditions"] and m2["samples"] == m1["samples"]
    v1, v2 = (json.loads((d / "verdict.json").read_text())["suites"]["octybot"] for d in (r1, r2))
    v1.pop("dir"), v2.pop("dir")
    assert v2 == v1
    report = (r2 / "report.md").read_text()
    # bm25's own time: dense's (the loop's last `rec`) differs when the two were stored a second apart
    assert f"**bm25** reused from `{r1}`, measured at {b['backends']['bm25']['reused']['measured_at']}" in report
    assert "their latency, setup and cost figures were measured then" in report
    assert "| bm25 | ok, reused |" in report


async def test_changing_one_backends_code_measures_that_backend_alone(tmp_path, started, monkeypatch):
    await run_suite(config(tmp_path, "r1", backends=("none", "bm25")))
    edit_file(monkeypatch, "services/adapters/ir_baselines/ranking.py")
    started.clear()
    out = await run_suite(config(tmp_path, "r2", backends=("none", "bm25")))
    assert started == ["bm25"] and set(out.reused) == {"none"}
    run = run_json(tmp_path / "r2")
    assert run["reuse"]["measured"]["bm25"] == f"changed since {tmp_path / 'r1'}: backend.code"
    assert set(run["reuse"]["stored"]) == {"bm25"}  # the new result is stored beside the old one
    assert outcomes(tmp_path / "r2") == outcomes(tmp_path / "r1")  # the edit changed no result


async def test_a_torn_entry_is_ignored_and_measured_again(tmp_path, started):
    await run_suite(config(tmp_path, "r1"))
    samples = entries()["bm25"] / "samples.jsonl"
    samples.write_bytes(samples.read_bytes()[:-40])  # cut mid-line, as a crash would
    started.clear()
    out = await run_suite(config(tmp_path, "r2"))
    assert started == ["bm25"] and set(out.reused) == {"dense"}
    assert "torn" in run_json(tmp_path / "r2")["reuse"]["measured"]["bm25"]
    assert len(lines(tmp_path / "r2")) == len(lines(tmp_path / "r1"))
    started.clear()
    out = await run_suite(config(tmp_path, "r3"))  # measured again whole, so stored again whole
    assert started == [] and set(out.reused) == {"bm25", "dense"}


async def test_fresh_reuses_nothing_and_stores_what_it_measures(tmp_path, started):
    await run_suite(config(tmp_path, "r1"))
    started.clear()
    out = await run_suite(config(tmp_path, "r2", reuse="store"))  # --fresh
    assert started == ["bm25", "dense"] and out.reused == {}
    run = run_json(tmp_path / "r2")
    assert run["reuse"]["measured"] == {"bm25": "--fresh", "dense": "--fresh"}
    assert set(run["reuse"]["stored"]) == {"bm25", "dense"}
    assert {json.loads((d / "meta.json").read_text())["run_dir"] for d in entries().values()} == {
        str(tmp_path / "r2")}
    started.clear()
    await run_suite(config(tmp_path, "r3", reuse="off"))  # a programmatic run (RunConfig's default)
    assert started == ["bm25", "dense"] and "reuse" not in run_json(tmp_path / "r3")


def test_fresh_on_the_command_line_turns_reuse_off(tmp_path):
    from services.commands.bench import _bench_config

    for argv, mode in (([], "on"), (["--fresh"], "store")):
        args = build_parser().parse_args(["bench", "--suite", "octybot", *argv])
        assert _bench_config(args, "octybot", ["bm25"], None).reuse == mode
        args = build_parser().parse_args(["bench-all", "--backends", "bm25", "--out", str(tmp_path), *argv])
        plan = bench_all_plan(args)
        assert plan.run_config(plan.suites[0]).reuse == mode
    parser = build_parser()._subparsers._group_actions[0].choices["bench"]
    parser.load()  # its flags come from services/commands/bench.py, added when it parses
    bench = next(a for a in parser._actions if "--fresh" in a.option_strings)
    assert "reuse no stored result" in bench.help


async def test_bench_all_never_starts_a_backend_reused_on_every_suite(tmp_path, started):
    def plan(out: str) -> RunPlan:
        return RunPlan("bench-all", tmp_path / out, [SuitePlan(s, ["bm25", "dense"]) for s in
                                                    ("octybot", "poisoned-memory")],
                       run=run_settings(embedder="hash", in_process=True, reuse="on"))

    first = await run_plan(plan("a"), run_suite, None, None)
    assert {s["state"] for s in first.values()} == {"succeeded"} and "reused" not in first["octybot"]
    assert started == ["bm25", "dense"] * 2
    started.clear()
    second = await run_plan(plan("b"), run_suite, None, None)
    assert started == []
    for name in ("octybot", "poisoned-memory"):
        assert second[name]["state"] == "succeeded" and set(second[name]["reused"]) == {"bm25", "dense"}
        assert lines(tmp_path / "b" / name) == lines(tmp_path / "a" / name)
    from services.coordinator.run_report import render_index

    md = render_index(tmp_path / "b", {"suites": second, "backends": ["bm25", "dense"]})
    assert "Reused from earlier runs, not measured again" in md and "octybot: bm25, dense" in md


# ------------------------------------------------------------------------------------------------------
# Every key part invalidates: one stored result, then each part changed alone


def edit_file(monkeypatch, rel: str) -> None:
    """Make the digest of one project file differ, as an edit of it would."""
    real = reuse.file_sha
    path = str(reuse.PROJECT_ROOT / rel)
    assert Path(path).is_file(), rel
    monkeypatch.setattr(reuse, "file_sha", lambda p: "edited" if str(p) == path else real(p))


def view(cfg: RunConfig, data=None, env: dict[str, str] | None = None) -> reuse.Reuse:
    """The Reuse the runner builds for this config (the same roles and environment)."""
    env = {**os.environ, **(env or {})}
    suite = get_suite(cfg.suite)(cfg.options, seed=cfg.seed)
    return reuse.Reuse(suite, data if data is not None else suite.load(), cfg, llm_roles.role_configs(env), env,
                       read=cfg.reuse == "on")


@pytest.fixture
async def stored(tmp_path, started) -> RunConfig:
    """bm25's Octybot result stored by a real run; its config."""
    cfg = config(tmp_path, "r1", backends=("bm25",))
    assert (await run_suite(cfg)).state == "succeeded"
    r = view(cfg)
    assert r.lookup("bm25") is not None, r.why  # unchanged: found (the view is the runner's)
    return cfg


def changed_first_probe(cfg: RunConfig):
    data = OctybotSuite({}, seed=0).load()
    data.probes[0] = dataclasses.replace(data.probes[0], question=data.probes[0].question + "?")
    return data


PARTS = {
    # part named in the reason -> how to change it alone: (monkeypatch, cfg) -> view
    "data": lambda mp, cfg: view(cfg, data=changed_first_probe(cfg)),
    "backend.config": lambda mp, cfg: (
        mp.setitem(registry._SPECS, "bm25", dataclasses.replace(registry.get_spec("bm25"),
                                                                config={"method": "bm25", "k1": 1.5})),
        view(cfg))[1],
    "backend.code": lambda mp, cfg: (edit_file(mp, "services/adapters/ir_baselines/backend.py"), view(cfg))[1],
    "backend.third_party": lambda mp, cfg: (mp.setitem(reuse.THIRD_PARTY, "ir_baselines", lambda: {"v": 2}),
                                            view(cfg))[1],
    "embedder": lambda mp, cfg: view(dataclasses.replace(cfg, embedder="wordllama")),
    "seed": lambda mp, cfg: view(dataclasses.replace(cfg, seed=1)),
    "options": lambda mp, cfg: view(dataclasses.replace(cfg, options={"top_k": 5})),
    "llm": lambda mp, cfg: view(cfg, env={"MEMRIG_LLM_MODEL": "another-answerer"}),
    "grader": lambda mp, cfg: (mp.setattr("services.coordinator.metrics.budget.GRADER_VERSION", 99), view(cfg))[1],
    "grader ": lambda mp, cfg: (edit_file(mp, "services/coordinator/metrics/budget.py"), view(cfg))[1],  # its code
    "grader  ": lambda mp, cfg: (edit_file(mp, "services/coordinator/suites/octybot.py"), view(cfg))[1],
    "grader   ": lambda mp, cfg: (edit_file(mp, "services/coordinator/judges.py"), view(cfg))[1],  # the judges
}


@pytest.mark.parametrize("part", list(PARTS))
async def test_each_key_part_invalidates_the_stored_result(stored, monkeypatch, part):
    r = PARTS[part](monkeypatch, stored)
    assert r.lookup("bm25") is None
    assert part.strip() in r.why["bm25"].split(": ", 1)[1].split(", "), r.why["bm25"]


def test_every_coordinator_module_a_suite_imports_is_in_its_key_or_declared_scoring_only():
    """The suite's own imports decide its samples (the judges, the probe context ...): each is in the key unless it is
    declared to score samples only (reuse.SCORING_ONLY); a module new to a suite's imports lands on one side."""
    for name, cls in suite_registry.all_suites().items():
        suite = cls({}, seed=0)
        closure = {f.relative_to(reuse.PROJECT_ROOT).as_posix()
                   for f in reuse.import_closure([type(suite).__module__, "services.coordinator.context"])}
        keyed = {f.relative_to(reuse.PROJECT_ROOT).as_posix() for f in reuse.rig_code_files(suite)}
        coordinator = {f for f in closure if f.startswith("services/coordinator/")}
        assert coordinator - keyed == set(reuse.SCORING_ONLY) & coordinator, name
        assert "services/coordinator/judges.py" in keyed, name


def test_the_import_scan_sees_every_line_of_a_block_of_imports():
    """Each import line of a block counts, after a `from x import a, b` line and after a parenthesised list over
    several lines (a names pattern that crossed line breaks swallowed the next line's import)."""
    text = ("from services.a import x, y\nfrom services.b import z\nimport services.c\n"
            "from services.d import (\n    p,\n    q,\n)\nfrom services.e import r  # note\n")
    found = [(base or plain, " ".join(names.split())) for base, names, plain in reuse._IMPORT.findall(text)]
    assert found == [("services.a", "x, y"), ("services.b", "z"), ("services.c", ""),
                     ("services.d", "( p, q, )"), ("services.e", "r  ".strip())]
    rel = reuse._REL_IMPORT.findall("from .a import x, y\nfrom ..b import z\n")
    assert [(d, m, n.strip()) for d, m, n in rel] == [(".", "a", "x, y"), ("..", "b", "z")]
    # the probe context imports its judges on the line after another from-import
    closure = {f.relative_to(reuse.PROJECT_ROOT).as_posix() for f in reuse.import_closure(["services.coordinator.context"])}
    assert "services/coordinator/judges.py" in closure


async def test_a_change_elsewhere_keeps_the_result(stored, monkeypatch):
    """Another backend's code, or the flush model of a backend that asks none, decides nothing of bm25's."""
    edit_file(monkeypatch, "services/adapters/cortex/backend.py")
    assert view(stored).lookup("bm25") is not None
    assert view(stored, env={"MEMRIG_FLUSH_MODEL": "another-writer"}).lookup("bm25") is not None


def test_the_flush_model_is_in_the_key_of_a_backend_that_writes_with_it():
    cfg = RunConfig(suite="octybot", backends=[], embedder="hash")
    data = OctybotSuite({}, seed=0).load()
    keys = [view(cfg, data, env).key("compacted") for env in ({}, {"MEMRIG_FLUSH_MODEL": "another-writer"})]
    assert keys[0] != keys[1]
    assert "llm" in view(cfg, data).backend_part("cortex")  # cortex-mock extracts with the flush model
    assert "llm" not in view(cfg, data).backend_part("bm25")


def test_every_adapter_that_pins_third_party_code_has_its_identity_in_the_key():
    """A folder that pins a source tree (PinnedSource) or an npm lockfile names it in reuse.THIRD_PARTY."""
    root = reuse.PROJECT_ROOT / "services" / "adapters"
    pinning = {d.name for d in root.iterdir() if d.is_dir() and (
        any("PinnedSource(" in f.read_text() for f in d.glob("*.py")) or list(d.glob("*/package-lock.json")))}
    assert pinning and pinning <= set(reuse.THIRD_PARTY), pinning - set(reuse.THIRD_PARTY)


def test_a_loopback_llm_url_is_not_identity_but_a_remote_one_is():
    a = reuse.llm_key({"model": "m", "base_url": "http://127.0.0.1:41234/v1", "response_cache": "on"})
    b = reuse.llm_key({"model": "m", "base_url": "http://127.0.0.1:50000/v1", "response_cache": "refresh"})
    assert a == b == {"model": "m"}
    assert reuse.llm_key({"model": "m", "base_url": "https://api.example.com/v1"})["base_url"]
    assert "mock_code" in reuse.llm_key({"model": "memrig-llm-mock", "offline_mock": True})


# ------------------------------------------------------------------------------------------------------
# The store


@pytest.mark.parametrize("tear", ["samples cut", "meta missing", "records garbled", "sample not ok", "format"])
def test_a_torn_entry_never_loads(tmp_path, tear):
    store = reuse.ResultStore(tmp_path / "store")
    samples = [{"key": f"c|p{i}", "status": "ok"} for i in range(3)]
    d = store.save("s", "k1", {"backend": "b"}, samples, {"describe": {}})
    assert store.load("s", "k1").samples == samples
    meta = json.loads((d / "meta.json").read_text())
    if tear == "samples cut":
        (d / "samples.jsonl").write_text((d / "samples.jsonl").read_text()[:-5])
    elif tear == "meta missing":
        (d / "meta.json").unlink()
    elif tear == "records garbled":
        (d / "records.json").write_text("{")
    elif tear == "sample not ok":  # consistent digests, but a sample that is not ok is never a result
        bad = [{**samples[0], "status": "error"}, *samples[1:]]
        store.save("s", "k1", {"backend": "b"}, bad, {"describe": {}})
    else:
        (d / "meta.json").write_text(json.dumps({**meta, "format": reuse.REUSE_FORMAT + 1}))
    assert store.load("s", "k1") is None
    assert not list((tmp_path / "store" / "s").glob(".*"))  # no temporary directory left behind


def test_an_entry_is_renamed_into_place_whole(tmp_path, monkeypatch):
    """A write that dies before the rename leaves no entry (only its temporary directory, never read)."""
    store = reuse.ResultStore(tmp_path / "store")
    real = os.replace

    def dies(a, b):
        if Path(b).name == "k1":
            raise OSError("killed")
        return real(a, b)

    monkeypatch.setattr(reuse.os, "replace", dies)
    with pytest.raises(OSError):
        store.save("s", "k1", {"backend": "b"}, [{"key": "c|p", "status": "ok"}], {})
    assert store.load("s", "k1") is None and not (tmp_path / "store" / "s" / "k1").exists()


# ------------------------------------------------------------------------------------------------------
# A condition that reads two backends (arclight's "native + X"): its owner's key covers the other


class PairSuite(OctybotSuite):
    """Octybot with a base condition on `none` and "none + bm25" reading both (owned by bm25, the last)."""

    name = "octybot-pairs"

    def conditions(self, backends, capabilities):
        return [Condition("none", ("backend:none",), answer=False),
                Condition("none + bm25", ("backend:none", "backend:bm25"), answer=False)]

    async def run_probe(self, ctx, probe, condition):
        recs = {b: await ctx.retrieve(b, probe) for b in condition.backends}
        text = "\n".join(m["text"] for r in recs.values() for m in r["memories"])
        return {"retrievals": recs, "passed": passes(text, probe.expected), "context_tokens": 0}


async def test_a_backend_read_by_a_condition_measured_again_is_started_and_its_own_result_still_reused(
        tmp_path, started, monkeypatch):
    monkeypatch.setitem(suite_registry._SUITES, PairSuite.name, PairSuite)
    cfg = lambda out: config(tmp_path, out, backends=("none", "bm25"), suite=PairSuite.name)  # noqa: E731
    assert (await run_suite(cfg("r1"))).state == "succeeded"
    assert set(entries(PairSuite.name)) == {"none", "bm25"}
    meta = json.loads((entries(PairSuite.name)["bm25"] / "meta.json").read_text())
    assert set(meta["companions"]) == {"none"}

    # bm25 changes: none's own result is reused, but none is started for "none + bm25"
    monkeypatch.setitem(reuse.THIRD_PARTY, "ir_baselines", lambda: {"v": 2})
    started.clear()
    out = await run_suite(cfg("r2"))
    assert out.state == "succeeded" and set(out.reused) == {"none"} and sorted(started) == ["bm25", "none"]
    assert outcomes(tmp_path / "r2") == outcomes(tmp_path / "r1")

    # none changes: its key and bm25's result (which read none) are both measured again
    monkeypatch.setitem(reuse.THIRD_PARTY, "none", lambda: {"v": 2})
    started.clear()
    out = await run_suite(cfg("r3"))
    assert out.reused == {} and sorted(started) == ["bm25", "none"]
    assert run_json(tmp_path / "r3")["reuse"]["measured"]["bm25"] == "a backend in its conditions changed"


async def test_a_store_that_cannot_be_written_costs_the_next_run_time_never_this_run(tmp_path, started, monkeypatch):
    def full(*a, **k):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(reuse.ResultStore, "save", full)
    out = await run_suite(config(tmp_path, "r1"))
    assert out.state == "succeeded"
    run = run_json(tmp_path / "r1")
    assert run["reuse"]["stored"] == {} and set(run["reuse"]["store_errors"]) == {"bm25", "dense"}


async def test_a_result_whose_code_changed_during_the_run_is_not_stored(tmp_path, started, monkeypatch):
    """The key is taken when the suite starts; an edit of the backend's (or the grader's) code before the result
    is stored would file samples under a key they do not match: such a result is not stored, and the reason says
    why."""
    cfg = config(tmp_path, "r1", backends=("bm25",))
    r = view(cfg)
    assert r.key("bm25") is not None and not r.code_changed("bm25")
    edit_file(monkeypatch, "services/adapters/ir_baselines/backend.py")
    assert r.code_changed("bm25")
    owned = [Condition("bm25", ("backend:bm25",), answer=False)]
    assert r.save("bm25", owned, [], [], {}, None) is None
    assert "changed while the run was going" in r.why["bm25"]
