"""Prometheus metrics of the fault proxy (one set per process, on the default registry)."""

from __future__ import annotations

from prometheus_client import Counter, Histogram

from collectors.buckets import LATENCY_BUCKETS_S

_SECONDS = (*LATENCY_BUCKETS_S, 120.0)  # bounds on the rig's delays and timeouts (collectors/buckets.py)

REQUESTS = Counter(
    "memrig_proxy_requests_total",
    "Requests handled by the fault proxy, by outcome "
    "(forwarded, delayed, injected, aborted, modified, upstream_error, client_gone)",
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
