"""Ctrl-C for the CLI's in-process commands (`memrig ingest`, `memrig bench`): stop at once, say so in one line,
leave nothing half written.

Why not asyncio.run's own handling: an in-process backend embeds and indexes in threads and in C code; asyncio.run
cancels its task on SIGINT but then joins the executor's threads, which run on to the end of their batch (34 s
for 2,400 messages, minutes for 18,000), and ends in a KeyboardInterrupt traceback.

The rule here: `run(main, on_interrupt)` runs asyncio.run(main) in a worker thread while the main thread only
waits, so SIGINT always lands at once. On SIGINT the main thread takes the commit lock (waiting for a `critical()`
section in progress to finish: a journal or run.json write is never cut), keeps it so no other section starts,
runs the registered cleanups (stopping child processes by their PIDs) and `on_interrupt` (which returns the line
to print), prints that line to stderr and exits with status 130 (128 + SIGINT) without waiting for the worker.

SIGTERM (`kill PID`, `timeout`, a CI runner or an orchestrator stopping the command) takes the same path and exits
with 143 (128 + SIGTERM). Before, it ended the process at once and left every service the command had started
running; and a command started in the background of a non-interactive shell ignores SIGINT, so SIGTERM is the
signal that reaches it.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sys
import threading
from collections.abc import Callable, Coroutine, Iterator
from typing import Any, TypeVar

T = TypeVar("T")
EXIT_STATUS = 130  # 128 + SIGINT, as a shell reports a command Ctrl-C stopped
CRITICAL_WAIT_S = 1.5  # the longest a section in progress delays the exit

_commit = threading.RLock()  # re-entrant: the main thread's cleanup may write what it guards
_cleanups: list[Callable[[], Any]] = []
_interrupted = threading.Event()
_interrupter: list[int] = []  # the thread that took the Ctrl-C (its cleanups may still enter sections)
_never = threading.Event()  # never set: what a section asked for after Ctrl-C waits on


@contextlib.contextmanager
def critical() -> Iterator[None]:
    """A section Ctrl-C must not cut (a journal commit, a run.json write). Once interrupted, a new section never
    starts: its thread blocks here until the process exits.

    The check comes before the lock and does not rely on it: a thread writing sections back to back releases and
    retakes the lock within a few bytecodes, and a lock is not fair, so the interrupting thread waiting for it
    could lose every race for CRITICAL_WAIT_S and exit in the middle of the next section."""
    if _interrupted.is_set() and threading.get_ident() not in _interrupter:
        _never.wait()
    with _commit:
        yield


def interrupted() -> bool:
    return _interrupted.is_set()


def on_exit(fn: Callable[[], Any]) -> Callable[[], Any]:
    """Run fn (e.g. a Rig's stop_all) when Ctrl-C stops the command; returns fn, so it can be `forget`-ten later."""
    _cleanups.append(fn)
    return fn


def forget(fn: Callable[[], Any]) -> None:
    with contextlib.suppress(ValueError):
        _cleanups.remove(fn)


def run(main: Coroutine[Any, Any, T], on_interrupt: Callable[[], str] | None = None,
        exit: Callable[[int], Any] = os._exit) -> T:
    """asyncio.run(main) in a worker thread; its result, or its exception re-raised here. Ctrl-C: see the module
    docstring (`exit` is for tests; the default leaves without joining threads)."""
    box: dict[str, Any] = {}

    def work() -> None:
        try:
            box["result"] = asyncio.run(main)
        except BaseException as e:
            box["error"] = e

    got: list[int] = []

    def on_term(signum: int, _frame: Any) -> None:
        got.append(signum)
        raise KeyboardInterrupt

    previous = None
    if threading.current_thread() is threading.main_thread():
        previous = signal.signal(signal.SIGTERM, on_term)
    t = threading.Thread(target=work, name="memrig-main", daemon=True)
    t.start()
    try:
        while t.is_alive():
            t.join(0.2)
    except KeyboardInterrupt:
        _interrupter.append(threading.get_ident())
        _interrupted.set()
        _commit.acquire(timeout=CRITICAL_WAIT_S)  # held until exit: no new section starts
        line = "interrupted"
        for fn in list(_cleanups):
            with contextlib.suppress(Exception):
                fn()
        if on_interrupt is not None:
            try:
                line = on_interrupt()
            except Exception as e:  # the line must still be printed
                line = f"interrupted ({type(e).__name__}: {e})"
        print(line, file=sys.stderr, flush=True)
        sys.stdout.flush()
        status = 128 + got[0] if got else EXIT_STATUS
        exit(status)
        raise SystemExit(status) from None
    finally:
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)
    if "error" in box:
        raise box["error"]
    return box["result"]
