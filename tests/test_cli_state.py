"""The CLI keeps state honest (issue 29): re-ingesting a stored session is skipped when identical and refused
before anything is journaled when not; a journal only ever holds a batch that replays; a damaged journal is an
error naming its file (and the way out), never a lock-out; `memrig reset` clears a namespace or everything."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from services.cli_state import Journal, journaled, reset_command
from services.common.interchange import session_from_json
from services.common.types import ValidationError

S1 = {"session_id": "s1", "started_at": "2026-03-01T09:00:00Z",
      "messages": [{"id": "s1-m0", "role": "user", "content": "The dev server runs on port 3001."}]}
S2 = {"session_id": "s2", "started_at": "2026-03-02T09:00:00Z",
      "messages": [{"id": "s2-m0", "role": "user", "content": "Lunch is at noon on Fridays."}]}


def sess(obj, **change):
    return session_from_json({**obj, **change})


def line(obj) -> str:
    return json.dumps(obj) + "\n"


# ------------------------------------------------------------------------------------------------------
# The journal itself


def test_plan_skips_identical_and_keeps_new(tmp_path):
    j = Journal("none", "demo", tmp_path)
    plan = j.plan([sess(S1)], [sess(S1), sess(S2)], "f.jsonl", [1, 2])
    assert [s.session_id for s in plan.skipped] == ["s1"] and [s.session_id for s in plan.new] == ["s2"]


def test_plan_refuses_a_changed_session_naming_it_the_namespace_and_the_reset(tmp_path):
    j = Journal("full-context", "demo", tmp_path)
    changed = sess(S1, messages=[{"id": "s1-m0", "role": "user", "content": "port 3002"}])
    with pytest.raises(ValidationError) as e:
        j.plan([sess(S1)], [sess(S2), changed], "g.jsonl", [3, 7])
    assert e.value.field == "g.jsonl:7 session_id"
    assert "session 's1' is already stored in namespace 'demo' of full-context with different content" in str(e.value)
    assert "memrig reset --backend full-context --namespace demo" in str(e.value)


def test_plan_refuses_a_message_id_another_stored_session_holds(tmp_path):
    j = Journal("none", "demo", tmp_path)
    clash = sess(S2, messages=[{"id": "s1-m0", "role": "user", "content": "x"}])
    with pytest.raises(ValidationError, match=r"message id 's1-m0' of session 's2' is already stored .*session 's1'"):
        j.plan([sess(S1)], [clash], "h.jsonl", [1])


def test_commit_then_load_round_trips_and_is_atomic(tmp_path):
    j = Journal("none", "demo", tmp_path)
    j.commit([], [sess(S1)])
    j.commit([sess(S1)], [sess(S2)])
    assert [s.session_id for s in j.load()] == ["s1", "s2"]
    assert not j.path.with_name(j.path.name + ".tmp").exists()
    assert j.path == tmp_path / "journal" / "none" / "demo.jsonl"


def test_legacy_journal_with_identical_repeats_loads_once(tmp_path):
    """What the old CLI wrote after ingesting one file twice: the same session appended again."""
    j = Journal("none", "demo", tmp_path)
    j.path.parent.mkdir(parents=True)
    j.path.write_text(line(S1) + line(S1) + line(S2))
    assert [s.session_id for s in j.load()] == ["s1", "s2"]


@pytest.mark.parametrize("content,where,what", [
    (line(S1) + '{"session_id": "s2", "start', ":2", "invalid JSON"),
    (line(S1) + line({**S1, "messages": [{"id": "x", "role": "user", "content": "other"}]}), ":2",
     "journaled twice with different content (first at line 1)"),
    (line({**S1, "messages": []}), ":1", "messages"),
    (line(S1) + line({**S2, "messages": S1["messages"]}), "", "duplicate message id"),
])
def test_a_damaged_journal_names_its_file_and_the_way_out(tmp_path, content, where, what):
    j = Journal("none", "demo", tmp_path)
    j.path.parent.mkdir(parents=True)
    j.path.write_text(content)
    with pytest.raises(ValidationError) as e:
        j.load()
    assert e.value.field.startswith(f"{j.path}{where}") and what in str(e.value)
    assert reset_command("none", "demo") in str(e.value) and "cannot be replayed" in str(e.value)


def test_odd_names_are_encoded_and_recovered(tmp_path):
    j = Journal("openclaw-real[profile=sessions]", "team/a b", tmp_path)
    j.commit([], [sess(S1)])
    assert j.path.name == "team%2Fa%20b.jsonl" and j.path.parent.name == "openclaw-real[profile=sessions]"
    assert journaled(tmp_path) == [("openclaw-real[profile=sessions]", "team/a b")]
    assert journaled(tmp_path, "none") == []
    assert reset_command("x[a=1]", "a b") == "memrig reset --backend 'x[a=1]' --namespace 'a b'"


# ------------------------------------------------------------------------------------------------------
# The commands


def memrig(*args, state, timeout=300):
    env = {**os.environ, "MEMRIG_STATE_DIR": str(state)}
    return subprocess.run([sys.executable, "-m", "services.cli", *args], capture_output=True, text=True,
                          timeout=timeout, env=env)


@pytest.mark.slow
def test_the_same_file_three_times_then_retrieve(tmp_path):
    """The issue's lock-out: ingest twice, then every command failed on the journal's duplicate session."""
    f = tmp_path / "f.jsonl"
    f.write_text(line(S1) + line(S2))
    state = tmp_path / "state"
    first = memrig("ingest", "--backend", "full-context", "--namespace", "demo", str(f), state=state)
    assert first.returncode == 0 and "2 sessions, 2 messages" in first.stdout, first.stderr
    for _ in range(2):
        again = memrig("ingest", "--backend", "full-context", "--namespace", "demo", str(f), state=state)
        assert again.returncode == 0, again.stderr
        assert "nothing new for full-context/demo" in again.stdout and "same content" in again.stdout
    journal = state / "journal" / "full-context" / "demo.jsonl"
    assert [json.loads(x)["session_id"] for x in journal.read_text().splitlines()] == ["s1", "s2"]
    r = memrig("retrieve", "--backend", "full-context", "--namespace", "demo", "--query", "port", "--json", state=state)
    assert r.returncode == 0, r.stderr
    assert {e for m in json.loads(r.stdout)["memories"] for e in m["evidence_ids"]} == {"s1-m0", "s2-m0"}

    # a changed s1 is refused before anything is journaled; a new file with one new session goes in
    g = tmp_path / "g.jsonl"
    g.write_text(line({**S1, "messages": [{"id": "s1-m0", "role": "user", "content": "port 3002"}]}))
    bad = memrig("ingest", "--backend", "full-context", "--namespace", "demo", str(g), state=state)
    assert bad.returncode == 2 and "g.jsonl:1 session_id: session 's1' is already stored" in bad.stderr
    assert "memrig reset --backend full-context --namespace demo" in bad.stderr
    assert len(journal.read_text().splitlines()) == 2
    h = tmp_path / "h.jsonl"
    h.write_text(line(S1) + line({**S2, "session_id": "s3", "messages": [{"id": "s3-m0", "role": "user",
                                                                          "content": "Standup at 10."}]}))
    ok = memrig("ingest", "--backend", "full-context", "--namespace", "demo", str(h), state=state)
    assert ok.returncode == 0 and "1 sessions, 1 messages" in ok.stdout and "skipped 1 already stored" in ok.stdout


@pytest.mark.slow
def test_an_old_locked_out_journal_works_again(tmp_path):
    state = tmp_path / "state"
    journal = state / "journal" / "none" / "demo.jsonl"
    journal.parent.mkdir(parents=True)
    journal.write_text(line(S1) + line(S1))  # what two ingests of one file left behind before the fix
    r = memrig("retrieve", "--backend", "none", "--namespace", "demo", "--query", "port", state=state)
    assert r.returncode == 0 and "(no memories)" in r.stdout, r.stderr


def test_a_damaged_journal_is_named_and_reset_clears_it(tmp_path):
    """Neither command starts a process here: the journal is read (and refused) first; reset never reads it."""
    state = tmp_path / "state"
    journal = state / "journal" / "none" / "demo.jsonl"
    journal.parent.mkdir(parents=True)
    journal.write_text('{"session_id": "s1", "sta')
    r = memrig("retrieve", "--backend", "none", "--namespace", "demo", "--query", "q", state=state)
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert f"error: {journal}:1: invalid JSON" in r.stderr and "memrig reset --backend none --namespace demo" in r.stderr
    f = tmp_path / "f.jsonl"
    f.write_text(line(S1))
    r = memrig("ingest", "--backend", "none", "--namespace", "demo", str(f), state=state)
    assert r.returncode == 2 and str(journal) in r.stderr
    r = memrig("reset", "--backend", "none", "--namespace", "demo", state=state)
    assert r.returncode == 0 and f"cleared the journal of none/demo ({journal})" in r.stdout
    assert not journal.exists()
    r = memrig("reset", "--backend", "none", "--namespace", "demo", state=state)
    assert r.returncode == 0 and "nothing to reset for none/demo" in r.stdout


def test_reset_all_and_bad_usage(tmp_path):
    state = tmp_path / "state"
    for b, ns in (("none", "a"), ("none", "b"), ("full-context", "c")):
        Journal(b, ns, state).commit([], [sess(S1)])
    r = memrig("reset", "--backend", "none", "--all", state=state)
    assert r.returncode == 0 and journaled(state) == [("full-context", "c")]
    assert "none/a" in r.stdout and "none/b" in r.stdout
    r = memrig("reset", "--all", state=state)
    assert r.returncode == 0 and journaled(state) == []
    for args, needle in ((["--backend", "none"], "--namespace: required"), ([], "--backend: required"),
                         (["--backend", "none", "--namespace", "a", "--all"], "--namespace: give a namespace or --all"),
                         (["--backend", "nosuch", "--all"], "unknown backend 'nosuch'")):
        r = memrig("reset", *args, state=state)
        assert r.returncode == 2 and needle in r.stderr, (args, r.stderr)


@pytest.mark.slow
def test_reset_clears_a_running_backend_over_grpc(tmp_path):
    state = tmp_path / "state"
    f = tmp_path / "f.jsonl"
    f.write_text(line(S1) + line(S2))
    up = memrig("up", "--backends", "full-context", state=state)
    assert up.returncode == 0, up.stderr
    try:
        for _ in range(3):  # the running backend keeps its own state; a repeat merges (nothing duplicated)
            r = memrig("ingest", "--backend", "full-context", "--namespace", "demo", str(f), state=state)
            assert r.returncode == 0 and "gRPC" in r.stdout, r.stderr
        r = memrig("retrieve", "--backend", "full-context", "--namespace", "demo", "--query", "port", "--json",
                   state=state)
        assert len(json.loads(r.stdout)["memories"]) >= 1
        r = memrig("reset", "--backend", "full-context", "--all", state=state)
        assert r.returncode == 0 and "reset full-context/demo at" in r.stdout and "2 item(s) removed" in r.stdout
        r = memrig("retrieve", "--backend", "full-context", "--namespace", "demo", "--query", "port", "--json",
                   state=state)
        assert json.loads(r.stdout)["memories"] == []
    finally:
        assert memrig("down", state=state).returncode == 0
