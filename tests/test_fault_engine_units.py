"""FaultEngine bookkeeping without HTTP (services/fault_proxy/engine.py): the store is re-read only when its
version moved, one-shot / max_hits counting through the engine, state of removed faults dropped, waits that a
removal or release_all cuts short, and the decision log's `since` / `limit` window. Found by `make mutation`
(the HTTP tests exercise these paths but do not pin them). No assertion is about time: waits are released
explicitly, and the only sleep checked is the argument handed to asyncio.sleep."""

from __future__ import annotations

import asyncio

import pytest

from services.fault_proxy import engine as engine_mod
from services.fault_proxy.engine import FaultEngine
from services.fault_proxy.faults import RequestInfo, parse_fault
from services.fault_proxy.store import LocalStore


class CountingStore(LocalStore):
    """A LocalStore whose version starts high (so identity and equality of ints differ) and counts loads."""

    def __init__(self, start_version: int = 10_000):
        super().__init__()
        self._version = start_version
        self.loads = 0

    async def version(self) -> int:
        return int(str(self._version))  # a fresh int object each call, as a Redis reply parses to

    async def load(self):
        self.loads += 1
        return await super().load()


def _info(seq: int) -> RequestInfo:
    return RequestInfo(seq, "POST", "/v1/retrieve", b"{}")


async def test_first_refresh_loads_a_store_at_version_one():
    store = LocalStore()
    await store.create(parse_fault({"name": "a", "type": "http_error", "attributes": {"status": 503}}))
    assert await store.version() == 1
    eng = FaultEngine(store, seed=1)
    await eng.refresh()
    assert [f.name for f in eng.faults] == ["a"]


async def test_store_reloaded_only_when_its_version_moves_or_forced():
    store = CountingStore()
    eng = FaultEngine(store, seed=1)
    await eng.refresh()
    await eng.refresh()
    assert store.loads == 1  # same version: no reload
    await eng.refresh(force=True)
    assert store.loads == 2
    await store.create(parse_fault({"name": "a", "type": "reset"}))
    await eng.refresh()
    await eng.refresh()
    assert store.loads == 3 and [f.name for f in eng.faults] == ["a"]
    store._version = 5  # the counter went back (a Redis restart): a different version is reloaded too
    await eng.refresh()
    assert store.loads == 4


async def test_max_hits_counted_through_the_engine_and_state_dropped_on_removal():
    store = LocalStore()
    await store.create(parse_fault({"name": "twice", "type": "http_error", "max_hits": 2,
                                    "attributes": {"status": 500}}))
    await store.create(parse_fault({"name": "bucket", "type": "rate_limit",
                                    "attributes": {"rate_per_s": 1.0, "burst": 1}}))
    eng = FaultEngine(store, seed=3, clock=lambda: 1000.0)
    await eng.refresh()
    twice = next(f for f in eng.faults if f.name == "twice")
    applied = []
    for seq in (1, 2, 3, 4):
        _, drawn, _ = eng.decide(twice, _info(seq))
        applied.append((drawn.applied, drawn.note))
    assert applied == [(True, ""), (True, ""), (False, "exhausted"), (False, "exhausted")]
    assert eng._hits[(twice.name, twice.generation)] == 2
    await store.create(parse_fault({"name": "once", "type": "http_error", "max_hits": 1, "attributes": {"status": 500}}))
    await eng.refresh()
    once = next(f for f in eng.faults if f.name == "once")
    assert [eng.decide(once, _info(seq))[1].applied for seq in (6, 7)] == [True, False]
    await store.delete("once")
    bucket = next(f for f in eng.faults if f.name == "bucket")
    eng.decide(bucket, _info(5))
    assert (bucket.name, bucket.generation) in eng._states
    await store.delete("twice")
    await store.delete("bucket")
    await eng.refresh()
    assert eng._hits == {} and eng._states == {}


async def test_waits_released_by_removal_and_by_release_all(monkeypatch):
    store = LocalStore()
    await store.create(parse_fault({"name": "lat", "type": "latency", "attributes": {"latency_ms": 10}}))
    await store.create(parse_fault({"name": "hole", "type": "blackhole"}))
    eng = FaultEngine(store, seed=1)
    await eng.refresh()
    lat, hole = (next(f for f in eng.faults if f.name == n) for n in ("lat", "hole"))
    assert await eng.wait(lat, 0) is False  # zero wait on an active fault: not released
    long_wait = asyncio.create_task(eng.wait(lat, 30.0))  # (0, 1) and above both wait for the event
    half_wait = asyncio.create_task(eng.wait(lat, 0.5))
    held = asyncio.create_task(eng.wait(hole, None))
    await asyncio.sleep(0)
    assert not long_wait.done() and not half_wait.done()
    await store.delete("lat")
    await eng.refresh()  # the removal sets the fault's event
    assert await asyncio.wait_for(long_wait, 5.0) is True and await asyncio.wait_for(half_wait, 5.0) is True
    assert await eng.wait(lat, 0) is True  # removed before the wait
    assert not held.done()
    eng.release_all()
    assert await asyncio.wait_for(held, 5.0) is True

    slept: list[float] = []

    async def fake_sleep(s):
        slept.append(s)

    monkeypatch.setattr(engine_mod.asyncio, "sleep", fake_sleep)
    assert await eng.wait(None, 0.25) is False  # header-forced: not removable, just sleeps
    assert await eng.wait(None, 0) is False
    assert slept == [0.25]


def test_log_window_since_and_limit():
    eng = FaultEngine(seed=1)
    for seq in (3, 1, 5, 2, 4):
        eng.record({"seq": seq})
    assert [e["seq"] for e in eng.log_entries()] == [1, 2, 3, 4, 5]
    assert [e["seq"] for e in eng.log_entries(since=2)] == [3, 4, 5]
    assert [e["seq"] for e in eng.log_entries(since=2, limit=2)] == [3, 4]
    assert [e["seq"] for e in eng.log_entries(limit=None)] == [1, 2, 3, 4, 5]


def test_request_numbering_and_reset_run():
    eng = FaultEngine(seed=1)
    assert [eng.next_seq() for _ in range(3)] == [1, 2, 3] and eng.requests_seen == 3
    eng.record({"seq": 3})
    eng.reset_run(seed=9)
    assert eng.seed == 9 and eng.next_seq() == 1 and eng.log_entries() == []


@pytest.mark.parametrize("seed", [None])
def test_unseeded_engine_draws_a_32_bit_seed(seed):
    seeds = {FaultEngine(seed=seed).seed for _ in range(8)}
    assert all(0 <= s < 2 ** 32 for s in seeds) and len(seeds) > 1
    assert max(seeds) >= 2 ** 24  # four random bytes: eight draws all below 2^24 has probability 2^-64


def test_decision_log_is_bounded():
    assert FaultEngine(seed=1).log.maxlen == 10_000
    eng = FaultEngine(seed=1, log_size=3)
    for seq in range(1, 6):
        eng.record({"seq": seq})
    assert [e["seq"] for e in eng.log_entries()] == [3, 4, 5]
