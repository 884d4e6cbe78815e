"""OpenClaw 2026.9.6's ranking (services/adapters/openclaw/ranking_2609.py) on the paths the first cases leave
out: where a result's age comes from (dated path, evergreen file, mtime, per source), the stem tier and
filename-only exact rows, the decay-off split of an exact tier into content-backed rows before path-only rows,
the order inside a tier (ranking, then lexical rank), negative vector scores, MMR with its default λ on both
implementations, token-less snippets, and the keyword-only finish's exact rows and cuts. Every expected order
and score is worked out by hand in the comments (content = 0.7·v + 0.3·k; under decay an exact row ranks
(1 + content)/2; MMR picks argmax 0.7·rel − 0.3·maxSim with rel min-max normalised)."""

from __future__ import annotations

import pytest

from services.adapters.openclaw.hybrid import DAY_MS, VectorHit
from services.adapters.openclaw.keyword_search import KeywordRow
from services.adapters.openclaw.mmr_matrix import TokenVocab
from services.adapters.openclaw.presets import PRESETS
from services.adapters.openclaw.ranking_2609 import Decay, finalize_keyword_only_2609, merge_hybrid_2609

P = PRESETS["openclaw-2026-09"]
NOW = 1_767_225_600_000 + 30 * DAY_MS  # 2026-01-31 00:00 UTC


def _decay(enabled: bool, mtimes: dict[str, int] | None = None) -> Decay:
    return Decay(enabled, NOW, 30.0, P["dated_path_regex"], P["evergreen_paths"], mtimes)


# ---------------------------------------------------------------------------------------------- decay sources
def test_where_a_results_age_comes_from():
    d = _decay(True, {"notes/x.md": NOW - 30 * DAY_MS, "memory/topic.md": NOW - 30 * DAY_MS,
                      "MEMORY.md": NOW - 60 * DAY_MS})
    assert d("notes/x.md", "memory") == pytest.approx(0.5)  # outside memory/: its mtime, 30 days → × 0.5
    assert d("memory/topic.md", "memory") == 1.0  # an undated memory/ file is evergreen: its mtime is ignored
    assert d("MEMORY.md", "memory") == 1.0  # evergreen by name
    assert d("memory/topic.md", "sessions") == pytest.approx(0.5)  # evergreen only for the memory source
    assert d("memory/2026-01-01.md", "sessions") == pytest.approx(0.5)  # a dated path decays by its date
    assert d("notes/y.md", "memory") == 1.0  # no mtime known: no decay
    # a source string read from storage (not the interned literal) is still the memory source
    assert d("memory/topic.md", "".join(["mem", "ory"])) == 1.0
    assert _decay(False, {"notes/x.md": NOW - 30 * DAY_MS})("notes/x.md", "memory") == 1.0
    with pytest.raises(ValueError, match="unknown memory source 'web'"):
        d("notes/z.md", "web")


# ------------------------------------------------------------------------------------------- exact tiers
def test_stem_tier_decay_off_puts_backed_rows_before_path_only_rows():
    # query "notes": x/notes.md, w/notes.md, y/notes.md and z/notes.md match by stem (tier 1)
    vector = [VectorHit("s", "x/notes.md", 1, 2, "stem chunk", 0.2),  # content 0.14 → ranking 0.14
              VectorHit("n", "z/notes.md", 1, 1, "negative", -0.2),  # content -0.14 → path-only, ranking 1
              VectorHit("o", "o.md", 1, 1, "other", 0.9)]  # not exact: 0.63
    keyword = [
        # filename-only exact row: its keyword score is 0 (not the path score), content 0 → ranking 1
        KeywordRow("f", "y/notes.md", "memory", 3, 4, "", 0.0, 1.0, path_score=0.8, exact=1, has_body=False),
        # a body row without a text score: lexical rank 0.3, content 0 → ranking 1, but backed by its body
        KeywordRow("b", "w/notes.md", "memory", 1, 1, "body text", 0.0, 0.3, exact=1, has_body=True),
    ]
    out = merge_hybrid_2609("notes", vector, keyword, _decay(False), mmr_enabled=False)
    # tier 1 by (ranking, lexical, path): b (1, 0.3), f (1, 0, y/), n (1, 0, z/), s (0.14); decay off splits it:
    # backed (content > 0 or lexical > 0) = b, s; then path-only = f, n; then the non-exact row
    assert [(r.id, r.extra["exact"], r.score, round(r.extra["ranking"], 9), round(r.extra["content"], 9),
             r.extra["lexical"], r.extra["keyword"]) for r in out] == [
        ("b", 1, 1.0, 1.0, 0.0, 0.3, 0.0),
        ("s", 1, 1.0, 0.14, 0.14, 0.0, 0.0),
        ("f", 1, 1.0, 1.0, 0.0, 0.0, 0.0),
        ("n", 1, 1.0, 1.0, -0.14, 0.0, 0.0),
        ("o", 0, 0.63, 0.63, 0.63, 0.0, 0.0),
    ]
    assert [r.text_score for r in out] == [0.0, 0.0, 0.0, 0.0, 0.0]  # no body match anywhere


def _full_path_tier():
    # one file, memory/notes.md (evergreen: no decay), queried by its full path: every chunk is tier 3
    vector = [VectorHit("A", "memory/notes.md", 1, 1, "gamma delta", 0.2),  # content 0.14 → (1.14)/2 = 0.57
              VectorHit("B", "memory/notes.md", 2, 2, "alpha beta", 0.6),  # 0.42 → 0.71
              VectorHit("C", "memory/notes.md", 3, 3, "alpha beta", 0.3)]  # 0.21 → 0.605
    keyword = [KeywordRow("D", "memory/notes.md", "memory", 7, 7, "d", 0.0, 0.3, exact=3, has_body=True),
               KeywordRow("E", "memory/notes.md", "memory", 8, 8, "e", 0.0, 0.5, exact=3, has_body=True),
               KeywordRow("F", "memory/notes.md", "memory", 6, 6, "", 0.0, 1.0, exact=3, has_body=False)]
    return vector, keyword  # D, E, F: content 0 → ranking 0.5; lexical 0.3, 0.5, 0


def test_full_path_tier_ranks_by_ranking_then_lexical_rank():
    vector, keyword = _full_path_tier()
    out = merge_hybrid_2609("memory/notes.md", vector, keyword, _decay(True), mmr_enabled=False)
    # B 0.71, C 0.605, A 0.57, then the three at 0.5 by lexical rank: E 0.5, D 0.3, F 0 (not by line: F, D, E)
    assert [(r.id, r.score, round(r.extra["ranking"], 9)) for r in out] == [
        ("B", 1.0, 0.71), ("C", 1.0, 0.605), ("A", 1.0, 0.57), ("E", 1.0, 0.5), ("D", 1.0, 0.5), ("F", 1.0, 0.5)]


def test_mmr_reorders_inside_an_exact_tier():
    vector, _ = _full_path_tier()
    out = merge_hybrid_2609("memory/notes.md", vector, [], _decay(True), mmr_enabled=True)
    # rankings B 0.71, C 0.605, A 0.57 → rel 1, 0.25, 0. B first; then C (same tokens as B): 0.7·0.25 − 0.3·1
    # = −0.125 against A: 0 → A, then C. Scores stay 1.
    assert [(r.id, r.score) for r in out] == [("B", 1.0), ("A", 1.0), ("C", 1.0)]


def test_exact_tier_under_decay_is_not_split_by_backing():
    # decay on: a path-only exact row ranks (1 + 0)/2 = 0.5 and, with importance 10, 0.625; the backed row
    # ranks (1 + 0.7·0.02)/2 = 0.507: the path-only row goes first (decay off would put backed rows first)
    vector = [VectorHit("V", "memory/notes.md", 1, 1, "v", 0.02)]
    keyword = [KeywordRow("Q", "memory/notes.md", "memory", 2, 2, "", 0.0, 1.0, exact=3, has_body=False)]
    out = merge_hybrid_2609("memory/notes.md", vector, keyword, _decay(True), mmr_enabled=False,
                            importance={"Q": 10})
    assert [(r.id, round(r.extra["ranking"], 9)) for r in out] == [("Q", 0.625), ("V", 0.507)]


# ----------------------------------------------------------------------------------------- non-exact rows
def test_negative_vector_scores_rank_below_lexical_only_rows():
    vector = [VectorHit("N", "memory/n.md", 1, 1, "neg", -0.2),  # content −0.14: score −0.14
              VectorHit("P", "memory/p.md", 1, 1, "pos", 0.5)]  # 0.35
    keyword = [KeywordRow("L", "memory/l.md", "memory", 1, 1, "lex", 0.0, 0.25, has_body=True)]  # score 0
    out = merge_hybrid_2609("zzz", vector, keyword, _decay(False), mmr_enabled=False)
    assert [(r.id, round(r.score, 9), round(r.extra["ranking"], 9)) for r in out] == [
        ("P", 0.35, 0.35), ("L", 0.0, 0.25), ("N", -0.14, -0.14)]


def test_a_keyword_snippet_replaces_the_vector_snippet_only_when_it_has_one():
    vector = [VectorHit("m", "memory/m.md", 1, 1, "vector text", 0.5),
              VectorHit("k", "memory/k.md", 1, 1, "vector text 2", 0.5)]
    keyword = [KeywordRow("m", "memory/m.md", "memory", 1, 1, "keyword text", 0.4, 0.6),
               KeywordRow("k", "memory/k.md", "memory", 1, 1, "", 0.4, 0.6)]
    out = merge_hybrid_2609("zzz", vector, keyword, _decay(False), mmr_enabled=False)
    assert {r.id: (r.snippet, r.text_score) for r in out} == {"m": ("keyword text", 0.4), "k": ("vector text 2", 0.4)}


def _three():
    # contents 0.63, 0.56, 0.525 → rel 1, 1/3, 0
    return [VectorHit("A", "memory/a.md", 1, 1, "alpha beta", 0.9),
            VectorHit("B", "memory/b.md", 1, 1, "alpha beta", 0.8),
            VectorHit("C", "memory/c.md", 1, 1, "gamma delta", 0.75)]


def _four():
    # contents 0.63, 0.595, 0.35, 0.28 → rel 1, 0.9, 0.2, 0
    return [VectorHit("A", "memory/a.md", 1, 1, "alpha beta", 0.9),
            VectorHit("B", "memory/b.md", 1, 1, "alpha beta", 0.85),
            VectorHit("C", "memory/c.md", 1, 1, "gamma delta", 0.5),
            VectorHit("D", "memory/d.md", 1, 1, "gamma eps", 0.4)]


@pytest.mark.parametrize("fast", [False, True])
def test_mmr_is_on_by_default_with_lambda_0_7(fast):
    kw = {"token_ids": {}, "vocab": TokenVocab()} if fast else {}
    # A; then B (same tokens as A): 0.7/3 − 0.3 = −0.067 against C: 0 → C; then B (MMR off: A, B, C)
    assert [r.id for r in merge_hybrid_2609("zzz", _three(), [], _decay(False), **kw)] == ["A", "C", "B"]
    # A; B: 0.63 − 0.3 = 0.33 beats C 0.14 and D 0; then C, D. (λ = 0 would give A, C, D, B; λ = 1 A, B, C, D.)
    assert [r.id for r in merge_hybrid_2609("zzz", _four(), [], _decay(False), **kw)] == ["A", "B", "C", "D"]


@pytest.mark.parametrize("kw", [{}, {"token_ids": {}, "vocab": TokenVocab()}, {"token_ids": {}},
                                {"vocab": TokenVocab()}], ids=["loop", "matrix", "ids-only", "vocab-only"])
def test_token_less_snippets_are_similar_only_when_equal(kw):
    rows = [VectorHit("A", "memory/a.md", 1, 1, "!!!", 0.9), VectorHit("B", "memory/b.md", 1, 1, "???", 0.8),
            VectorHit("C", "memory/c.md", 1, 1, "gamma", 0.75)]
    # A; B has no tokens like A but a different text: similarity 0, 0.7/3 = 0.233 beats C's 0 → A, B, C
    # (Jaccard's 1 for two empty sets would give A, C, B). Either MMR implementation; half the inputs = the loop.
    assert [r.id for r in merge_hybrid_2609("zzz", rows, [], _decay(False), mmr_enabled=True, **kw)] == ["A", "B", "C"]


# ------------------------------------------------------------------------------------- keyword-only finish
def test_keyword_only_stem_row_without_body_scores_half_under_decay():
    rows = [KeywordRow("S", "x/notes.md", "memory", 1, 1, "s", 0.0, 0.9, exact=1, has_body=False),
            KeywordRow("a", "memory/a.md", "memory", 1, 1, "a", 0.6, 0.6)]
    out = finalize_keyword_only_2609(rows, _decay(True), 10, 0.35)
    # S: (1 + 0)/2 = 0.5 (its 0.9 is a path score, not a body score), reported as 1 and first
    assert [(r.id, r.score, round(r.extra["keyword"], 9)) for r in out] == [("S", 1.0, 0.5), ("a", 0.6, 0.6)]


def test_keyword_only_prefers_exact_rows_with_a_body_when_decay_is_off():
    rows = [KeywordRow("X1", "memory/n.md", "memory", 1, 1, "", 0.0, 0.9, exact=3, has_body=False),
            KeywordRow("X2", "memory/n.md", "memory", 2, 2, "x", 0.4, 0.4, exact=3, has_body=True)]
    assert [r.id for r in finalize_keyword_only_2609(rows, _decay(False), 10, 0.35)] == ["X2", "X1"]
    # under decay both rank by (1 + body)/2: X2 0.7, X1 0.5
    assert [r.id for r in finalize_keyword_only_2609(rows, _decay(True), 10, 0.35)] == ["X2", "X1"]


def test_keyword_only_cut_at_and_below_min_score():
    m = KeywordRow("M", "memory/m.md", "memory", 1, 1, "m", 0.5, 0.5)
    z = KeywordRow("Z", "memory/z.md", "memory", 1, 1, "z", 0.2, 0.2)
    zero = KeywordRow("Z0", "memory/0.md", "memory", 1, 1, "", 0.0, 0.0)
    assert [r.id for r in finalize_keyword_only_2609([m, z], _decay(False), 10, 0.5)] == ["M"]  # 0.5 >= 0.5
    # nothing reaches 0.9: every row with a score >= 0 comes back, a zero score included
    assert [r.id for r in finalize_keyword_only_2609([m, zero], _decay(False), 10, 0.9)] == ["M", "Z0"]


def test_mmr_off_keeps_the_score_order():
    # the rows MMR would reorder (A, C, B above) stay in score order when MMR is off
    assert [r.id for r in merge_hybrid_2609("zzz", _three(), [], _decay(False), mmr_enabled=False)] == ["A", "B", "C"]


def test_memory_source_read_from_storage_on_a_fresh_path():
    # first sight of this path and of this (non-interned) source string: no cache can answer for the literal
    d = _decay(True, {"memory/fresh-topic.md": NOW - 30 * DAY_MS})
    assert d("memory/fresh-topic.md", "".join(["mem", "ory"])) == 1.0
