"""The CLI under bad input (issue 14): one `error:` line and exit 2, never a traceback — bytes that are not
UTF-8 (naming the line), a directory, an unreadable path, an unreachable --target, and a batch-level problem
named by its file line rather than its index in the batch."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys


def memrig(*args, timeout=120):
    return subprocess.run([sys.executable, "-m", "services.cli", *args], capture_output=True, text=True,
                          timeout=timeout, env=os.environ.copy())


def session(sid: str, mid: str) -> str:
    return json.dumps({"session_id": sid, "started_at": "2026-03-02T09:00:00Z",
                       "messages": [{"id": mid, "role": "user", "content": "hello there"}]})


def assert_one_line_error(r, *needles):
    assert r.returncode == 2, (r.returncode, r.stderr)
    assert "Traceback" not in r.stderr, r.stderr
    assert r.stderr.startswith("error: "), r.stderr
    for n in needles:
        assert n in r.stderr, r.stderr


def test_invalid_utf8_names_the_line(tmp_path):
    p = tmp_path / "latin1.jsonl"
    p.write_bytes(session("s1", "m1").encode() + b"\n" + session("s2", "m2").encode().replace(b"hello", b"h\xe9llo"))
    assert_one_line_error(memrig("ingest", "--backend", "full-context", "--namespace", "x", str(p)),
                          "latin1.jsonl:2", "UTF-8")


def test_a_directory_and_a_missing_file(tmp_path):
    assert_one_line_error(memrig("ingest", "--backend", "full-context", "--namespace", "x", str(tmp_path)),
                          "is a directory")
    assert_one_line_error(memrig("ingest", "--backend", "full-context", "--namespace", "x",
                                 str(tmp_path / "nope.jsonl")), "nope.jsonl")


def test_batch_errors_name_the_file_line(tmp_path):
    p = tmp_path / "dup.jsonl"
    p.write_text(session("s1", "m1") + "\n\n" + session("s1", "m2") + "\n")  # line 3 repeats s1
    assert_one_line_error(memrig("ingest", "--backend", "full-context", "--namespace", "x", str(p)),
                          "dup.jsonl:3 (sessions[1].session_id)")


def test_unreachable_target(tmp_path):
    p = tmp_path / "ok.jsonl"
    p.write_text(session("s1", "m1") + "\n")
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    r = memrig("ingest", "--backend", "full-context", "--namespace", "x", "--target", f"127.0.0.1:{port}", str(p))
    assert_one_line_error(r, f"cannot reach 127.0.0.1:{port}")


def test_a_suite_whose_data_is_missing_says_where_to_get_it(tmp_path):
    r = memrig("bench", "--suite", "longmemeval", "--option", "variant=s", "--option", f"data_dir={tmp_path}",
               "--backends", "bm25", "--in-process", "--llm", "mock", "--out", str(tmp_path / "run"))
    assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr
    last = r.stderr.strip().splitlines()[-1]  # after the progress lines
    assert last.startswith("error: ") and "longmemeval/longmemeval_s_cleaned.json not found" in last
    assert "make data-longmemeval-s" in last
