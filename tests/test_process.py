"""services/common/process.py, the one helper that starts and stops the rig's children: a child that says READY
gives its ports, a child that dies or hangs at start-up is named with the tail of its log, a child is stopped by
PID (SIGTERM, then SIGKILL after the grace, one grace for many)."""

from __future__ import annotations

import sys
import time

import pytest

from services.common import process
from services.common.errors import DependencyError, LaunchError


def py(code: str) -> list[str]:
    return [sys.executable, "-c", code]


READY_CHILD = py("from services.common.process import announce_ready\nimport time\n"
                 "announce_ready(http=4321, metrics=0)\ntime.sleep(60)")
# SIGTERM ignored before READY, so the stop's first signal surely finds it ignoring
STUBBORN_CHILD = py("import signal, time\nsignal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
                    "print('READY pid=1', flush=True)\ntime.sleep(60)")


def test_ready_line_round_trips_and_only_key_number_pairs_count():
    line = process.ready_line(http=8080, admin=9)
    assert line.startswith("READY http=8080 admin=9 pid=")
    assert process.parse_ready(f"starting\n{line}\n") == {"http": 8080, "admin": 9, "pid": int(line.split("=")[-1])}
    assert process.parse_ready("READY\n") == {}  # a bare READY: serving, no ports to tell
    assert process.parse_ready("READY http=x\n") is None
    assert process.parse_ready("not READY http=1\n") is None
    assert process.parse_ready("READY\nhttp=1\n") == {}  # the pairs are on the READY line only


def test_a_child_that_says_ready_gives_its_ports_and_is_stopped_by_pid(tmp_path):
    log = tmp_path / "child.log"
    p = process.spawn(READY_CHILD, log)
    try:
        ports = process.wait_ready(p, "tiny", log, timeout_s=30)
        assert ports["http"] == 4321 and ports["metrics"] == 0 and ports["pid"] == p.pid
        assert process.pid_alive(p.pid)
        t0 = time.monotonic()
        process.stop(p.pid)  # a bare PID, as `memrig down` has it
        assert time.monotonic() - t0 < 4  # it left on SIGTERM, no grace waited out
        p.wait(timeout=5)
        assert not process.pid_alive(p.pid) and p.returncode == -15
    finally:
        process.stop(p, grace_s=0)


async def test_waiting_on_an_event_loop_and_on_a_pipe(tmp_path):
    p = process.spawn(READY_CHILD, tmp_path / "a.log")
    q = process.spawn(READY_CHILD, None, new_session=False)  # no log: stdout read until READY
    try:
        assert (await process.wait_ready_async(p, "a", tmp_path / "a.log", timeout_s=30))["http"] == 4321
        assert process.wait_ready(q, "b", None, timeout_s=30)["pid"] == q.pid
        assert q.stdout is not None and q.stdout.closed  # read no further: a full pipe cannot block it
    finally:
        process.stop(p, q)
    assert p.returncode is not None and q.returncode is not None


@pytest.mark.parametrize("log_name", ["early.log", None])
def test_a_child_that_exits_before_ready_is_named_with_its_log_tail(tmp_path, log_name):
    log = tmp_path / log_name if log_name else None
    p = process.spawn(py("import sys\nprint('config.json: no such file', flush=True)\nsys.exit(3)"), log)
    with pytest.raises(LaunchError, match=r"(?s)early-bird exited with code 3 before it was ready; "
                                          r"(log .*early\.log|its output):\nconfig.json: no such file"):
        process.wait_ready(p, "early-bird", log, timeout_s=30)
    assert isinstance(LaunchError("x"), DependencyError)  # the family callers catch and HTTP maps to 502


def test_a_child_that_never_says_ready_is_stopped_after_the_timeout(tmp_path):
    log = tmp_path / "slow.log"
    p = process.spawn(py("import time\nprint('warming up', flush=True)\ntime.sleep(60)"), log)
    with pytest.raises(LaunchError, match=r"(?s)slowpoke not ready after 0.5s; log .*slow\.log:\nwarming up"):
        process.wait_ready(p, "slowpoke", log, timeout_s=0.5)
    assert p.poll() is not None  # stopped, not left behind


def test_an_unfinished_ready_line_is_not_read_as_ready(tmp_path):
    """A READY line whose newline has not arrived yet could still be growing (`pid=12` of `pid=1234`)."""
    log = tmp_path / "half.log"
    p = process.spawn(py("import sys, time\nsys.stdout.write('READY http=12'); sys.stdout.flush()\n"
                         "time.sleep(0.5)\nprint('34', flush=True)\ntime.sleep(60)"), log)
    try:
        assert process.wait_ready(p, "half", log, timeout_s=30)["http"] == 1234
    finally:
        process.stop(p)


def test_a_child_that_ignores_sigterm_is_killed_after_the_grace(tmp_path):
    log = tmp_path / "stubborn.log"
    p = process.spawn(STUBBORN_CHILD, log)
    process.wait_ready(p, "stubborn", log, timeout_s=30)
    t0 = time.monotonic()
    process.stop(p, grace_s=1.0)
    took = time.monotonic() - t0
    assert p.returncode == -9 and 1.0 <= took < 4.0


def test_many_children_share_one_grace(tmp_path):
    procs = [process.spawn(STUBBORN_CHILD, tmp_path / f"s{i}.log") for i in range(3)]
    for i, p in enumerate(procs):
        process.wait_ready(p, f"s{i}", tmp_path / f"s{i}.log", timeout_s=30)
    t0 = time.monotonic()
    process.stop(*procs, grace_s=1.0)
    assert [p.returncode for p in procs] == [-9] * 3 and time.monotonic() - t0 < 2.5  # not 3 x 1 s


def test_stopping_what_is_already_gone_is_a_no_op(tmp_path):
    p = process.spawn(py("pass"), tmp_path / "done.log")
    p.wait(timeout=30)
    process.stop(p)
    process.stop(p.pid)  # reaped: no such process any more
    assert p.returncode == 0
