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
    # every namespace of a window costs the same: zero-width intervals, both verdicts settled
    assert f["ingest_growth_ci"] == (1.0, 1.0) and f["settled"] is True and g["settled"] is True
    assert g["ingest_growth_ci"] == pytest.approx((1.8, 1.8)) and g["query_growth_ci"] == pytest.approx((1.2, 1.2))
    assert "| flat | 15,000 | 2.00 | 2.00 | 10.0 | 10.0 | – | – | 1.00 [1.00, 1.00] | 1.00 [1.00, 1.00] | yes |" in md
    assert "| grows | 15,000 | 2.00 | 3.60 | 10.0 | 12.0 | – | – | 1.80 [1.80, 1.80] | 1.20 [1.20, 1.20] | **no** |" in md


def test_one_mark_reached_judges_nothing_and_failed_namespaces_are_left_out():
    rows = [ns(500, 1.0), ns(500, 1.0), ns(500, 1.0), {"messages": 500, "error": "ingest failed"}]
    t = costs.cost_table({"b": lane(rows)}, marks=(1_000, 10_000))
    assert t["b"]["messages"] == 1_500 and list(t["b"]["marks"]) == [1_000]
    assert t["b"]["flat"] is None and t["b"]["ingest_growth"] is None
    assert t["b"]["settled"] is None and t["b"]["ingest_growth_ci"] is None
    assert costs.render({}) == ""
    assert "backends at a time" not in costs.render(t)
    two = costs.cost_table({"b": {**lane(rows), "lanes": 2}}, marks=(1_000,))
    assert two["b"]["lanes"] == 2 and "Measured with 2 backends at a time (--lanes 2): each" in costs.render(two)
    # a resumed run can mix lane counts: the note names the backends that shared the host
    mixed = costs.cost_table({"b": {**lane(rows), "lanes": 2}, "c": lane(rows)}, marks=(1_000,))
    assert "Measured with 2 backends at a time (--lanes 2) for b: each" in costs.render(mixed)
    # every backend with 2 lanes on every record: no list of names
    both = costs.cost_table({"b": {**lane(rows), "lanes": 2}, "c": {**lane(rows), "lanes": 2}}, marks=(1_000,))
    assert "Measured with 2 backends at a time (--lanes 2): each" in costs.render(both)


def test_growth_interval_resamples_each_window_on_its_own():
    from services.coordinator.stats import median_ratio_ci

    assert median_ratio_ci([1.0, 1.0], [2.0, 2.0, 2.0]) == (2.0, 2.0)
    # before = [1, 3]: a resample's median is 1, 2 or 3 with chances 1/4, 1/2, 1/4; after is always 2, so the
    # ratio is 2, 1 or 2/3 and the 2.5% and 97.5% quantiles are the two ends
    lo, hi = median_ratio_ci([1.0, 3.0], [2.0, 2.0, 2.0])
    assert lo == pytest.approx(2 / 3) and hi == pytest.approx(2.0)
    assert median_ratio_ci([1.0], [2.0, 2.0]) is None  # one value: no spread to resample
    assert median_ratio_ci([1.0, 1.0], [2.0]) is None
    assert median_ratio_ci([0.0, 0.0], [2.0, 2.0]) is None  # no ratio to a zero cost


def test_a_growth_from_two_noisy_namespaces_is_unsettled():
    # The full S run at 786b379: the 1k window held two namespaces that ran fast (0.18 and 0.23 ms a message), the
    # rest of the run 0.34. Growth 0.34 / 0.205 = 1.66 reads "not flat"; but a resampled 1k median is 0.18, 0.205
    # or 0.23, so the interval is [0.34 / 0.23, 0.34 / 0.18] = [1.48, 1.89], which crosses 1.5: unsettled.
    rows = [ns(500, 0.2, lat=(8,))] + [ns(500, 0.09, lat=(8,)), ns(500, 0.115, lat=(8,))]
    rows += [ns(500, 0.17, lat=(8,)) for _ in range(27)]
    e = costs.cost_table({"hybrid": lane(rows)}, marks=(1_000, 10_000))["hybrid"]
    assert e["ingest_growth"] == pytest.approx(0.34 / 0.205)
    assert e["ingest_growth_ci"] == pytest.approx((0.34 / 0.23, 0.34 / 0.18))
    assert e["flat"] is False and e["settled"] is False
    md = costs.render({"hybrid": e}, marks=(1_000, 10_000))
    assert "| 1.66 [1.48, 1.89] | 1.00 [1.00, 1.00] | **no** (unsettled) |" in md
    # the same two namespaces both at 0.18: the interval is [1.89, 1.89], wholly above 1.5, and "no" is settled
    rows[2] = ns(500, 0.09, lat=(8,))
    e = costs.cost_table({"hybrid": lane(rows)}, marks=(1_000, 10_000))["hybrid"]
    assert e["flat"] is False and e["settled"] is True
    assert "| **no** |" in costs.render({"hybrid": e}, marks=(1_000, 10_000))


def test_a_flat_verdict_is_settled_only_when_every_interval_stays_under_the_limit():
    # 1k window with one namespace of 1,000 messages (midpoint 1,250 after a first of 500): no interval
    one = [ns(500, 1.0, lat=(10,)), ns(1_000, 2.0, lat=(10,))] + [ns(500, 1.0, lat=(10,)) for _ in range(28)]
    e = costs.cost_table({"b": lane(one)}, marks=(1_000, 10_000))["b"]
    assert e["marks"][1_000]["namespaces"] == 1 and e["ingest_growth_ci"] is None and e["query_growth_ci"] is None
    assert e["flat"] is True and e["settled"] is False
    assert "| 1.00 | 1.00 | yes (unsettled) |" in costs.render({"b": e}, marks=(1_000, 10_000))
    # query times 10 and 16 at 1k, 12 at 10k: growth 12 / 13 = 0.92 (flat), but a resampled 1k median of 10 gives 1.2,
    # still under 1.5: settled
    rows = [ns(500, 1.0, lat=(10,)), ns(500, 1.0, lat=(10,)), ns(500, 1.0, lat=(16,))]
    rows += [ns(500, 1.0, lat=(12,)) for _ in range(27)]
    e = costs.cost_table({"b": lane(rows)}, marks=(1_000, 10_000))["b"]
    assert e["query_growth"] == pytest.approx(12 / 13) and e["query_growth_ci"] == pytest.approx((12 / 16, 12 / 10))
    assert e["flat"] is True and e["settled"] is True
    # 1k times 10 and 6: the interval reaches 12 / 6 = 2.0 > 1.5, so "flat" (growth 12 / 8 = 1.5) is unsettled
    rows[2] = ns(500, 1.0, lat=(6,))
    e = costs.cost_table({"b": lane(rows)}, marks=(1_000, 10_000))["b"]
    assert e["query_growth"] == pytest.approx(1.5) and e["flat"] is True and e["settled"] is False


def test_a_resumed_pass_counts_its_messages_from_its_own_start():
    # pass 0 ingested 3 namespaces (midpoints 250, 750, 1250), then the run was resumed: pass 1's processes start
    # empty, so its namespaces sit at 250, 750, 1250, ... again; its first (250) pays warm-up like pass 0's
    rows = [{**ns(500, 1.0), "pass": 0} for _ in range(3)] + [{**ns(500, 2.0), "pass": 1} for _ in range(3)]
    w = costs.windows(rows, marks=(1_000, 2_000))
    assert w[1_000] == [rows[1], rows[2], rows[4], rows[5]]
    assert 2_000 not in w  # no pass reached 2,000 messages, though the run ingested 3,000
    # records without a pass (written before passes were kept) are one pass, as before
    legacy = [ns(500, i) for i in range(4)]  # midpoints 250, 750, 1250, 1750 counted through
    assert costs.windows(legacy, marks=(1_000, 2_000)) == {1_000: legacy[1:3], 2_000: legacy[2:4]}


def test_each_records_lanes_and_passes_label_the_table():
    rows = [{**ns(500, 1.0), "pass": 0, "lanes": 2} for _ in range(3)] + [{**ns(500, 1.0), "pass": 1, "lanes": 1}]
    t = costs.cost_table({"b": {**lane(rows), "lanes": 1}, "c": lane([ns(500, 1.0)] * 3)}, marks=(1_000,))
    assert t["b"]["lanes"] == 2 and t["b"]["passes"] == 2  # the last pass's lanes (1) would have hidden pass 0's
    assert t["c"]["lanes"] == 1 and t["c"]["passes"] == 1
    assert t["b"]["lanes_mixed"] is True and t["c"]["lanes_mixed"] is False
    md = costs.render(t, marks=(1_000,))
    assert "(--lanes 2) for b (part of its namespaces): each" in md  # pass 1 ran alone
    assert "more than one pass of a resumed run: b (2); each pass started new processes" in md


def test_the_pass_of_a_resumed_run():
    from services.coordinator.runner import next_pass

    assert next_pass({}) == 0
    assert next_pass({"a": {"namespaces": {}}}) == 0
    assert next_pass({"a": {"namespaces": {"q": {"messages": 3}}}}) == 1  # a record from before passes: pass 0
    assert next_pass({"a": {"namespaces": {"q": {"pass": 2}}}, "b": {"namespaces": {"r": {"pass": 0}}}}) == 3


def test_cost_by_group_leaves_out_each_passes_warm_up_and_reads_each_group_on_its_own():
    group_of = {"q0": "small", "q1": "small", "q2": "small", "q3": "big", "q4": "big", "q5": "big"}
    rows = [ns(100, 5.0, lat=(10, 20), rss=100 * 2**20),  # first of pass 0: 50 ms a message of warm-up, left out
            ns(100, 0.2, 0.1, lat=(30,), rss=110 * 2**20),  # 3.0 ms a message
            ns(300, 1.2, lat=(40,), rss=120 * 2**20),  # 4.0
            ns(1_000, 6.0, lat=(50, 70), rss=300 * 2**20),  # 6.0
            ns(1_000, 7.0, 1.0, lat=(90,), rss=500 * 2**20),  # 8.0
            {**ns(2_000, 1.0), "error": "ingest failed"}]  # failed: in no group
    table = costs.group_table({"b": lane(rows), "batch": {"namespaces": {}}}, group_of, ("small", "big", "huge"))
    assert list(table) == ["b"]
    small, big = table["b"]["groups"]["small"], table["b"]["groups"]["big"]
    assert list(table["b"]["groups"]) == ["small", "big"]  # in the order given; a group without rows is not there
    assert small["namespaces"] == 3 and small["messages"] == 500 and small["messages_median"] == 100
    assert small["warmup_left_out"] == 1 and big["warmup_left_out"] == 0
    assert small["ingest_ms_per_message"] == pytest.approx(3.5)  # median of 3.0 and 4.0; the warm-up's 50 is out
    assert big["ingest_ms_per_message"] == pytest.approx(7.0)  # median of 6.0 and 8.0
    # every retrieve counts, the warm-up namespace's too: 10, 20, 30, 40 and 50, 70, 90; p95 by linear interpolation
    assert small["query_ms"] == 25.0 and small["query_p95_ms"] == pytest.approx(38.5) and small["queries"] == 4
    assert big["query_ms"] == 70.0 and big["query_p95_ms"] == pytest.approx(88.0)
    assert small["rss_mb"] == 110.0 and small["rss_max_mb"] == 120.0 and big["rss_mb"] == 400.0
    e = table["b"]
    assert e["groups_compared"] == ["small", "big"]
    assert e["ingest_growth"] == pytest.approx(2.0) and e["query_growth"] == pytest.approx(2.8) and e["flat"] is False


def test_cost_by_group_restarts_the_warm_up_at_each_pass_and_leaves_ungrouped_namespaces_out():
    rows = [ns(100, 1.0), {**ns(100, 0.5), "pass": 1}, {**ns(100, 0.3), "pass": 1}, ns(100, 9.0)]
    table = costs.group_table({"b": lane(rows)}, {"q0": "g", "q1": "g", "q2": "g"}, ("g",))
    g = table["b"]["groups"]["g"]
    assert g["namespaces"] == 3 and g["warmup_left_out"] == 2  # q0 opens pass 0, q1 opens pass 1; q3 has no group
    assert g["ingest_ms_per_message"] == pytest.approx(3.0)  # q2 alone
    assert table["b"]["passes"] == 2 and table["b"]["ingest_growth"] is None and table["b"]["flat"] is None
    assert costs.group_table({"b": lane(rows)}, {}, ("g",)) == {}


def test_cost_by_group_renders_a_row_per_backend_and_group_and_the_growth():
    rows = [ns(100, 5.0, lat=(10, 20), rss=100 * 2**20), ns(100, 0.3, lat=(30,), rss=110 * 2**20),
            ns(300, 1.2, lat=(40,), rss=120 * 2**20), ns(1_000, 6.0, lat=(50, 70), rss=300 * 2**20),
            ns(1_000, 8.0, lat=(90,), rss=500 * 2**20)]
    table = costs.group_table({"b": lane(rows)}, {f"q{i}": "small" if i < 3 else "big" for i in range(5)},
                              ("small", "big"))
    md = costs.render_groups(table, "size bucket")
    assert md.startswith("## Cost by size bucket")
    assert "| b | small | 3 | 100 | 1 | 3.50 | 25.0 | 38.5 | 110 | 120 | – |\n" in md  # no embedder counts: –
    assert "| b | big | 2 | 1,000 | 0 | 7.00 | 70.0 | 88.0 | 400 | 500 | – |\n" in md
    assert "| b | big ÷ small | 2.00 [" in md
    assert costs.render_groups({}, "size bucket") == ""


def test_cost_by_group_says_what_share_of_the_vectors_each_group_embedded():
    emb = lambda embedded, cached: {"texts_embedded": embedded, "texts_cached": cached}  # noqa: E731
    rows = [{**ns(100, 1.0), **emb(100, 0)},  # the pass's warm-up counts here: it embedded what it embedded
            {**ns(100, 1.0), **emb(10, 90)},
            {**ns(100, 1.0), "texts_embedded": 7},  # half a record: left out
            {**ns(1_000, 1.0), **emb(0, 1_000)}, {**ns(1_000, 1.0), **emb(0, 0)},
            ns(1_000, 1.0), ns(1_000, 1.0)]
    group_of = {"q0": "small", "q1": "small", "q2": "small", "q3": "big", "q4": "big", "q5": "none", "q6": "none"}
    table = costs.group_table({"b": lane(rows)}, group_of, ("small", "big", "none"))
    g = table["b"]["groups"]
    assert g["small"]["embedded_share"] == pytest.approx(110 / 200)  # (100 + 10) / (100 + 10 + 90)
    assert g["big"]["embedded_share"] == 0.0  # all 1,000 from the cache; the record with nothing to embed adds 0
    assert g["none"]["embedded_share"] is None  # not recorded
    assert costs.embedded_share([{**emb(0, 0)}]) is None  # nothing to embed: no share
    md = costs.render_groups(table, "size bucket")
    assert "| embedded |" in md.splitlines()[4]
    rows_md = {line.split(" | ")[1]: line for line in md.splitlines() if line.startswith("| b | ")}
    assert rows_md["small"].endswith("| 55% |") and rows_md["big"].endswith("| 0% |")
    assert rows_md["none"].endswith("| – |")


def test_the_cost_by_group_warns_when_the_embedding_cache_was_warm_at_the_start():
    warm = costs.cache_note({"vectors": 209_741, "vectors_added": {"all-MiniLM-L6-v2": 130_854}})
    assert "held 78,887 vectors when this run started" in warm
    assert costs.cache_note({"vectors": 500, "vectors_added": {"a": 300, "b": 200}}) == ""  # all added by this run
    assert costs.cache_note(None) == "" and costs.cache_note({}) == ""
    table = costs.group_table({"b": lane([ns(100, 1.0), ns(100, 1.0)])}, {"q0": "g", "q1": "g"}, ("g",))
    assert warm in costs.render_groups(table, "size bucket", warm)


def test_cost_by_group_compares_ingest_and_query_between_the_same_two_groups():
    # "a" holds only the pass's first namespace (no ingest figure), so both growths are c over b, never query c over a
    rows = [ns(100, 9.0, lat=(5,)), ns(100, 0.2, lat=(10,)), ns(100, 0.2, lat=(10,)), ns(100, 0.6, lat=(40,))]
    table = costs.group_table({"x": lane(rows)}, {"q0": "a", "q1": "b", "q2": "b", "q3": "c"}, ("a", "b", "c"))
    e = table["x"]
    assert e["groups"]["a"]["ingest_ms_per_message"] is None and e["groups"]["a"]["query_ms"] == 5.0
    assert e["groups_compared"] == ["b", "c"]
    assert e["ingest_growth"] == pytest.approx(3.0) and e["query_growth"] == pytest.approx(4.0)
    assert e["flat"] is False
