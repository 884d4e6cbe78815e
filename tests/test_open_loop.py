"""Open-loop driver: schedules, the coordinated-omission correction (hand-checked), validity rules, targets."""

from __future__ import annotations

import asyncio
import json
import math
import time

import numpy as np
import pytest
from aiohttp import web

from loadtests.open_loop import (
    DriverConfig,
    GrpcRetrieveTarget,
    HttpRetrieveTarget,
    HttpStatusError,
    Phase,
    Records,
    Validity,
    build_parser,
    build_schedule,
    constant_phases,
    default_queries,
    drive,
    error_kind,
    format_markdown,
    hdr_from_ns,
    hdr_summary_ms,
    main,
    phases_from_args,
    run_open_loop,
    spike_phases,
    step_phases,
    summarise,
)
from loadtests.workload import queries

MS = 1_000_000  # ns


# ------------------------------------------------------------------------------------------------ schedules
def test_constant_schedule_is_evenly_spaced():
    offs, idx = build_schedule([Phase(100, 0.05)])
    assert offs.tolist() == pytest.approx([0.0, 0.01, 0.02, 0.03, 0.04])
    assert idx.tolist() == [0, 0, 0, 0, 0]


def test_step_schedule_phases_follow_each_other():
    phases = step_phases(10, 10, 3, 1.0)
    assert [p.rate for p in phases] == [10, 20, 30]
    offs, idx = build_schedule(phases)
    # 10 + 20 + 30 arrivals; the second phase starts at 1.0 s and is spaced 50 ms.
    assert np.bincount(idx).tolist() == [10, 20, 30]
    assert offs[10] == pytest.approx(1.0) and offs[11] == pytest.approx(1.05)
    assert np.all(np.diff(offs) > 0)


def test_spike_schedule_has_base_spike_recovery():
    offs, idx = build_schedule(spike_phases(10, 100, 1.0, 0.5, 1.0))
    assert np.bincount(idx).tolist() == [10, 50, 10]
    assert offs[10] == pytest.approx(1.0) and offs[60] == pytest.approx(1.5)


def test_poisson_schedule_is_seeded_and_bounded():
    ph = [Phase(200, 5.0, "poisson")]
    a, _ = build_schedule(ph, seed=3)
    b, _ = build_schedule(ph, seed=3)
    c, _ = build_schedule(ph, seed=4)
    assert np.array_equal(a, b) and not np.array_equal(a, c)
    assert a.min() >= 0 and a.max() < 5.0 and np.all(np.diff(a) >= 0)
    # 1000 expected arrivals; sd ~32, so 6 sd either side.
    assert 800 < a.size < 1200


def test_phase_validation_names_the_field():
    with pytest.raises(ValueError, match="phase.arrival"):
        Phase(10, 1.0, "burst")
    with pytest.raises(ValueError, match="phase.duration_s"):
        Phase(10, 0)


# ------------------------------------------------------------------------------------------------ the CO case
def _single_connection(intended_ms: list[int], service_ms: list[int]) -> Records:
    """One connection (concurrency 1): a request is sent when both due and the connection is free."""
    n = len(intended_ms)
    rec = Records.empty(n)
    free = 0
    for i, (t, s) in enumerate(zip(intended_ms, service_ms, strict=True)):
        send = max(t, free)
        free = send + s
        rec.intended[i], rec.dispatched[i], rec.sent[i], rec.done[i] = t * MS, t * MS, send * MS, free * MS
        rec.ok[i] = True
    return rec


def test_stall_hand_checked_corrected_vs_service():
    """100/s for 5 s (every 10 ms); each answer takes 1 ms, except the one sent at 2000 ms takes 500 ms.

    By hand: request 200+j (j >= 1) is intended at 2000+10j but sent when the connection frees at 2500+(j-1),
    done at 2500+j, so its corrected latency is 500-9j ms until that falls to 1 ms (j = 56 is on time).
    Corrected, sorted from the top: 500, 491, 482, 473, 464, 455, ... p99 of 500 samples is the 495th
    smallest = the 6th largest = 455 ms. Service times: one 500 ms, every other 1 ms, so p99 = 1 ms.
    """
    intended = [10 * i for i in range(500)]
    service = [500 if i == 200 else 1 for i in range(500)]
    res = summarise(_single_connection(intended, service), validity=Validity(20.0))
    assert res["corrected"]["n"] == 500 and res["service"]["n"] == 500
    assert res["corrected"]["p99_ms"] == pytest.approx(455, rel=2e-3)  # HdrHistogram: 3 significant digits
    assert res["corrected"]["max_ms"] == pytest.approx(500, rel=2e-3)
    assert res["service"]["p99_ms"] == pytest.approx(1, rel=2e-3)
    assert res["service"]["max_ms"] == pytest.approx(500, rel=2e-3)
    assert res["corrected"]["p50_ms"] == pytest.approx(1, rel=2e-3)
    # The scheduler itself was on time, so the run is valid; the queue wait shows the backlog.
    assert res["valid"] and res["schedule_lag"]["p99_ms"] == 0
    # The longest queue wait is j=1's: sent at 2500, intended at 2010.
    assert res["queue_wait"]["max_ms"] == 490


def test_summary_counts_failures_and_drops_and_invalidates():
    rec = Records.empty(4)
    rec.intended[:] = [0, 10 * MS, 20 * MS, 30 * MS]
    rec.dispatched[:] = rec.intended
    rec.sent[:3] = rec.intended[:3]
    rec.done[:3] = rec.intended[:3] + 2 * MS
    rec.ok[:2] = True
    rec.errors[2] = "http_503"
    rec.dropped[3] = True
    res = summarise(rec)
    assert (res["ok"], res["failed"], res["dropped"], res["errors"]) == (2, 1, 1, {"http_503": 1})
    assert not res["valid"] and "1 arrivals dropped" in res["invalid_reasons"][0]
    assert "corrected" in format_markdown(res)


# ------------------------------------------------------------------------------------------------ real runs
class _StallServer:
    """A tiny aiohttp stand-in for /v1/retrieve that stalls `stall_s` once, `stall_after_s` after its first call."""

    def __init__(self, stall_after_s: float = 1.0, stall_s: float = 0.5, status: int = 200):
        self.stall_after_s, self.stall_s, self.status = stall_after_s, stall_s, status
        self.first: float | None = None
        self.stalled = False
        self.calls = 0

    async def handle(self, request: web.Request) -> web.Response:
        await request.json()
        self.calls += 1
        now = time.monotonic()
        self.first = self.first or now
        if not self.stalled and now - self.first >= self.stall_after_s:
            self.stalled = True
            await asyncio.sleep(self.stall_s)
        return web.json_response({"results": []}, status=self.status)

    async def __aenter__(self) -> str:
        app = web.Application()
        app.router.add_post("/v1/retrieve", self.handle)
        self.runner = web.AppRunner(app, access_log=None)
        await self.runner.setup()
        site = web.TCPSite(self.runner, "127.0.0.1", 0)
        await site.start()
        return f"http://127.0.0.1:{site._server.sockets[0].getsockname()[1]}"

    async def __aexit__(self, *exc) -> None:
        await self.runner.cleanup()


@pytest.mark.slow  # takes seconds (plots, a real library's model, or 1,000 rounds)
async def test_injected_stall_corrected_p99_exceeds_uncorrected():
    """One 500 ms stall 1 s into a 3 s, 100/s schedule on one connection: about 50 arrivals queue behind it.

    Corrected p99 (4th largest of 300) is about 473 ms by the same arithmetic as the hand-checked case; the
    service-time p99 only sees the one slow answer. Margins are wide because the box is shared.
    """
    srv = _StallServer(stall_after_s=1.0, stall_s=0.5)
    async with srv as url:
        cfg = DriverConfig(concurrency=1, max_pending=1000, validity=Validity(lag_p99_threshold_ms=100))
        res = await run_open_loop(HttpRetrieveTarget(url, concurrency=1), [Phase(100, 3.0)], seed=1, config=cfg)
    assert srv.stalled and res["ok"] == 300 and res["dropped"] == 0
    assert res["corrected"]["p99_ms"] > 300
    assert res["corrected"]["p99_ms"] > res["service"]["p99_ms"] + 200
    assert res["service"]["max_ms"] >= 490  # the stalled request itself
    assert res["valid"], res["invalid_reasons"]


async def test_in_flight_bound_drops_and_invalidates():
    class Slow:
        name = "slow"

        async def start(self): ...

        async def close(self): ...

        async def call(self, i):
            await asyncio.sleep(0.3)

    offs, idx = build_schedule([Phase(100, 0.2)])
    rec = await drive(Slow(), offs, idx, DriverConfig(concurrency=2, max_pending=4))
    res = summarise(rec)
    # 20 arrivals 10 ms apart; only 4 fit before the first answer at 300 ms.
    assert res["dropped"] == 16 and res["ok"] == 4 and not res["valid"]


async def test_blocked_generator_lags_and_is_invalid():
    class Blocking:
        name = "blocking"

        async def start(self): ...

        async def close(self): ...

        async def call(self, i):
            time.sleep(0.03)  # blocks the event loop, as a CPU-starved generator would

    offs, idx = build_schedule([Phase(100, 0.3)])
    res = summarise(await drive(Blocking(), offs, idx, DriverConfig()), validity=Validity(lag_p99_threshold_ms=20))
    assert not res["valid"] and any("schedule lag" in r for r in res["invalid_reasons"])


async def test_http_errors_are_counted_by_status():
    async with _StallServer(stall_after_s=1e9, status=503) as url:
        res = await run_open_loop(HttpRetrieveTarget(url, concurrency=4), [Phase(50, 0.2)])
    assert res["ok"] == 0 and res["errors"] == {"http_503": 10}


async def test_grpc_target_against_in_process_backend():
    from services.adapters.base import BackendContext
    from services.adapters.none.backend import NoMemoryBackend
    from services.adapters.server import serve_backend

    ready, stop = asyncio.Event(), asyncio.Event()
    server = asyncio.create_task(serve_backend(NoMemoryBackend({}, BackendContext(embedder_name="hash")),
                                               port=0, metrics_port=None, ready=ready, stop=stop, announce=False))
    await asyncio.wait_for(ready.wait(), 30)
    try:
        res = await run_open_loop(GrpcRetrieveTarget(f"127.0.0.1:{ready.port}"), [Phase(50, 0.4)],
                                  config=DriverConfig(concurrency=8, validity=Validity(100)))
    finally:
        stop.set()
        await server
    assert res["ok"] == 20 and res["failed"] == 0 and res["corrected"]["n"] == 20


# ------------------------------------------------------------------------------------------------ schedule edges
def test_schedule_edges_rate_zero_empty_and_float_products():
    # a rate-0 phase (constant or Poisson) takes its time and places nothing; a 1/s phase over 2 s places 2
    offs, idx = build_schedule([Phase(0, 1.0, "poisson"), Phase(1, 2.0), Phase(0, 0.5)])
    assert offs.tolist() == [1.0, 2.0] and idx.tolist() == [1, 1]
    for phases in ([], [Phase(0, 1.0)]):
        offs, idx = build_schedule(phases)
        assert offs.size == 0 and idx.size == 0 and idx.dtype == np.int32
    # 100/s × 0.29 s is 28.999999999999996 in floating point: still 29 arrivals
    offs, _ = build_schedule([Phase(100, 0.29)])
    assert offs.size == 29 and offs[-1] == pytest.approx(0.28)


def test_poisson_phases_draw_from_one_seeded_stream():
    """Replay across versions: a seed names one schedule. Phase 1 (100/s, 1 s) draws 100 + 10·√100 + 10 = 210
    gaps of mean 10 ms, phase 2 (50/s from 1 s) the next int(50 + 10·√50 + 10) = 130 gaps of mean 20 ms; each
    phase keeps the arrivals before its end."""
    offs, idx = build_schedule([Phase(100, 1.0, "poisson"), Phase(50, 1.0, "poisson")], seed=5)
    rng = np.random.default_rng(5)
    t1 = np.cumsum(rng.exponential(0.01, 210))
    t2 = 1.0 + np.cumsum(rng.exponential(0.02, 130))
    t1, t2 = t1[t1 < 1.0], t2[t2 < 2.0]
    assert offs.tolist() == t1.tolist() + t2.tolist()
    assert idx.tolist() == [0] * t1.size + [1] * t2.size


def test_phase_rate_must_be_finite_and_not_negative():
    assert Phase(0, 1.0).rate == 0
    for bad in (-1.0, math.inf, math.nan):
        with pytest.raises(ValueError, match="phase.rate"):
            Phase(bad, 1.0)
    with pytest.raises(ValueError, match="phase.duration_s"):
        Phase(10, -0.5)


def test_phase_builders_name_their_phases():
    assert constant_phases(50, 2.0, "poisson") == [Phase(50, 2.0, "poisson", "constant 50/s")]
    assert step_phases(10, 5, 3, 1.5, "poisson") == [Phase(10, 1.5, "poisson", "step 1: 10/s"),
                                                     Phase(15, 1.5, "poisson", "step 2: 15/s"),
                                                     Phase(20, 1.5, "poisson", "step 3: 20/s")]
    assert spike_phases(10, 100, 2.0, 0.5, 3.0) == [Phase(10, 2.0, "constant", "base 10/s"),
                                                    Phase(100, 0.5, "constant", "spike 100/s"),
                                                    Phase(10, 3.0, "constant", "recovery 10/s")]


# ------------------------------------------------------------------------------------------------ histograms
def test_hdr_quantisation_and_clamping_by_hand():
    # 3 significant digits: below 2048 µs every µs is its own bucket; from 2048 µs buckets are 2 µs wide, and a
    # percentile reports the bucket's highest value: 2050 µs reads 2051 µs (2 digits would read 2063, 4: 2050).
    assert hdr_summary_ms(hdr_from_ns(np.array([2_050_000])))["max_ms"] == pytest.approx(2.051)
    assert hdr_summary_ms(hdr_from_ns(np.array([2_047_000])))["max_ms"] == pytest.approx(2.047)
    # below 1 µs (here 0 and 999 ns) is recorded as 1 µs; above an hour is clamped to an hour
    assert hdr_summary_ms(hdr_from_ns(np.array([0, 999])))["max_ms"] == pytest.approx(0.001)
    top = hdr_from_ns(np.array([2 * 3_600 * 10 ** 9]))
    assert top.get_total_count() == 1 and top.get_max_value() / 1e6 == pytest.approx(3_600, rel=1e-3)


def test_hdr_summary_by_hand():
    s = hdr_summary_ms(hdr_from_ns(np.array([100_000, 200_000, 300_000, 400_000])))  # 100..400 µs
    assert s == {"n": 4, "p50_ms": 0.2, "p90_ms": 0.4, "p99_ms": 0.4, "p999_ms": 0.4, "max_ms": 0.4,
                 "mean_ms": 0.25}
    assert hdr_summary_ms(hdr_from_ns(np.array([], dtype=np.int64)))  == {
        "n": 0, "p50_ms": None, "p90_ms": None, "p99_ms": None, "p999_ms": None, "max_ms": None, "mean_ms": None}
    # the mean keeps 3 decimals of a millisecond: (1 + 2 + 2) µs / 3 = 1.667 µs = 0.001667 ms -> 0.002
    assert hdr_summary_ms(hdr_from_ns(np.array([1_000, 2_000, 2_000])))["mean_ms"] == 0.002


# ------------------------------------------------------------------------------------------------ summary
def _hand_records() -> Records:
    """Six arrivals 10 ms apart (stamps in ms after T0): two ok, one failed, one dropped, one never finished, one
    ok late. Columns: intended, dispatched, sent, done, ok, dropped, error."""
    T0 = 10 ** 9
    rows = [(0, 2, 2, 5, True, False, None),  # corrected 5, service 3, lag 2, queue wait 2
            (10, 12, 14, 18, True, False, None),  # corrected 8, service 4, lag 2, wait 4
            (20, 22, 22, 23, False, False, "http_500"),  # failed: counted by error, not in the latencies
            (30, 32, 0, 0, False, True, None),  # dropped: never sent
            (40, 42, 43, 0, False, False, "timeout"),  # sent, never finished: its error is not counted
            (50, 52, 60, 90, True, False, None)]  # corrected 40, service 30, lag 2, wait 10
    rec = Records.empty(len(rows))
    for i, (it, di, se, do, ok, dr, err) in enumerate(rows):
        rec.intended[i], rec.dispatched[i] = T0 + it * MS, T0 + di * MS
        rec.sent[i] = T0 + se * MS if se else 0
        rec.done[i] = T0 + do * MS if do else 0
        rec.ok[i], rec.dropped[i], rec.errors[i] = ok, dr, err
    return rec


def test_summary_counts_rates_and_reasons_by_hand():
    res = summarise(_hand_records(), validity=Validity(lag_p99_threshold_ms=2.0, max_dropped=0))
    assert (res["scheduled"], res["sent"], res["completed"], res["ok"], res["failed"], res["dropped"]) == \
        (6, 5, 4, 3, 1, 1)
    assert res["errors"] == {"http_500": 1}
    # 3 ok over the span from the first intended (0) to the last done (90 ms): 33.33 ok/s
    assert res["achieved_rps"] == 33.33
    # lag is 2 ms for all six dispatched (dropped too): p99 = 2.0, not above a 2.0 threshold
    assert res["schedule_lag"] == {"p50_ms": 2.0, "p99_ms": 2.0, "max_ms": 2.0}
    # queue wait of the five sent: 2, 4, 2, 3, 10 -> p50 3; p99 at rank 3.96 of sorted 2,2,3,4,10: 4 + 0.96 × 6
    assert res["queue_wait"] == {"p50_ms": 3.0, "p99_ms": 9.76, "max_ms": 10.0}
    assert res["corrected"]["n"] == 3 and res["corrected"]["max_ms"] == pytest.approx(40, rel=1e-3)
    assert res["service"]["max_ms"] == pytest.approx(30, rel=1e-3)
    assert res["invalid_reasons"] == ["1 arrivals dropped (in-flight bound hit)", "1 requests never finished"]
    assert not res["valid"]
    tight = summarise(_hand_records(), validity=Validity(lag_p99_threshold_ms=1.999, max_dropped=1))
    assert tight["invalid_reasons"] == ["schedule lag p99 2.0 ms > 1.999 ms", "1 requests never finished"]
    assert summarise(_hand_records())["invalid_reasons"][0] == "1 arrivals dropped (in-flight bound hit)"


def test_summary_per_phase_counts_failures_and_drops():
    rec = _hand_records()
    rec.phase[:] = [0, 0, 0, 1, 1, 1]
    res = summarise(rec, [Phase(100, 0.03), Phase(100, 0.03, name="second")], Validity(100.0, 5))
    first, second = res["per_phase"]
    assert (first["phase"], first["scheduled"], first["ok"], first["failed"], first["dropped"]) == \
        ("phase 0", 3, 2, 1, 0)
    assert (second["phase"], second["scheduled"], second["ok"], second["failed"], second["dropped"]) == \
        ("second", 3, 1, 0, 1)
    assert (first["rate"], first["duration_s"]) == (100, 0.03)
    assert second["corrected"]["max_ms"] == pytest.approx(40, rel=1e-3)
    assert second["service"]["max_ms"] == pytest.approx(30, rel=1e-3)
    assert res["invalid_reasons"] == ["1 requests never finished"]


def test_summary_of_nothing_finished():
    rec = Records.empty(2)
    rec.intended[:] = [10 ** 9, 10 ** 9 + MS]
    res = summarise(rec)  # never dispatched, never sent
    assert (res["completed"], res["achieved_rps"], res["corrected"]["n"], res["valid"]) == (0, 0.0, 0, True)
    assert res["schedule_lag"] == {"p50_ms": None, "p99_ms": None, "max_ms": None}
    assert res["histoblobs"] == {"corrected_us": "", "service_us": ""}


def test_histoblobs_decode_to_the_recorded_latencies():
    from hdrh.histogram import HdrHistogram

    res = summarise(_hand_records(), validity=Validity(100.0, 5))
    h = HdrHistogram.decode(res["histoblobs"]["corrected_us"])
    assert h.get_total_count() == 3 and h.get_min_value() == 5000
    assert HdrHistogram.decode(res["histoblobs"]["service_us"]).get_min_value() == 3000


def test_markdown_validity_errors_and_single_phase():
    res = summarise(_hand_records(), [Phase(100, 0.06, name="only")], Validity(100.0, 0))
    res["errors"] = {"timeout": 2, "http_500": 1}
    md = format_markdown(res, title="Hand")
    assert md.startswith("### Hand\n")
    assert "Valid: **NO — 1 arrivals dropped (in-flight bound hit); 1 requests never finished**" in md
    assert "Errors: http_500 x1, timeout x2" in md
    assert "| phase |" not in md  # one phase: no per-phase table
    ok = summarise(_single_connection([0, 10], [1, 1]))
    md = format_markdown(ok)
    assert "Valid: **yes**" in md and "Errors:" not in md and md.startswith("### Open-loop run\n")


# ------------------------------------------------------------------------------------------------ the driver
class _Noop:
    name = "noop"

    def __init__(self, delay_s: float = 0.0):
        self.delay_s = delay_s
        self.calls: list[int] = []

    async def start(self): ...

    async def close(self): ...

    async def call(self, i):
        self.calls.append(i)
        if self.delay_s:
            await asyncio.sleep(self.delay_s)


async def test_driver_stamps_the_schedule_exactly_after_the_start_delay():
    before = time.perf_counter_ns()
    rec = await drive(_Noop(), np.array([0.0, 0.6]))
    assert int(rec.intended[1] - rec.intended[0]) == 600_000_000  # to the nanosecond
    assert 50_000_000 <= int(rec.intended[0]) - before < 500_000_000  # start_delay_s = 0.05
    assert rec.ok.all() and (rec.done >= rec.sent).all() and (rec.sent >= rec.dispatched).all()
    assert (rec.dispatched >= rec.intended).all()


async def test_a_late_generator_yields_to_the_loop_every_32_arrivals():
    # 70 arrivals all due at once: the first is awaited, the rest are late; the loop runs the queued requests
    # only when 32 more are dispatched, so requests 0..31 are sent after arrival 31's dispatch and before 32's.
    target = _Noop()
    rec = await drive(target, np.zeros(70), config=DriverConfig(concurrency=100))
    assert rec.sent[0] > rec.dispatched[31] and rec.sent[31] < rec.dispatched[32]
    assert rec.sent[32] > rec.dispatched[63] and rec.sent[63] < rec.dispatched[64]
    assert sorted(target.calls) == list(range(70)) and not rec.dropped.any()


async def test_finished_requests_free_their_place_and_timeouts_are_counted():
    # max 2 pending, 3 arrivals 50 ms apart, 5 ms each: nobody is dropped
    rec = await drive(_Noop(0.005), np.array([0.0, 0.05, 0.1]), config=DriverConfig(concurrency=1, max_pending=2))
    assert not rec.dropped.any() and rec.ok.all()
    # a call longer than the timeout fails as "timeout", and is finished (done stamped)
    rec = await drive(_Noop(5.0), np.array([0.0]), config=DriverConfig(timeout_s=0.05))
    assert rec.errors == ["timeout"] and not rec.ok[0] and rec.done[0] > 0
    assert 50 * MS <= rec.done[0] - rec.sent[0] < 4000 * MS


def test_driver_and_validity_defaults():
    assert DriverConfig() == DriverConfig(concurrency=64, max_pending=4096, timeout_s=10.0, start_delay_s=0.05,
                                          validity=Validity(lag_p99_threshold_ms=20.0, max_dropped=0))


def test_error_kinds():
    class Code:
        name = "UNAVAILABLE"

    class RpcError(Exception):
        def code(self):
            return Code()

    class BrokenRpc(Exception):
        def code(self):
            raise RuntimeError("no code")

    class WithCodeAttr(Exception):
        code = 7  # not callable: not a gRPC error

    assert error_kind(HttpStatusError(404, b"nope")) == "http_404"
    assert str(HttpStatusError(503, b"x" * 300)) == f"HTTP 503: {b'x' * 200!r}"
    assert HttpStatusError(503).status == 503
    assert error_kind(TimeoutError()) == "timeout" and error_kind(TimeoutError()) == "timeout"
    assert error_kind(RpcError()) == "grpc_UNAVAILABLE"
    assert error_kind(BrokenRpc()) == "BrokenRpc"
    assert error_kind(WithCodeAttr()) == "WithCodeAttr" and error_kind(ValueError()) == "ValueError"


# ------------------------------------------------------------------------------------------------ targets
async def test_http_target_sends_the_query_mix_and_counts_4xx():
    seen: list[tuple[dict, str | None]] = []
    statuses = iter([200, 400, 399, 200, 200])

    async def handle(request: web.Request) -> web.Response:
        seen.append((await request.json(), request.headers.get("x-api-key")))
        return web.json_response({}, status=next(statuses))

    app = web.Application()
    app.router.add_post("/v1/retrieve", handle)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    url = f"http://127.0.0.1:{site._server.sockets[0].getsockname()[1]}/"
    try:
        target = HttpRetrieveTarget(url, queries=["a", "b", "c"])
        assert target.name == f"http {url.rstrip('/')}/v1/retrieve (fast)" and target.top_k == 10
        await target.start()
        assert target._client.limit == 64
        errors = []
        for i in range(4):
            try:
                await target.call(i)
            except HttpStatusError as e:
                errors.append(e.kind)
        await target.close()
        custom = HttpRetrieveTarget(url, api_key="k2", concurrency=3, queries=["q"], top_k=4, mode="full")
        await custom.start()
        assert custom._client.limit == 3
        await custom.call(0)
        await custom.close()
    finally:
        await runner.cleanup()
    assert errors == ["http_400"]  # 399 is not an error
    assert seen[:4] == [({"query": q, "top_k": 10, "mode": "fast"}, "memrig-local") for q in "abca"]
    assert seen[4] == ({"query": "q", "top_k": 4, "mode": "full"}, "k2")
    assert HttpRetrieveTarget("http://x").queries == default_queries() == queries(64, 7)


async def test_grpc_target_sends_namespace_query_top_k_and_mode():
    from services.adapters.base import BackendContext
    from services.adapters.none.backend import NoMemoryBackend
    from services.adapters.server import serve_backend

    class Recording(NoMemoryBackend):
        seen: list = []

        async def retrieve(self, namespace, query):
            self.seen.append((namespace, query.query, query.top_k, query.mode))
            return await super().retrieve(namespace, query)

    ready, stop = asyncio.Event(), asyncio.Event()
    backend = Recording({}, BackendContext(embedder_name="hash"))
    server = asyncio.create_task(serve_backend(backend, port=0, metrics_port=None, ready=ready, stop=stop,
                                               announce=False))
    await asyncio.wait_for(ready.wait(), 30)
    address = f"127.0.0.1:{ready.port}"
    try:
        for target in (GrpcRetrieveTarget(address, queries=["a", "b"]),
                       GrpcRetrieveTarget(address, namespace="ns2", queries=["c"], top_k=3, mode="full")):
            await target.start()
            for i in range(3):
                await target.call(i)
            await target.close()
    finally:
        stop.set()
        await server
    assert backend.seen == [("load", "a", 10, "fast"), ("load", "b", 10, "fast"), ("load", "a", 10, "fast")] + \
        [("ns2", "c", 3, "full")] * 3
    assert GrpcRetrieveTarget(address).name == f"grpc {address} Retrieve"


# ------------------------------------------------------------------------------------------------ the CLI
def test_cli_defaults_are_the_documented_ones():
    a = build_parser().parse_args([])
    assert vars(a) == {"target": "http", "url": "http://127.0.0.1:8792", "api_key": "memrig-local",
                       "address": "127.0.0.1:50051", "namespace": "load", "mode": "fast", "top_k": 10,
                       "shape": "constant", "arrival": "constant", "rate": 50.0, "duration": 10.0, "step": 50.0,
                       "steps": 4, "spike_rate": 200.0, "spike_duration": 3.0, "seed": 0, "concurrency": 64,
                       "max_pending": 4096, "timeout": 10.0, "lag_threshold_ms": 20.0, "out": ""}
    assert phases_from_args(a) == constant_phases(50.0, 10.0)
    step = build_parser().parse_args(["--shape", "step", "--rate", "5", "--step", "2", "--steps", "3",
                                      "--duration", "1.5", "--arrival", "poisson"])
    assert phases_from_args(step) == step_phases(5, 2, 3, 1.5, "poisson")
    spike = build_parser().parse_args(["--shape", "spike", "--rate", "5", "--spike-rate", "40", "--duration", "2",
                                       "--spike-duration", "0.5"])
    assert phases_from_args(spike) == spike_phases(5, 40, 2.0, 0.5, 2.0)


def _closed_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_cli_run_writes_results_and_exit_status(tmp_path, capsys):
    port = _closed_port()  # nothing listens: every request fails, which counts but does not invalidate a run
    out = tmp_path / "nested" / "run"  # parents are created
    argv = ["--url", f"http://127.0.0.1:{port}", "--rate", "20", "--duration", "0.1", "--lag-threshold-ms", "1000",
            "--concurrency", "3", "--timeout", "2", "--seed", "4", "--out", str(out)]
    assert main(argv) == 0
    text = (out / "open_loop.json").read_text()
    res = json.loads(text)
    assert text == json.dumps(res, indent=2)
    assert res["phases"] == [{"rate": 20.0, "duration_s": 0.1, "arrival": "constant", "name": "constant 20/s"}]
    assert (res["scheduled"], res["ok"], res["failed"], res["valid"]) == (2, 0, 2, True)
    assert list(res["errors"]) == ["ConnectionRefusedError"]
    assert (res["concurrency"], res["max_pending"], res["timeout_s"], res["lag_p99_threshold_ms"], res["seed"]) == \
        (3, 4096, 2.0, 1000.0, 4)
    assert res["target"] == f"http http://127.0.0.1:{port}/v1/retrieve (fast)"
    assert (out / "open_loop.md").read_text() == capsys.readouterr().out[:-1]
    # every arrival dropped (no place for any): invalid, exit status 3; gRPC target named by its address
    argv = ["--target", "grpc", "--address", f"127.0.0.1:{port}", "--rate", "20", "--duration", "0.1",
            "--max-pending", "0", "--lag-threshold-ms", "1000", "--out", str(out)]  # the directory exists now
    assert main(argv) == 3
    assert f"Target `grpc 127.0.0.1:{port} Retrieve`" in capsys.readouterr().out
    res = json.loads((out / "open_loop.json").read_text())
    assert (res["dropped"], res["valid"], res["target"]) == (2, False, f"grpc 127.0.0.1:{port} Retrieve")


async def test_a_cancelled_request_propagates_and_is_not_counted_as_a_failure():
    """A run torn down mid-request (its tasks cancelled) leaves the request unfinished, not failed."""
    gate = asyncio.Event()

    class Blocked(_Noop):
        async def call(self, i):
            await gate.wait()

    driver = asyncio.create_task(drive(Blocked(), np.array([0.0]), config=DriverConfig(start_delay_s=0.0)))
    requests: list[asyncio.Task] = []
    for _ in range(200):
        await asyncio.sleep(0.01)
        requests = [t for t in asyncio.all_tasks() if t.get_coro().__qualname__ == "drive.<locals>.one"]
        if requests:
            break
    assert len(requests) == 1
    requests[0].cancel()
    with pytest.raises(asyncio.CancelledError):
        await requests[0]
    rec = await driver
    assert rec.errors == [None] and rec.done[0] == 0 and not rec.ok[0] and rec.sent[0] > 0
    assert summarise(rec)["invalid_reasons"] == ["1 requests never finished"]


async def test_http_target_sends_each_query_in_turn_as_json_with_the_key():
    seen = []

    async def handle(request):
        seen.append((request.headers.get("x-api-key"), request.content_type, await request.json()))
        return web.json_response({"results": []})

    app = web.Application()
    app.router.add_post("/v1/retrieve", handle)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    url = f"http://127.0.0.1:{site._server.sockets[0].getsockname()[1]}/"
    t = HttpRetrieveTarget(url, "k1", queries=["first?", "second?"], top_k=7, mode="full")
    try:
        await t.start()
        for i in range(3):
            await t.call(i)
    finally:
        await t.close()
        await runner.cleanup()
    assert seen == [("k1", "application/json", {"query": q, "top_k": 7, "mode": "full"})
                    for q in ("first?", "second?", "first?")]
