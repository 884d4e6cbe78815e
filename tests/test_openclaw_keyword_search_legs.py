"""OpenClaw 2026.9.6's keyword leg end to end (services/adapters/openclaw/keyword_search.KeywordSearch): the body
search, the filename search and the per-keyword fallback over a crafted index whose FTS answers are given per
query, so every row, score and order below is worked out by hand. The BM25 mapping is `score = -rank` (ranks
are given as negative decimals) so the arithmetic stays visible; the lexical boost is
0.45·coverage + 0.2·density + 0.18·(query tokens in the path) + min(len/160, 0.18)."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from services.adapters.openclaw.keyword_search import (
    FALLBACK_TERM_LIMIT,
    KeywordRow,
    KeywordSearch,
    _path_sort_key,
    exact_path_matcher,
    keyword_sort_key,
    lexical_boost,
    limit_keyword_hits,
    merge_keyword_hits,
    search_tokens,
)


@dataclass
class Chunk:
    id: str
    source: str
    start_line: int
    end_line: int
    text: str


class FakeIndex:
    """The three IndexStore reads KeywordSearch makes. `body[fts]` = [(id, path, source, s, e, text, rank)],
    `paths[fts]` = [(path, source, rank)] in rank order, `first` = path → first chunk."""

    def __init__(self, first=None, body=None, paths=None):
        self.first = first or {}
        self.body = body or {}
        self.paths = paths or {}
        self.calls: list[tuple] = []

    def search_body_rows(self, ns, fts_query, limit):
        self.calls.append(("body", fts_query, limit))
        return list(self.body.get(fts_query, []))[:limit]

    def search_path_rows(self, ns, fts_query):
        self.calls.append(("paths", fts_query))
        return list(self.paths.get(fts_query, []))

    def first_chunks(self, ns):
        return self.first


def bm25(rank: float) -> float:
    return -rank


def ks(index: FakeIndex, **kw) -> KeywordSearch:
    return KeywordSearch(index, "ns", bm25, **kw)


def first(*paths: str) -> dict[str, Chunk]:
    return {p: Chunk(f"c:{p}", "memory", 1, 2, f"text of {p}") for p in paths}


def test_keyword_row_defaults():
    r = KeywordRow("i", "p.md", "memory", 1, 1, "s", 0.1, 0.2)
    assert (r.path_score, r.exact, r.has_body) == (0.0, 0, True)


# ------------------------------------------------------------------------------------------------------- body
def test_body_rows_boost_against_the_ranking_query_and_cap_at_one():
    idx = FakeIndex(body={'"alpha"': [("c1", "memory/alpha.md", "memory", 1, 3, "alpha", -0.9),
                                      ("c2", "memory/b.md", "memory", 4, 4, "beta gamma", -0.2)]})
    out = ks(idx).body("alpha", 10, "alpha")
    # c1: coverage 1 (0.45) + density 1/1 (0.2) + "alpha" in the path (0.18) + 5/160 = 0.03125 → 0.86125;
    #     0.9 + 0.86125 capped at 1
    # c2: no overlap, path has no "alpha", 10/160 = 0.0625 → 0.2 + 0.0625
    assert [(r.id, r.text_score, r.score, r.path_score, r.has_body, r.exact) for r in out] == [
        ("c1", 0.9, 1.0, 0.0, True, 0), ("c2", 0.2, pytest.approx(0.2625), 0.0, True, 0)]
    # a ranking query without tokens: no boost, the BM25 score as it is
    out = ks(idx).body("alpha", 10, "!!!")
    assert [(r.id, r.score) for r in out] == [("c1", 0.9), ("c2", 0.2)]


def test_body_snippet_is_cut_at_700_utf16_units():
    text = "x" * 701
    idx = FakeIndex(body={'"x"': [("c", "memory/a.md", "memory", 1, 1, text, -0.5)]})
    assert len(ks(idx).body("x", 5, "x")[0].snippet) == 700
    assert len(ks(idx, snippet_max_chars=10).body("x", 5, "x")[0].snippet) == 10


def test_lexical_boost_density_with_one_and_with_no_text_token():
    # one distinct text token, found: coverage 1/2, density 1/1, no path hit, len 5 → 0.225 + 0.2 + 0.03125
    assert lexical_boost(["alpha", "beta"], "p.md", "alpha") == pytest.approx(0.45625)
    # no token at all in the text: density 0/1 (never a division by zero), length 3/160
    assert lexical_boost(["alpha"], "p.md", "!!!") == pytest.approx(0.01875)


def test_search_tokens_normalises_before_splitting():
    # "e" + COMBINING ACUTE is one letter after NFC: one token, not "cafe" cut at the mark
    assert search_tokens("Cafe\u0301 au lait") == ["café", "au", "lait"]
    assert search_tokens("Hello_World 42") == ["hello_world", "42"]


# ------------------------------------------------------------------------------------------------------ paths
def test_ascii_query_takes_exact_candidates_from_the_path_matches_only():
    # x/notes.md matches by basename but the path FTS did not return it: for an ASCII query it is no candidate
    idx = FakeIndex(first=first("memory/notes.md", "x/notes.md", "memory/other.md"),
                    paths={'"notes" AND "md"': [("memory/notes.md", "memory", -0.4), ("memory/other.md", "memory", -0.3)]})
    out = ks(idx).paths("notes.md", "notes.md", 10)
    # memory/notes.md: basename (2), path score max(0, 0.4); memory/other.md: partial, 0.3
    assert [(r.id, r.exact, r.path_score, r.score, r.has_body, r.text_score) for r in out] == [
        ("c:memory/notes.md", 2, 0.4, 0.4, False, 0.0), ("c:memory/other.md", 0, 0.3, 0.3, False, 0.0)]


def test_non_ascii_query_takes_exact_candidates_from_every_path():
    idx = FakeIndex(first=first("memory/café.md", "a/café.md", "memory/b.md"),
                    paths={'"café" AND "md"': [("memory/b.md", "memory", -0.7)]})
    out = ks(idx).paths("café.md", "café.md", 10)
    # both café.md files are basename matches though the path FTS found neither; their path score stays 0
    assert [(r.id, r.exact, r.path_score, r.score) for r in out] == [
        ("c:a/café.md", 2, 0.0, 0.0), ("c:memory/café.md", 2, 0.0, 0.0), ("c:memory/b.md", 0, 0.7, 0.7)]


def test_query_without_tokens_returns_the_exact_rows_only():
    idx = FakeIndex(first=first("memory/a.md", "-"))
    assert [(r.id, r.exact) for r in ks(idx).paths("-", "-", 10)] == [("c:-", 3)]


def test_stem_matches_take_their_path_score_and_partial_matches_are_limited():
    idx = FakeIndex(first=first("memory/notes.md", "memory/notes-old.md", "memory/my-notes.md", "memory/zz-notes.md"),
                    paths={'"notes"': [("memory/notes-old.md", "memory", -0.9), ("memory/notes.md", "memory", -0.5),
                                       ("memory/my-notes.md", "memory", -0.4), ("memory/zz-notes.md", "memory", -0.2)]})
    out = ks(idx).paths("notes", "notes", 2)
    # notes.md: stem (1), path score 0.5 from the path FTS; then the best 2 partial matches: notes-old 0.9, my-notes 0.4
    assert [(r.id, r.exact, r.path_score) for r in out] == [
        ("c:memory/notes.md", 1, 0.5), ("c:memory/notes-old.md", 0, 0.9), ("c:memory/my-notes.md", 0, 0.4)]
    out = ks(idx).paths("notes", "notes", 1)
    assert [r.id for r in out] == ["c:memory/notes.md", "c:memory/notes-old.md"]
    out = ks(idx).paths("notes", "notes", 3)
    assert [r.id for r in out][1:] == ["c:memory/notes-old.md", "c:memory/my-notes.md", "c:memory/zz-notes.md"]


def test_partial_matches_are_cut_in_path_fts_order_before_the_sort():
    # limit 1 and two partial matches with the same rank: the path FTS orders them by path (binary: "B" < "a"),
    # the cut keeps B.md; the later sort alone would have kept a.md (case-folded order)
    idx = FakeIndex(first=first("memory/B.md", "memory/a.md", "memory/x.md"),
                    paths={'"md"': [("memory/x.md", "memory", -0.8), ("memory/B.md", "memory", -0.5),
                                    ("memory/a.md", "memory", -0.5)]})
    out = ks(idx).paths("md", "x", 1)
    # x.md is an exact stem match (query "x"): it does not use up the one partial place
    assert [(r.id, r.exact, r.path_score) for r in out] == [("c:memory/x.md", 1, 0.8), ("c:memory/B.md", 0, 0.5)]


def test_at_most_200_exact_files_best_specificity_first():
    paths = [f"d{i:03d}/x.md" for i in range(200)] + ["x.md"]  # 200 basename matches and the full path
    idx = FakeIndex(first=first(*paths))
    out = ks(idx).paths("!", "x.md", 10)  # no FTS tokens: the exact candidates come from every path
    ids = [r.id for r in out]
    assert len(ids) == 200 and ids[0] == "c:x.md" and "c:d199/x.md" not in ids and ids[-1] == "c:d198/x.md"


# ----------------------------------------------------------------------------------------------------- search
def test_search_merges_body_and_filename_rows():
    idx = FakeIndex(first=first("memory/notes.md", "memory/n2.md"),
                    body={'"notes" AND "md"': [("c:memory/notes.md", "memory/notes.md", "memory", 1, 2, "notes md", -0.3)]},
                    paths={'"notes" AND "md"': [("memory/notes.md", "memory", -0.6), ("memory/n2.md", "memory", -0.1)]})
    out = ks(idx).search("notes.md", 10)
    # the body row of memory/notes.md: boost 0.45·1 + 0.2·1 + 0.18·2 ("notes", "md" in the path) + 8/160 = 1.06
    # → min(1, 0.3 + 1.06) = 1; its path score 0.6 from the filename row; exact (basename) first
    assert [(r.id, r.exact, r.has_body, r.text_score, r.path_score, r.score) for r in out] == [
        ("c:memory/notes.md", 2, True, 0.3, 0.6, 1.0), ("c:memory/n2.md", 0, False, 0.0, 0.1, 0.1)]


def _fallback_index(n_full: int) -> FakeIndex:
    full = [(f"f{i}", f"memory/f{i}.md", "memory", 1, 1, "zebra", -0.5) for i in range(n_full)]
    return FakeIndex(first={}, body={'"a" AND "zebra"': full,
                                     '"zebra"': [("z1", "memory/z1.md", "memory", 1, 1, "zebra", -0.4)]})


def test_no_fallback_when_the_whole_query_fills_the_limit():
    rows, terms = ks(_fallback_index(2)).search_with_fallback("a zebra", 2)
    assert terms == [] and [r.id for r in rows] == ["f0", "f1"]


def test_fallback_searches_each_keyword_when_the_query_finds_too_few():
    # one row for the whole query (limit 2): "zebra" (the keyword of "a zebra") is searched too, ranked against
    # the whole query; its strict query '"a" AND "zebra"' differs from the keyword query '"zebra"'
    idx = _fallback_index(1)
    rows, terms = ks(idx).search_with_fallback("a zebra", 2)
    assert terms == ["zebra"]
    assert [r.id for r in rows] == ["f0", "z1"]
    assert [c for c in idx.calls if c[0] == "body"] == [("body", '"a" AND "zebra"', 2), ("body", '"zebra"', 2)]


def test_single_keyword_query_has_no_fallback_terms():
    idx = FakeIndex()
    assert ks(idx).search_with_fallback("Zebra", 3) == ([], [])  # the query itself is its only keyword


def test_fallback_terms_are_limited_to_six():
    words = ["alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel"]
    rows, terms = ks(FakeIndex()).search_with_fallback(" ".join(words), 5)
    assert FALLBACK_TERM_LIMIT == 6 and terms == words[:6] and rows == []


def test_same_strict_and_keyword_query_with_results_stops_early():
    # too few rows, but the keywords ("zebra", "quagga") rebuild the very FTS query of the whole query: no
    # fallback search (it would find the same rows)
    idx = FakeIndex(body={'"zebra" AND "quagga"': [("q", "memory/q.md", "memory", 1, 1, "zebra quagga", -0.5)]})
    rows, terms = ks(idx).search_with_fallback("zebra quagga", 5)
    assert terms == [] and [r.id for r in rows] == ["q"]


# --------------------------------------------------------------------------------------------- merge / limit
def kw(cid, path, text_score=0.0, score=0.0, path_score=0.0, snippet="", has_body=True, exact=0, start=1):
    return KeywordRow(cid, path, "memory", start, start, snippet, text_score, score, path_score, exact, has_body)


def test_merge_snippet_rules():
    # a path-only row's longer snippet never replaces a body snippet
    out = merge_keyword_hits([[kw("c", "m/a.md", 0.3, 0.5, snippet="short")],
                              [kw("c", "m/a.md", 0.0, 0.4, 0.4, "a much longer path snippet", has_body=False)]], "q")
    assert out[0].snippet == "short"
    # between two body rows (or two path rows) only a strictly longer snippet wins
    for has_body in (True, False):
        out = merge_keyword_hits([[kw("c", "m/a.md", 0.3, 0.5, 0.2, "longer one", has_body=has_body)],
                                  [kw("c", "m/a.md", 0.3, 0.5, 0.2, "short", has_body=has_body)]], "q")
        assert out[0].snippet == "longer one"
        out = merge_keyword_hits([[kw("c", "m/a.md", 0.3, 0.5, 0.2, "first", has_body=has_body)],
                                  [kw("c", "m/a.md", 0.3, 0.5, 0.2, "other", has_body=has_body)]], "q")
        assert out[0].snippet == "first"


def test_merge_body_row_scoring_zero_takes_the_path_score():
    out = merge_keyword_hits([[kw("c", "m/a.md", 0.0, 0.0)], [kw("c", "m/a.md", 0.0, 0.4, 0.4, has_body=False)]], "q")
    assert (out[0].has_body, out[0].score, out[0].path_score) == (True, 0.4, 0.4)


def test_filename_only_stem_match_scores_one_and_is_kept_by_the_limit():
    out = merge_keyword_hits([[kw("s", "x/notes.md", 0.0, 0.2, 0.2, has_body=False),
                               kw("b", "y/notes.txt", 0.3, 0.3), kw("o", "z/o.md", 0.9, 0.9)]], "notes")
    assert [(r.id, r.exact, r.score) for r in out] == [("b", 1, 0.3), ("s", 1, 1.0), ("o", 0, 0.9)]
    assert [r.id for r in limit_keyword_hits(out, 1)] == ["b", "s", "o"]


def test_exact_matcher_for_a_query_sorting_before_a_dot():
    assert exact_path_matcher("-")("-") == 3 and exact_path_matcher("-")("a/-") == 2
    assert exact_path_matcher(".")("x/.") == 0


@pytest.mark.parametrize("query, path, level", [
    ("note", "x/notes", 0),  # no dot: the stem is the whole name, "note" is not it
    ("a", "x/a.md", 1),  # a one-letter stem
    ("a", "x/ab.md", 0),
])
def test_exact_matcher_stems(query, path, level):
    assert exact_path_matcher(query)(path) == level


def test_body_preference_is_for_exact_rows_only():
    # two non-exact rows: the path-only one scores higher and goes first; body presence is not a key for them
    path_only = kw("p", "m/p.md", 0.0, 0.6, 0.6, has_body=False)
    body = kw("b", "m/b.md", 0.3, 0.5)
    assert [r.id for r in sorted([body, path_only], key=keyword_sort_key)] == ["p", "b"]


def test_non_exact_rows_tie_break_on_the_path_score_value():
    # equal score and text score: the higher path score first (0.4 before 0.2), not the path order
    a, z = kw("a", "m/a.md", 0.3, 0.5, 0.2), kw("z", "m/z.md", 0.3, 0.5, 0.4)
    assert [r.id for r in sorted([a, z], key=keyword_sort_key)] == ["z", "a"]


def test_exact_filename_rows_order_by_path_not_path_score():
    # the same exact level: path order decides (their path scores do not), then non-exact rows by path score
    rows = [kw("z", "z/notes.md", path_score=0.9, exact=2, has_body=False),
            kw("a", "a/notes.md", path_score=0.1, exact=2, has_body=False),
            kw("o", "o.md", path_score=0.3, has_body=False), kw("q", "q.md", path_score=0.7, has_body=False)]
    assert [r.id for r in sorted(rows, key=_path_sort_key)] == ["a", "z", "q", "o"]


def test_fallback_when_the_strict_query_sorts_after_the_keyword_query():
    # '"the" AND "alpha"' differs from '"alpha"' (and sorts after it): the keyword is searched
    idx = FakeIndex(body={'"the" AND "alpha"': [("t", "memory/t.md", "memory", 1, 1, "the alpha", -0.5)],
                          '"alpha"': [("a", "memory/a.md", "memory", 1, 1, "alpha", -0.4)]})
    rows, terms = ks(idx).search_with_fallback("the alpha", 3)
    assert terms == ["alpha"] and [r.id for r in rows] == ["t", "a"]


def test_exact_rows_do_not_count_towards_the_fallback_threshold():
    # limit 2: the whole query finds one exact (basename) row and one other row: too few non-exact rows
    idx = FakeIndex(first=first("x/notes.md", "y/other.md"),
                    body={'"notes" AND "md"': [("c:x/notes.md", "x/notes.md", "memory", 1, 2, "notes md", -0.3),
                                               ("c:y/other.md", "y/other.md", "memory", 1, 2, "notes md", -0.2)]})
    rows, terms = ks(idx).search_with_fallback("notes.md", 2)
    assert terms == ["notes"]
