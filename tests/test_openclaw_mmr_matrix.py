"""The vectorised MMR (services/adapters/openclaw/mmr_matrix.py) and its reference loop (hybrid.mmr_rerank) on
hand-worked cases: the lambda clamp, lambda 1 and 0, exact ties in the MMR value, rows without tokens, and the
Jaccard matrix itself. Each case states the arithmetic; both implementations must give the stated order."""

from __future__ import annotations

import numpy as np
import pytest

from services.adapters.openclaw import hybrid as H
from services.adapters.openclaw.mmr_matrix import TokenVocab, jaccard_matrix, mmr_rerank_matrix


def _rows(*spec: tuple[float, str]) -> list[H.Scored]:
    return [H.Scored(f"id{i}", "p.md", i, i, text, score) for i, (score, text) in enumerate(spec)]


def _both(rows, lam, empty_by_text=False) -> list[str]:
    fast = [r.id for r in mmr_rerank_matrix(rows, lam, {}, TokenVocab(), "ascii+cjk", empty_by_text=empty_by_text)]
    ref = [r.id for r in H.mmr_rerank(rows, lam, "ascii+cjk", empty_by_text=empty_by_text)]
    assert fast == ref
    return fast


def test_nothing_or_one_row_comes_back_as_is():
    assert mmr_rerank_matrix([], 0.7, {}, TokenVocab()) == []
    one = _rows((0.3, "a"))
    assert mmr_rerank_matrix(one, 0.7, {}, TokenVocab()) == one


def test_two_rows_are_reordered_by_relevance():
    assert _both(_rows((0.2, "a"), (0.9, "b")), 0.7) == ["id1", "id0"]


def test_lambda_one_and_above_sorts_by_score():
    rows = _rows((0.5, "cats dogs"), (0.9, "cats dogs"), (0.7, "zebra"))
    assert _both(rows, 1.0) == ["id1", "id2", "id0"]
    # λ 1.5 is clamped to 1. Unclamped, 1.5·rel + 0.5·maxSim would rank the duplicate of the first pick second:
    # A 0.9 "cats dogs", B 0.8 "zebra lion", C 0.79 "cats dogs" → after A: B = 1.5·(0.01/0.11) = 0.136, C = 0.5
    rows = _rows((0.9, "cats dogs"), (0.8, "zebra lion"), (0.79, "cats dogs"))
    assert _both(rows, 1.5) == ["id0", "id1", "id2"]


def test_lambda_zero_and_below_picks_the_least_similar():
    # A 0.9 "x y", B 0.8 "x z" (Jaccard 1/3 with A), C 0.1 "w". λ 0: first pick by score (all MMR values 0,
    # ties to the higher score) = A; then B = −1/3 < C = 0 → C, then B. λ 0.7 keeps A, B, C.
    rows = _rows((0.9, "x y"), (0.8, "x z"), (0.1, "w"))
    assert _both(rows, 0.0) == ["id0", "id2", "id1"]
    assert _both(rows, -0.5) == ["id0", "id2", "id1"]  # clamped to 0
    assert _both(rows, 0.7) == ["id0", "id1", "id2"]


def test_an_exact_tie_goes_to_the_higher_original_score_not_the_earlier_row():
    # λ 0.5, scores 1, 0, 0.5 (rel = score, range 1). After A "a": C "a b" (Jaccard 1/2 with A) = 0.5·0.5 − 0.5·0.5
    # = 0 and B "z" = 0.5·0 − 0.5·0 = 0, exactly: C (score 0.5) beats the earlier B (score 0).
    rows = _rows((1.0, "a"), (0.0, "z"), (0.5, "a b"))
    assert _both(rows, 0.5) == ["id0", "id2", "id1"]


def test_rows_without_tokens_are_alike_unless_told_to_compare_their_text():
    # A 0.9 "x", B 0.8 "!!", C 0.7 "??", D 0.6 "y": rel 1, 2/3, 1/3, 0. After A and B: C = 0.7/3 − 0.3·sim(C, B),
    # D = 0. Without tokens B and C are alike (sim 1) → C = −0.067 → D first; compared by text ("!!" vs "??")
    # they are not (sim 0) → C = 0.233 → C first.
    rows = _rows((0.9, "x"), (0.8, "!!"), (0.7, "??"), (0.6, "y"))
    assert _both(rows, 0.7) == ["id0", "id1", "id3", "id2"]
    assert _both(rows, 0.7, empty_by_text=True) == ["id0", "id1", "id2", "id3"]


def test_jaccard_matrix_by_hand():
    ids = [np.array([1, 2], np.int32), np.array([2, 3], np.int32), np.array([], np.int32), np.array([], np.int32)]
    expected = np.array([[1, 1 / 3, 0, 0], [1 / 3, 1, 0, 0], [0, 0, 1, 1], [0, 0, 1, 1]])
    assert np.allclose(jaccard_matrix(ids), expected)
    by_text = jaccard_matrix(ids, ["a", "b", "x", "y"])
    assert by_text[2, 3] == 0.0 and by_text[2, 2] == 1.0 and by_text[0, 1] == pytest.approx(1 / 3)
    assert np.array_equal(jaccard_matrix([np.array([], np.int32)] * 2), np.ones((2, 2)))
    assert jaccard_matrix([]).shape == (0, 0)


def test_by_default_rows_without_tokens_are_alike():
    """The older eras (backend.py) call without `empty_by_text`: two token-less rows are then similar (1)."""
    rows = _rows((0.9, "x"), (0.8, "!!"), (0.7, "??"), (0.6, "y"))
    assert [r.id for r in mmr_rerank_matrix(rows, 0.7, {}, TokenVocab())] == ["id0", "id1", "id3", "id2"]
