"""The CLI as a user runs it: ingest then retrieve --json across two commands; bad input exits 2 naming the field."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from services.launcher import Proc

SESSIONS = [
    {"session_id": "s1", "started_at": "2026-03-02T09:00:00Z", "messages": [
        {"id": "s1-m0", "role": "user", "content": "The staging deploy uses blue-green with a 15 minute bake time."},
        {"id": "s1-m1", "role": "assistant", "content": "Noted, 15 minute bake time before switching traffic."}]},
    {"session_id": "s2", "started_at": "2026-03-03T09:00:00Z", "messages": [
        {"id": "s2-m0", "role": "user", "content": "Lunch is at noon on Fridays."}]},
]


def memrig(*args, env=None, timeout=300):
    return subprocess.run([sys.executable, "-m", "services.cli", *args], capture_output=True, text=True,
                          timeout=timeout, env=env or os.environ.copy())


@pytest.fixture
def sessions_file(tmp_path):
    p = tmp_path / "sessions.jsonl"
    p.write_text("\n".join(json.dumps(s) for s in SESSIONS) + "\n")
    return p


@pytest.mark.slow  # two CLI commands, each starting the full-context backend process
def test_ingest_then_retrieve_json_returns_message_ids(sessions_file):
    r = memrig("ingest", "--backend", "full-context", "--namespace", "demo", str(sessions_file))
    assert r.returncode == 0, r.stderr
    assert "2 sessions, 3 messages" in r.stdout
    r = memrig("retrieve", "--backend", "full-context", "--namespace", "demo", "--query", "bake time", "--json")
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    ids = [e for m in out["memories"] for e in m["evidence_ids"]]
    assert set(ids) == {"s1-m0", "s1-m1", "s2-m0"}
    assert "15 minute bake time" in out["formatted_context"]


@pytest.mark.slow
def test_ingest_retrieve_openclaw_shows_paths_lines_and_channel_scores(sessions_file):
    env = {**os.environ, "MEMRIG_EMBEDDER": "minilm"}
    assert memrig("ingest", "--backend", "openclaw", "--namespace", "oc", str(sessions_file), env=env).returncode == 0
    r = memrig("retrieve", "--backend", "openclaw", "--namespace", "oc", "--query",
               "How long is the staging bake time?", "--json",
               # "now" two days after the session: the late preset's 30-day decay would bury a months-old note
               "--reference-time", "2026-03-04T09:00:00Z", env=env)
    assert r.returncode == 0, r.stderr
    mems = json.loads(r.stdout)["memories"]
    assert mems, r.stdout
    top = mems[0]
    assert top["attributes"]["path"].startswith(("memory/", "MEMORY.md"))
    assert int(top["attributes"]["start_line"]) >= 1 and int(top["attributes"]["end_line"]) >= int(top["attributes"]["start_line"])
    assert {"vector", "text"} <= set(top["channel_scores"])
    assert "s1-m0" in {e for m in mems for e in m["evidence_ids"]}


def test_bad_jsonl_exits_2_naming_line_and_field(tmp_path):
    p = tmp_path / "bad.jsonl"
    p.write_text(json.dumps({"session_id": "s1", "started_at": "2026-03-02T09:00:00Z",
                             "messages": [{"role": "user", "content": "no id"}]}) + "\n")
    r = memrig("ingest", "--backend", "full-context", "--namespace", "x", str(p))
    assert r.returncode == 2
    assert "bad.jsonl:1.messages[0].id" in r.stderr


def test_unknown_backend_and_suite_exit_2():
    r = memrig("retrieve", "--backend", "nope", "--namespace", "x", "--query", "q")
    assert r.returncode == 2 and "unknown backend 'nope'" in r.stderr
    r = memrig("bench", "--suite", "nope", "--backends", "none")
    assert r.returncode == 2 and "unknown suite 'nope'" in r.stderr


def test_list_names_suites_backends_services():
    r = memrig("list")
    assert r.returncode == 0
    for name in ("cortex-v1", "full-context", "openclaw", "llm-mock", "fault-proxy"):
        assert name in r.stdout


@pytest.mark.slow
def test_up_then_down_stops_exactly_what_it_started(tmp_path):
    env = {**os.environ, "MEMRIG_STATE_DIR": str(tmp_path / "state")}
    r = memrig("up", "--backends", "full-context", env=env)
    assert r.returncode == 0, r.stderr
    state = json.loads((tmp_path / "state" / "run" / "state.json").read_text())
    assert set(state) == {"llm-mock", "backend/full-context"}
    pids = [p["pid"] for p in state.values()]
    for pid in pids:
        os.kill(pid, 0)  # running
    # a running backend is used over gRPC by retrieve
    r = memrig("retrieve", "--backend", "full-context", "--namespace", "x", "--query", "q", "--json", env=env)
    assert r.returncode == 0 and json.loads(r.stdout)["memories"] == []
    r = memrig("down", env=env)
    assert r.returncode == 0
    assert r.stdout.index("backend/full-context") < r.stdout.index("llm-mock")  # dependents first
    for pid in pids:  # gone, or a zombie waiting for init to reap it
        assert not Proc("", pid, {}, "", "").alive()
    assert not (tmp_path / "state" / "run" / "state.json").exists()
