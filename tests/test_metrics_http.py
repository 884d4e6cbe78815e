"""The side /metrics server (services/common/metrics_http.py): the exposition is made in a worker thread, so the
event loop it shares with the process's work keeps running while a large registry is collected, and scrapes that
arrive together share one collection."""

from __future__ import annotations

import asyncio
import threading
import time

from aiohttp import ClientSession
from prometheus_client import CollectorRegistry, Counter
from prometheus_client.core import GaugeMetricFamily

from services.common.metrics_http import start_metrics_server


class Slow:
    """A collector that takes 0.4 s and counts its collections."""

    def __init__(self):
        self.calls = 0
        self.threads: set[str] = set()

    def collect(self):
        self.calls += 1
        self.threads.add(threading.current_thread().name)
        time.sleep(0.4)
        yield GaugeMetricFamily("memrig_test_slow", "a slow collector", value=1.0)


async def test_a_slow_collection_leaves_the_loop_running_and_is_shared():
    reg = CollectorRegistry()
    Counter("memrig_test_things", "things", registry=reg).inc(3)
    slow = Slow()
    reg.register(slow)
    slow.calls = 0  # register() collects once to learn the names
    runner, port = await start_metrics_server(port=0, registry=reg)
    ticks = 0
    stop = asyncio.Event()

    async def beat():
        nonlocal ticks
        while not stop.is_set():
            ticks += 1
            await asyncio.sleep(0.01)

    beating = asyncio.create_task(beat())
    try:
        async with ClientSession() as s:
            async def scrape():
                async with s.get(f"http://127.0.0.1:{port}/metrics") as r:
                    assert r.status == 200 and r.headers["Content-Type"].startswith("text/plain")
                    return await r.text()

            before = ticks
            bodies = await asyncio.gather(scrape(), scrape(), scrape())
            during = ticks - before
    finally:
        stop.set()
        await beating
        await runner.cleanup()
    assert all("memrig_test_things_total 3.0" in b and "memrig_test_slow 1.0" in b for b in bodies)
    assert slow.calls == 1  # three scrapes at once, one collection
    assert threading.main_thread().name not in slow.threads  # made off the loop's thread
    assert during >= 10  # the loop ticked on through the 0.4 s collection (on the loop: 0 ticks)
