"""Histogram bucket bounds (seconds) shared by every latency histogram of the rig.

Dashboards estimate quantiles by linear interpolation inside a bucket (PromQL histogram_quantile), so a value
the rig itself sets should sit on a bound: otherwise a fixed 300 ms injected delay, falling in a 0.25-0.5 s
bucket, reads as p95 = 487 ms. The bounds therefore include the delays and timeouts the rig uses: the
llm-mock's 100 ms turn latency (services/cost_scenarios/scenarios.py), 300 ms fault-timeline delays, the drills' 500 ms
recall budget and 3 s slow API (services/drills/base.py), the cortex adapter's 1 s retry base and 2 s
recallTimeoutMs (services/adapters/cortex/backend.py), and 60 s (its retry cap; the LLM client's slow end),
with steps of at most ~1.5x between them. The +Inf bucket takes anything slower.
"""

from __future__ import annotations

LATENCY_BUCKETS_S = (
    0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.075,
    0.1, 0.15, 0.2, 0.25, 0.3, 0.4, 0.5, 0.6, 0.75,
    1.0, 1.25, 1.5, 2.0, 2.5, 3.0, 4.0, 5.0, 7.5,
    10.0, 15.0, 20.0, 30.0, 45.0, 60.0,
)
