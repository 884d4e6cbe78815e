"""The backend-start study's gate: at most N starts at a time, every name started once."""

from __future__ import annotations

import asyncio

import pytest

from services.studies.backend_starts import main, start_all


@pytest.mark.parametrize("at_once,peak", [(1, 1), (2, 2), (3, 3), (9, 5)])
def test_start_all_runs_at_most_n_at_once(at_once, peak):
    running, seen, started = 0, [], []

    async def start(name):
        nonlocal running
        running += 1
        seen.append(running)
        await asyncio.sleep(0.01)
        started.append(name)
        running -= 1

    names = ["a", "b", "c", "d", "e"]
    s = asyncio.run(start_all(names, at_once, start))
    assert max(seen) == peak and sorted(started) == names and s > 0


def test_at_once_below_one_is_refused_naming_the_flag(capsys):
    with pytest.raises(SystemExit) as e:
        main(["--at-once", "2", "0"])
    assert e.value.code == 2 and "--at-once" in capsys.readouterr().err
