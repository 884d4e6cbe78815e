"""Prometheus metrics of the llm-mock: requests by task and status, latency, tokens.

One set per registry (the process-wide default REGISTRY when serving, a fresh CollectorRegistry in tests
that count), created once and shared by every app built on that registry.
"""

from __future__ import annotations

from prometheus_client import REGISTRY, CollectorRegistry, Counter, Histogram

from collectors.buckets import LATENCY_BUCKETS_S

# LLM calls can be slow on a real endpoint and the mock can be told to be: buckets reach 60 s, with bounds on
# the rig's injected delays (collectors/buckets.py), so `--latency-ms 100` reads as 100 ms on the dashboard.
LATENCY_BUCKETS = LATENCY_BUCKETS_S


class MockMetrics:
    def __init__(self, registry: CollectorRegistry):
        self.requests = Counter(
            "memrig_llm_mock_requests", "Chat-completion requests by task and HTTP status", ["task", "status"],
            registry=registry,
        )
        self.latency = Histogram(
            "memrig_llm_mock_request_duration_seconds", "Chat-completion handling time incl. injected latency",
            ["task"], buckets=LATENCY_BUCKETS, registry=registry,
        )
        self.prompt_tokens = Counter(
            "memrig_llm_mock_prompt_tokens", "Prompt tokens reported in usage", ["task"], registry=registry
        )
        self.completion_tokens = Counter(
            "memrig_llm_mock_completion_tokens", "Completion tokens reported in usage", ["task"], registry=registry
        )


_BY_REGISTRY: dict[int, tuple[CollectorRegistry, MockMetrics]] = {}


def metrics_for(registry: CollectorRegistry | None = None) -> MockMetrics:
    reg = REGISTRY if registry is None else registry
    hit = _BY_REGISTRY.get(id(reg))
    if hit is None or hit[0] is not reg:
        hit = (reg, MockMetrics(reg))
        _BY_REGISTRY[id(reg)] = hit
    return hit[1]
