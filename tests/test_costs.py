"""The cost-per-message table (services/coordinator/costs.py) on hand-built lanes: windows by midpoint, the first
namespace in none, figures per window, growth and the flat verdict."""

from __future__ import annotations

import pytest

from services.coordinator import costs


def ns(messages, ingest_s, settle_s=0.0, lat=(), rss=None):
    return {"messages": messages, "ingest_s": ingest_s, "settle_s": settle_s, "retrieve_ms": list(lat),
            "rss_bytes": rss}


def lane(rows):
    return {"mode": "streamed", "namespaces": {f"q{i}": r for i, r in enumerate(rows)}}


def test_windows_hold_the_namespaces_whose_midpoint_is_within_half_to_one_and_a_half_marks():
    rows = [ns(500, 1.0) for _ in range(4)]  # midpoints 250, 750, 1250, 1750; 2,000 messages in all
    w = costs.windows(rows, marks=(1_000, 10_000))
    assert list(w) == [1_000]  # 10k not reached
    assert w[1_000] == [rows[1], rows[2]]  # 750 and 1250 are in [500, 1500); the first (250) never is


def test_a_mark_needs_the_messages_and_a_namespace_in_its_window():
    assert costs.windows([ns(3_000, 1.0)], marks=(1_000,)) == {}  # 3,000 ingested but the midpoint 1,500 is out
    assert costs.windows([ns(400, 1.0), ns(400, 1.0)], marks=(1_000,)) == {}  # window has 600, but only 800 in all


def test_window_figures():
    rows = [ns(400, 1.0, 0.2, lat=(10, 30), rss=100 * 2**20), ns(600, 2.0, 0.0, lat=(20,), rss=150 * 2**20)]
    c = costs.window_costs(rows)
    assert c["messages"] == 1_000 and c["namespaces"] == 2 and c["queries"] == 3
    # per namespace 1.2 s / 400 = 3.0 ms and 2.0 s / 600 = 3.333 ms: median 3.1667; in all 3.2 s over 1,000
    assert c["ingest_ms_per_message"] == pytest.approx((3.0 + 2000 / 600) / 2)
    assert c["ingest_ms_per_message_total"] == pytest.approx(3.2)
    # one namespace waiting 30 s (a refused capture's retries) moves the median by nothing, the total 7x
    stall = [ns(500, 1.0), ns(500, 1.0), ns(500, 31.0)]
    assert costs.window_costs(stall)["ingest_ms_per_message"] == pytest.approx(2.0)
    assert costs.window_costs(stall)["ingest_ms_per_message_total"] == pytest.approx(1000 * 33.0 / 1500)
    assert c["query_ms"] == 20.0 and c["rss_mb"] == 150.0
    empty = costs.window_costs([ns(10, 0.0)])
    assert empty["query_ms"] is None and empty["rss_mb"] is None


def test_growth_and_flat_verdict_per_backend():
    # 500-message namespaces; 1 s each up to the 10k window, then 2 s (2 ms a message at 10k against 2... see below)
    flat_rows = [ns(500, 1.0, lat=(10,)) for _ in range(30)]  # 15,000 messages, constant cost
    growing = [ns(500, 1.0 if i < 10 else 1.8, lat=(10 if i < 10 else 12,)) for i in range(30)]
    table = costs.cost_table({"flat": lane(flat_rows), "grows": lane(growing), "batch": {"namespaces": {}}},
                             marks=(1_000, 10_000))
    assert set(table) == {"flat", "grows"}  # a lane not streamed has no table
    f, g = table["flat"], table["grows"]
    assert f["marks"][1_000]["ingest_ms_per_message"] == pytest.approx(2.0)
    assert f["ingest_growth"] == pytest.approx(1.0) and f["query_growth"] == 1.0 and f["flat"] is True
    # 10k window: midpoints 5,000..14,750 -> namespaces 10..29, all at 1.8 s / 500 = 3.6 ms a message
    assert g["marks"][10_000]["ingest_ms_per_message"] == pytest.approx(3.6)
    assert g["ingest_growth"] == pytest.approx(1.8) and g["query_growth"] == pytest.approx(1.2)
    assert g["flat"] is False  # 1.8 > 1.5
    md = costs.render(table, marks=(1_000, 10_000))
    assert "| flat | 15,000 | 2.00 | 2.00 | 10.0 | 10.0 | – | – | 1.00 | 1.00 | yes |" in md
    assert "| grows | 15,000 | 2.00 | 3.60 | 10.0 | 12.0 | – | – | 1.80 | 1.20 | **no** |" in md


def test_one_mark_reached_judges_nothing_and_failed_namespaces_are_left_out():
    rows = [ns(500, 1.0), ns(500, 1.0), ns(500, 1.0), {"messages": 500, "error": "ingest failed"}]
    t = costs.cost_table({"b": lane(rows)}, marks=(1_000, 10_000))
    assert t["b"]["messages"] == 1_500 and list(t["b"]["marks"]) == [1_000]
    assert t["b"]["flat"] is None and t["b"]["ingest_growth"] is None
    assert costs.render({}) == ""
    assert "backends at a time" not in costs.render(t)
    two = costs.cost_table({"b": {**lane(rows), "lanes": 2}}, marks=(1_000,))
    assert two["b"]["lanes"] == 2 and "Measured with 2 backends at a time (--lanes 2): each" in costs.render(two)
    # a resumed run can mix lane counts: the note names the backends that shared the host
    mixed = costs.cost_table({"b": {**lane(rows), "lanes": 2}, "c": lane(rows)}, marks=(1_000,))
    assert "Measured with 2 backends at a time (--lanes 2) for b: each" in costs.render(mixed)
