"""Merge arithmetic, temporal decay, MMR order and the final cut, with hand-computed expectations (OpenClaw's rules in
openclaw/openclaw: src/memory/manager.ts search, hybrid.ts mergeHybridResults, temporal-decay.ts, mmr.ts; later
extensions/memory-core/src/memory/)."""

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


def test_merge_keeps_the_vector_snippet_when_the_keyword_row_has_none_and_carries_source():
    v = h.VectorHit("A", "memory/a.md", 3, 5, "vector text", 0.5, source="sessions")
    k = h.KeywordHit("A", "memory/a.md", 3, 5, "", 0.25, source="sessions")
    (row,) = h.merge_hybrid([v], [k], 0.7, 0.3, "weighted-sum")
    assert (row.snippet, row.source, row.start_line, row.end_line) == ("vector text", "sessions", 3, 5)
    assert row.score == pytest.approx(0.7 * 0.5 + 0.3 * 0.25)
    # a keyword-only row keeps its own fields
    (only,) = h.merge_hybrid([], [h.KeywordHit("K", "memory/k.md", 7, 9, "kw", 0.5, source="sessions")])
    assert (only.path, only.start_line, only.end_line, only.snippet, only.source) == ("memory/k.md", 7, 9, "kw",
                                                                                        "sessions")
    assert (only.vector_score, only.text_score, only.score) == (0.0, 0.5, pytest.approx(0.15))


def test_merge_with_zero_weights_and_unknown_mode():
    v, k = [vec("A", 0.8)], [kw("A", 0.6)]
    assert h.merge_hybrid(v, k, 0.0, 0.0, "normalised")[0].score == 0.0  # no weight: 0, not a division by 0
    assert h.merge_hybrid(v, k, 0.0, 0.5, "normalised")[0].score == pytest.approx(0.6)  # (0 + 0.3) / 0.5
    with pytest.raises(ValueError, match="merge mode"):
        h.merge_hybrid(v, k, 0.7, 0.3, "nope")


def test_decay_multiplier_edges():
    assert h.decay_multiplier(30, 30) == pytest.approx(0.5)
    assert h.decay_multiplier(60, 30) == pytest.approx(0.25)
    assert h.decay_multiplier(15, 30) == pytest.approx(2 ** -0.5)
    assert h.decay_multiplier(-5, 30) == 1.0  # future: age clamped to 0
    assert h.decay_multiplier(float("inf"), 30) == 1.0  # temporal-decay.ts: a non-finite age leaves the score
    assert h.decay_multiplier(30, 0) == 1.0  # a non-positive half-life disables decay
    assert h.decay_multiplier(30, -1) == 1.0
    assert h.decay_multiplier(30, float("inf")) == 1.0
    assert h.decay_multiplier(30, float("nan")) == 1.0


def test_dates_and_evergreen_paths_normalise_backslashes_and_dot_slash():
    ms = int(datetime(2026, 1, 2, tzinfo=UTC).timestamp() * 1000)
    assert h.date_from_path("memory\\2026-01-02.md", DATED) == ms
    assert h.date_from_path("./memory/2026-01-02.md", DATED) == ms
    assert h.date_from_path("x/memory/2026-01-02.md", DATED) == ms
    assert h.date_from_path("memory/2026-13-02.md", DATED) is None
    assert h.is_evergreen(".\\MEMORY.md", DATED)  # ".\" → "./" → stripped
    assert h.is_evergreen("./memory/topics/auth.md", DATED)
    assert not h.is_evergreen("memory/2026-01-02.md", DATED)
    assert not h.is_evergreen("notes/MEMORY.md", DATED)
    assert not h.is_evergreen("USER.md", DATED)  # default evergreen names: MEMORY.md only
    assert h.is_evergreen("USER.md", DATED, ("MEMORY.md", "USER.md"))


def test_timestamp_source_by_path_and_source():
    names = ("MEMORY.md",)
    dated = int(datetime(2026, 1, 2, tzinfo=UTC).timestamp() * 1000)
    assert h.file_timestamp_ms("memory/2026-01-02.md", "memory", DATED, names, 5) == dated  # the path wins
    assert h.file_timestamp_ms("MEMORY.md", "memory", DATED, names, 5) is None  # evergreen: no age
    assert h.file_timestamp_ms("MEMORY.md", "sessions", DATED, names, 5) == 5  # only memory files are evergreen
    assert h.file_timestamp_ms("notes/x.md", "memory", DATED, names, 7) == 7
    assert h.file_timestamp_ms("notes/x.md", "memory", DATED, names, None) is None


def test_decay_without_mtimes_and_a_future_mtime():
    now = int(datetime(2026, 3, 1, tzinfo=UTC).timestamp() * 1000)
    rows = [h.Scored("n", "notes/x.md", 1, 1, "", 0.8), h.Scored("d", "memory/2026-01-30.md", 1, 1, "", 0.8)]
    out = h.apply_temporal_decay(rows, now, 30, DATED, ["MEMORY.md"])  # evergreen names as a list: any iterable
    assert [r.score for r in out] == [0.8, pytest.approx(0.4)]
    assert [r.decay for r in out] == [1.0, pytest.approx(0.5)]
    fut = h.apply_temporal_decay(rows[:1], now, 30, DATED, ("MEMORY.md",), {"notes/x.md": now + 5 * h.DAY_MS})
    assert fut[0].score == 0.8 and fut[0].decay == 1.0


def test_path_tiebreak_orders_by_path_case_insensitively_then_lines():
    # Only paths that differ beyond letter case: there ICU's localeCompare puts "b" before "B" while this key
    # puts "B" first (a known approximation, only reachable on exactly tied scores).
    rows = [h.Scored("c", "memory/C.md", 5, 9, "", 0.5), h.Scored("a", "memory/a.md", 9, 9, "", 0.5),
            h.Scored("b1", "memory/b.md", 5, 6, "", 0.5), h.Scored("top", "memory/z.md", 1, 1, "", 0.9),
            h.Scored("b0", "memory/b.md", 1, 9, "", 0.5), h.Scored("b1x", "memory/b.md", 5, 7, "", 0.5)]
    # "C" sorts after "a" and "b" case-insensitively (in code points "C" < "a")
    assert [r.id for r in h.sort_results(rows, "path")] == ["top", "a", "b0", "b1", "b1x", "c"]
    assert [r.id for r in h.sort_results(rows, "stable")] == ["top", "c", "a", "b1", "b0", "b1x"]


def test_mmr_tokens_by_tokenizer():
    assert h.mmr_tokens("Foo_bar BAZ-9", "ascii") == frozenset({"foo_bar", "baz", "9"})
    assert h.mmr_tokens("東x京 ab", "ascii+cjk") == frozenset({"x", "ab", "東", "京"})  # not adjacent: no bigram
    assert h.mmr_tokens("한국어", "ascii+cjk") == frozenset({"한", "국", "어", "한국", "국어"})
    assert h.mmr_tokens("Cafe\u0301 Ünïcode_1", "unicode") == frozenset({"café", "ünïcode_1"})  # NFC
    assert h.mmr_tokens("plain ascii", "ascii+cjk") == frozenset({"plain", "ascii"})
    with pytest.raises(ValueError, match="tokenizer"):
        h.mmr_tokens("x", "nope")


def test_jaccard_values():
    a, b = frozenset({"x", "y", "z"}), frozenset({"y", "z", "w", "v"})
    assert h.jaccard(a, b) == pytest.approx(2 / 5)
    assert h.jaccard(a, frozenset()) == 0.0
    assert h.jaccard(frozenset(), a) == 0.0
    assert h.jaccard(a, a) == 1.0


def test_mmr_lambda_is_clamped_and_single_items_pass_through():
    items = [_s("A", 1.0, "apple banana cherry"), _s("B", 0.9, "apple banana cherry"),
             _s("C", 0.8, "delta echo foxtrot"), _s("D", 0.5, "apple zebra")]
    assert [r.id for r in h.mmr_rerank(items, 1.5, "ascii")] == ["A", "B", "C", "D"]  # λ > 1 → 1: plain sort
    assert [r.id for r in h.mmr_rerank(list(reversed(items)), 1.0, "ascii")] == ["A", "B", "C", "D"]
    # λ < 0 → 0: pure diversity. Step 1: every maxSim 0 and every mmr 0 → the higher original score, A. Then
    # maxSim B 1, C 0, D 0.25 → C (mmr 0 beats -0.25 and -1); then D (-0.25) before B (-1).
    assert [r.id for r in h.mmr_rerank(items, -2.0, "ascii")] == ["A", "C", "D", "B"]
    assert h.mmr_rerank(items[:1], 0.7) == items[:1]
    assert h.mmr_rerank([], 0.7) == []


def test_mmr_ties_go_to_the_higher_original_score_then_to_the_first():
    # λ 0.5, relevance = score (range 1). After A every maxSim is 0: C and D tie at 0.25 with equal scores → the
    # first (C); then D (0.25) before B (0).
    items = [_s("A", 1.0, "a1 a2"), _s("B", 0.0, "b1"), _s("C", 0.5, "c1"), _s("D", 0.5, "d1")]
    assert [r.id for r in h.mmr_rerank(items, 0.5, "ascii")] == ["A", "C", "D", "B"]
    # After A: E 0.5·0.5 − 0 = 0.25; F shares 1 of 4 tokens with A → 0.5·0.75 − 0.5·0.25 = 0.25: a tie (exact in
    # binary), won by F's higher original score although E comes first; then E (0.25) before L (0).
    items2 = [_s("A", 1.0, "a b c"), _s("E", 0.5, "e"), _s("F", 0.75, "a x"), _s("L", 0.0, "l")]
    assert [r.id for r in h.mmr_rerank(items2, 0.5, "ascii")] == ["A", "F", "E", "L"]


def test_mmr_empty_token_rows_by_text():
    # Snippets without tokens ("!!" and "??") are similar only when their lower-cased text is equal.
    items = [_s("A", 1.0, "!!"), _s("B", 0.9, "!!"), _s("C", 0.8, "??"), _s("D", 0.1, "word")]
    # relevance A 1, B 8/9, C 7/9, D 0. After A: B maxSim 1 (same text), C 0, D 0 (Jaccard with an empty set).
    # B 0.7·8/9 − 0.3 = 0.322, C 0.7·7/9 = 0.544 → C; then B (0.322) before D (0).
    assert [r.id for r in h.mmr_rerank(items, 0.7, "ascii", empty_by_text=True)] == ["A", "C", "B", "D"]
    # plain Jaccard: two empty sets are identical (1), so C is a duplicate of A too: B 0.322, C 0.244 → B first
    assert [r.id for r in h.mmr_rerank(items, 0.7, "ascii")] == ["A", "B", "C", "D"]


def test_mmr_with_a_custom_token_function():
    items = [_s("A", 1.0, "x"), _s("B", 0.9, "y"), _s("C", 0.8, "z")]
    same = lambda s: frozenset({"t"})  # noqa: E731 - every row identical → relevance alone decides
    assert [r.id for r in h.mmr_rerank(items, 0.7, tokens=same)] == ["A", "B", "C"]
    dup_b = lambda s: frozenset({"a"}) if s in ("x", "y") else frozenset({"c"})  # noqa: E731
    # relevance A 1, B 0.5, C 0; λ 0.5: after A, B maxSim 1 → 0.25 − 0.5 = −0.25; C 0 → C first
    assert [r.id for r in h.mmr_rerank(items, 0.5, tokens=dup_b)] == ["A", "C", "B"]


def test_relaxed_and_strict_else_all_when_rows_qualify():
    x = h.Scored("x", "memory/x.md", 1, 2, "", 0.42, vector_score=0.6)
    k = h.Scored("k", "memory/k.md", 1, 2, "", 0.31, vector_score=0.0, text_score=0.9)
    lo = h.Scored("lo", "memory/k.md", 3, 4, "", 0.29, vector_score=0.0, text_score=0.9)
    keys = {k.range_key, lo.range_key}
    assert [r.id for r in h.select_results([x, k], keys, 6, 0.35, "relaxed", 0.3)] == ["x"]  # strict rows exist
    assert [r.id for r in h.select_results([k, lo], keys, 6, 0.35, "relaxed", 0.3)] == ["k"]  # floor min(.35,.3)
    assert [r.id for r in h.select_results([k, lo], keys, 6, 0.25, "relaxed", 0.3)] == ["k", "lo"]  # floor .25
    assert [r.id for r in h.select_results([k, lo], keys, 1, 0.25, "relaxed", 0.3)] == ["k"]
    assert [r.id for r in h.select_results([k, lo], {k.range_key}, 6, 0.35, "relaxed", 0.3)] == ["k"]
    with pytest.raises(ValueError, match="selection mode"):
        h.select_results([x], keys, 6, 0.35, "nope")
    rows = [_s("a", 0.5, ""), _s("b", 0.4, ""), _s("c", 0.2, "")]
    assert [r.id for r in h.select_fts_only(rows, 6, 0.35, "strict-else-all")] == ["a", "b"]
    assert [r.id for r in h.select_fts_only(rows, 1, 0.35, "strict")] == ["a"]
    assert [r.id for r in h.select_fts_only(rows, 6, 0.2, "strict")] == ["a", "b", "c"]  # inclusive


def test_spare_slots_fill_in_merged_order_without_duplicates_and_stop_at_max():
    x = h.Scored("x", "memory/x.md", 1, 2, "", 0.5, vector_score=0.7)
    k1 = h.Scored("k1", "memory/k.md", 1, 2, "", 0.2, vector_score=0.0, text_score=0.6)
    k1dup = h.Scored("k1dup", "memory/k.md", 1, 2, "", 0.1, vector_score=0.0, text_score=0.3)  # same range
    k2 = h.Scored("k2", "memory/k.md", 5, 6, "", 0.15, vector_score=0.0, text_score=0.5)
    k3 = h.Scored("k3", "memory/k.md", 8, 9, "", 0.12, vector_score=0.0, text_score=0.4)
    neg = h.Scored("neg", "memory/n.md", 1, 1, "", -0.1, vector_score=0.0, text_score=0.1)
    keys = {k1.range_key, k2.range_key, k3.range_key, neg.range_key}
    merged = [x, k1, k1dup, k2, k3]
    assert [r.id for r in h.select_results(merged, keys, 6, 0.35, "spare-slots")] == ["x", "k1", "k2", "k3"]
    assert [r.id for r in h.select_results(merged, keys, 3, 0.35, "spare-slots")] == ["x", "k1", "k2"]
    assert [r.id for r in h.select_results(merged, set(), 6, 0.35, "spare-slots")] == ["x"]  # no keyword rows
    # a keyword row that is already strict is not added twice
    ks = h.Scored("ks", "memory/s.md", 1, 1, "", 0.4, vector_score=0.0, text_score=1.0)
    assert [r.id for r in h.select_results([ks, k2], {ks.range_key, k2.range_key}, 6, 0.35,
                                           "spare-slots")] == ["ks", "k2"]
    # nothing strict: keyword-backed rows with score >= 0, first max_results
    assert [r.id for r in h.select_results([k1, neg, k2, k3], keys, 2, 0.35, "spare-slots")] == ["k1", "k2"]
    assert [r.id for r in h.select_results([k1, neg, k2], keys, 6, 0.35, "spare-slots")] == ["k1", "k2"]


def test_mmr_reorders_two_items():
    # two items are reranked too: the higher score first whatever the input order
    items = [_s("B", 0.5, "b"), _s("A", 1.0, "a")]
    assert [r.id for r in h.mmr_rerank(items, 0.7, "ascii")] == ["A", "B"]


def test_spare_slots_need_a_zero_vector_score_exactly():
    x = h.Scored("x", "memory/x.md", 1, 2, "", 0.5, vector_score=0.7)
    neg = h.Scored("neg", "memory/k.md", 1, 2, "", 0.01, vector_score=-0.2, text_score=0.5)  # a vector hit too
    k = h.Scored("k", "memory/k.md", 3, 4, "", 0.15, vector_score=0.0, text_score=0.5)
    keys = {neg.range_key, k.range_key}
    assert [r.id for r in h.select_results([x, neg, k], keys, 6, 0.35, "spare-slots")] == ["x", "k"]


def test_selection_sizes_above_the_small_int_cache():
    # 299 strict rows + keyword-only rows, max 300: exactly one spare slot is filled (sizes > 256 compare by value)
    strict = [h.Scored(f"s{i}", f"memory/s{i}.md", 1, 1, "", 0.9) for i in range(299)]
    extra = [h.Scored(f"k{i}", f"memory/k{i}.md", 1, 1, "", 0.1, vector_score=0.0, text_score=0.3) for i in range(3)]
    keys = {r.range_key for r in extra}
    out = h.select_results(strict + extra, keys, 300, 0.35, "spare-slots")
    assert len(out) == 300 and out[-1].id == "k0"
    full = [h.Scored(f"t{i}", f"memory/t{i}.md", 1, 1, "", 0.9) for i in range(300)]
    assert len(h.select_results(full + extra, keys, 300, 0.35, "spare-slots")) == 300


def test_keyword_rows_scoring_exactly_zero_count_when_nothing_is_strict():
    z = h.Scored("z", "memory/z.md", 1, 1, "", 0.0, vector_score=0.0, text_score=0.0)
    assert [r.id for r in h.select_results([z], {z.range_key}, 6, 0.35, "spare-slots")] == ["z"]


def test_rows_are_frozen_hashable_values_with_defaults():
    import dataclasses

    s = h.Scored("i", "memory/a.md", 1, 2, "t", 0.5)
    assert (s.vector_score, s.text_score, s.source, s.decay, s.extra) == (0.0, 0.0, "memory", 1.0, {})
    assert s.range_key == ("memory", "memory/a.md", 1, 2)
    # extra is a diagnostic: not compared, not hashed
    assert s == h.Scored("i", "memory/a.md", 1, 2, "t", 0.5, extra={"exact": 1})
    assert len({s, h.Scored("i", "memory/a.md", 1, 2, "t", 0.5, extra={"exact": 1})}) == 1
    v, k = h.VectorHit("i", "p", 1, 1, "t", 0.5), h.KeywordHit("i", "p", 1, 1, "t", 0.5)
    assert (v.source, k.source) == ("memory", "memory") and len({v, k}) == 2
    for row in (s, v, k):
        with pytest.raises(dataclasses.FrozenInstanceError):
            row.id = "x"
