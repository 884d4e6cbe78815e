"""A real system's processes, run beside the adapter.

`Sidecar`, a long-lived child:
- spawned in a new session (a Ctrl-C at the terminal reaches the rig, which stops it), stderr appended to its log
  file, stdout a pipe; stdin a pipe only when the adapter talks to it that way, or when the child watches it to
  end with its parent (its end of input: the adapter stopped it or died);
- ready when its first stdout line passes the adapter's check (by default: it starts with `READY`); `start` waits at
  most `timeout_s`, and no line in time, the child exiting first, or a line the check refuses stops the child and
  raises the adapter's error, naming the process and showing the tail of its log;
- after ready, stdout is either the reply channel (`request`: one line written to stdin, one line read back, one
  request at a time) or, with `drain_stdout`, copied into the log so a chatty child can never fill the pipe and
  stall;
- `stop`: stdin closed (a child reading requests ends on EOF) and up to `grace_s` to exit, then SIGTERM to its PID,
  then after `grace_s` SIGKILL to its PID; a child already gone is left alone.

`run_once`, a child per request: its input on stdin, its stdout and stderr back; a run that overruns its timeout,
or whose caller is cancelled, is killed with its whole process group (a runtime may start helpers).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from services.common.errors import DependencyError

LOG_TAIL_CHARS = 1500


def ready_prefix(prefix: bytes = b"READY") -> Callable[[bytes], str]:
    """A ready check: "" when the line starts with `prefix`, else what was wrong."""
    def check(line: bytes) -> str:
        return "" if line.startswith(prefix) else f"its first line was {line[:200]!r}, not {prefix.decode()}"
    return check


class Sidecar:
    def __init__(self, name: str, argv: list[str], *, cwd: Path, env: dict[str, str], log: Path,
                 error: type[DependencyError] = DependencyError, stdin: bool = False,
                 line_limit: int = 2 ** 16) -> None:
        self.name, self.argv, self.cwd, self.env, self.log = name, argv, cwd, env, log
        self.error, self.stdin, self.line_limit = error, stdin, line_limit
        self.proc: asyncio.subprocess.Process | None = None
        self._drain: asyncio.Task | None = None
        self._lock = asyncio.Lock()

    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc is not None else None

    @property
    def alive(self) -> bool:
        return self.proc is not None and self.proc.returncode is None

    def log_tail(self, n: int = LOG_TAIL_CHARS) -> str:
        try:
            return self.log.read_text(errors="replace")[-n:]
        except OSError:
            return "(no log)"

    async def start(self, timeout_s: float, check: Callable[[bytes], str] = ready_prefix(),
                    drain_stdout: bool = False) -> bytes:
        """Spawn the child and wait for its ready line; returns that line."""
        self.log.parent.mkdir(parents=True, exist_ok=True)
        try:
            with open(self.log, "wb") as log:
                self.proc = await asyncio.create_subprocess_exec(
                    *self.argv, cwd=str(self.cwd), env=self.env,
                    stdin=asyncio.subprocess.PIPE if self.stdin else asyncio.subprocess.DEVNULL,
                    stdout=asyncio.subprocess.PIPE, stderr=log, limit=self.line_limit, start_new_session=True)
        except OSError as e:
            raise self.error(f"{self.name}: cannot start {self.argv[0]}: {e}") from e
        proc = self.proc
        assert proc.stdout is not None
        try:
            line = await asyncio.wait_for(proc.stdout.readline(), timeout_s)
        except BaseException as e:
            await self.stop()
            if isinstance(e, TimeoutError):
                raise self.error(f"{self.name}: the sidecar (pid {proc.pid}) was not ready in {timeout_s:g} s; "
                                 f"log: {self.log_tail()}") from None
            raise
        if not line:
            await self.stop()
            raise self.error(f"{self.name}: the sidecar (pid {proc.pid}) exited before it was ready (exit "
                             f"{proc.returncode}); log: {self.log_tail()}")
        why = check(line)
        if why:
            await self.stop()
            raise self.error(f"{self.name}: the sidecar (pid {proc.pid}) did not start: {why}; "
                             f"log: {self.log_tail()}")
        if drain_stdout:
            self._drain = asyncio.create_task(self._drain_stdout(proc.stdout))
        return line

    async def _drain_stdout(self, stream: asyncio.StreamReader) -> None:
        while line := await stream.readline():
            with open(self.log, "ab") as log:
                log.write(line)

    async def request(self, line: bytes, timeout_s: float, what: str = "a request") -> bytes:
        """Write one line to the child's stdin and read one line back (b"" when the child has exited)."""
        if not self.alive or self.proc is None or self.proc.stdin is None or self.proc.stdout is None:
            raise self.error(f"{self.name}: the sidecar is not running (start() was not called or failed)")
        async with self._lock:
            self.proc.stdin.write(line if line.endswith(b"\n") else line + b"\n")
            await self.proc.stdin.drain()
            try:
                return await asyncio.wait_for(self.proc.stdout.readline(), timeout_s)
            except TimeoutError:
                raise self.error(f"{self.name}: {what} took longer than {timeout_s:g} s") from None

    async def stop(self, grace_s: float = 10.0) -> None:
        if self._drain is not None:
            self._drain.cancel()
            self._drain = None
        p, self.proc = self.proc, None
        if p is None:
            return
        if p.returncode is None and p.stdin is not None:
            p.stdin.close()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(p.wait(), grace_s)
        for sig in (signal.SIGTERM, signal.SIGKILL):
            if p.returncode is not None:
                break
            with contextlib.suppress(ProcessLookupError):
                os.kill(p.pid, sig)  # our own child, by its PID (still ours: not yet reaped)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(p.wait(), grace_s if sig == signal.SIGTERM else None)
        await p.wait()


@dataclass(frozen=True)
class Finished:
    returncode: int
    stdout: str
    stderr: str


async def run_once(name: str, argv: list[str], payload: bytes, *, cwd: Path, env: dict[str, str], timeout_s: float,
                   error: type[DependencyError] = DependencyError) -> Finished:
    """Run a child to completion with `payload` on stdin; raises `error` when it cannot start or overruns."""
    try:
        proc = await asyncio.create_subprocess_exec(
            *argv, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
            cwd=str(cwd), env=env, start_new_session=True)
    except OSError as e:
        raise error(f"{name}: cannot start {argv[0]}: {e}") from e
    try:
        out, err = await asyncio.wait_for(proc.communicate(payload), timeout_s)
    except BaseException as e:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)  # its own session: the child and whatever it started
        await proc.wait()
        if isinstance(e, TimeoutError):
            raise error(f"{name}: did not finish in {timeout_s:g} s") from None
        raise
    return Finished(proc.returncode if proc.returncode is not None else -1, out.decode(errors="replace"),
                    err.decode(errors="replace"))
