"""`make mutation`'s test selection (tests/mutation/selective.py, coverage_map.py): the changed lines of a mutant,
the tests that reached them, and the rule that a survivor is always decided by the whole test command."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests.mutation.coverage_map import build_map
from tests.mutation.selective import changed_lines, main, select_tests, split_command

ROOT = Path(__file__).resolve().parents[1]

ORIG = "a = 1\ndef f(x):\n    if x < 3:\n        return x\n    return 0\n"


def test_changed_lines_replace_delete_insert():
    assert changed_lines(ORIG, ORIG) == set()
    assert changed_lines(ORIG, ORIG.replace("x < 3", "x <= 3")) == {3}
    assert changed_lines(ORIG, ORIG.replace("        return x\n", "")) == {4}
    assert changed_lines(ORIG, ORIG.replace("    return 0\n", "    return 0\n    pass\n")) == {5}
    assert changed_lines(ORIG, ORIG.replace("a = 1\n", "a = 2\n").replace("return 0", "return 1")) == {1, 5}


def test_select_tests_unions_reaching_tests_and_defers_import_time_or_unreached_lines():
    cover = {"tests": {"3": ["t.py::b", "t.py::a"], "4": ["t.py::a"], "5": ["t.py::c"]}, "import_lines": [1, 2]}
    assert select_tests({3}, cover) == ["t.py::a", "t.py::b"]
    assert select_tests({4, 5}, cover) == ["t.py::a", "t.py::c"]
    assert select_tests({1}, cover) is None  # ran at import: every test depends on it
    assert select_tests({3, 9}, cover) is None  # line 9 reached by no test in process
    assert select_tests(set(), cover) is None


def test_split_command_strips_trailing_test_paths_only():
    cmd = ["py", "-m", "pytest", "-x", "-m", "not slow", "tests/test_a.py", "tests/test_b.py::t"]
    assert split_command(cmd, 2) == (cmd[:6], cmd[6:])
    assert split_command(cmd, 0) == (cmd, [])
    with pytest.raises(SystemExit, match="--paths 9"):
        split_command(cmd, 9)


def _fake_pytest(tmp: Path, fail_when: str) -> list[str]:
    """A stand-in test command: appends its arguments to calls.jsonl, fails (exit 1) when `fail_when` is among
    them, passes otherwise; its trailing `.py` argument plays the test path."""
    code = (f"import json,sys; open({str(tmp / 'calls.jsonl')!r}, 'a').write(json.dumps(sys.argv[1:]) + '\\n'); "
            f"sys.exit(1 if {fail_when!r} in sys.argv[1:] else 0)")
    return [sys.executable, "-c", code, "tests/test_all.py"]


def _calls(tmp: Path) -> list[list[str]]:
    return [json.loads(x) for x in (tmp / "calls.jsonl").read_text().splitlines()]


def _setup(tmp: Path, mutated: str) -> list[str]:
    (tmp / "orig.py").write_text(ORIG)
    (tmp / "mod.py").write_text(mutated)
    (tmp / "map.json").write_text(json.dumps({"tests": {"3": ["t.py::a"], "4": ["t.py::a"]}, "import_lines": [1]}))
    return ["--map", str(tmp / "map.json"), "--module", str(tmp / "mod.py"), "--original", str(tmp / "orig.py"),
            "--paths", "1", "--"]


def test_a_failing_reaching_test_kills_without_the_whole_command(tmp_path):
    args = _setup(tmp_path, ORIG.replace("x < 3", "x <= 3"))
    assert main([*args, *_fake_pytest(tmp_path, "t.py::a")]) == 1
    assert [c[-1] for c in _calls(tmp_path)] == ["t.py::a"]  # only the reaching test ran


def test_passing_reaching_tests_leave_the_verdict_to_the_whole_command(tmp_path):
    args = _setup(tmp_path, ORIG.replace("x < 3", "x <= 3"))
    assert main([*args, *_fake_pytest(tmp_path, "tests/test_all.py")]) == 1  # the whole command fails: killed
    assert [c[-1] for c in _calls(tmp_path)] == ["t.py::a", "tests/test_all.py"]
    (tmp_path / "calls.jsonl").unlink()
    assert main([*args, *_fake_pytest(tmp_path, "nothing")]) == 0  # both pass: survived
    assert len(_calls(tmp_path)) == 2


def test_import_time_and_unreached_lines_run_the_whole_command_only(tmp_path):
    args = _setup(tmp_path, ORIG.replace("a = 1", "a = 2"))
    assert main([*args, *_fake_pytest(tmp_path, "t.py::a")]) == 0
    assert [c[-1] for c in _calls(tmp_path)] == ["tests/test_all.py"]
    (tmp_path / "calls.jsonl").unlink()
    args = _setup(tmp_path, ORIG.replace("return 0", "return 1"))  # line 5: no test reached it in process
    main([*args, *_fake_pytest(tmp_path, "x")])
    assert [c[-1] for c in _calls(tmp_path)] == ["tests/test_all.py"]


@pytest.mark.slow  # starts a server process
def test_coverage_map_names_the_tests_that_ran_each_line(tmp_path):
    (tmp_path / "cmod.py").write_text(textwrap.dedent("""\
        LIMIT = 3
        def f(x):
            if x < LIMIT:
                return "low"
            return "high"
        """))
    (tmp_path / "test_c.py").write_text(textwrap.dedent("""\
        from cmod import f
        def test_low():
            assert f(1) == "low"
        def test_high():
            assert f(5) == "high"
        """))
    data = tmp_path / "cov.data"
    env = {**os.environ, "PYTHONPATH": f"{tmp_path}{os.pathsep}{ROOT}"}
    run = subprocess.run([sys.executable, "-m", "coverage", "run", f"--data-file={data}",
                          f"--include={tmp_path / 'cmod.py'}", "-m", "pytest", "-q", "-p", "no:cacheprovider",
                          "-p", "tests.mutation.coverage_map", "test_c.py"],
                         cwd=tmp_path, env=env, capture_output=True, text=True)
    assert run.returncode == 0, run.stdout + run.stderr
    m = build_map(data, tmp_path / "cmod.py")
    assert m["tests"]["3"] == ["test_c.py::test_high", "test_c.py::test_low"]
    assert m["tests"]["4"] == ["test_c.py::test_low"]
    assert m["tests"]["5"] == ["test_c.py::test_high"]
    assert m["import_lines"] == [1, 2]  # the constant and the def run while the test file is collected


def test_forkserver_preloads_only_what_lies_outside_the_repository(tmp_path):
    from types import SimpleNamespace

    from tests.mutation.forkserver import project_names, third_party

    (tmp_path / "services").mkdir()
    (tmp_path / "proto").mkdir()
    (tmp_path / "proto" / "memrig_pb2.py").write_text("")
    (tmp_path / "conftest.py").write_text("")
    own = project_names(tmp_path)
    assert {"services", "proto", "memrig_pb2", "conftest"} <= own
    mods = {"numpy": SimpleNamespace(__file__="/usr/lib/numpy/__init__.py"),
            "services.x": SimpleNamespace(__file__="/elsewhere/services/x.py"),  # a repo package, wherever it is
            "local": SimpleNamespace(__file__=str(tmp_path / "local.py")),  # lives in the repository
            "sys": SimpleNamespace(), "__main__": SimpleNamespace(__file__="/x/m.py")}
    assert third_party(mods, tmp_path, own) == ["numpy"]


@pytest.mark.slow  # starts a server process
def test_forkserver_runs_each_request_in_a_fresh_child_that_sees_the_file_on_disk(tmp_path):
    from tests.mutation.forkserver import request

    (tmp_path / "cmod.py").write_text("VALUE = 1\n")
    (tmp_path / "test_c.py").write_text("from cmod import VALUE\ndef test_v():\n    assert VALUE == 1\n")
    sock = tmp_path / "s"
    env = {**os.environ, "PYTHONPATH": f"{tmp_path}{os.pathsep}{ROOT}", "PYTHONDONTWRITEBYTECODE": "1"}
    args = ["-q", "-p", "no:cacheprovider", "test_c.py"]
    proc = subprocess.Popen([sys.executable, "-m", "tests.mutation.forkserver", "--socket", str(sock), "--", *args],
                            cwd=tmp_path, env=env, stdout=subprocess.PIPE, text=True, start_new_session=True)
    try:
        assert proc.stdout.readline().strip() == "ready"
        assert request(str(sock), args) == 0
        (tmp_path / "cmod.py").write_text("VALUE = 2\n")  # a mutant: the next child imports it afresh
        assert request(str(sock), args) == 1
        (tmp_path / "cmod.py").write_text("VALUE = 1\n")
        assert request(str(sock), args) == 0
        assert request(str(sock), [*args[:-1], "missing_test.py"]) == 4  # pytest's usage error, passed through
    finally:
        proc.terminate()
        proc.wait(timeout=10)
    assert request(str(sock), args) is None  # no server: the caller runs the command itself


@pytest.mark.slow  # starts a server process
def test_forkserver_kills_the_run_when_the_client_goes_away(tmp_path):
    import socket
    import time

    (tmp_path / "test_h.py").write_text(
        "import os, time\ndef test_hang():\n"
        f"    open({str(tmp_path / 'pid')!r}, 'w').write(str(os.getpid()))\n    time.sleep(60)\n")
    sock = tmp_path / "s"
    env = {**os.environ, "PYTHONPATH": f"{tmp_path}{os.pathsep}{ROOT}", "PYTHONDONTWRITEBYTECODE": "1"}
    args = ["-q", "-p", "no:cacheprovider", "test_h.py"]
    proc = subprocess.Popen([sys.executable, "-m", "tests.mutation.forkserver", "--socket", str(sock), "--",
                             "--co", *args], cwd=tmp_path, env=env, stdout=subprocess.PIPE, text=True,
                            start_new_session=True)
    try:
        assert proc.stdout.readline().strip() == "ready"
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as c:  # a client that times out, as cosmic-ray does
            c.connect(str(sock))
            c.sendall((json.dumps({"args": args}) + "\n").encode())
            deadline = time.monotonic() + 20
            while not (tmp_path / "pid").exists() or not (tmp_path / "pid").read_text():
                assert time.monotonic() < deadline, "the test never started"
                time.sleep(0.05)
        pid = int((tmp_path / "pid").read_text())
        deadline = time.monotonic() + 10
        while Path(f"/proc/{pid}").exists() and "Z" not in Path(f"/proc/{pid}/stat").read_text().split()[2]:
            assert time.monotonic() < deadline, "the abandoned run is still alive"
            time.sleep(0.05)
    finally:
        proc.terminate()
        proc.wait(timeout=10)
