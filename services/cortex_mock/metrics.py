"""Prometheus metrics of one cortex-mock server (a registry per app, so tests can build many apps).

memrig_cortex_mock_requests_total{endpoint,method,status}
memrig_cortex_mock_retrieve_duration_seconds{mode}      histogram, server-side incl. added latency
memrig_cortex_mock_job_queue_depth                      jobs waiting to be claimed
memrig_cortex_mock_jobs_total{status}                   jobs entering each status (+ "retried")
memrig_cortex_mock_nodes{type}                          nodes by type, summed over the tenants open here
memrig_cortex_mock_open_tenants                         tenants open in this process (no tenant ids: privacy)
memrig_cortex_mock_evicted_tenants                      tenants closed for idleness or the open-tenant cap
memrig_cortex_mock_released_tenants                     tenants closed because a forget left them empty
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client.core import CounterMetricFamily
from prometheus_client.platform_collector import PlatformCollector
from prometheus_client.process_collector import ProcessCollector

RETRIEVE_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.15, 0.25, 0.4, 0.6, 1.0, 1.5, 2.5, 5.0, 10.0, 25.0)


class _JobsCollector:
    def __init__(self, counts_ref):
        self._counts_ref = counts_ref  # callable -> dict[str, float]

    def collect(self):
        fam = CounterMetricFamily("memrig_cortex_mock_jobs", "Jobs entering each status", labels=["status"])
        for status, v in sorted(self._counts_ref().items()):
            fam.add_metric([status], v)
        yield fam


class MockMetrics:
    def __init__(self, jobs_counts_ref) -> None:
        self.registry = CollectorRegistry()
        ProcessCollector(registry=self.registry)
        PlatformCollector(registry=self.registry)
        self.requests = Counter("memrig_cortex_mock_requests", "HTTP requests by endpoint and status",
                                ["endpoint", "method", "status"], registry=self.registry)
        self.retrieve_seconds = Histogram("memrig_cortex_mock_retrieve_duration_seconds",
                                          "Server-side /v1/retrieve duration", ["mode"], buckets=RETRIEVE_BUCKETS,
                                          registry=self.registry)
        self.queue_depth = Gauge("memrig_cortex_mock_job_queue_depth", "Jobs waiting to be claimed",
                                 registry=self.registry)
        self.nodes = Gauge("memrig_cortex_mock_nodes", "Nodes by type over the open tenants", ["type"],
                           registry=self.registry)
        self.open_tenants = Gauge("memrig_cortex_mock_open_tenants", "Tenants open in this process",
                                  registry=self.registry)
        self.evicted_tenants = Gauge("memrig_cortex_mock_evicted_tenants", "Tenants closed (idle or over the cap)",
                                     registry=self.registry)
        self.released_tenants = Gauge("memrig_cortex_mock_released_tenants",
                                      "Tenants closed because a forget left them empty", registry=self.registry)
        self.registry.register(_JobsCollector(jobs_counts_ref))
