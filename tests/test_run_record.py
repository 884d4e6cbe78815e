"""run.json as one object (services/coordinator/run_record.py): its parts in a fixed order as run_suite fills them,
the backends' status built in one place from the live describes and failures, the resumed run's and the reused
results' records merged under this run's, both caches measured the same way (a reading before, one after, the
difference), and every write through RunRecord.write."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from services.adapters.client import InProcessBackendClient
from services.common import llm_cache, llm_roles
from services.common.llm_client import LLMConfig
from services.coordinator import results
from services.coordinator.results import RunDir, sample_key
from services.coordinator.run_record import CacheMeter, RunRecord, amend, vectors_added
from services.coordinator.runner import RunConfig, run_suite

IDENTITY = ["run_id", "suite", "suite_description", "options", "seed", "backends_requested", "config", "llm", "judge",
            "prompts_hash", "tokenizer", "embedder", "data", "probes", "namespaces", "git_sha", "packages", "machine",
            "started_at", "started_monotonic"]
CLOSING = ["llm_cache", "failures", "embedding_cache"]


def fake_suite() -> Any:
    return SimpleNamespace(name="octybot", description="a suite", options={"limit": 2})


def fake_data() -> Any:
    corpus = SimpleNamespace(sessions=["s1", "s2"], message_count=5, documents=["d1"])
    return SimpleNamespace(info={"source": "here"}, probes=["p1", "p2", "p3"], corpora={"ns1": corpus})


def mock_roles() -> dict[str, LLMConfig]:
    return {r: LLMConfig() for r in llm_roles.ROLES}  # llm-mock: no role caches


def make_record(tmp_path: Path, backends=("a", "b", "c"), prev: dict[str, Any] | None = None,
                cache: Path | None = None) -> RunRecord:
    run_dir = RunDir(tmp_path / "run")
    if prev is not None:
        run_dir.write_run(prev)
    cfg = RunConfig(suite="octybot", backends=list(backends), embedder="hash", llm_roles={"answerer": "mock"})
    return RunRecord(run_dir, cfg, cache or tmp_path / "no-embeddings.sqlite")


class Stored:
    """A stored result as the record reads one (services/coordinator/reuse.py Entry)."""

    def __init__(self, records: dict[str, Any], run_id: str = "r0"):
        self.records, self.run_id = records, run_id

    def note(self) -> dict[str, Any]:
        return {"run_id": self.run_id}


def on_disk(record: RunRecord) -> dict[str, Any]:
    return json.loads(record.run_dir.run_json.read_text())


# ------------------------------------------------------------------------------------------------------
# The order of run.json's parts


def test_run_json_lists_its_parts_in_one_order_as_the_record_fills(tmp_path):
    record = make_record(tmp_path)
    with pytest.raises(RuntimeError, match="before identify"):
        record.to_json()
    record.identify(fake_suite(), fake_data(), mock_roles())
    record.write()
    assert list(on_disk(record)) == [*IDENTITY, "llm_roles"]
    run = record.to_json()
    assert run["run_id"] == "run" and run["suite"] == "octybot" and run["options"] == {"limit": 2}
    assert run["backends_requested"] == ["a", "b", "c"] and "options" not in run["config"]
    assert run["config"]["embedder"] == "hash" and run["embedder"] == "hash"
    assert run["probes"] == 3 and run["namespaces"] == {"ns1": {"sessions": 2, "messages": 5, "documents": 1}}
    assert run["judge"]["passes"] == 1 and run["judge"]["label"] == "offline rubric judge (llm-mock), not a model"
    assert run["llm_roles"]["choices"] == {"answerer": "mock"} and set(run["llm_roles"]) == {*llm_roles.ROLES,
                                                                                              "choices"}
    with pytest.raises(RuntimeError, match="identify called twice"):
        record.identify(fake_suite(), fake_data(), mock_roles())

    record.backends_started()
    assert list(record.to_json())[-2:] == ["llm_roles", "backends"]
    record.replay_views = {"c": {"replay_of": "a", "view": "v"}}
    record.ingested({"a": {"namespaces": {}}})  # writes
    assert list(on_disk(record))[-3:] == ["backends", "replay_views", "ingest"]
    record.prepared({"a": {"ns1": 0.1}})
    record.close({})
    record.finished(2.5)
    full = [*IDENTITY, "llm_roles", "backends", "replay_views", "ingest", "prepare", *CLOSING, "duration_s"]
    assert list(on_disk(record)) == full and on_disk(record)["duration_s"] == 2.5


def test_no_replay_views_no_key(tmp_path):
    record = make_record(tmp_path)
    record.identify(fake_suite(), fake_data(), mock_roles())
    record.backends_started()
    record.ingested({})
    assert list(on_disk(record))[-2:] == ["backends", "ingest"] and on_disk(record)["ingest"] == {}


def test_a_resumed_run_keeps_when_its_first_attempt_started(tmp_path):
    record = make_record(tmp_path, prev={"started_at": "T1"})
    record.identify(fake_suite(), fake_data(), mock_roles())
    run = record.to_json()
    assert list(run)[len(IDENTITY):] == ["first_started_at", "resumed", "sittings_s", "llm_roles"]
    assert run["first_started_at"] == "T1" and run["resumed"] is True and run["started_at"] != "T1"

    again = make_record(tmp_path / "2", prev={"started_at": "T2", "first_started_at": "T0"})
    again.identify(fake_suite(), fake_data(), mock_roles())
    assert again.to_json()["first_started_at"] == "T0"

    fresh = make_record(tmp_path / "3")
    fresh.identify(fake_suite(), fake_data(), mock_roles())
    assert "resumed" not in fresh.to_json() and fresh.prev == {}


def test_a_resumed_run_adds_up_its_sittings(tmp_path):
    # sitting 1 stopped after 100 s, sitting 2 after 40 s: the third finishes in 25 s, 165 s in all
    prev = {"started_at": "T2", "first_started_at": "T1", "sittings_s": [100.0],
            "interrupted": {"at": "x", "samples_ok": 3, "elapsed_s": 40.0}}
    record = make_record(tmp_path, prev=prev)
    record.identify(fake_suite(), fake_data(), mock_roles())
    assert record.to_json()["sittings_s"] == [100.0, 40.0] and "duration_all_s" not in record.to_json()
    record.finished(25.0)
    run = on_disk(record)
    assert run["duration_s"] == 25.0 and run["duration_all_s"] == 165.0
    # a finished run run again: its duration is the earlier sitting
    again = make_record(tmp_path / "2", prev={"started_at": "T1", "duration_s": 70.0})
    again.identify(fake_suite(), fake_data(), mock_roles())
    again.finished(5.0)
    assert on_disk(again)["sittings_s"] == [70.0] and on_disk(again)["duration_all_s"] == 75.0
    # a sitting killed without a word: its length unknown, so no sum
    killed = make_record(tmp_path / "3", prev={"started_at": "T1"})
    killed.identify(fake_suite(), fake_data(), mock_roles())
    killed.finished(5.0)
    assert on_disk(killed)["sittings_s"] == [None] and "duration_all_s" not in on_disk(killed)
    fresh = make_record(tmp_path / "4")
    fresh.identify(fake_suite(), fake_data(), mock_roles())
    fresh.finished(9.0)
    assert "sittings_s" not in on_disk(fresh) and "duration_all_s" not in on_disk(fresh)


def test_an_interrupt_records_how_long_the_sitting_ran(tmp_path):
    import time

    import psutil

    from services.coordinator.runner import mark_interrupted

    run_dir = RunDir(tmp_path / "run")
    run_dir.write_run({"suite": "madial", "started_at": "T", "started_monotonic": time.monotonic() - 0.5})
    mark_interrupted(run_dir)
    stop = run_dir.read_run()["interrupted"]
    assert stop["samples_ok"] == 0 and 0.5 <= stop["elapsed_s"] < 0.5 + 60
    # run.json of an earlier sitting (began 100 s before this process): its start is not this sitting's
    age = time.time() - psutil.Process().create_time()
    run_dir.write_run({"suite": "madial", "started_at": "T", "started_monotonic": time.monotonic() - age - 100.0})
    mark_interrupted(run_dir)
    assert "elapsed_s" not in run_dir.read_run()["interrupted"]


# ------------------------------------------------------------------------------------------------------
# Backend status


def test_backend_status_is_built_from_the_live_describes_failures_keys_and_reused(tmp_path):
    record = make_record(tmp_path)
    record.identify(fake_suite(), fake_data(), mock_roles())
    record.describes["a"] = {"name": "a"}
    record.failures["b"] = "start failed: X"
    record.describes["c"] = {"name": "c-stored"}
    record.result_keys = {"a": "ka", "b": None, "c": "kc"}
    record.reused = {"c": Stored({})}
    record.backends_started()
    assert record.to_json()["backends"] == {
        "a": {"describe": {"name": "a"}, "status": "ok", "reason": "", "result_key": "ka"},
        "b": {"describe": None, "status": "failed", "reason": "start failed: X"},  # no key: none recorded
        "c": {"describe": {"name": "c-stored"}, "status": "ok", "reason": "", "result_key": "kc",
              "reused": {"run_id": "r0"}},
    }
    record.failures["a"] = "failed mid-run: UNAVAILABLE"  # the runner's dict: the next write says so
    record.ingested({})
    assert on_disk(record)["backends"]["a"]["status"] == "failed"
    assert on_disk(record)["backends"]["a"]["reason"] == "failed mid-run: UNAVAILABLE"


def test_backends_started_puts_describes_and_failures_in_the_asked_order(tmp_path):
    record = make_record(tmp_path, backends=("a", "b", "c", "d"))
    record.failures.update({"c": "x", "a": "y"})
    record.describes.update({"d": {}, "b": {}, "extra": {}})
    record.backends_started()
    assert list(record.failures) == ["a", "c"] and list(record.describes) == ["b", "d", "extra"]
    record.failures["b"] = "started later, failed later"  # after them, as it happened
    assert list(record.failures) == ["a", "c", "b"]


# ------------------------------------------------------------------------------------------------------
# Merging with the resumed run and the reused results


def test_ingest_and_prepare_merge_the_resumed_runs_then_the_reused_then_this_runs(tmp_path):
    prev = {"ingest": {"a": {"pass": 0}, "b": {"pass": 0}}, "prepare": {"a": "a then", "b": "b then"}}
    record = make_record(tmp_path, prev=prev)
    record.identify(fake_suite(), fake_data(), mock_roles())
    record.reused = {"b": Stored({"ingest": {"pass": "stored"}, "prepare": None})}
    record.ingested({"a": {"pass": 1}, "c": {"pass": 1}})
    assert on_disk(record)["ingest"] == {"a": {"pass": 1}, "b": {"pass": "stored"}, "c": {"pass": 1}}
    assert list(on_disk(record)["ingest"]) == ["a", "b", "c"]
    record.ingested({"a": {"pass": 2}})  # a later checkpoint replaces the earlier one's records
    assert on_disk(record)["ingest"] == {"a": {"pass": 2}, "b": {"pass": "stored"}}
    record.prepared({"c": "c now"})  # b's stored result has no Prepare record: the resumed run's stands
    assert record.to_json()["prepare"] == {"a": "a then", "b": "b then", "c": "c now"}


def test_own_samples_are_trusted_under_the_same_key_or_when_there_are_none(tmp_path):
    prev = {"backends": {"a": {"result_key": "k1"}, "b": {"result_key": "old"}, "c": None}}
    record = make_record(tmp_path, backends=("a", "b", "c", "d"), prev=prev)
    record.result_keys = {"a": "k1", "b": "k2", "c": "k3", "d": "k4"}
    conds = [SimpleNamespace(name=n.upper(), backends=[n]) for n in ("a", "b", "c", "d")]
    probes = [SimpleNamespace(id="p1"), SimpleNamespace(id="p2")]
    done = {"A|p1", "B|p2", "C|p1"}
    assert record.own_samples(conds, probes, done) == {"a": True, "b": False, "c": False, "d": True}


# ------------------------------------------------------------------------------------------------------
# The caches


def test_cache_meter_reads_before_and_after_and_says_the_difference():
    readings = iter([{"n": 3}, {"n": 10}])
    meter = CacheMeter(lambda: next(readings), lambda b, a: {"added": a["n"] - b["n"]})
    with pytest.raises(RuntimeError, match="before start"):
        meter.finish()
    meter.start()
    assert meter.finish() == ({"n": 10}, {"added": 7})


def test_vectors_added_counts_only_models_that_moved():
    assert vectors_added({"m1": 2, "m2": 4}, {"m1": 5, "m2": 4, "m3": 1}) == {"m1": 3, "m3": 1}
    assert vectors_added({}, {}) == {}


def _embed(path: Path, rows: list[str]) -> None:
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE IF NOT EXISTS embedding_cache (model TEXT, text TEXT)")
    conn.executemany("INSERT INTO embedding_cache VALUES (?, ?)", [(m, str(i)) for i, m in enumerate(rows)])
    conn.commit()
    conn.close()


class Client:
    def __init__(self, config: LLMConfig, hits: int):
        self.config, self.hits = config, hits

    def cache_stats(self) -> dict[str, Any]:
        return {"mode": "on", "hits": self.hits, "misses": 0}


def test_close_measures_the_response_cache_and_the_embedding_cache_alike(tmp_path):
    vectors = tmp_path / "embeddings.sqlite"
    _embed(vectors, ["m1", "m1"])
    record = make_record(tmp_path, cache=vectors)  # the embedding cache is read here
    real = LLMConfig(base_url="http://127.0.0.1:1/v1", model="real-model", cache="on",
                     cache_path=str(tmp_path / "llm.sqlite"))
    roles = {"answerer": real, "judge": real, "flush": LLMConfig(), "compaction": LLMConfig()}
    cache = llm_cache.shared(real.cache_path)
    cache.put("k0", "real-model", "", {}, {"x": 0}, 0.1)
    record.identify(fake_suite(), fake_data(), roles)  # the response cache is read here
    _embed(vectors, ["m1", "m2", "m2", "m2"])
    cache.put("k1", "real-model", "", {}, {"x": 1}, 0.1)
    cache.put("k2", "real-model", "", {}, {"x": 2}, 0.1)
    assert cache.get("k0") is not None  # a hit
    record.backends_started()
    record.close({1: Client(real, 4), 2: Client(roles["flush"], 0)})
    run = record.to_json()
    assert run["embedding_cache"] == {"path": str(vectors), "vectors_added": {"m1": 1, "m2": 3}, "vectors": 6}
    assert run["llm_cache"] == {
        "clients": {"answerer+judge": {"model": "real-model", "mode": "on", "hits": 4, "misses": 0},
                    "flush+compaction": {"model": LLMConfig().model, "mode": "on", "hits": 0, "misses": 0}},
        "all_processes": {"hits": 1, "new_entries": 2, "mode": "on", "path": str(Path(real.cache_path).resolve())},
    }
    assert run["failures"] == {}


def test_with_no_caching_role_the_response_cache_is_not_read(tmp_path):
    record = make_record(tmp_path)
    record.identify(fake_suite(), fake_data(), mock_roles())
    record.close({})
    assert record.responses is None and record.to_json()["llm_cache"] == {"clients": {}}
    assert record.to_json()["embedding_cache"] == {"path": str(tmp_path / "no-embeddings.sqlite"),
                                                   "vectors_added": {}, "vectors": 0}


# ------------------------------------------------------------------------------------------------------
# Storing results, amending


class FakeReuse:
    def __init__(self, tmp_path: Path, read: bool = True):
        self.read = read
        self.store = SimpleNamespace(root=tmp_path / "store")
        self.why = {"b": "no stored result", "c": "--fresh"}
        self.saved: list[tuple[str, dict[str, Any]]] = []

    def save(self, name, conditions, probes, samples, run, run_dir):
        self.saved.append((name, run))
        if name == "b":
            raise OSError(28, "No space left on device")
        return None if name == "d" else self.store.root / name


def test_store_results_saves_what_was_measured_whole_and_says_why_the_rest_was_measured(tmp_path):
    record = make_record(tmp_path, backends=("a", "b", "c", "d", "e"))
    record.identify(fake_suite(), fake_data(), mock_roles())
    record.backends_started()
    record.reused = {"a": Stored({})}
    record.failures["e"] = "ingest failed"
    record.close({})
    reuse = FakeReuse(tmp_path)
    record.store_results(reuse, [], [], {"a": True, "b": True, "c": True, "d": True, "e": True})
    # a reused, e failed: neither saved; b's disk is full; d had nothing whole to store
    assert [n for n, _ in reuse.saved] == ["b", "c", "d"]
    assert list(reuse.saved[0][1]) == [*IDENTITY, "llm_roles", "backends", *CLOSING]
    assert record.to_json()["reuse"] == {
        "mode": "on", "store": str(tmp_path / "store"), "reused": {"a": {"run_id": "r0"}},
        "measured": {"b": "no stored result", "c": "--fresh", "d": "", "e": ""},
        "stored": {"c": str(tmp_path / "store" / "c")},
        "store_errors": {"b": "OSError: [Errno 28] No space left on device"},
    }
    untrusted = make_record(tmp_path / "2", backends=("c",))
    untrusted.identify(fake_suite(), fake_data(), mock_roles())
    fresh = FakeReuse(tmp_path, read=False)
    untrusted.store_results(fresh, [], [], {"c": False})
    assert fresh.saved == [] and untrusted.reuse == {"mode": "store (--fresh)", "store": str(tmp_path / "store"),
                                                     "reused": {}, "measured": {"c": "--fresh"}, "stored": {}}


def test_amend_adds_after_what_run_json_holds(tmp_path):
    run_dir = RunDir(tmp_path / "run")
    run_dir.write_run({"suite": "octybot", "duration_s": 1.0})
    out = amend(run_dir, interrupted={"at": "T", "samples_ok": 3})
    assert list(run_dir.read_run()) == ["suite", "duration_s", "interrupted"] and out == run_dir.read_run()


def test_sample_key_is_condition_bar_probe():
    assert sample_key(SimpleNamespace(name="compacted + bm25"), SimpleNamespace(id="q7")) == "compacted + bm25|q7"


# ------------------------------------------------------------------------------------------------------
# A whole run: every write of run.json, in order


@pytest.mark.slow
async def test_a_run_writes_run_json_four_times_each_through_the_record(tmp_path, monkeypatch):
    """Octybot over in-process backends (about a second): identity first, then the backends' status once every
    backend started (crash_at's `run.json:2`, services/drills/rig_faults.py), then the cost records, then the rest."""
    from services.coordinator import report_html

    monkeypatch.setenv("MEMRIG_LLM_BASE_URL", "http://127.0.0.1:9/v1")  # nobody calls it: retrieval only
    monkeypatch.setattr(report_html, "render_html", lambda *a, **k: None)
    real_write = results.RunDir.write_run
    writes: list[list[str]] = []

    def spy(self, run):
        writes.append(list(run))
        return real_write(self, run)

    monkeypatch.setattr(results.RunDir, "write_run", spy)
    started = []
    make = InProcessBackendClient.from_spec.__func__
    monkeypatch.setattr(InProcessBackendClient, "from_spec",
                        classmethod(lambda cls, name, *a, **k: started.append(name) or make(cls, name, *a, **k)))
    cfg = RunConfig(suite="octybot", backends=["dense", "bm25"], out_dir=str(tmp_path / "r1"), embedder="hash",
                    in_process=True, reuse="on")
    out = await run_suite(cfg)
    assert out.state == "succeeded", out.failures
    ident = [*IDENTITY, "llm_roles"]
    assert writes == [ident, [*ident, "backends"], [*ident, "backends", "ingest"],
                      [*ident, "backends", "ingest", "prepare", *CLOSING, "reuse", "duration_s"]]
    run = json.loads((tmp_path / "r1" / "run.json").read_text())
    assert list(run["backends"]) == ["dense", "bm25"] and sorted(started) == ["bm25", "dense"]
    assert list(run["ingest"]) == ["bm25", "dense"]
    assert set(run["reuse"]["stored"]) == {"dense", "bm25"}
