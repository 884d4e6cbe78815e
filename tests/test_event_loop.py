"""services/common/event_loop.py: the loop choice from MEMRIG_EVENT_LOOP and running on it."""

from __future__ import annotations

import asyncio
import subprocess
import sys

import pytest

from services.common import event_loop as ev


def test_choice_from_the_environment(monkeypatch):
    monkeypatch.setattr(ev, "uvloop_installed", lambda: True)
    assert ev.loop_choice({}) == "uvloop"
    assert ev.loop_choice({ev.ENV: ""}) == "uvloop"
    assert ev.loop_choice({ev.ENV: " Auto "}) == "uvloop"
    assert ev.loop_choice({ev.ENV: "asyncio"}) == "asyncio"
    assert ev.loop_choice({ev.ENV: "UVLOOP"}) == "uvloop"
    monkeypatch.setattr(ev, "uvloop_installed", lambda: False)
    assert ev.loop_choice({}) == "asyncio"  # auto falls back to the standard loop
    with pytest.raises(ValueError, match="MEMRIG_EVENT_LOOP: uvloop was asked for but is not installed"):
        ev.loop_choice({ev.ENV: "uvloop"})


def test_unknown_choice_names_the_variable():
    with pytest.raises(ValueError, match=r"MEMRIG_EVENT_LOOP: 'tokio' is not one of auto, uvloop, asyncio"):
        ev.loop_choice({ev.ENV: "tokio"})


async def _loop_module() -> str:
    return type(asyncio.get_running_loop()).__module__


def test_runs_on_the_standard_loop_when_asked():
    assert ev.run(_loop_module(), "asyncio").startswith("asyncio")
    assert ev.describe("asyncio").startswith("asyncio (Python 3.")


def test_runs_on_uvloop_when_asked():
    pytest.importorskip("uvloop")
    assert ev.run(_loop_module(), "uvloop").startswith("uvloop")
    assert ev.describe("uvloop").startswith("uvloop ")


def test_a_bad_choice_exits_2_with_one_line_and_leaves_the_coroutine_unrun(monkeypatch, capsys):
    monkeypatch.setenv(ev.ENV, "fast")
    ran = []

    async def main() -> None:
        ran.append(1)

    coro = main()
    with pytest.raises(SystemExit) as e:
        ev.run(coro)
    assert e.value.code == 2
    assert capsys.readouterr().err == "error: MEMRIG_EVENT_LOOP: 'fast' is not one of auto, uvloop, asyncio\n"
    assert ran == [] and coro.cr_frame is None  # closed, never started (no "never awaited" warning)


def test_a_service_refuses_a_bad_loop_on_one_line():
    r = subprocess.run([sys.executable, "-m", "services.llm_mock", "--port", "0"], capture_output=True, text=True,
                       timeout=60, env={**__import__("os").environ, ev.ENV: "nope"})
    assert r.returncode == 2
    assert r.stderr.strip().splitlines()[-1] == "error: MEMRIG_EVENT_LOOP: 'nope' is not one of auto, uvloop, asyncio"
