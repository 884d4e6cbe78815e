"""Backends start concurrently (runner.START_AT_ONCE): the Rig must still start one process per key, so two backends
that require the same service (cortex and cortex-fast both require cortex-mock) share one, as they did when they
started one after the other."""

from __future__ import annotations

import asyncio
import textwrap

import pytest

from services.launcher import Rig

pytestmark = pytest.mark.slow  # starts processes

SERVICE = textwrap.dedent("""
    import os, sys, time
    from services.common.process import announce_ready
    with open(sys.argv[1], "a") as f:
        f.write(f"{os.getpid()}\\n")
    time.sleep(0.5)  # still starting while the other callers ask for it
    announce_ready(http=1)
    time.sleep(60)
""")


def _rig(tmp_path) -> Rig:
    (tmp_path / "fakesvc.py").write_text(SERVICE)
    rig = Rig(tmp_path / "procs")
    rig.env["PYTHONPATH"] = f"{tmp_path}:{rig.env.get('PYTHONPATH', '')}".rstrip(":")
    return rig


def test_concurrent_starts_of_one_key_start_one_process(tmp_path):
    started = tmp_path / "started.txt"
    rig = _rig(tmp_path)

    async def main():
        return await asyncio.gather(*(rig.start("svc", "fakesvc", [str(started)]) for _ in range(3)))

    try:
        procs = asyncio.run(main())
        pids = started.read_text().split()
        assert len(pids) == 1
        assert {p.pid for p in procs} == {int(pids[0])}
        # a different key is a different process, and starts while the first is held
        other = asyncio.run(rig.start("svc2", "fakesvc", [str(started)]))
        assert other.pid != procs[0].pid and len(started.read_text().split()) == 2
    finally:
        rig.stop_all()
    assert not rig.procs


def test_a_rig_starts_again_in_a_later_event_loop(tmp_path):
    """The per-key lock belongs to the loop that made it: a Rig used by two asyncio.run calls (the CLI's commands do
    this) must not fail with 'bound to a different event loop' when the key is contended in the second."""
    started = tmp_path / "started.txt"
    rig = _rig(tmp_path)
    try:
        async def contend():
            return await asyncio.gather(rig.start("svc", "fakesvc", [str(started)]),
                                        rig.start("svc", "fakesvc", [str(started)]))

        first = asyncio.run(contend())
        rig.stop("svc")
        second = asyncio.run(contend())
        assert first[0].pid == first[1].pid and second[0].pid == second[1].pid
        assert first[0].pid != second[0].pid
        assert len(started.read_text().split()) == 2
    finally:
        rig.stop_all()


