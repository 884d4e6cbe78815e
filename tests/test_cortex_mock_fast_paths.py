"""The retrieve path's shortcuts (issue 14 throughput) answer exactly as the long way round: an all-true filter
mask skips the masked copy, fast mode normalises only the packing window, top_ranked hands back Python ints."""

from __future__ import annotations

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
