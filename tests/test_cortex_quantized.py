"""cortex-mock's exact top-n search through int8 copies (services/cortex_mock/quantized.py): the bounds hold the
exact score, the pruning keeps every row that can make the list, and the lists equal ranking.top_ranked over
every row's exact score (ties, masks, minimum scores, duplicate rows and grouped rows included)."""

from __future__ import annotations

import numpy as np
import pytest

from services.cortex_mock import quantized as Q
from services.cortex_mock.ranking import top_ranked


def _unit_rows(rng: np.random.Generator, n: int, d: int) -> np.ndarray:
    m = rng.standard_normal((n, d)).astype(np.float32)
    return (m / np.linalg.norm(m, axis=1, keepdims=True)).astype(np.float32)


def _exact_all(m: np.ndarray, q: np.ndarray) -> np.ndarray:
    return Q.exact_scores(m, np.arange(m.shape[0]), np.asarray(q, np.float32))


def test_quantise_by_hand():
    codes, scale, err = Q.quantise(np.array([[0.5, -0.25, 0.0], [0.0, 0.0, 0.0], [-0.127, 0.001, 0.0635]]))
    # row 0: scale 0.5/127; -0.25/scale = -63.5 -> -64 (round half to even); error |-0.25 + 64 * 0.5/127|
    assert codes.dtype == np.int8 and codes[0].tolist() == [127, -64, 0]
    assert scale[0] == pytest.approx(0.5 / 127) and err[0] == pytest.approx(64 * 0.5 / 127 - 0.25)
    # an all-zero row: scale 1 (never divide by 0), codes 0, no error
    assert codes[1].tolist() == [0, 0, 0] and scale[1] == 1.0 and err[1] == 0.0
    # row 2: scale 0.001; 0.001 -> 1, 0.0635 -> 63.5 -> 64 (half to even), error 0.0005
    assert codes[2].tolist() == [-127, 1, 64] and err[2] == pytest.approx(0.0005, abs=1e-12)


def test_zero_width_rows_and_queries():
    """Rows of no dimensions (a tenant before its embedder's width is known) code to nothing, with no error."""
    codes, scale, err = Q.quantise(np.zeros((2, 0), np.float32))
    assert codes.shape == (2, 0) and scale.tolist() == [1.0, 1.0] and err.tolist() == [0.0, 0.0]
    qc = Q.QueryCodes.of(np.zeros(0, np.float32))
    assert qc.amax == 0.0 and qc.l1 == 0.0 and qc.err == 0.0 and qc.scale == 1.0


def test_query_codes_by_hand():
    qc = Q.QueryCodes.of(np.array([0.5, -0.25, 0.0], np.float32))
    assert qc.codes.tolist() == [127, -64, 0]  # -0.25 / (0.5/127) = -63.5 -> -64
    assert qc.scale == pytest.approx(0.5 / 127) and qc.amax == 0.5 and qc.l1 == 0.75
    assert qc.err == pytest.approx(64 * 0.5 / 127 - 0.25)
    assert qc.q32.dtype == np.float32 and qc.q32.tolist() == [0.5, -0.25, 0.0]


def test_bounds_by_hand():
    """One row [1, 0] (scale 1/127, no error) and the query [0.5, 0.5] (scale 0.5/127, no error): the int8
    product is 127 * 127 = 16129, so the approximation is 16129 * (1/127) * (0.5/127) = 0.5 and the slack is only
    the rounding allowance."""
    qr = Q.QuantizedRows.of(np.array([[1.0, 0.0]], np.float32))
    lo, up = qr.bounds(Q.QueryCodes.of(np.array([0.5, 0.5], np.float32)))
    assert lo[0] == pytest.approx(0.5, abs=1e-8) and up[0] == pytest.approx(0.5, abs=1e-8)
    assert lo[0] < 0.5 < up[0]


def test_bounds_reach_exactly_the_quantisation_error():
    """Where the codes are off, the bound is off by exactly as much: -0.25 is coded as -64 steps of 0.5/127 =
    -0.251969, 0.001969 too low, whether it sits in the query (row [0, 1]) or in the row (query [0, 1])."""
    step_err = 64 * 0.5 / 127 - 0.25
    for row, q in (([0.0, 1.0], [0.5, -0.25]), ([0.5, -0.25], [0.0, 1.0])):
        lo, up = Q.QuantizedRows.of(np.array([row], np.float32)).bounds(Q.QueryCodes.of(np.array(q, np.float32)))
        assert up[0] == pytest.approx(-0.25, abs=1e-8) and up[0] >= -0.25
        assert lo[0] == pytest.approx(-0.25 - 2 * step_err, abs=1e-8)


@pytest.mark.parametrize("seed", range(6))
def test_bounds_hold_the_exact_score(seed):
    rng = np.random.default_rng(seed)
    m = _unit_rows(rng, 400, 48) * rng.uniform(0.1, 3.0, (400, 1)).astype(np.float32)  # rows of any norm
    q = (rng.standard_normal(48) * rng.uniform(0.1, 2.0)).astype(np.float32)
    lo, up = Q.QuantizedRows.of(m).bounds(Q.QueryCodes.of(q))
    exact = m.astype(np.float64) @ q.astype(np.float64)
    assert np.all(lo <= exact) and np.all(exact <= up)
    # and only as wide as int8 codes demand: each element of a row or the query is off by at most half a step
    # (max|x| / 254), so on each side the score is off by at most a row's half step times ||q||_1 plus the
    # query's half step times the coded row's L1 norm (<= ||e||_1 + d half steps)
    m64, q64 = m.astype(np.float64), q.astype(np.float64)
    row_half = np.abs(m64).max(axis=1) / 254
    coded_l1 = np.abs(m64).sum(axis=1) + 48 * row_half
    assert np.all(up - lo <= 2 * (row_half * np.abs(q64).sum() + coded_l1 * np.abs(q64).max() / 254) * (1 + 1e-6))


def test_bounds_of_no_rows():
    lo, up = Q.QuantizedRows.of(np.zeros((0, 4), np.float32)).bounds(Q.QueryCodes.of(np.ones(4, np.float32)))
    assert lo.shape == up.shape == (0,)


def test_threshold_and_pruned_by_hand():
    lower = np.array([0.9, 0.5, 0.7, 0.1])
    upper = np.array([1.0, 0.69, 0.8, 0.75])
    # the 2nd largest lower bound is 0.7: rows whose upper bound reaches it
    assert Q.threshold(lower, 2, 0.2) == 0.7
    assert Q.pruned(lower, upper, 2, 0.2).tolist() == [0, 2, 3]
    # a minimum above it wins
    assert Q.threshold(lower, 2, 0.78) == 0.78 and Q.pruned(lower, upper, 2, 0.78).tolist() == [0, 2]
    # masked out: row 0 neither sets the threshold (2nd largest of 0.5, 0.7, 0.1 is 0.5) nor is returned
    mask = np.array([False, True, True, True])
    assert Q.threshold(lower, 2, 0.2, mask) == 0.5
    assert Q.pruned(lower, upper, 2, 0.2, mask).tolist() == [1, 2, 3]
    # no more rows than the limit: only the minimum applies
    assert Q.threshold(lower, 4, 0.2) == 0.2 and Q.pruned(lower, upper, 4, 0.7).tolist() == [0, 2, 3]
    assert Q.pruned(lower, upper, 0, 0.0).tolist() == [] and Q.pruned(np.zeros(0), np.zeros(0), 3, 0.0).tolist() == []
    assert Q.pruned(lower, upper, -1, 0.0).tolist() == []  # a negative limit asks for nothing (no partition)
    # exactly `limit` items: no cut, only the minimum, however low it is
    assert Q.threshold(lower, 4, -1.0) == -1.0
    # masked items never set the threshold, even when theirs would be the best (all scores negative)
    neg = np.array([-0.5, -0.6, -0.7])
    assert Q.threshold(neg, 1, -np.inf, np.array([False, True, True])) == -0.6
    # an upper bound exactly at the threshold stays: its exact score may tie the last place
    assert Q.pruned(np.array([0.5, 0.4]), np.array([0.6, 0.5]), 1, -np.inf).tolist() == [0, 1]


def test_exact_scores_per_row():
    rng = np.random.default_rng(3)
    m = _unit_rows(rng, 50, 384)
    m[7] = m[30]  # identical rows
    q = _unit_rows(rng, 1, 384)[0]
    all_rows = _exact_all(m, q)
    assert all_rows.dtype == np.float64 and all_rows[7] == all_rows[30]
    reference = m.astype(np.float64) @ q.astype(np.float64)
    assert np.max(np.abs(all_rows - reference)) < 1e-12
    for r in (0, 7, 49):  # a row scores the same alone as among others
        assert Q.exact_scores(m, np.array([r]), q)[0] == all_rows[r]
    assert Q.exact_scores(m, np.zeros(0, np.int64), q).shape == (0,)


def _reference_top(m, q, limit, min_score, tie, mask=None):
    s = _exact_all(m, q)
    if mask is not None:
        s = np.where(mask, s, -np.inf)
    return top_ranked(s, limit, min_score, tie)


@pytest.mark.parametrize("seed", range(12))
def test_top_rows_is_the_exact_list(seed):
    rng = np.random.default_rng(100 + seed)
    n, d = 600, 32
    m = _unit_rows(rng, n, d)
    # clusters of near-duplicates and exact duplicates, so ties and near-ties sit at the cut
    m[100:160] = m[5] + rng.normal(0, 1e-3, (60, d)).astype(np.float32)
    m[200:240] = m[9]
    q = (m[5] + m[9] + rng.normal(0, 0.05, d)).astype(np.float32)
    tie = rng.permutation(n)
    qr, qc = Q.QuantizedRows.of(m), Q.QueryCodes.of(q)
    mask = rng.random(n) < 0.6 if seed % 2 else None
    for limit, min_score in ((50, 0.2), (10, -np.inf), (200, 0.0), (1, 0.5)):
        got, cand, scores = Q.top_rows(m, qr, qc, limit, min_score, tie, mask)
        assert got == _reference_top(m, q, limit, min_score, tie, mask)
        assert all(type(i) is int for i in got)
        assert np.array_equal(scores, Q.exact_scores(m, cand, qc.q32))
        assert set(got) <= set(cand.tolist()) and cand.size < n  # pruned, not everything scored


def test_top_rows_prunes_most_rows():
    rng = np.random.default_rng(7)
    m = _unit_rows(rng, 5000, 64)
    q = m[17] + 0.3 * m[99]
    got, cand, _ = Q.top_rows(m, Q.QuantizedRows.of(m), Q.QueryCodes.of(q), 50, 0.2, np.arange(5000))
    assert got[0] == 17 and cand.size < 500


def test_appended_equals_a_fresh_copy():
    rng = np.random.default_rng(11)
    m = _unit_rows(rng, 30, 16)
    for start in (m[:20], m[:0], np.zeros((0, 0), np.float32), m):  # grown, from nothing (also 0 x 0), unchanged
        grown = Q.QuantizedRows.of(start).appended(m)
        fresh = Q.QuantizedRows.of(m)
        for a in ("codes", "scale", "err", "code_l1"):
            assert np.array_equal(getattr(grown, a), getattr(fresh, a))


def test_frozen_query_codes_and_question_rows():
    """Both are shared between search threads (the engine's query cache, a snapshot's question view)."""
    import dataclasses

    qc = Q.QueryCodes.of(np.ones(2, np.float32))
    with pytest.raises(dataclasses.FrozenInstanceError):
        qc.scale = 2.0  # type: ignore[misc]
    g = _groups(np.array([0]), np.ones((1, 2), np.float32), np.array([0]))
    with pytest.raises(dataclasses.FrozenInstanceError):
        g.owners = np.zeros(0)  # type: ignore[misc]


def test_bounds_pin_every_term_of_the_slack():
    """Row [0.5, -0.25] (scale 0.5/127, codes [127, -64], error 64*0.5/127 - 0.25), query [0, 1] (scale 1/127,
    exact, ||q||_1 = max|q| = 1): the int8 product is -64 * 127, and the slack is error * (1 + 2e-9) +
    ||coded row||_1 * 1e-9 + 1e-21, the rounding allowance included, to 1e-15."""
    e = 64 * 0.5 / 127 - 0.25
    coded_l1 = (127 + 64) * 0.5 / 127
    lo, up = Q.QuantizedRows.of(np.array([[0.5, -0.25]], np.float32)).bounds(Q.QueryCodes.of(np.array([0, 1], np.float32)))
    approx = -64 * 127 * (0.5 / 127) * (1 / 127)
    slack = e * (1 + 2e-9) + coded_l1 * 1e-9 + 1e-21
    assert up[0] == pytest.approx(approx + slack, abs=1e-15) and lo[0] == pytest.approx(approx - slack, abs=1e-15)
    # a query with an error of its own and max|q| != 1: [0.5, -0.25] against the row [0, 1]
    qe = e
    lo, up = Q.QuantizedRows.of(np.array([[0.0, 1.0]], np.float32)).bounds(Q.QueryCodes.of(np.array([0.5, -0.25], np.float32)))
    slack = 0.0 * (0.75 + 1e-9 * 0.5 * 2) + 1.0 * (qe + 1e-9 * 0.5) + 1e-21
    assert up[0] == pytest.approx(approx + slack, abs=1e-15) and lo[0] == pytest.approx(approx - slack, abs=1e-15)


def _groups(owner_of_row: np.ndarray, distinct: np.ndarray, inverse: np.ndarray) -> Q.QuestionRows:
    order = np.argsort(owner_of_row, kind="stable")
    owners, counts = np.unique(owner_of_row, return_counts=True)
    layout = np.full((counts.max(), owners.size), distinct.shape[0], np.int64)
    k = 0
    for j, c in enumerate(counts):
        layout[:c, j] = inverse[order[k:k + c]]
        k += c
    return Q.QuestionRows(distinct, Q.QuantizedRows.of(distinct), owners, layout)


@pytest.mark.parametrize("seed", range(10))
def test_top_groups_is_the_best_row_per_owner(seed):
    rng = np.random.default_rng(200 + seed)
    n_owners, n_rows, d = 300, 700, 24
    templates = _unit_rows(rng, 12, d)  # questions repeat: a few templates plus some unique ones
    rows = np.concatenate([templates[rng.integers(0, 12, 500)], _unit_rows(rng, 200, d)])
    owner_of_row = np.sort(rng.choice(n_owners * 2, n_rows))  # some owners have several rows, many have none
    distinct, inverse = np.unique(rows, axis=0, return_inverse=True)
    g = _groups(owner_of_row, distinct.astype(np.float32), inverse.reshape(-1))
    q = (templates[3] + rng.normal(0, 0.2, d)).astype(np.float32)
    tie = rng.permutation(n_owners * 2)
    mask = rng.random(n_owners * 2) < 0.7 if seed % 2 else None
    per_row = Q.exact_scores(distinct.astype(np.float32), np.arange(distinct.shape[0]), q)[inverse.reshape(-1)]
    best = np.full(n_owners * 2, -np.inf)
    np.maximum.at(best, owner_of_row, per_row)
    if mask is not None:
        best = np.where(mask, best, -np.inf)
    for limit, min_score in ((50, 0.3), (5, -np.inf), (400, 0.0)):
        got, owners, scores = Q.top_groups(g, Q.QueryCodes.of(q), limit, min_score, tie, mask)
        assert got == top_ranked(best, limit, min_score, tie)
        # every owner reported with a score carries its exact best (the rows left out could not be its best)
        listed = dict(zip(owners.tolist(), scores.tolist(), strict=True))
        for o in got:
            assert listed[o] == best[o]


def test_top_groups_without_rows_or_limit():
    empty = Q.QuestionRows(np.zeros((0, 3), np.float32), Q.QuantizedRows.of(np.zeros((0, 3), np.float32)),
                           np.zeros(0, np.int64), np.zeros((0, 0), np.int64))
    qc = Q.QueryCodes.of(np.ones(3, np.float32))
    got, owners, best = Q.top_groups(empty, qc, 5, 0.0, np.arange(3))
    assert got == [] and owners.size == 0 and best.size == 0
    one = _groups(np.array([0]), np.ones((1, 3), np.float32), np.array([0]))
    for limit in (0, -1):
        got, owners, best = Q.top_groups(one, qc, limit, 0.0, np.arange(3))
        assert got == [] and owners.size == 0 and best.size == 0
    got, owners, best = Q.top_groups(one, qc, 1, 0.0, np.arange(3))
    assert got == [0] and owners.tolist() == [0] and best.tolist() == [3.0]


def test_top_groups_when_every_score_is_negative():
    """Padding slots and masked owners score -inf, never 0: with every real score below 0 they would otherwise
    win. Owners 0 (two questions), 1, 2 (two); the query points away from all of them."""
    distinct = np.array([[1.0, 0.0], [0.0, 1.0], [0.6, 0.8]], np.float32)
    g = _groups(np.array([0, 0, 1, 2, 2]), distinct, np.array([0, 1, 2, 1, 2]))
    qc = Q.QueryCodes.of(np.array([-1.0, -1.0], np.float32))
    tie = np.arange(3)
    # exact best per owner: 0 -> max(-1, -1) = -1; 1 -> -1.4; 2 -> max(-1, -1.4) = -1
    got, owners, best = Q.top_groups(g, qc, 3, -np.inf, tie)
    assert got == [0, 2, 1] and owners.tolist() == [0, 1, 2] and best.tolist() == pytest.approx([-1.0, -1.4, -1.0])
    got, owners, best = Q.top_groups(g, qc, 3, -np.inf, tie, np.array([True, False, True]))
    assert got == [0, 2]
    # only owners with a row scored exactly come back: the limit-1 threshold (-1) leaves out distinct row 2
    got, owners, best = Q.top_groups(g, qc, 1, -np.inf, tie)
    assert got == [0] and owners.tolist() == [0, 2] and best.tolist() == pytest.approx([-1.0, -1.0])


def test_exact_lookup_fills_only_what_is_missing():
    m = np.array([[1, 0], [0, 1], [1, 1]], np.float32)
    q = np.array([2, 3], np.float32)
    known = {0: 99.0}
    out = Q.exact_lookup(m, q, known, [2, 0, 1, 2])
    assert out is known and out == {0: 99.0, 1: 3.0, 2: 5.0}
