"""Prometheus metrics of the fault proxy (one set per process, on the default registry)."""

from __future__ import annotations

from prometheus_client import Counter, Histogram

_SECONDS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120)

REQUESTS = Counter(
    "memrig_proxy_requests_total",
    "Requests handled by the fault proxy, by outcome "
    "(forwarded, injected, aborted, modified, upstream_error, client_gone)",
    ["outcome"],
)
FAULTS_INJECTED = Counter(
    "memrig_proxy_faults_injected_total", "Faults that took effect on a request", ["fault", "type"]
)
UPSTREAM_DURATION = Histogram(
    "memrig_proxy_upstream_request_duration_seconds",
    "Time from sending a request upstream to having its whole body", buckets=_SECONDS,
)
INJECTED_DELAY = Histogram(
    "memrig_proxy_injected_delay_seconds",
    "Delay the proxy added to a request (latency, timeout_after, blackhole hold, slow body)", buckets=_SECONDS,
)
