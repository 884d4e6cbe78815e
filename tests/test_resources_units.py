"""Units of the leak check: the RSS slope is in bytes per second of the sampler's clock, checked against a
synthetic RSS series (no psutil, no wall clock), so a slope computed per sample instead fails."""

from __future__ import annotations

import asyncio
import math
import os
import tracemalloc
import warnings

import numpy as np
import psutil
import pytest
from prometheus_client import CollectorRegistry

from collectors.resources import ResourceSampler, SlopeEstimate, leak_verdict, ols_slope, slope_ci
from collectors.samples import SampleSink


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


# ------------------------------------------------------------------------------------------------ slope_ci edges
def test_ols_slope_of_a_vertical_line_is_zero_at_the_mean():
    # All x equal: no slope can be fitted (Sxx = 0); the line is flat at ȳ = (1 + 5 + 9) / 3 = 5.
    assert ols_slope([2.0, 2.0, 2.0], [1.0, 5.0, 9.0]) == (0.0, 5.0)
    assert ols_slope([0, 2], [1, 5]) == pytest.approx((2.0, 1.0))


def test_few_points_give_the_slope_with_an_infinite_interval():
    # 2 points: the slope (4 - 0) / (2 - 0) = 2 is reported, but no interval (dof 0): nothing can be concluded.
    two = slope_ci([0, 2], [0, 4])
    assert (two.slope, two.lo, two.hi, two.n) == (2.0, -math.inf, math.inf, 2)
    assert leak_verdict(two) == "unknown"
    one = slope_ci([3], [7])
    assert (one.slope, one.lo, one.hi, one.n) == (0.0, -math.inf, math.inf, 1)
    # 3 points on y = 1 + 2x: a zero-width interval at 2, and a verdict.
    three = slope_ci([0, 1, 2], [1, 3, 5])
    assert (three.slope, three.lo, three.hi, three.n) == (pytest.approx(2.0), pytest.approx(2.0),
                                                          pytest.approx(2.0), 3)
    assert leak_verdict(three) == "leak"
    with pytest.raises(ValueError, match="length"):
        slope_ci([0, 1, 2], [0, 1])


def test_empty_series_is_unknown_without_numpy_warnings():
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a mean of an empty slice would warn
        est = slope_ci([], [])
        assert (est.slope, est.lo, est.hi, est.n) == (0.0, -math.inf, math.inf, 0)
        s = _sampler([], step_s=1.0)
        assert s.leak_check("sustained")["verdict"] == "unknown"
        assert s.summary("sustained") == {"phase": "sustained", "n": 0}


@pytest.mark.parametrize("method", ["t", "bootstrap"])
def test_all_samples_at_one_instant_give_no_interval(method):
    est = slope_ci([5.0, 5.0, 5.0, 5.0], [1.0, 2.0, 3.0, 4.0], method=method)
    assert (est.slope, est.lo, est.hi, est.n, est.method) == (0.0, -math.inf, math.inf, 4, method)
    assert leak_verdict(est) == "unknown"


def test_t_interval_at_other_confidences_by_hand():
    # Same series as the noisy case: x = 0, 2, 4, 6; slope 1600, se = sqrt(400000 / 20) = 141.4214 (dof 2).
    # t(0.95, 2) = 2.919986 -> 90%: ±412.95; t(0.995, 2) = 9.924843 -> 99%: ±1403.59.
    x, y = [0, 2, 4, 6], [1000, 5000, 7000, 11000]
    c90 = slope_ci(x, y, confidence=0.90)
    assert (c90.lo, c90.hi, c90.confidence) == (pytest.approx(1600 - 412.950, abs=1e-2),
                                                pytest.approx(1600 + 412.950, abs=1e-2), 0.90)
    c99 = slope_ci(x, y, confidence=0.99)
    assert (c99.lo, c99.hi) == (pytest.approx(1600 - 1403.594, abs=1e-2), pytest.approx(1600 + 1403.594, abs=1e-2))
    assert c99.to_json() == {"slope": pytest.approx(1600.0), "lo": c99.lo, "hi": c99.hi, "n": 4, "method": "t",
                             "confidence": 0.99}


def _bootstrap_reference(x, y, confidence, n_boot, seed):
    """The residual bootstrap written out differently: refit every resample with np.polyfit."""
    xa, ya = np.asarray(x, float), np.asarray(y, float)
    b, a = np.polyfit(xa, ya, 1)
    fitted = a + b * xa
    resid = ya - fitted
    idx = np.random.default_rng(seed).integers(0, len(xa), size=(n_boot, len(xa)))
    slopes = [np.polyfit(xa, fitted + resid[row], 1)[0] for row in idx]
    tail = (1 - confidence) / 2 * 100
    return b, np.percentile(slopes, tail), np.percentile(slopes, 100 - tail)


def test_bootstrap_interval_matches_a_refit_of_every_resample():
    x = [0.0, 1.5, 3.0, 4.5, 6.0, 7.5, 9.0, 10.5]
    y = [10.0, 14.0, 13.0, 21.0, 22.0, 24.0, 31.0, 30.0]
    for confidence, n_boot, seed in ((0.95, 2000, 0), (0.80, 500, 11)):
        b, lo, hi = _bootstrap_reference(x, y, confidence, n_boot, seed)
        est = slope_ci(x, y, confidence, "bootstrap", n_boot=n_boot, seed=seed)
        assert (est.slope, est.lo, est.hi) == (pytest.approx(b), pytest.approx(lo), pytest.approx(hi))
        assert (est.n, est.method, est.confidence) == (8, "bootstrap", confidence)
    # the defaults are 2000 resamples and seed 0, also through the sampler's leak check
    b, lo, hi = _bootstrap_reference(x, y, 0.95, 2000, 0)
    est = slope_ci(x, y, method="bootstrap")
    assert (est.lo, est.hi) == (pytest.approx(lo), pytest.approx(hi))
    s = _sampler([int(v) for v in y], step_s=1.5)
    chk = s.leak_check("sustained", method="bootstrap")
    assert (chk["lo"], chk["hi"], chk["method"]) == (pytest.approx(lo), pytest.approx(hi), "bootstrap")
    b7, lo7, hi7 = _bootstrap_reference(x, y, 0.95, 2000, 7)
    chk7 = s.leak_check("sustained", method="bootstrap", seed=7, confidence=0.95)
    assert (chk7["lo"], chk7["hi"]) == (pytest.approx(lo7), pytest.approx(hi7))


def test_leak_verdict_needs_three_points_and_the_whole_interval_above_the_tolerance():
    assert leak_verdict(SlopeEstimate(5.0, 4.0, 6.0, 2, "t", 0.95)) == "unknown"  # < 3 points, whatever the CI
    assert leak_verdict(SlopeEstimate(5.0, 4.0, 6.0, 3, "t", 0.95)) == "leak"
    assert leak_verdict(SlopeEstimate(5.0, -math.inf, math.inf, 30, "t", 0.95)) == "unknown"
    assert leak_verdict(SlopeEstimate(5.0, 4.0, 6.0, 3, "t", 0.95), tolerance=4.0) == "stable"  # lo == tolerance
    assert leak_verdict(SlopeEstimate(5.0, 4.0, 6.0, 3, "t", 0.95), tolerance=3.999) == "leak"
    assert leak_verdict(SlopeEstimate(5.0, 0.0, 6.0, 3, "t", 0.95)) == "stable"  # lo == default tolerance 0


def test_leak_check_default_tolerance_is_zero_bytes_per_second():
    # +1 byte every 2 s: 0.5 bytes/s exactly, a leak against the default tolerance of 0
    s = _sampler([1000 + i for i in range(6)], step_s=2.0)
    chk = s.leak_check()  # default phase "sustained"
    assert (chk["phase"], chk["slope"], chk["verdict"], chk["tolerance_bytes_per_s"]) == \
        ("sustained", pytest.approx(0.5), "leak", 0.0)
    assert chk["confidence"] == 0.95 and chk["method"] == "t" and chk["n"] == 6


# ------------------------------------------------------------------------------------------------ the sampler
def test_summary_by_hand_with_heap_numbers():
    s = ResourceSampler("sum", interval_s=3600, registry=CollectorRegistry(), trace_heap=False,
                        rss_reader=lambda: 0, clock=lambda: 0.0)
    mib = 2 ** 20
    s.samples = [
        {"t_s": 0.0, "phase": "a", "rss_bytes": 4 * mib, "heap_current_bytes": 1 * mib, "heap_peak_bytes": 3 * mib},
        {"t_s": 1.0, "phase": "b", "rss_bytes": 100 * mib, "heap_current_bytes": None, "heap_peak_bytes": None},
        {"t_s": 2.0, "phase": "a", "rss_bytes": 10 * mib, "heap_current_bytes": None, "heap_peak_bytes": None},
        {"t_s": 3.0, "phase": "a", "rss_bytes": 7 * mib, "heap_current_bytes": 2 * mib, "heap_peak_bytes": 5 * mib},
    ]
    assert s.summary("a") == {"phase": "a", "n": 3, "rss_mb_mean": pytest.approx(7.0), "rss_mb_max": 10.0,
                              "rss_mb_first": 4.0, "rss_mb_last": 7.0, "heap_mb_mean": pytest.approx(1.5),
                              "heap_peak_mb": 5.0}
    assert s.summary("b") == {"phase": "b", "n": 1, "rss_mb_mean": 100.0, "rss_mb_max": 100.0,
                              "rss_mb_first": 100.0, "rss_mb_last": 100.0, "heap_mb_mean": None, "heap_peak_mb": None}
    assert [r["t_s"] for r in s.phase_samples("a")] == [0.0, 2.0, 3.0]


def test_sample_rows_gauges_and_sink():
    reg = CollectorRegistry()
    sink = SampleSink()
    rss = iter([1000, 2500])
    clock = [50.0]
    s = ResourceSampler("gauged", interval_s=3600, sink=sink, registry=reg, trace_heap=False,
                        rss_reader=lambda: next(rss), clock=lambda: clock[0])
    clock[0] = 52.5
    s.set_phase("active")
    row = s.sample()
    assert row == {"t_s": 2.5, "phase": "active", "rss_bytes": 1000, "heap_current_bytes": None,
                   "heap_peak_bytes": None}
    assert reg.get_sample_value("memrig_process_rss_bytes", {"component": "gauged"}) == 1000
    assert reg.get_sample_value("memrig_resource_phase", {"component": "gauged", "phase": "idle"}) == 0
    assert reg.get_sample_value("memrig_resource_phase", {"component": "gauged", "phase": "active"}) == 1
    s.set_phase("sustained")
    s.sample()
    assert reg.get_sample_value("memrig_resource_phase", {"component": "gauged", "phase": "active"}) == 0
    assert reg.get_sample_value("memrig_resource_phase", {"component": "gauged", "phase": "sustained"}) == 1
    assert reg.get_sample_value("memrig_process_rss_bytes", {"component": "gauged"}) == 2500
    assert [(r["kind"], r["component"], r["phase"], r["rss_bytes"]) for r in sink.rows] == \
        [("resources", "gauged", "active", 1000), ("resources", "gauged", "sustained", 2500)]


def test_heap_is_traced_only_for_this_process_when_asked():
    was_tracing = tracemalloc.is_tracing()
    tracemalloc.start()
    try:
        reg = CollectorRegistry()
        s = ResourceSampler("heap", interval_s=3600, registry=reg, rss_reader=lambda: 1, clock=lambda: 0.0)
        row = s.sample()
        assert row["heap_current_bytes"] > 0 and row["heap_peak_bytes"] >= row["heap_current_bytes"]
        assert reg.get_sample_value("memrig_heap_current_bytes", {"component": "heap"}) == row["heap_current_bytes"]
        assert reg.get_sample_value("memrig_heap_peak_bytes", {"component": "heap"}) == row["heap_peak_bytes"]
        off = ResourceSampler("off", interval_s=3600, registry=reg, trace_heap=False, rss_reader=lambda: 1)
        other = ResourceSampler("other", interval_s=3600, registry=reg, pid=os.getpid(), rss_reader=lambda: 1)
        assert not off.trace_heap and not other.trace_heap  # another pid's heap cannot be traced from here
        assert off.sample()["heap_current_bytes"] is None and other.sample()["heap_peak_bytes"] is None
        assert reg.get_sample_value("memrig_heap_current_bytes", {"component": "off"}) is None
    finally:
        if not was_tracing:
            tracemalloc.stop()


async def test_start_and_stop_sample_and_leave_tracemalloc_as_found():
    if tracemalloc.is_tracing():
        pytest.skip("tracemalloc already running in this process")
    clock = [10.0]
    rss = iter(range(1000, 2000))
    s = ResourceSampler("bg", interval_s=3600, registry=CollectorRegistry(), rss_reader=lambda: next(rss),
                        clock=lambda: clock[0])
    clock[0] = 30.0
    await s.start()  # the run's time starts here, not at construction
    assert tracemalloc.is_tracing()
    await asyncio.sleep(0)  # the background task takes its first sample at once
    clock[0] = 34.0
    await s.stop()  # and stop() takes a last one
    assert [(r["t_s"], r["rss_bytes"]) for r in s.samples] == [(0.0, 1000), (4.0, 1001)]
    assert not tracemalloc.is_tracing()
    # a second stop() must not stop a tracemalloc someone else started since
    tracemalloc.start()
    try:
        await s.stop()
        assert tracemalloc.is_tracing()
    finally:
        tracemalloc.stop()
    # without heap tracing, start() leaves tracemalloc alone
    quiet = ResourceSampler("quiet", interval_s=3600, registry=CollectorRegistry(), trace_heap=False,
                            rss_reader=lambda: 1)
    await quiet.start()
    assert not tracemalloc.is_tracing()
    await quiet.stop()


def test_method_is_compared_by_value_not_identity():
    # a method name built at run time (from a CLI flag or a JSON config) is equal to, not the same object as,
    # the literal
    method = "".join(["boot", "strap"])
    est = slope_ci([0, 1, 2, 3], [0, 1, 2, 4], method=method)
    assert est.method == "bootstrap" and est.lo <= est.slope <= est.hi


def test_another_process_is_sampled_by_its_pid():
    parent = os.getppid()
    s = ResourceSampler("parent", interval_s=3600, registry=CollectorRegistry(), pid=parent)
    assert s.proc.pid == parent and s.pid == parent
    assert s.sample()["rss_bytes"] > 0 and psutil.pid_exists(parent)
    own = ResourceSampler("own", interval_s=3600, registry=CollectorRegistry(), trace_heap=False)
    assert own.proc.pid == os.getpid() and own.sample()["rss_bytes"] > 0


@pytest.mark.parametrize("bad", ["a", "nope", "wild", "T", ""])
def test_unknown_methods_are_rejected_naming_the_field(bad):
    with pytest.raises(ValueError, match="method must be 't' or 'bootstrap'"):
        slope_ci([0, 1, 2, 3], [0, 1, 2, 4], method=bad)


async def test_background_task_samples_every_interval(monkeypatch):
    """The sampler's task samples, then sleeps `interval_s` (default 5 s), forever until stop()."""
    slept: list[float] = []
    real_sleep = asyncio.sleep

    async def fake_sleep(seconds, *a, **kw):
        slept.append(seconds)
        await real_sleep(0)

    s = ResourceSampler("period", registry=CollectorRegistry(), trace_heap=False, rss_reader=lambda: 1,
                        clock=lambda: 0.0)
    assert s.interval_s == 5.0 and s.component == "period"
    monkeypatch.setattr(asyncio, "sleep", fake_sleep)
    await s.start()
    for _ in range(5):
        await real_sleep(0)
    await s.stop()
    monkeypatch.undo()
    assert len(slept) >= 3 and set(slept) == {5.0}
    assert len(s.samples) == len(slept) + 1  # one sample before each sleep, one more on stop()


def test_lengths_are_compared_by_value_both_ways():
    with pytest.raises(ValueError, match="differ in length"):
        slope_ci([0, 1], [0, 1, 2])
    # 300 points (beyond CPython's cached small ints): equal lengths are equal, not the same object
    x = list(range(300))
    assert slope_ci(x, [2.0 * v for v in x]).slope == pytest.approx(2.0)


async def test_a_sampler_never_started_leaves_tracemalloc_alone():
    if tracemalloc.is_tracing():
        pytest.skip("tracemalloc already running in this process")
    tracemalloc.start()
    try:
        s = ResourceSampler("never", interval_s=3600, registry=CollectorRegistry(), rss_reader=lambda: 1)
        await s.stop()  # takes a last sample; tracemalloc was not its to stop
        assert tracemalloc.is_tracing() and len(s.samples) == 1
    finally:
        tracemalloc.stop()
