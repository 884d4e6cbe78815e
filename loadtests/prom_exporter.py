"""Locust's figures as Prometheus metrics, served from the locust master (or local runner).

A custom collector reads the runner's live `RequestStats` at scrape time (the master's stats already merge
every worker's reports), so nothing is double counted and no worker needs an exporter:

    memrig_locust_requests_total{method,name}            counter
    memrig_locust_failures_total{method,name}            counter
    memrig_locust_response_time_seconds{method,name}     histogram (from locust's rounded response times)
    memrig_locust_current_rps{method,name}               gauge (locust's own sliding-window rate)
    memrig_locust_users                                  gauge
    memrig_locust_workers                                gauge (connected workers; 0 for a local runner)

Locust rounds response times to about two significant digits before counting them, so the histogram is as
coarse as that; it is for live dashboards, and the closed-model caveat applies (anchors §3, §6). A stats reset
(`--reset-stats`) shows up to Prometheus as a counter reset, which `rate()` handles.

The HTTP server is prometheus_client's threaded WSGI server; in a gevent-patched locust process its thread is
a greenlet. No locust import here: the collector duck-types the environment so it can be tested without it.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from prometheus_client import CollectorRegistry, start_http_server
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily

# Seconds; past 10 s because a stalled upstream or a polled ingest job can take that long.
BUCKETS_S = (0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)


def histogram_buckets(response_times_ms: dict[int | float, int],
                      bounds_s: Iterable[float] = BUCKETS_S) -> list[tuple[str, int]]:
    """Cumulative (le, count) pairs from locust's {rounded_ms: count} dict, ending with +Inf."""
    items = sorted(response_times_ms.items())
    out, i, cum = [], 0, 0
    for b in bounds_s:
        limit_ms = b * 1000.0
        while i < len(items) and items[i][0] <= limit_ms:
            cum += items[i][1]
            i += 1
        out.append((_fmt(b), cum))
    out.append(("+Inf", cum + sum(c for _, c in items[i:])))
    return out


def _fmt(b: float) -> str:
    return repr(float(b))


class LocustCollector:
    def __init__(self, environment: Any):
        self.env = environment

    def _stats(self) -> Any:
        runner = getattr(self.env, "runner", None)
        return runner.stats if runner is not None else self.env.stats

    def collect(self):
        stats = self._stats()
        labels = ["method", "name"]
        req = CounterMetricFamily("memrig_locust_requests", "Requests made (locust stats, per endpoint)", labels=labels)
        fail = CounterMetricFamily("memrig_locust_failures", "Failed requests (locust stats, per endpoint)",
                                   labels=labels)
        hist = HistogramMetricFamily("memrig_locust_response_time_seconds",
                                     "Response time, closed model (locust's rounded values)", labels=labels)
        rps = GaugeMetricFamily("memrig_locust_current_rps", "Locust's current requests/s (sliding window)",
                                labels=labels)
        for e in list(stats.entries.values()):
            lv = [e.method or "", e.name]
            req.add_metric(lv, e.num_requests)
            fail.add_metric(lv, e.num_failures)
            hist.add_metric(lv, histogram_buckets(dict(e.response_times)), e.total_response_time / 1000.0)
            rps.add_metric(lv, float(e.current_rps or 0.0))
        yield req
        yield fail
        yield hist
        yield rps
        runner = getattr(self.env, "runner", None)
        yield GaugeMetricFamily("memrig_locust_users", "Running locust users", value=getattr(runner, "user_count", 0))
        workers = getattr(runner, "clients", None)
        yield GaugeMetricFamily("memrig_locust_workers", "Connected locust workers",
                                value=len(workers) if workers is not None else 0)


def start_exporter(environment: Any, port: int, host: str = "127.0.0.1") -> tuple[Any, int]:
    """Serve the collector on host:port (0 = pick a free port); returns (server, bound_port)."""
    registry = CollectorRegistry()
    registry.register(LocustCollector(environment))
    server, _thread = start_http_server(port, addr=host, registry=registry)
    return server, server.server_port
