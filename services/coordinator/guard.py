"""A run's guard: stops every process a run started when the run's own process dies without stopping them.

A run stops its children itself (services/launcher.py `Rig.stop_all`, also on Ctrl-C and SIGTERM), but a process
killed by SIGKILL (the OOM killer, `kill -9`, a CI runner's hard timeout) runs no cleanup: its backends, llm-mock,
cortex-mock and their sidecars went on running, each in its own session, for good (issue 49's fault campaign found
five after one `kill -9` of `memrig bench`).

`protect()` (`memrig bench`, `bench-all`) puts a token (MEMRIG_RUN_GUARD) in the command's environment, which every
process it starts from then on, and everything those start, inherits, and starts one small watcher process holding the read end of a pipe whose write
end only the run holds. When the run exits, however it exits, the pipe reaches end of file and the watcher stops
every process whose environment carries the token: SIGTERM (and SIGCONT, so a stopped process gets it), then
SIGKILL to those still running after the grace period, and notes what it stopped in the log it was given
($MEMRIG_STATE_DIR/guard.log for the CLI). A run that stopped its children itself leaves it nothing to do. By PID, found by the token: never by name, never a process group, never a process of another run.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

ENV = "MEMRIG_RUN_GUARD"
GRACE_S = 5.0


class Guard:
    def __init__(self, token: str, proc: subprocess.Popen | None, env: dict[str, str] | None = None):
        self.token = token
        self.proc = proc
        self.env = env  # the environment the token was put in, taken out again on close

    def close(self, wait_s: float = GRACE_S + 2.0) -> None:
        """The run is done: the token leaves the environment (a process started later in the same interpreter, e.g.
        the next test, is not the finished run's) and the watcher sweeps (finding nothing when the run stopped its
        children) and exits."""
        if self.env is not None and self.env.get(ENV) == self.token:
            del self.env[ENV]
        self.env = None
        if self.proc is None:
            return
        try:
            if self.proc.stdin is not None:
                self.proc.stdin.close()
            self.proc.wait(timeout=wait_s)
        except (OSError, subprocess.TimeoutExpired):
            self.proc.kill()
            self.proc.wait(timeout=5)
        self.proc = None


def protect(env: dict[str, str] | None = None, log: str | Path | None = None) -> Guard:
    """Mark `env` (default: this process's environment, which every child started from now on inherits, whichever
    Rig starts it) with a fresh token and start the watcher for it. When the watcher cannot start: a Guard that
    does nothing, and the run goes on as before. Not for a command whose processes must outlive it (`memrig up`)."""
    token = uuid.uuid4().hex
    target = os.environ if env is None else env
    # Its own small environment and no stdout/stderr of the command's: it is not one of the run's processes (a
    # check of what a run left, by environment, does not count it) and never holds the command's output open (a
    # caller reading it to its end does not wait for the sweep).
    base = {k: os.environ[k] for k in ("PATH", "LANG", "LC_ALL", "TMPDIR") if k in os.environ}
    try:
        proc = subprocess.Popen([sys.executable, "-m", "services.coordinator.guard", token, str(os.getpid()),
                                 str(log or "")], stdin=subprocess.PIPE, stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL, env=base, cwd=str(Path(__file__).resolve().parents[2]),
                                start_new_session=True)
    except OSError as e:  # the run is not worse off than without its guard
        print(f"guard: not started ({e}); a run killed by SIGKILL would leave its processes running",
              file=sys.stderr)
        return Guard(token, None)
    target[ENV] = token
    return Guard(token, proc, target)


@contextlib.contextmanager
def unmarked(env: dict[str, str] | None = None):
    """Inside: processes started carry no run token. For helpers that end on their own when the run does and that a
    sweep must not wait for: a process pool's workers and multiprocessing's resource tracker, which ignores SIGTERM
    and lives until its parent exits, so the sweep at the end of every bench-all waited its whole grace (5 s) for
    it, then killed it."""
    target = os.environ if env is None else env
    token = target.pop(ENV, None)
    try:
        yield
    finally:
        if token is not None:
            target[ENV] = token


def marked(token: str, exclude: set[int] | None = None) -> list[int]:
    """PIDs of live processes whose environment carries `token`."""
    needle = f"{ENV}={token}".encode()
    out = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) in (exclude or set()):
            continue
        try:
            with open(f"/proc/{entry}/environ", "rb") as f:
                if needle in f.read().split(b"\0") and not _zombie(int(entry)):
                    out.append(int(entry))
        except OSError:
            continue
    return out


def _zombie(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(") ", 1)[1][0] == "Z"
    except OSError:
        return True


def sweep(token: str, grace_s: float = GRACE_S) -> list[int]:
    """Stop every process carrying `token`: SIGTERM + SIGCONT, up to `grace_s` for all, then SIGKILL. Returns the
    PIDs it signalled."""
    me = {os.getpid()}
    hit: set[int] = set()
    deadline = time.monotonic() + grace_s
    while (pids := marked(token, me)) and time.monotonic() < deadline:
        for pid in pids:
            if pid not in hit:  # one SIGTERM each; one started meanwhile (a sidecar's child) gets its own
                for sig in (signal.SIGTERM, signal.SIGCONT):
                    try:
                        os.kill(pid, sig)
                    except ProcessLookupError:
                        pass
                hit.add(pid)
        time.sleep(0.05)
    for pid in marked(token, me):
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        hit.add(pid)
    return sorted(hit)


def main(argv: list[str]) -> int:
    token, parent, log = argv[0], argv[1], (argv[2] if len(argv) > 2 else "")
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # a Ctrl-C at the terminal is the run's to handle
    try:
        while sys.stdin.buffer.read(65536):  # the run never writes: this returns at end of file, when it is gone
            pass
    except OSError:
        pass
    stopped = sweep(token)
    if stopped and log:  # what it did, for whoever wonders where the run's processes went
        try:
            Path(log).parent.mkdir(parents=True, exist_ok=True)
            with open(log, "a") as f:
                f.write(f"{time.strftime('%Y-%m-%dT%H:%M:%S')} guard: process {parent} ended without stopping "
                        f"{len(stopped)} process(es) it started; stopped {stopped}\n")
        except OSError:
            pass
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
