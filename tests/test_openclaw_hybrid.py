"""Merge arithmetic, temporal decay, MMR order and the final cut, with hand-computed expectations (peers.md §1.6-§1.9,
§1.12b)."""

from datetime import UTC, datetime

import pytest

from services.adapters.openclaw import hybrid as h
from services.adapters.openclaw.presets import EARLY, LATE

DATED = LATE["dated_path_regex"]


def vec(id_, score, path="memory/a.md", snippet="", start=1):
    return h.VectorHit(id_, path, start, start + 1, snippet or id_, score)


def kw(id_, score, path="memory/a.md", snippet="", start=1):
    return h.KeywordHit(id_, path, start, start + 1, snippet or f"kw:{id_}", score)


def by_id(rows):
    return {r.id: r for r in rows}


def test_merge_weighted_sum_union_by_id():
    out = by_id(h.merge_hybrid([vec("A", 0.8), vec("B", 0.5)], [kw("B", 0.6), kw("C", 0.9)], 0.7, 0.3, "weighted-sum"))
    assert out["A"].score == pytest.approx(0.56)  # 0.7*0.8
    assert out["B"].score == pytest.approx(0.53)  # 0.7*0.5 + 0.3*0.6
    assert out["C"].score == pytest.approx(0.27)  # 0.3*0.9, keyword-only
    assert (out["B"].vector_score, out["B"].text_score) == (0.5, 0.6)
    assert out["B"].snippet == "kw:B"  # the keyword row replaces the snippet
    assert out["C"].vector_score == 0.0


def test_merge_normalised_equals_sum_for_default_weights_and_divides_otherwise():
    v, k = [vec("A", 0.8), vec("B", 0.5)], [kw("B", 0.6), kw("C", 0.9)]
    a = by_id(h.merge_hybrid(v, k, 0.7, 0.3, "normalised"))
    assert a["B"].score == pytest.approx(0.53)
    s = by_id(h.merge_hybrid(v, k, 1.0, 1.0, "weighted-sum"))
    n = by_id(h.merge_hybrid(v, k, 1.0, 1.0, "normalised"))
    assert (s["A"].score, s["B"].score, s["C"].score) == pytest.approx((0.8, 1.1, 0.9))
    assert (n["A"].score, n["B"].score, n["C"].score) == pytest.approx((0.4, 0.55, 0.45))


def test_decay_half_life_and_evergreen_exemption():
    now = int(datetime(2026, 3, 1, tzinfo=UTC).timestamp() * 1000)
    day = h.DAY_MS
    rows = [
        h.Scored("d30", "memory/2026-01-30.md", 1, 2, "", 0.8),  # 30 days → ×0.5
        h.Scored("d0", "memory/2026-03-01.md", 1, 2, "", 0.8),  # today → ×1
        h.Scored("future", "memory/2026-03-05.md", 1, 2, "", 0.8),  # future → age clamped to 0
        h.Scored("mem", "MEMORY.md", 1, 2, "", 0.8),  # evergreen
        h.Scored("topic", "memory/topics/auth.md", 1, 2, "", 0.8),  # undated memory/** → evergreen
        h.Scored("extra", "notes/x.md", 1, 2, "", 0.8),  # not a memory path → mtime (60 days → ×0.25)
        h.Scored("bad", "memory/2026-02-30.md", 1, 2, "", 0.8),  # invalid date, no mtime → no decay
    ]
    mt = {"notes/x.md": now - 60 * day}
    out = by_id(h.apply_temporal_decay(rows, now, 30, DATED, LATE["evergreen_paths"], mt))
    assert out["d30"].score == pytest.approx(0.4)
    assert out["d30"].decay == pytest.approx(0.5)
    assert out["d0"].score == pytest.approx(0.8)
    assert out["future"].score == pytest.approx(0.8)
    assert out["mem"].score == 0.8 and out["topic"].score == 0.8
    assert out["extra"].score == pytest.approx(0.2)
    assert out["bad"].score == 0.8


def test_lowercase_memory_md_is_evergreen_only_in_the_early_era():
    now = int(datetime(2026, 3, 1, tzinfo=UTC).timestamp() * 1000)
    row = [h.Scored("m", "memory.md", 1, 1, "", 1.0)]
    mt = {"memory.md": now - 30 * h.DAY_MS}
    assert h.apply_temporal_decay(row, now, 30, DATED, EARLY["evergreen_paths"], mt)[0].score == 1.0
    assert h.apply_temporal_decay(row, now, 30, DATED, LATE["evergreen_paths"], mt)[0].score == pytest.approx(0.5)


def test_dated_path_must_sit_directly_under_memory():
    assert h.date_from_path("memory/2026-01-02.md", DATED) is not None
    assert h.date_from_path("./memory/2026-01-02.md", DATED) is not None
    assert h.date_from_path("memory/sub/2026-01-02.md", DATED) is None  # before PR #121103
    assert h.date_from_path("memory/2026-01-02-slug.md", DATED) is None


def _s(id_, score, snippet):
    return h.Scored(id_, f"{id_}.md", 1, 1, snippet, score)


def test_mmr_order_on_a_crafted_set():
    # Relevance min-max over [0.5, 1.0]: A 1, B 0.8, C 0.6, D 0. B duplicates A (Jaccard 1); D shares 1 of 4
    # tokens with A (0.25). Step 2: B 0.7*0.8-0.3*1 = 0.26, C 0.42, D -0.075 → C. Step 3: B 0.26 > D → B. Then D.
    items = [_s("A", 1.0, "apple banana cherry"), _s("B", 0.9, "apple banana cherry"),
             _s("C", 0.8, "delta echo foxtrot"), _s("D", 0.5, "apple zebra")]
    assert [r.id for r in h.mmr_rerank(items, 0.7, "ascii")] == ["A", "C", "B", "D"]
    assert [r.id for r in h.mmr_rerank(items, 1.0, "ascii")] == ["A", "B", "C", "D"]  # λ=1 → plain sort


def test_mmr_equal_scores_keep_order_and_tokenizers():
    items = [_s("A", 0.5, "x"), _s("B", 0.5, "y")]
    assert [r.id for r in h.mmr_rerank(items)] == ["A", "B"]
    assert h.mmr_tokens("Café 東京都", "ascii") == frozenset({"caf"})
    assert h.mmr_tokens("Café 東京都", "ascii+cjk") == frozenset({"caf", "東", "京", "都", "東京", "京都"})
    assert h.jaccard(frozenset(), frozenset()) == 1.0


def test_min_score_cut_is_inclusive():
    rows = [_s("a", 0.5, ""), _s("b", 0.36, ""), _s("c", 0.35, ""), _s("d", 0.3499, "")]
    assert [r.id for r in h.select_results(rows, set(), 6, 0.35, "strict")] == ["a", "b", "c"]
    assert [r.id for r in h.select_results(rows, set(), 2, 0.35, "strict")] == ["a", "b"]


def test_spare_slots_rule():
    x = h.Scored("x", "memory/x.md", 1, 2, "", 0.42, vector_score=0.6)
    k1 = h.Scored("k1", "memory/k.md", 1, 2, "", 0.15, vector_score=0.0, text_score=0.5)
    y = h.Scored("y", "memory/y.md", 1, 2, "", 0.21, vector_score=0.3)
    k2 = h.Scored("k2", "memory/k.md", 3, 4, "", 0.20, vector_score=0.1, text_score=0.4)  # has a vector score
    keys = {k1.range_key, k2.range_key}
    merged = [x, y, k2, k1]
    assert [r.id for r in h.select_results(merged, keys, 6, 0.35, "spare-slots")] == ["x", "k1"]
    assert [r.id for r in h.select_results(merged, keys, 1, 0.35, "spare-slots")] == ["x"]  # never displaces
    assert [r.id for r in h.select_results(merged, keys, 6, 0.35, "strict")] == ["x"]
    # nothing strict → every keyword-backed row, in merged order
    assert [r.id for r in h.select_results([y, k2, k1], keys, 6, 0.35, "spare-slots")] == ["k2", "k1"]
    # the relaxed era (#29112): nothing strict → keyword rows >= min(0.35, 0.3)
    assert [r.id for r in h.select_results([y, k2, k1], keys, 6, 0.35, "relaxed", 0.3)] == []


def test_early_bug_keyword_only_hit_vanishes_late_keeps_it():
    # Early mapping: every FTS hit → 1.0; keyword-only merge 0.3*1.0 = 0.30 < 0.35 → dropped by the strict cut.
    strict_hit = vec("S", 0.9, "memory/s.md")
    early = h.merge_hybrid([strict_hit], [kw("K", 1.0, "memory/k.md")], 0.7, 0.3, "weighted-sum")
    k = by_id(early)["K"]
    assert k.score == pytest.approx(0.30)
    keys = {k.range_key}
    assert [r.id for r in h.select_results(h.sort_results(early), keys, 6, 0.35, "strict")] == ["S"]
    # Late: same hit, fixed mapping (a bm25 rank of -2 → 2/3), still below 0.35, kept in a spare slot.
    late = h.merge_hybrid([strict_hit], [kw("K", 2 / 3, "memory/k.md")], 0.7, 0.3, "normalised")
    assert by_id(late)["K"].score == pytest.approx(0.2)
    assert [r.id for r in h.select_results(h.sort_results(late, "path"), keys, 6, 0.35, "spare-slots")] == ["S", "K"]


def test_fts_only_selection():
    rows = [_s("a", 0.3, ""), _s("b", 0.2, "")]
    assert h.select_fts_only(rows, 6, 0.35, "strict") == []
    assert [r.id for r in h.select_fts_only(rows, 1, 0.35, "strict-else-all")] == ["a"]


def test_sort_tiebreaks():
    a, b = h.Scored("a", "memory/b.md", 1, 1, "", 0.5), h.Scored("b", "memory/a.md", 1, 1, "", 0.5)
    assert [r.id for r in h.sort_results([a, b], "stable")] == ["a", "b"]
    assert [r.id for r in h.sort_results([a, b], "path")] == ["b", "a"]
