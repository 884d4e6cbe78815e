"""Per-phase figures of the open-loop summary, by hand: corrected latency (done − intended) and service time
(done − sent) per phase, with a queue wait in each phase so the two differ. Values stay below 2048 µs, where
HdrHistogram (3 significant digits) records them exactly."""

from __future__ import annotations

import numpy as np
import pytest

from loadtests.open_loop import Phase, Records, format_markdown, summarise

US = 1_000  # ns
T0 = 10 ** 9  # stamps are perf_counter_ns values; 0 means "never happened", so start away from it

# (phase, intended, sent, done) in µs after T0
ROWS = [
    (0, 0, 0, 1000),  # corrected 1000, service 1000
    (0, 10_000, 10_500, 11_500),  # corrected 1500, service 1000
    (0, 20_000, 21_200, 22_000),  # corrected 2000, service 800
    (1, 30_000, 30_000, 30_300),  # corrected 300, service 300
    (1, 40_000, 41_500, 41_900),  # corrected 1900, service 400
]
PHASES = [Phase(100.0, 0.03, name="steady"), Phase(200.0, 0.02, name="spike")]


def _records() -> Records:
    rec = Records.empty(len(ROWS), np.array([r[0] for r in ROWS], dtype=np.int32))
    for i, (_, intended, sent, done) in enumerate(ROWS):
        rec.intended[i] = T0 + intended * US
        rec.dispatched[i] = T0 + intended * US
        rec.sent[i] = T0 + sent * US
        rec.done[i] = T0 + done * US
        rec.ok[i] = True
    return rec


def test_per_phase_corrected_and_service_latency():
    res = summarise(_records(), PHASES)
    steady, spike = res["per_phase"]
    assert (steady["phase"], steady["scheduled"], steady["ok"]) == ("steady", 3, 3)
    assert (spike["phase"], spike["scheduled"], spike["ok"]) == ("spike", 2, 2)
    # corrected: steady 1.0 / 1.5 / 2.0 ms, spike 0.3 / 1.9 ms
    assert steady["corrected"]["p50_ms"] == pytest.approx(1.5)
    assert steady["corrected"]["max_ms"] == pytest.approx(2.0)
    assert steady["corrected"]["mean_ms"] == pytest.approx(1.5)
    assert spike["corrected"]["max_ms"] == pytest.approx(1.9)
    assert spike["corrected"]["mean_ms"] == pytest.approx(1.1)
    # service: steady 1.0 / 1.0 / 0.8 ms, spike 0.3 / 0.4 ms
    assert steady["service"]["max_ms"] == pytest.approx(1.0)
    assert steady["service"]["mean_ms"] == pytest.approx(2.8 / 3, abs=1e-3)
    assert spike["service"]["max_ms"] == pytest.approx(0.4)
    # the whole run: corrected max 2.0 ms (steady's third), service max 1.0 ms; queue wait max 1.5 ms (spike)
    assert res["corrected"]["max_ms"] == pytest.approx(2.0) and res["service"]["max_ms"] == pytest.approx(1.0)
    assert res["queue_wait"]["max_ms"] == pytest.approx(1.5)


def test_per_phase_rows_in_the_markdown():
    md = format_markdown(summarise(_records(), PHASES))
    rows = [line for line in md.splitlines() if line.startswith("| steady") or line.startswith("| spike")]
    assert len(rows) == 2
    # corrected p99 then service p99 are the last two cells
    cells = [[c.strip() for c in r.strip("|").split("|")] for r in rows]
    assert [float(c[-2]) for c in cells] == pytest.approx([2.0, 1.9])
    assert [float(c[-1]) for c in cells] == pytest.approx([1.0, 0.4])
