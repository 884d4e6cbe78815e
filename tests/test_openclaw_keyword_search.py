"""The rules of OpenClaw 2026.9.6's keyword leg (services/adapters/openclaw/keyword_search.py) on crafted rows,
expectations by hand: merging the body, filename and per-keyword result sets (maxima, snippets, filename-only
scores), the limit (body-backed exact rows, path-only exact rows, 200 files, the best non-exact rows), the sort
keys with every tie-break, the exact-path matcher and the lexical boost."""

from __future__ import annotations

import pytest

from services.adapters.openclaw.keyword_search import (
    EXACT_PATH_CANDIDATE_LIMIT,
    KeywordRow,
    _path_sort_key,
    exact_path_matcher,
    keyword_sort_key,
    lexical_boost,
    lexical_boost_score,
    limit_keyword_hits,
    merge_keyword_hits,
)


def kw(cid, path, text_score=0.0, score=0.0, path_score=0.0, snippet="", has_body=True, exact=0, start=1):
    return KeywordRow(cid, path, "memory", start, start, snippet, text_score, score, path_score, exact, has_body)


def test_merge_takes_maxima_keeps_the_body_snippet_and_scores_filename_rows():
    body = [kw("c1", "memory/a.md", 0.3, 0.5, snippet="short")]
    paths = [kw("c1", "memory/a.md", 0.0, 0.4, 0.4, "a longer path snippet", has_body=False),
             kw("c3", "notes.md", 0.0, 0.0, 0.0, "n", has_body=False),
             kw("c4", "memory/notes-old.md", 0.0, 0.2, 0.2, "o", has_body=False),
             kw("c5", "memory/e.md", 0.0, 0.3, 0.3, "a path-only snippet", has_body=False),
             kw("c6", "memory/f.md", 0.0, 0.1, 0.1, "f", has_body=False)]
    fallback = [kw("c1", "memory/a.md", 0.35, 0.45, snippet="the longest body snippet"),
                kw("c5", "memory/e.md", 0.5, 0.6, snippet="x"),
                kw("c6", "memory/f.md", 0.0, 0.15, 0.15, "ff", has_body=False)]
    out = merge_keyword_hits([body, paths, fallback], "notes.md")
    got = {r.id: (r.exact, r.has_body, r.text_score, r.path_score, r.score, r.snippet) for r in out}
    assert got == {
        # body score max(0.5, 0.45); text max 0.35; path max 0.4; a longer body snippet replaces a body snippet,
        # a path-only row's snippet never replaces a body one
        "c1": (0, True, 0.35, 0.4, 0.5, "the longest body snippet"),
        "c3": (3, False, 0.0, 0.0, 1.0, "n"),  # the exact path (query = path), filename only: score 1
        "c4": (0, False, 0.0, 0.2, 0.2, "o"),  # filename only: its path score
        "c5": (0, True, 0.5, 0.3, 0.6, "x"),  # the first body row's snippet replaces a path-only one, even shorter
        "c6": (0, False, 0.0, 0.15, 0.15, "ff"),  # two filename-only rows: max path score, the longer snippet
    }
    assert [r.id for r in out] == ["c3", "c5", "c1", "c4", "c6"]


def test_merge_marks_basename_and_stem_matches():
    out = merge_keyword_hits([[kw("b", "x/notes.md", 0.2, 0.2), kw("s", "y/notes", 0.9, 0.9),
                               kw("o", "z/other.md", 0.95, 0.95)]], "notes.md")
    assert [(r.id, r.exact) for r in out] == [("b", 2), ("o", 0), ("s", 0)]
    out = merge_keyword_hits([[kw("s", "y/notes.md", 0.1, 0.1), kw("o", "z/other.md", 0.9, 0.9)]], "notes")
    assert [(r.id, r.exact) for r in out] == [("s", 1), ("o", 0)]


def test_sort_key_tie_breaks_in_order():
    rows = [kw("z", "b.md", 0.5, 0.5, start=1), kw("y", "a.md", 0.5, 0.5, start=2), kw("x", "a.md", 0.5, 0.5, start=1),
            kw("w", "c.md", 0.6, 0.5), kw("v", "d.md", 0.5, 0.5, path_score=0.4), kw("u", "e.md", 0.1, 0.9)]
    # score first, then text score, then path score (non-exact rows), then path (case-folded), start line
    assert [r.id for r in sorted(rows, key=keyword_sort_key)] == ["u", "w", "v", "x", "y", "z"]
    same = [kw("b", "A.md", 0.5, 0.5), kw("a", "a.md", 0.5, 0.5)]
    assert [r.id for r in sorted(same, key=keyword_sort_key)] == ["b", "a"]  # "A.md" < "a.md" after folding ties
    twins = [kw("b", "a.md", 0.5, 0.5), kw("a", "a.md", 0.5, 0.5)]
    assert [r.id for r in sorted(twins, key=keyword_sort_key)] == ["a", "b"]  # last: the chunk id


def test_exact_rows_first_and_body_preferred_only_when_asked():
    rows = [kw("n", "n.md", 0.9, 0.9), kw("p", "x/k.md", 0.0, 0.8, has_body=False, exact=2),
            kw("b", "y/k.md", 0.2, 0.2, exact=2), kw("f", "k.md", 0.1, 0.1, exact=3)]
    assert [r.id for r in sorted(rows, key=keyword_sort_key)] == ["f", "b", "p", "n"]
    by_score = sorted(rows, key=lambda r: keyword_sort_key(r, prefer_exact_body=False))
    assert [r.id for r in by_score] == ["f", "p", "b", "n"]
    # the path score separates non-exact rows only
    ex = [kw("a", "x/k.md", 0.0, 0.5, path_score=0.1, exact=2), kw("b", "y/k.md", 0.0, 0.5, path_score=0.9, exact=2)]
    assert [r.id for r in sorted(ex, key=keyword_sort_key)] == ["a", "b"]


def test_path_sort_key():
    rows = [kw("a", "b.md", path_score=0.3), kw("b", "a.md", path_score=0.3), kw("c", "z.md", path_score=0.9),
            kw("d", "q/k.md", path_score=0.0, exact=2), kw("e", "k.md", path_score=0.0, exact=3),
            kw("f", "a.md", path_score=0.3, start=0)]
    assert [r.id for r in sorted(rows, key=_path_sort_key)] == ["e", "d", "c", "f", "b", "a"]


def test_limit_keeps_exact_rows_then_the_best_non_exact():
    rows = [kw(f"e{i}", f"d{i}/k.md", 0.1 * i, 0.1 * i, exact=2) for i in range(1, 4)]  # body-backed exact rows
    rows += [kw("p", "p/k.md", 0.0, 1.0, has_body=False, exact=2)]  # a path-only exact row: always kept
    rows += [kw(f"n{i}", f"n{i}.md", 0.2 * i, 0.2 * i) for i in range(1, 5)]
    out = limit_keyword_hits(rows, 2)
    # the 2 best body-backed exact rows (e3, e2) and the path-only one, in key order; then n4, n3
    assert [r.id for r in out] == ["e3", "e2", "p", "n4", "n3"]


def test_limit_keeps_at_most_200_exact_files():
    rows = [kw(f"p{i:03d}", f"d{i:03d}/k.md", 0.0, 1.0, has_body=False, exact=2) for i in range(205)]
    out = limit_keyword_hits(rows, 5)
    assert EXACT_PATH_CANDIDATE_LIMIT == 200
    assert len(out) == 200 and out[0].id == "p000" and out[-1].id == "p199"


def test_exact_path_matcher_levels():
    m = exact_path_matcher("notes.md")
    assert [m(p) for p in ("notes.md", "./Notes.md", "a/notes.md", "a/notes", "a/notes.txt", "x.md")] == \
        [3, 3, 2, 0, 0, 0]
    m = exact_path_matcher("notes")
    assert [m(p) for p in ("notes", "a/notes.md", "a/notes.tar.gz", "a/notes", "a/.notes", "a/notesx.md")] == \
        [3, 1, 0, 2, 0, 0]  # a leading dot is not a stem boundary: ".notes" has no stem "notes"
    m = exact_path_matcher("memory/notes.md")
    assert [m(p) for p in ("memory/notes.md", "x/memory/notes.md", "notes.md")] == [3, 0, 0]
    assert exact_path_matcher("  ")("anything") == 0 and exact_path_matcher(".")(".") == 0


def test_lexical_boost_by_hand():
    # query tokens [cache, ttl]; text tokens {the, cache, ttl, is, 300}: coverage 2/2, density 2/5; "cache" in
    # the path: +0.18; text length 23 / 160 = 0.14375
    text = "The cache TTL is 300..."
    b = lexical_boost(["cache", "ttl"], "memory/cache.md", text)
    assert b == pytest.approx(0.45 + 0.2 * 2 / 5 + 0.18 + 23 / 160)
    assert lexical_boost_score(0.5, ["cache", "ttl"], "memory/cache.md", text) == 1.0  # capped at 1
    assert lexical_boost_score(0.1, [], "p", text) == 0.1  # no query tokens: unchanged
    assert lexical_boost(["x"], "p", "y" * 400) == pytest.approx(0.18)  # only the length term, capped at 0.18
