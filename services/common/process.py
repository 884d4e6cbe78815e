"""The rig's child processes, by PID: spawn one with its log, wait for its READY line, stop it with grace.

Every rig service prints one line `READY key=port ... pid=PID` on stdout once it serves (`announce_ready`; a
service on port 0 says there which port it bound), and whoever started it waits for that line (`wait_ready` /
`wait_ready_async`) rather than for a port to answer, so a child that dies or hangs at start-up is named with the
tail of what it wrote (`LaunchError`) instead of surfacing later as a refused connection.

A child's stdout and stderr go to a log file (`spawn(argv, log)`, read for the READY line), or, with no log, stdout
is a pipe read only until READY and then closed (nothing reads it afterwards, so a full pipe could otherwise block
the child) and stderr stays this process's own: cortex-mock's supervised workers write their errors into
cortex-mock's log that way.

`stop` works on our own children (a Popen, reaped) and on bare PIDs (`memrig down` stops the PIDs `memrig up`
recorded in a state file): SIGTERM, up to `grace_s` for every one of them to exit (one deadline for all, so N
children take one grace period, not N), then SIGKILL to whatever still runs. By PID only, never a process group or
a name: the rig stops exactly what it started.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import select
import signal
import subprocess
import time
from pathlib import Path

from services.common.errors import LaunchError

# `key=<digits>` pairs on one line after READY (none is allowed: a bare `READY` only says it serves).
READY_RE = re.compile(r"^READY((?:[ \t]+\w+=\d+)*)[ \t]*$", re.M)
LOG_TAIL_CHARS = 2000
POLL_S = 0.05


def ready_line(**ports: int) -> str:
    """`READY k=v ... pid=<this pid>`: what `wait_ready` waits for."""
    return "READY" + "".join(f" {k}={int(v)}" for k, v in ports.items()) + f" pid={os.getpid()}"


def announce_ready(**ports: int) -> None:
    """Print the READY line (flushed: the parent reads it while this process keeps running)."""
    print(ready_line(**ports), flush=True)


def parse_ready(text: str) -> dict[str, int] | None:
    """The ports of the first READY line in `text` ({} for a bare READY), None when there is none yet."""
    m = READY_RE.search(text)
    if not m:
        return None
    return {k: int(v) for k, v in (kv.split("=") for kv in m.group(1).split())}


def spawn(argv: list[str], log: str | Path | None = None, *, env: dict[str, str] | None = None,
          cwd: str | Path | None = None, new_session: bool = True) -> subprocess.Popen:
    """Start `argv` with stdout and stderr into `log` (truncated), or with stdout a pipe and stderr inherited when
    `log` is None. `new_session`: the child gets its own session, so a Ctrl-C at the terminal reaches only the
    rig, which then stops it by PID (off for children that should share their parent's fate, like cortex-mock's
    workers)."""
    if log is None:
        return subprocess.Popen(argv, stdout=subprocess.PIPE, env=env, cwd=cwd, start_new_session=new_session)
    with open(log, "w") as f:  # handed to the child; our copy closes here
        return subprocess.Popen(argv, stdout=f, stderr=subprocess.STDOUT, env=env, cwd=cwd,
                                start_new_session=new_session)


class _Watch:
    """What a starting child has written so far, and whether it is ready, gone or late."""

    def __init__(self, p: subprocess.Popen, name: str, log: str | Path | None, timeout_s: float, grace_s: float):
        self.p, self.name, self.timeout_s, self.grace_s = p, name, timeout_s, grace_s
        self.log = Path(log) if log is not None else None
        self.deadline = time.monotonic() + timeout_s
        self.out = b""
        self.fd: int | None = None
        if self.log is None and p.stdout is not None:
            self.fd = p.stdout.fileno()
            os.set_blocking(self.fd, False)

    def text(self) -> str:
        if self.log is not None:
            return self.log.read_text(errors="replace") if self.log.exists() else ""
        while self.fd is not None:
            try:
                chunk = os.read(self.fd, 65536)
            except BlockingIOError:
                break
            if not chunk:
                break
            self.out += chunk
        return self.out.decode(errors="replace")

    def _where(self) -> str:
        return f"log {self.log}" if self.log is not None else "its output"

    def check(self) -> dict[str, int] | None:
        """The ports once the READY line is complete (up to its newline), None while still starting; raises
        LaunchError when the child exited first or the timeout passed (stopping it then)."""
        text = self.text()
        ports = parse_ready(text[:text.rfind("\n") + 1])
        if ports is None and self.p.poll() is not None:
            text = self.text()  # what it wrote just before it exited
            ports = parse_ready(text)
            if ports is None:
                self._close()
                raise LaunchError(f"{self.name} exited with code {self.p.returncode} before it was ready; "
                                  f"{self._where()}:\n{text[-LOG_TAIL_CHARS:]}")
        if ports is not None:
            self._close()
            return ports
        if time.monotonic() > self.deadline:
            self._close()
            stop(self.p, grace_s=self.grace_s)
            raise LaunchError(f"{self.name} not ready after {self.timeout_s}s; {self._where()}:\n"
                              f"{text[-LOG_TAIL_CHARS:]}")
        return None

    def _close(self) -> None:
        """Nothing more is read from the pipe: closed, so a full pipe can never block the child."""
        if self.fd is not None and self.p.stdout is not None:
            self.p.stdout.close()
            self.fd = None

    def pause(self) -> None:
        """Until the pipe has something to read (or the poll interval passes)."""
        if self.fd is not None:
            select.select([self.fd], [], [], POLL_S)
        else:
            time.sleep(POLL_S)


def wait_ready(p: subprocess.Popen, name: str, log: str | Path | None = None, timeout_s: float = 120.0,
               grace_s: float = 5.0) -> dict[str, int]:
    """Block until `p` prints its READY line and return its ports. `log` is the file `spawn` gave it (None: read
    its stdout pipe). A child that exits first, or is not ready after `timeout_s` (it is stopped, with `grace_s`),
    raises LaunchError naming `name` with the tail of what it wrote."""
    w = _Watch(p, name, log, timeout_s, grace_s)
    while (ports := w.check()) is None:
        w.pause()
    return ports


async def wait_ready_async(p: subprocess.Popen, name: str, log: str | Path | None = None, timeout_s: float = 120.0,
                           grace_s: float = 5.0) -> dict[str, int]:
    """`wait_ready` for an event loop: polls without blocking it (a stop on timeout still blocks up to
    `grace_s`)."""
    w = _Watch(p, name, log, timeout_s, grace_s)
    while (ports := w.check()) is None:
        await asyncio.sleep(POLL_S)
    return ports


def pid_alive(pid: int) -> bool:
    """Whether `pid` runs. A zombie (exited, not yet reaped by its parent) still answers kill(0): it counts as
    dead."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # pragma: no cover - someone else's process: alive
        return True
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(") ", 1)[1][0] != "Z"
    except OSError:
        return True


def _running(t: subprocess.Popen | int) -> bool:
    return t.poll() is None if isinstance(t, subprocess.Popen) else pid_alive(t)


def stop(*targets: subprocess.Popen | int, grace_s: float = 5.0) -> None:
    """Stop each target (a child we started, or a bare PID): SIGTERM, up to `grace_s` for all of them to exit,
    then SIGKILL; `grace_s` <= 0 kills at once. Our own children are reaped. A target already gone is left alone."""
    sig = signal.SIGTERM if grace_s > 0 else signal.SIGKILL
    signalled: list[subprocess.Popen | int] = []
    for t in targets:
        if not _running(t):
            continue
        try:
            os.kill(t.pid if isinstance(t, subprocess.Popen) else t, sig)
        except ProcessLookupError:
            continue
        signalled.append(t)
    if sig == signal.SIGTERM:
        deadline = time.monotonic() + grace_s
        while (signalled := [t for t in signalled if _running(t)]) and time.monotonic() < deadline:
            time.sleep(POLL_S)
        for t in signalled:
            with contextlib.suppress(ProcessLookupError):
                os.kill(t.pid if isinstance(t, subprocess.Popen) else t, signal.SIGKILL)
    for t in targets:
        if isinstance(t, subprocess.Popen):
            # SIGKILL ends a process at once unless it is stuck in the kernel; then it stays a zombie rather
            # than hang the stop of everything else.
            with contextlib.suppress(subprocess.TimeoutExpired):
                t.wait(timeout=5)
