"""cortex-mock ranking maths (services/cortex_mock/ranking.py) at its edges, hand-computed: BM25 with one
document, a term frequency above 1, explicit k1/b and zero-length documents; top_ranked's cut at the limit
with ties and a tie key, the threshold boundary and fewer candidates than the limit; RRF with an explicit k
and no lists; coverage, cross-score clamping, the coverage-label boundaries and exact-fit packing. Found by
`make mutation` (the golden tests in test_cortex_mock_units.py pin the common case only)."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest

from services.cortex_mock import ranking


def _post(**terms: tuple[list[int], list[float]]) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    return {t: (np.array(i, dtype=np.int64), np.array(tf, dtype=np.float64)) for t, (i, tf) in terms.items()}


def test_bm25_single_document_and_unknown_terms_skipped():
    # one doc [ttl]: idf = ln(1 + (1 - 1 + .5) / (1 + .5)) = ln(4/3); dl = avgdl = 1: tf part 2.2 / 2.2 = 1
    post = _post(ttl=([0], [1.0]))
    s = ranking.bm25_scores(["ttl"], post, np.array([1.0]))
    assert s.tolist() == pytest.approx([math.log(4 / 3)])
    # a term with no posting is skipped, the terms after it still count
    assert ranking.bm25_scores(["nope", "ttl"], post, np.array([1.0])).tolist() == pytest.approx([math.log(4 / 3)])
    assert ranking.bm25_idf(1, 1) == pytest.approx(math.log(4 / 3))


def test_bm25_term_frequency_and_explicit_parameters():
    # d0 = [ttl, ttl, cache] (len 3), d1 = [cache] (len 1); avgdl 2; query ttl: df 1 of 2 -> idf ln 2
    post = _post(ttl=([0], [2.0]), cache=([0, 1], [1.0, 1.0]))
    dl = np.array([3.0, 1.0])
    # tf part = 2 * 2.2 / (2 + 1.2 * (.25 + .75 * 3 / 2)) = 4.4 / 3.65
    assert ranking.bm25_scores(["ttl"], post, dl).tolist() == pytest.approx([math.log(2) * 4.4 / 3.65, 0.0])
    # k1 = 2, b = 0 (no length normalisation): 2 * 3 / (2 + 2) = 1.5
    assert ranking.bm25_scores(["ttl"], post, dl, k1=2.0, b=0.0).tolist() == pytest.approx([math.log(2) * 1.5, 0.0])
    # cache in both docs: idf = ln(1 + .5 / 2.5) = ln 1.2; d1: 2.2 / (1 + 1.2 * (.25 + .75 * 1 / 2)) = 2.2 / 1.75
    assert ranking.bm25_scores(["cache"], post, dl)[1] == pytest.approx(math.log(1.2) * 2.2 / 1.75)


def test_bm25_zero_length_documents_and_empty_index():
    # every length 0: avgdl falls back to 1, so dl / avgdl = 0: tf part = 2.2 / (1 + 1.2 * .25) = 2.2 / 1.3
    post = _post(ttl=([0], [1.0]))
    assert ranking.bm25_scores(["ttl"], post, np.array([0.0, 0.0])).tolist() == pytest.approx(
        [math.log(2) * 2.2 / 1.3, 0.0])
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # an empty index returns at once: no mean of an empty array
        out = ranking.bm25_scores(["ttl"], {}, np.zeros(0))
    assert out.shape == (0,) and out.dtype == np.float64


def test_top_ranked_cut_at_the_limit_keeps_boundary_ties_for_the_tie_key():
    scores = np.array([0.3, 0.9, 0.3, 0.3, 0.1])
    assert ranking.top_ranked(scores, 2) == [1, 0]  # ties among 0, 2, 3 by index
    assert ranking.top_ranked(scores, 3) == [1, 0, 2]
    # the tie key decides which of the tied 0.3s makes the cut: tie[2] = 1 is the smallest among 0, 2, 3
    tie = np.array([3, 0, 1, 2, 0])
    assert ranking.top_ranked(scores, 2, tie=tie) == [1, 2]
    assert ranking.top_ranked(scores, 4, tie=tie) == [1, 2, 3, 0]
    assert ranking.top_ranked(scores, 1) == [1]
    assert ranking.top_ranked(scores, 0) == []
    assert ranking.top_ranked(scores, -1) == []  # a negative limit is no limit to sort to
    assert ranking.top_ranked(scores, 9) == [1, 0, 2, 3, 4]


def test_top_ranked_threshold_is_strict_and_short_lists():
    assert ranking.top_ranked(np.array([0.2, 0.5]), 5, 0.2) == [1]  # equal to min_score: out
    assert ranking.top_ranked(np.array([0.5, 0.9]), 3) == [1, 0]  # fewer candidates than the limit
    assert ranking.top_ranked(np.array([0.7]), 3) == [0]
    assert ranking.top_ranked(np.array([0.7, 0.0, -np.inf]), 3) == [0]  # default min_score 0: strictly above
    assert ranking.top_ranked(np.array([-1.0]), 3, -2.0) == [0]
    assert ranking.top_ranked(np.array([0.1, 0.1]), 3, 0.5) == []


def test_rrf_explicit_k_and_no_lists():
    docs, scores = ranking.rrf_fuse([[3, 4]], k=0)
    assert docs.tolist() == [3, 4] and scores.tolist() == [1.0, 0.5]
    assert ranking.rrf_normalised(0.5, 0) == 0.0
    assert ranking.rrf_normalised(1 / 61, 1) == pytest.approx(1.0)
    assert ranking.rrf_normalised(1.0, 2, k=1) == pytest.approx(1.0)  # best possible: 2 / (1 + 1)


def test_coverage_cross_score_and_demotion_edges():
    assert ranking.lexical_coverage([], ["cache"]) == 0.0
    assert ranking.lexical_coverage(["cache", "cache", "ttl"], ["cache"]) == 0.5  # distinct query tokens
    assert ranking.cross_score(0.0, 1.7) == pytest.approx(0.5)  # cosine clamped at 1
    assert ranking.cross_score(1.0, 0.2, w_lex=0.25) == pytest.approx(0.25 + 0.75 * 0.2)
    assert ranking.demote(0.8, False) == 0.8
    assert ranking.demote(0.8, True) == pytest.approx(0.8 * ranking.SUPERSEDED_FACTOR) == pytest.approx(0.4)


@pytest.mark.parametrize("score,label", [
    (1.0, "high"), (0.6, "high"), (0.5999, "partial"), (0.35, "partial"), (0.3499, "low"), (0.15, "low"),
    (0.1499, "none"), (0.0, "none"), (-0.5, "none"), (None, "none"),
])
def test_coverage_label_boundaries(score, label):
    assert ranking.coverage_label(score) == label


def test_pack_exact_fit_and_zero_limit():
    assert ranking.pack([10, 30, 5], budget=40, limit=5) == ([0, 1], 40)  # 10 + 30 = 40 fits exactly
    assert ranking.pack([5, 7], budget=40, limit=0) == ([], 0)
    assert ranking.pack([100, 10, 50], budget=40, limit=5) == ([0], 100)  # first kept, then nothing fits
    assert ranking.pack([], budget=40, limit=5) == ([], 0)
    assert ranking.pack([5, 7], budget=40, limit=-1) == ([], 0)
    # a limit above CPython's small-int cache (256): the count must be compared by value
    assert ranking.pack([1] * 300, budget=10_000, limit=257) == (list(range(257)), 257)


def test_bm25_takes_a_kept_average_length():
    post = _post(ttl=([0], [1.0]))
    dl = np.array([2.0, 4.0])  # mean 3
    assert ranking.bm25_scores(["ttl"], post, dl, avgdl=3.0).tolist() == ranking.bm25_scores(["ttl"], post, dl).tolist()
    # a different kept average changes the length norm: dl/avgdl = 2/2 = 1 -> tf part (2.2) / (1 + 1.2) = 1.0
    assert ranking.bm25_scores(["ttl"], post, dl, avgdl=2.0)[0] == pytest.approx(math.log(1 + 1.5 / 1.5))
    # a kept average of 0 (every document empty) is treated as 1, as a computed one is
    assert ranking.bm25_scores(["ttl"], post, dl, avgdl=0.0)[0] == pytest.approx(
        math.log(2) * 2.2 / (1 + 1.2 * (0.25 + 0.75 * 2.0)))


def test_rrf_fuse_by_hand():
    docs, scores = ranking.rrf_fuse([[3, 1], [1, 2]], k=60)
    assert docs.tolist() == [1, 2, 3]
    assert scores.tolist() == [1 / 62 + 1 / 61, 1 / 62, 1 / 61]
    d0, s0 = ranking.rrf_fuse([])
    d1, s1 = ranking.rrf_fuse([[], []])
    assert d0.size == s0.size == d1.size == s1.size == 0 and d0.dtype == np.int64
    _, s = ranking.rrf_fuse([[5]], k=0)
    assert s.tolist() == [1.0]


def test_rrf_fuse_sums_in_list_then_rank_order():
    """The same floats as adding 1/(k + rank) doc by doc, list by list, best rank first (float addition is not
    associative: another order could differ in the last bit and reorder exact ties)."""
    rng = np.random.default_rng(4)
    for _ in range(30):
        lists = [rng.choice(200, int(rng.integers(0, 60)), replace=False).tolist() for _ in range(int(rng.integers(1, 6)))]
        fused: dict[int, float] = {}
        for ranked in lists:
            for r, d in enumerate(ranked, start=1):
                fused[d] = fused.get(d, 0.0) + 1.0 / (60 + r)
        docs, scores = ranking.rrf_fuse(lists)
        assert dict(zip(docs.tolist(), scores.tolist(), strict=True)) == fused  # equal floats, not approx


def test_fused_order_breaks_ties_by_the_tie_key():
    docs = np.array([4, 7, 9, 11])
    scores = np.array([0.5, 0.9, 0.5, 0.5])
    tie = np.zeros(12, dtype=np.int64)
    tie[[4, 9, 11]] = [2, 0, 1]
    order, s = ranking.fused_order(docs, scores, tie)
    assert order == [7, 9, 11, 4] and s == [0.9, 0.5, 0.5, 0.5]
    assert all(type(d) is int for d in order)
