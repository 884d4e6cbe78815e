"""The retrieve path's shortcuts (issue 14 throughput) answer exactly as the long way round: an all-true filter
mask skips the masked copy, fast mode normalises only the packing window, top_ranked hands back Python ints."""

from __future__ import annotations

import math
from datetime import UTC, datetime

import numpy as np

from services.cortex_mock import ranking
from services.cortex_mock.config import MockConfig
from services.cortex_mock.engine import CortexEngine
from services.cortex_mock.search import SearchParams, _masked


def test_masked_without_a_filter_is_the_scores_themselves():
    s64 = np.array([0.5, -1.0, 2.0, 0.0])
    s32 = s64.astype(np.float32)
    for s in (s64, s32):
        everything = _masked(s, np.ones(4, dtype=bool))
        reference = np.where(np.ones(4, dtype=bool), s, -np.inf)
        assert everything.dtype == reference.dtype and np.array_equal(everything, reference)
        some = _masked(s, np.array([True, False, True, False]))
        assert some.dtype == s.dtype
        assert some.tolist() == [s[0], -np.inf, s[2], -np.inf]


def test_top_ranked_returns_python_ints_best_first():
    out = ranking.top_ranked(np.array([0.1, 0.9, 0.5, 0.9]), 3, 0.0, np.array([3, 2, 1, 0]))
    assert out == [3, 1, 2] and all(type(i) is int for i in out)  # the 0.9 tie: tie key 0 before 2


async def test_a_filter_that_keeps_everyone_answers_as_no_filter(tmp_path):
    """user_id 'u' owns every fact, so its mask is all true (the shortcut); user 'v' owns none (the masked
    copy: nothing passes); a filter on a third of the facts is served by the long path."""
    e = CortexEngine(MockConfig(data_dir=str(tmp_path), embedder="hash"))
    try:
        ref = datetime(2026, 1, 1, tzinfo=UTC)
        for i, text in enumerate(["Priya owns the billing worker. The cache TTL is 300s.",
                                  "Marco profiled the search index in checkout-api.",
                                  "We moved the flaky test to a nightly job; it needs the redis fixture."]):
            await e.ingest_text("t", {"text": text, "session_id": f"s{i}", "reference_date": ref,
                                      "user_id": "u"})
        for mode in ("fast", "full"):
            for q in ("Who owns the billing worker?", "flaky test redis", "search index"):
                plain = e.retrieve_sync("t", SearchParams(query=q, top_k=5, mode=mode, debug=True))
                scoped = e.retrieve_sync("t", SearchParams(query=q, top_k=5, mode=mode, debug=True, user_id="u"))
                assert plain.results and scoped.results == plain.results
                assert scoped.debug["channels"] == plain.debug["channels"]
                other = e.retrieve_sync("t", SearchParams(query=q, top_k=5, mode=mode, user_id="v"))
                assert other.results == []
        one = e.retrieve_sync("t", SearchParams(query="billing worker search index flaky", top_k=5, mode="fast",
                                                session_filter="s1"))
        assert [r["metadata"]["session_id"] for r in one.results] == ["s1"] * len(one.results) and one.results
    finally:
        await e.close()


def _times(seed: int, n: int, around: datetime) -> list[datetime | None]:
    import random
    from datetime import timedelta

    rng = random.Random(seed)
    out: list[datetime | None] = []
    for i in range(n):
        if i % 17 == 0:
            out.append(None)
        else:  # within about a year either side, to the microsecond
            out.append(around + timedelta(microseconds=rng.randrange(-400 * 86_400_000_000, 400 * 86_400_000_000)))
    return out


def test_proximity_all_is_proximity_bit_for_bit():
    from datetime import timedelta

    from services.cortex_mock.temporal import TimeWindow, find_time_window, micros, proximity, proximity_all

    ref = datetime(2026, 3, 14, 15, 9, 26, 535897, tzinfo=UTC)
    times = _times(1, 3000, ref)
    # exact window edges and a microsecond either side
    w = find_time_window("what did we do last week", ref)
    times += [w.start, w.end, w.start - timedelta(microseconds=1), w.end - timedelta(microseconds=1), ref]
    us = np.array([micros(t) if t else 0 for t in times], dtype=np.int64)
    has = np.array([t is not None for t in times])
    windows = [w, find_time_window("what is the current cache TTL", ref),
               find_time_window("what happened yesterday", ref), find_time_window("in March 2025", ref),
               TimeWindow(ref - timedelta(days=90), ref - timedelta(days=30), "custom", "range")]
    for win in windows:
        assert win is not None
        fast = proximity_all(us, has, win, ref)
        slow = np.array([proximity(t, win, ref) for t in times])
        assert fast.dtype == slow.dtype and np.array_equal(fast, slow), win
        assert fast.tobytes() == slow.tobytes()  # the same bits, -0.0 and all
    assert proximity_all(np.zeros(0, np.int64), np.zeros(0, bool), w, ref).shape == (0,)


def test_proximity_all_beyond_exact_float_gaps_takes_the_slow_way():
    from services.cortex_mock.temporal import find_time_window, micros, proximity, proximity_all

    ref = datetime(2026, 3, 14, tzinfo=UTC)
    times = [datetime(1, 1, 1, tzinfo=UTC), datetime(9999, 12, 31, tzinfo=UTC), ref, None]
    us = np.array([micros(t) if t else 0 for t in times], dtype=np.int64)
    has = np.array([t is not None for t in times])
    for q in ("what did we do last week", "what is the latest"):
        win = find_time_window(q, ref)
        assert np.array_equal(proximity_all(us, has, win, ref), [proximity(t, win, ref) for t in times])


async def test_temporal_channel_scores_through_the_snapshot(tmp_path):
    """The snapshot's microsecond times feed the channel: a time-window query ranks the fact said in the
    window first and the channel's scores equal proximity() of each fact."""
    from services.cortex_mock.temporal import find_time_window, proximity

    e = CortexEngine(MockConfig(data_dir=str(tmp_path), embedder="hash"))
    try:
        for i, (text, day) in enumerate([("We changed the cache TTL to 300s.", 2),
                                         ("We changed the cache TTL to 600s.", 20),
                                         ("We changed the retry policy of the billing worker.", 21)]):
            await e.ingest_text("t", {"text": text, "session_id": f"s{i}",
                                      "reference_date": datetime(2026, 1, day, 12, tzinfo=UTC)})
        ref = datetime(2026, 1, 27, tzinfo=UTC)  # "last week" = Jan 19-26
        q = "What did we change in the cache TTL last week?"
        out = e.retrieve_sync("t", SearchParams(query=q, top_k=3, mode="fast", reference=ref, debug=True))
        assert "temporal" in out.channels_used
        idx = e.store("t").index(e.embedder)
        win = find_time_window(q, ref)
        by_id = {f.id: f for f in idx.facts}
        top = out.debug["channels"]["temporal"]["top"]
        assert by_id[top[0]["node_id"]].content == "We changed the cache TTL to 600s." and top[0]["score"] == 1.0
        # Jan 2 12:00 is 16.5 days before the window (Mon Jan 19 - Mon Jan 26) whose scale is 7 days
        assert len(top) == 3 and top[-1]["score"] == round(math.exp(-16.5 / 7), 6)
        for item in top:
            assert item["score"] == round(proximity(by_id[item["node_id"]].occurred_at, win, ref), 6)
    finally:
        await e.close()


def test_search_threads_carry_their_name_at_the_os_level(tmp_path):
    """load-bench splits the server's CPU by OS thread name (loadtests/cpu_meter.py): the search pool's
    threads must be named cortex-search_N in /proc, not after the process."""
    import threading

    e = CortexEngine(MockConfig(data_dir=str(tmp_path), embedder="hash"))
    try:
        tid = e.search_pool.submit(threading.get_native_id).result()
        with open(f"/proc/self/task/{tid}/comm") as f:
            assert f.read().strip() == "cortex-search_0"
    finally:
        e.search_pool.shutdown()


async def test_a_grown_snapshot_searches_as_a_fresh_one(tmp_path):
    """After an ingest the writer extends its snapshot, int8 copy included (quantized.QuantizedRows.appended);
    a second engine that builds the same tenant from disk must give the same answers."""
    e = CortexEngine(MockConfig(data_dir=str(tmp_path), embedder="hash"))
    fresh = None
    try:
        ref = datetime(2026, 1, 1, tzinfo=UTC)
        queries = ("Who owns the billing worker?", "flaky test redis", "search index", "cache TTL")
        await e.ingest_text("t", {"text": "Priya owns the billing worker. The cache TTL is 300s.", "session_id": "a",
                                  "reference_date": ref})
        for q in queries:  # builds the snapshot and its int8 copies
            e.retrieve_sync("t", SearchParams(query=q, top_k=5, mode="fast"))
        built = e.store("t").index(e.embedder)
        for i, text in enumerate(["Marco profiled the search index in checkout-api.",
                                  "We moved the flaky test to a nightly job; it needs the redis fixture."]):
            await e.ingest_text("t", {"text": text, "session_id": f"s{i}", "reference_date": ref})
        grown = e.store("t").index(e.embedder)
        assert grown is not built and grown._emb_codes is not None  # extended, codes carried over
        fresh = CortexEngine(MockConfig(data_dir=str(tmp_path), embedder="hash"))
        for mode in ("fast", "full"):
            for q in queries:
                a = e.retrieve_sync("t", SearchParams(query=q, top_k=5, mode=mode, debug=True))
                b = fresh.retrieve_sync("t", SearchParams(query=q, top_k=5, mode=mode, debug=True))
                assert a.results and a.results == b.results and a.debug["channels"] == b.debug["channels"]
        rebuilt = fresh.store("t").index(fresh.embedder)
        assert np.array_equal(grown.emb_codes().codes, rebuilt.emb_codes().codes)
        assert grown.avg_doc_len() == rebuilt.avg_doc_len() == float(rebuilt.doc_len.mean())
    finally:
        await e.close()
        if fresh is not None:
            await fresh.close()
