"""The open-loop driver (loadtests/open_loop.py) at its edges, by hand: a Poisson phase whose first draw falls
short of the phase end (the extension draw), the exact boundary of a phase, the draw sizes and scales read off
a scripted generator; stamps one nanosecond apart; the exact-percentile helper's units and rounding; the
in-flight bound above the small-integer cache; targets closed before they were started; the CLI's phases."""

from __future__ import annotations

import asyncio
import dataclasses
import math

import numpy as np
import pytest

import loadtests.open_loop as ol
from loadtests.open_loop import (
    DriverConfig,
    GrpcRetrieveTarget,
    HttpRetrieveTarget,
    Phase,
    Records,
    _exact_ms,
    build_parser,
    build_schedule,
    drive,
    format_markdown,
    phases_from_args,
    summarise,
)


def dyn(s: str) -> str:
    """The same text as a new string object (as read from argv or a file), never the interned literal."""
    return "".join([s[:1], s[1:]])


class ScriptedRng:
    """Stands in for numpy's Generator: each `exponential` call returns its scripted constant gap."""

    def __init__(self, gaps):
        self.gaps = list(gaps)
        self.calls: list[tuple[float, int]] = []

    def exponential(self, scale, size):
        self.calls.append((scale, size))
        return np.full(size, self.gaps.pop(0))


def test_poisson_extension_draw_and_exact_phase_ends(monkeypatch):
    # Phase 1: 2/s for 3 s draws int(6 + 10·√6 + 10) = 40 gaps (scale 1/2); 40 × 1/16 ends at 2.5 < 3: one more
    # draw of 40 gaps (0.25) from 2.5: 2.75, 3.0, …; the phase keeps what is strictly before 3.0.
    # Phase 2: 0.36/s for 1 s from 3.0 draws int(0.36 + 6 + 10) = 16 gaps (scale 1/0.36); 16 × 1/16 ends at
    # exactly 4.0, the phase end: no extension; 4.0 itself is not kept.
    rng = ScriptedRng([1 / 16, 0.25, 1 / 16])
    monkeypatch.setattr(ol.np.random, "default_rng", lambda seed: rng)
    offs, idx = build_schedule([Phase(2, 3.0, "poisson"), Phase(0.36, 1.0, "poisson")], seed=3)
    assert rng.calls == [(0.5, 40), (0.5, 40), (1.0 / 0.36, 16)]
    assert offs.tolist() == [k / 16 for k in range(1, 41)] + [2.75] + [3 + k / 16 for k in range(1, 16)]
    assert idx.tolist() == [0] * 41 + [1] * 15


def test_schedule_default_seed_is_zero_and_arrival_compares_by_value():
    phases = [Phase(50, 1.0, "poisson")]
    assert build_schedule(phases)[0].tolist() == build_schedule(phases, seed=0)[0].tolist()
    offs, _ = build_schedule([Phase(4, 1.0, dyn("constant"))])
    assert offs.tolist() == [0.0, 0.25, 0.5, 0.75]


def test_phase_is_immutable():
    with pytest.raises(dataclasses.FrozenInstanceError):
        Phase(1, 1.0).rate = 2  # type: ignore[misc]


def test_summary_of_stamps_one_nanosecond_apart():
    # r0: intended 0, dispatched 1, sent 1, done 1 (ok); r1: dispatched 1, never sent nor finished
    rec = Records.empty(2)
    rec.dispatched[:] = [1, 1]
    rec.sent[0], rec.done[0], rec.ok[0] = 1, 1, True
    res = summarise(rec)
    assert (res["scheduled"], res["sent"], res["completed"], res["ok"], res["failed"]) == (2, 1, 1, 1, 0)
    assert res["achieved_rps"] == 1e9  # 1 ok over 1 ns
    assert res["schedule_lag"] == {"p50_ms": 0.0, "p99_ms": 0.0, "max_ms": 0.0}  # 1 ns each
    assert res["queue_wait"] == {"p50_ms": 0.0, "p99_ms": 0.0, "max_ms": 0.0}
    assert res["corrected"]["n"] == 1
    assert res["invalid_reasons"] == ["1 requests never finished"]
    # over 2 ns: 5e8/s
    rec.done[0] = 2
    assert summarise(rec)["achieved_rps"] == 5e8


def test_exact_percentiles_in_milliseconds():
    # 1.234567 ms and 1000 ms: p50 = 500.6172835 → 500.617; p99 = 1.234567 + 0.99 × 998.765433 = 990.01234…
    v = np.array([1_234_567, 1_000_000_000], dtype=np.int64)
    assert _exact_ms(v) == {"p50_ms": 500.617, "p99_ms": 990.012, "max_ms": 1000.0}
    assert _exact_ms(v, (90,)) == {"p90_ms": 900.123, "max_ms": 1000.0}  # 1.234567 + 0.9 × 998.765433 = 900.1234
    assert _exact_ms(np.zeros(0, dtype=np.int64), (50, 99.9)) == {"p50_ms": None, "p999_ms": None, "max_ms": None}


async def test_in_flight_bound_above_the_small_integer_cache():
    release = asyncio.Event()
    entered = 0

    class Held:
        name = "held"

        async def start(self): ...

        async def close(self): ...

        async def call(self, i):
            # Every call is held until the 300th has started. A task runs only once the dispatch loop yields, and
            # none can finish before the release, so by then all 302 arrivals are dispatched: no clock decides it
            # (a 0.3 s timer did, and a slow host let the release come first: no drop).
            nonlocal entered
            entered += 1
            if entered == 300:
                release.set()
            await release.wait()

    # 302 arrivals at once, 300 may be pending: the last two are dropped, the rest finish when released
    rec = await drive(Held(), np.zeros(302), None, DriverConfig(concurrency=400, max_pending=300, start_delay_s=0.0))
    assert entered == 300
    assert int(rec.dropped.sum()) == 2 and rec.dropped[-2:].all() and int(rec.ok.sum()) == 300


async def test_targets_close_before_start_and_after():
    await HttpRetrieveTarget("http://127.0.0.1:9").close()
    await GrpcRetrieveTarget("127.0.0.1:9").close()
    t = HttpRetrieveTarget("http://127.0.0.1:9")
    await t.start()
    await t.close()
    assert t._client.closed


def _res(n_phases: int) -> dict:
    rec = Records.empty(1)
    rec.intended[0], rec.dispatched[0], rec.sent[0], rec.done[0], rec.ok[0] = 10**9, 10**9, 10**9, 10**9 + 10**6, True
    return summarise(rec, [Phase(1, 1.0, name=f"p{k}") for k in range(n_phases)])


@pytest.mark.parametrize("n, table", [(0, False), (1, False), (2, True)])
def test_markdown_per_phase_table_only_for_several_phases(n, table):
    assert ("| phase | scheduled |" in format_markdown(_res(n))) is table


def test_cli_phases_from_argv_strings():
    p = build_parser()
    a = p.parse_args(["--shape", dyn("constant"), "--rate", "20", "--duration", "2"])
    assert phases_from_args(a) == [Phase(20, 2.0, "constant", "constant 20/s")]
    a = p.parse_args(["--shape", dyn("step"), "--rate", "10", "--step", "5", "--steps", "2", "--duration", "1"])
    assert phases_from_args(a) == [Phase(10, 1.0, "constant", "step 1: 10/s"), Phase(15, 1.0, "constant", "step 2: 15/s")]
    a = p.parse_args(["--shape", dyn("spike"), "--rate", "10", "--spike-rate", "40", "--spike-duration", "0.5",
                      "--duration", "1"])
    assert [(ph.rate, ph.duration_s) for ph in phases_from_args(a)] == [(10, 1.0), (40, 0.5), (10, 1.0)]
    assert p.description == ol.__doc__.split("\n\n")[0] and p.description.strip()
    assert math.isclose(p.parse_args([]).rate, 50.0)


def test_exact_maximum_keeps_three_decimals():
    assert _exact_ms(np.array([1_234_567], dtype=np.int64), (50,)) == {"p50_ms": 1.235, "max_ms": 1.235}


async def test_finished_requests_free_their_place():
    # max 2 pending: the first two answer at once; 50 ms later four more arrive and are held: two fit, two drop
    release = asyncio.Event()

    class FirstTwoFast:
        name = "first-two-fast"

        async def start(self): ...

        async def close(self): ...

        async def call(self, i):
            if i >= 2:
                await release.wait()

    async def open_gate():
        await asyncio.sleep(0.3)
        release.set()

    gate = asyncio.create_task(open_gate())
    rec = await drive(FirstTwoFast(), np.array([0.0, 0.0, 0.05, 0.05, 0.05, 0.05]), None,
                      DriverConfig(concurrency=8, max_pending=2, start_delay_s=0.0))
    await gate
    assert rec.dropped.tolist() == [False, False, False, False, True, True] and int(rec.ok.sum()) == 4


async def test_run_open_loop_default_seed_is_recorded():
    class Quick:
        name = "quick"

        async def start(self): ...

        async def close(self): ...

        async def call(self, i): ...

    res = await ol.run_open_loop(Quick(), [Phase(20, 0.1)], config=DriverConfig(start_delay_s=0.0))
    assert (res["seed"], res["target"], res["scheduled"], res["ok"]) == (0, "quick", 2, 2)


def test_cli_runs_as_a_module():
    import subprocess
    import sys

    out = subprocess.run([sys.executable, "-m", "loadtests.open_loop", "--help"], capture_output=True, text=True,
                         timeout=60, cwd=str(__import__("pathlib").Path(__file__).resolve().parents[1]))
    assert out.returncode == 0 and out.stdout.startswith("usage: python -m loadtests.open_loop")
