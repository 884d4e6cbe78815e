"""Edges of the OpenClaw hybrid ranking helpers (services/adapters/openclaw/hybrid.py) that the pipeline tests do
not reach: mode and tokenizer names built at run time (as config values are, never the interned literals),
unknown names refused, MMR's default lambda and its clamp, half-lives under a day, the relaxed selection's
default text weight, and CJK bigrams past the 256th character. Expectations computed by hand."""

from __future__ import annotations

import math

import pytest

from services.adapters.openclaw import hybrid as H
from services.adapters.openclaw.presets import PRESETS


def _rt(s: str) -> str:
    """The same text as a new string object (a value read from a config or JSON, not a source literal)."""
    return "".join(list(s))


def _row(i: int, score: float, snippet: str = "", vector: float = 0.0, path: str = "p.md") -> H.Scored:
    return H.Scored(f"id{i}", path, i, i, snippet, score, vector_score=vector)


def test_merge_modes_by_value_and_unknown_modes_refused():
    v = [H.VectorHit("a", "a.md", 1, 1, "a", 0.8)]
    k = [H.KeywordHit("a", "a.md", 1, 1, "", 0.4)]
    # weights 0.5 / 0.25: weighted sum 0.4 + 0.1 = 0.5; normalised 0.5 / 0.75 = 2/3
    assert H.merge_hybrid(v, k, 0.5, 0.25, _rt("weighted-sum"))[0].score == pytest.approx(0.5)
    assert H.merge_hybrid(v, k, 0.5, 0.25, _rt("normalised"))[0].score == pytest.approx(2 / 3)
    for bad in ("zzz", "p", "a"):  # after, between and before the known names
        with pytest.raises(ValueError, match="unknown merge mode"):
            H.merge_hybrid(v, k, 0.5, 0.25, bad)


def test_age_source_of_an_undated_memory_file_by_source_value():
    dated = PRESETS["openclaw-2026-09"]["dated_path_regex"]
    # an undated memory/ file from the memory source is evergreen (no age); from any other source its mtime
    assert H.file_timestamp_ms("memory/topics.md", _rt("memory"), dated, ("MEMORY.md",), 123) is None
    assert H.file_timestamp_ms("memory/topics.md", "a", dated, ("MEMORY.md",), 123) == 123
    assert H.file_timestamp_ms("memory/topics.md", "sessions", dated, ("MEMORY.md",), 123) == 123


def test_path_tiebreak_by_value_and_other_values_keep_merge_order():
    rows = [_row(1, 0.5, path="b.md"), _row(2, 0.5, path="a.md")]
    assert [r.path for r in H.sort_results(rows, _rt("path"))] == ["a.md", "b.md"]
    assert [r.path for r in H.sort_results(rows, "a")] == ["b.md", "a.md"]
    assert [r.path for r in H.sort_results(rows, "stable")] == ["b.md", "a.md"]


def test_tokenizers_by_value_and_unknown_ones_refused():
    assert H.mmr_tokens("Port 8080 日本", _rt("ascii")) == frozenset({"port", "8080"})
    assert H.mmr_tokens("Ünïcode wörd", _rt("unicode")) == frozenset({"ünïcode", "wörd"})
    assert H.mmr_tokens("Port 日本", _rt("ascii+cjk")) == frozenset({"port", "日", "本", "日本"})
    for bad in ("a", "aaa", "zzz"):
        with pytest.raises(ValueError, match="unknown MMR tokenizer"):
            H.mmr_tokens("x", bad)


def test_cjk_bigrams_far_into_a_snippet():
    toks = H.mmr_tokens("x" * 300 + "日本", "ascii+cjk")  # the two characters sit at positions 300 and 301
    assert "日本" in toks and "x" * 300 in toks


def test_half_life_under_a_day():
    assert H.decay_multiplier(1.0, 0.5) == pytest.approx(0.25)  # two half-lives in one day
    assert H.decay_multiplier(0.25, 0.25) == pytest.approx(0.5)
    assert H.decay_multiplier(1.0, 0.0) == 1.0 and H.decay_multiplier(1.0, -1.0) == 1.0  # decay off


def test_mmr_default_lambda_is_0_7():
    # A, B near-duplicates; C different. rel: A 1, B (0.82-0.8)/0.1 = 0.2, C 0. After A: B = 0.7·0.2 − 0.3·1
    # = −0.16, C = 0 → C before B. With λ = 1 (a default above 1, clamped) the order is by score: A, B, C.
    rows = [_row(1, 0.9, "cats dogs"), _row(2, 0.82, "cats dogs"), _row(3, 0.8, "zebra")]
    assert [r.id for r in H.mmr_rerank(rows)] == ["id1", "id3", "id2"]
    # λ = 0 (a negative default, clamped) ignores relevance: A 0.9 "x y", B 0.8 "x z" (Jaccard 1/3 with A),
    # C 0.1 "w". With 0.7 after A: B = 0.7·(0.7/0.8) − 0.3/3 = 0.5125 > C = 0 → A, B, C; λ = 0 would take C.
    rows = [_row(1, 0.9, "x y"), _row(2, 0.8, "x z"), _row(3, 0.1, "w")]
    assert [r.id for r in H.mmr_rerank(rows)] == ["id1", "id2", "id3"]
    assert [r.id for r in H.mmr_rerank(rows, 0.0)] == ["id1", "id3", "id2"]


def test_mmr_lambda_above_one_is_one():
    # A 0.9 "cats dogs", B 0.8 "zebra lion", C 0.79 "cats dogs": λ = 1 sorts by score (A, B, C). An unclamped
    # 1.5 would reward similarity (1.5·rel + 0.5·maxSim: C = 0.5 > B = 0.136) and put C second.
    rows = [_row(1, 0.9, "cats dogs"), _row(2, 0.8, "zebra lion"), _row(3, 0.79, "cats dogs")]
    assert [r.id for r in H.mmr_rerank(rows, 1.5)] == ["id1", "id2", "id3"]
    assert [r.id for r in H.mmr_rerank(rows, 1.0)] == ["id1", "id2", "id3"]


def test_relaxed_selection_default_text_weight_and_modes_by_value():
    keys = {_row(1, 0).range_key, _row(2, 0).range_key}
    rows = [_row(1, 0.35), _row(2, 0.1)]  # nothing reaches min_score 0.5: keyword rows from min(0.5, 0.3) up
    assert [r.id for r in H.select_results(rows, keys, 5, 0.5, _rt("relaxed"))] == ["id1"]
    strict_rows = [_row(1, 0.6), _row(2, 0.1)]
    assert [r.id for r in H.select_results(strict_rows, keys, 5, 0.5, _rt("strict"))] == ["id1"]
    for bad in ("zzz", "aaa"):
        with pytest.raises(ValueError, match="unknown selection mode"):
            H.select_results(strict_rows, keys, 5, 0.5, bad)


def test_fts_only_selection_other_modes_are_strict():
    rows = [_row(1, 0.2), _row(2, 0.1)]
    assert H.select_fts_only(rows, 5, 0.5, _rt("strict-else-all")) == rows  # nothing strict: every hit
    assert H.select_fts_only(rows, 5, 0.5, "strict") == []
    assert H.select_fts_only(rows, 5, 0.5, "strict-only") == []  # any other name: strict


def test_jaccard_values():
    assert H.jaccard(frozenset(), frozenset()) == 1.0
    assert H.jaccard(frozenset({"a"}), frozenset()) == 0.0
    assert H.jaccard(frozenset({"a", "b"}), frozenset({"b", "c"})) == pytest.approx(1 / 3)
    assert math.isclose(H.jaccard(frozenset({"a"}), frozenset({"a"})), 1.0)
