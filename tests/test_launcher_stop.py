"""Rig.stop_all stops a tier at once (every backend, then the proxy, then the services they depend on): a run's
OpenClaw backends each took up to their whole 5 s grace to exit, one after the other, at the end of bench-all."""

from __future__ import annotations

import asyncio
import textwrap
import time

import pytest

from services.launcher import Rig

pytestmark = pytest.mark.slow  # starts processes

EXIT_AFTER_S = 1.5
SERVICE = textwrap.dedent(f"""
    import os, signal, sys, time
    from services.common.process import announce_ready
    log = sys.argv[1]
    def on_term(*_):
        with open(log, "a") as f:
            f.write(f"term {{sys.argv[2]}} {{time.time()}}\\n")
        time.sleep({EXIT_AFTER_S})  # a slow shutdown, inside the grace
        with open(log, "a") as f:
            f.write(f"exit {{sys.argv[2]}} {{time.time()}}\\n")
        os._exit(0)
    signal.signal(signal.SIGTERM, on_term)
    announce_ready(http=1)
    while True:
        time.sleep(1)
""")


def test_stop_all_stops_each_tier_at_once_dependents_first(tmp_path):
    (tmp_path / "slowstop.py").write_text(SERVICE)
    log = tmp_path / "events.txt"
    rig = Rig(tmp_path / "procs")
    rig.env["PYTHONPATH"] = f"{tmp_path}:{rig.env.get('PYTHONPATH', '')}".rstrip(":")
    keys = ["backend/a", "backend/b", "backend/c", "backend/d", "fault-proxy", "cortex-mock"]

    async def start():
        for k in keys:
            await rig.start(k, "slowstop", [str(log), k])

    try:
        asyncio.run(start())
        pids = [rig.procs[k].pid for k in keys]
        t0 = time.monotonic()
        rig.stop_all()
        took = time.monotonic() - t0
    finally:
        rig.stop_all()
    assert not rig.procs
    events = [line.split() for line in log.read_text().splitlines()]
    term = {k: float(t) for e, k, t in events if e == "term"}
    exited = {k: float(t) for e, k, t in events if e == "exit"}
    assert set(term) == set(exited) == set(keys)  # every one asked to stop and exited by itself, none killed
    backends = [k for k in keys if k.startswith("backend/")]
    # the tiers in order: nothing a backend depends on is asked to stop before every backend has exited
    assert min(term["fault-proxy"], term["cortex-mock"]) >= max(exited[k] for k in backends)
    assert term["cortex-mock"] >= exited["fault-proxy"]
    # within a tier at once: the four backends were all asked before the first of them had exited
    assert max(term[k] for k in backends) < min(exited[k] for k in backends)
    # three tiers of one slow exit each, not six slow exits one after the other (9 s)
    assert took < 3 * EXIT_AFTER_S + 3.0
    import os

    for pid in pids:
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)
