"""Which asyncio event loop the rig's HTTP services and its load generator run on.

uvloop (libuv underneath; a maintained drop-in for asyncio's loop) is the default wherever it is installed: on
this 2-core machine, with the generator and cortex-mock sharing the cores, it took about 15% off the CPU each
side spends per request outside the search itself (`make load-bench` prints the loop it ran on beside its
figures). `MEMRIG_EVENT_LOOP=asyncio` selects the standard library's loop, for comparison or debugging;
`uvloop` insists on uvloop; anything else is refused with an error naming the variable.

Only aiohttp processes use this (cortex-mock, fault-proxy, llm-mock, the load-bench generator and its trivial
target); the gRPC servers keep grpc.aio's own default loop.
"""

from __future__ import annotations

import asyncio
import importlib.util
import os
import sys
from collections.abc import Coroutine, Mapping
from typing import Any, TypeVar

ENV = "MEMRIG_EVENT_LOOP"
CHOICES = ("auto", "uvloop", "asyncio")
T = TypeVar("T")


def uvloop_installed() -> bool:
    return importlib.util.find_spec("uvloop") is not None


def loop_choice(env: Mapping[str, str] | None = None) -> str:
    """"uvloop" or "asyncio" from MEMRIG_EVENT_LOOP (unset or empty = auto: uvloop when installed)."""
    raw = (os.environ if env is None else env).get(ENV, "")
    value = raw.strip().lower() or "auto"
    if value not in CHOICES:
        raise ValueError(f"{ENV}: {raw!r} is not one of {', '.join(CHOICES)}")
    if value == "auto":
        return "uvloop" if uvloop_installed() else "asyncio"
    if value == "uvloop" and not uvloop_installed():
        raise ValueError(f"{ENV}: uvloop was asked for but is not installed (pip install uvloop)")
    return value


def describe(choice: str | None = None) -> str:
    """The loop with its version, for reports: "uvloop 0.23.0" or "asyncio (Python 3.11.14)"."""
    choice = choice or loop_choice()
    if choice == "uvloop":
        import uvloop

        return f"uvloop {uvloop.__version__}"
    import platform

    return f"asyncio (Python {platform.python_version()})"


def run(main: Coroutine[Any, Any, T], choice: str | None = None) -> T:
    """asyncio.run(main) on the chosen loop, for a process's entry point: a bad MEMRIG_EVENT_LOOP closes `main`
    unrun and exits with status 2 and a one-line error."""
    try:
        choice = choice or loop_choice()
    except ValueError as e:
        main.close()
        print(f"error: {e}", file=sys.stderr)
        raise SystemExit(2) from None
    if choice == "uvloop":
        import uvloop

        return uvloop.run(main)
    return asyncio.run(main)
