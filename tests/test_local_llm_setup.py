"""make setup-local-llm builds llama-cpp-python for any x86-64 host, not for the host that built it, and proves the
build runs on this CPU before the tests and profiles use it.

Why: CI failed both real-server tests at 3d5bd7c with "Connect call failed" after READY. The wheel pip had cached
was built with llama.cpp's default -march=native on a host with AVX-512 (30,141 zmm instructions in
libggml-cpu.so); a host without it loads the model, says READY, and dies by SIGILL at the first token.
"""

from __future__ import annotations

import stat
from pathlib import Path

from services.local_llm import setup as S


def fake_python(tmp_path: Path, body: str) -> str:
    exe = tmp_path / "python"
    exe.write_text("#!/bin/sh\n" + body + "\n")
    exe.chmod(exe.stat().st_mode | stat.S_IXUSR)
    return str(exe)


def test_the_build_is_portable_and_a_users_cmake_args_come_last():
    env = S.build_env({"PATH": "/bin"})
    assert env["CMAKE_ARGS"] == "-DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON"
    assert env["PATH"] == "/bin"
    env = S.build_env({"CMAKE_ARGS": " -DGGML_NATIVE=ON "})
    assert env["CMAKE_ARGS"].split()[0] == "-DGGML_NATIVE=OFF" and env["CMAKE_ARGS"].split()[-1] == "-DGGML_NATIVE=ON"


def test_the_runtime_is_built_from_source_past_the_wheel_cache(monkeypatch):
    calls = []
    monkeypatch.setattr(S, "_pip", lambda *a, env=None: calls.append((a, env["CMAKE_ARGS"])))
    S.build_runtime()
    S.build_runtime(reinstall=True)
    assert calls[0][0] == ("--no-cache-dir", "llama-cpp-python[server]==0.3.36")
    assert calls[1][0] == ("--force-reinstall", "--no-deps", "--no-cache-dir", "llama-cpp-python==0.3.36")
    assert all(c[1] == S.PORTABLE_CMAKE_ARGS for c in calls)


def test_smoke_names_a_build_for_another_cpu(tmp_path):
    ok, what = S.smoke("m.gguf", python=fake_python(tmp_path, "kill -ILL $$"))
    assert not ok and what == "the model process died by SIGILL (an instruction this CPU lacks: a build for another host)"
    ok, what = S.smoke("m.gguf", python=fake_python(tmp_path, "kill -SEGV $$"))
    assert (ok, what) == (False, "the model process died by SIGSEGV")
    ok, what = S.smoke("m.gguf", python=fake_python(tmp_path, "echo 'ValueError: bad model' >&2; exit 1"))
    assert (ok, what) == (False, "exit code 1: ValueError: bad model")
    ok, what = S.smoke("m.gguf", python=fake_python(tmp_path, "exec sleep 30"), timeout=1.0)
    assert (ok, what) == (False, "no token within 1 s")
    ok, what = S.smoke("m.gguf", python=fake_python(tmp_path, 'test "$3" = m.gguf && echo "smoke ok"'))
    assert (ok, what) == (True, "one token generated")


def test_a_build_that_dies_is_rebuilt_once_and_then_named(monkeypatch, capsys):
    results = iter([(False, "the model process died by SIGILL"), (True, "one token generated")])
    rebuilt = []
    monkeypatch.setattr(S, "smoke", lambda path: next(results))
    monkeypatch.setattr(S, "build_runtime", lambda *, reinstall=False: rebuilt.append(reinstall))
    assert S._ensure_runs("m.gguf") == 0 and rebuilt == [True]
    assert "smoke: one token generated after the portable rebuild" in capsys.readouterr().out

    results = iter([(False, "the model process died by SIGILL")] * 2)
    rebuilt.clear()
    assert S._ensure_runs("m.gguf") == 1 and rebuilt == [True]
    err = capsys.readouterr().err
    assert "built with -DGGML_NATIVE=OFF" in err and "died by SIGILL" in err

    results = iter([(True, "one token generated")])
    rebuilt.clear()
    assert S._ensure_runs("m.gguf") == 0 and rebuilt == []
