"""Units of the leak check: the RSS slope is in bytes per second of the sampler's clock, checked against a
synthetic RSS series (no psutil, no wall clock), so a slope computed per sample instead fails."""

from __future__ import annotations

import pytest
from prometheus_client import CollectorRegistry

from collectors.resources import ResourceSampler


def _sampler(rss_series: list[int], step_s: float) -> ResourceSampler:
    clock = [100.0]
    it = iter(rss_series)

    def tick() -> float:
        return clock[0]

    s = ResourceSampler("synthetic", interval_s=3600, registry=CollectorRegistry(), trace_heap=False,
                        rss_reader=lambda: next(it), clock=tick)
    s.set_phase("sustained")
    for _ in rss_series:
        s.sample()
        clock[0] += step_s
    return s


def test_leak_slope_is_bytes_per_second_not_per_sample():
    # 3 s between samples, +6000 bytes per sample: 2000 bytes/s exactly (a perfect line: zero-width interval)
    s = _sampler([50_000_000 + 6000 * i for i in range(10)], step_s=3.0)
    assert [r["t_s"] for r in s.samples] == pytest.approx([3.0 * i for i in range(10)])
    chk = s.leak_check("sustained")
    assert chk["slope"] == pytest.approx(2000.0)
    assert chk["lo"] == pytest.approx(2000.0) and chk["hi"] == pytest.approx(2000.0)
    assert chk["verdict"] == "leak"
    assert s.leak_check("sustained", tolerance_bytes_per_s=2500.0)["verdict"] == "stable"


def test_noisy_series_slope_and_interval_by_hand():
    # x = 0, 2, 4, 6 s; y = 1000, 5000, 7000, 11000 bytes. x̄ = 3, ȳ = 6000; Sxx = 20;
    # Sxy = (-3)(-5000) + (-1)(-1000) + (1)(1000) + (3)(5000) = 32000 -> slope 1600 bytes/s.
    # residuals: y - (1200 + 1600x) = -200, 600, -600, 200 -> SSE = 800000, s² = 400000 (dof 2),
    # se = sqrt(400000 / 20) = 141.42; t(0.975, 2) = 4.302653 -> half-width 608.49
    s = _sampler([1000, 5000, 7000, 11000], step_s=2.0)
    chk = s.leak_check("sustained")
    assert chk["slope"] == pytest.approx(1600.0)
    assert chk["hi"] - chk["slope"] == pytest.approx(608.487, abs=1e-3)
    assert chk["lo"] > 0 and chk["verdict"] == "leak"
    assert s.summary("sustained")["rss_mb_last"] == pytest.approx(11000 / 2 ** 20)
