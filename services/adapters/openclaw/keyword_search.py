"""The keyword leg of OpenClaw 2026.9.6's memory search: body FTS with lexical boosts, filename search, and
the per-keyword fallback searches, merged into one ranked candidate list.

Read off the bundled code of openclaw@2026.9.6 (the rules are re-implemented here, not copied):
- dist/manager-search-Fk8GHOOd.mjs (extensions/memory-core/src/memory/manager-search.ts): `searchKeyword`
  (body), `scoreFallbackKeywordResult` (the lexical boost), `prepareExactPathMatcher`, `searchPathKeyword`
  (filename search), `comparePathKeywordSearchResults`;
- dist/extensions/memory-core/manager-runtime.js (manager-keyword-retrieval.ts): `searchKeywordWithFallback`,
  `resolveKeywordFallbackTerms`, `mergeKeywordSearchHits`, `limitKeywordSearchHits`, `compareKeywordSearchHits`.

What a search does (limit = 200 candidates in ordinary searches):
1. `search_keyword(q)`: the body search (AND of the quoted tokens of q, best `limit` by BM25; each row's score
   is min(1, bm25RankToScore(rank) + lexical boost against the *ranking* query)) and the filename search over
   the separately indexed paths (exact full path > basename > stem of the exact-path query first, then partial
   matches by path BM25), merged per chunk id and cut to `limit` non-exact rows plus the exact-path rows.
2. If that finds fewer than `limit` non-exact rows, each keyword of `extractKeywords(q)` (at most 6, the
   query itself excluded) is searched the same way (ranking and exact-path query still the whole q), and all
   the lists are merged: text and path scores take their maximum, the boosted body score its maximum.

Deviations, on purpose: the trigram-tokenizer plans and the substring (non-ASCII token) path plans are not
modelled (the rig uses unicode61 and English data); an FTS5 syntax error yields no rows instead of the
upstream substring scan (the quoted-token queries built here never raise one); `localeCompare` ties are
approximated by a case-folded comparison.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Callable, Iterable
from dataclasses import dataclass

import regex

from services.adapters.openclaw import fts as ftsmod
from services.adapters.openclaw.jsstr import js_len, truncate_utf16_safe

FALLBACK_TERM_LIMIT = 6  # KEYWORD_FALLBACK_SEARCH_TERM_LIMIT
EXACT_PATH_CANDIDATE_LIMIT = 200  # EXACT_PATH_CANDIDATE_LIMIT
_TOKEN_RE = regex.compile(r"[\p{L}\p{N}_]+")


@dataclass
class KeywordRow:
    """One keyword candidate (mutable: merging raises its scores in place, as upstream does)."""

    id: str
    path: str
    source: str
    start_line: int
    end_line: int
    snippet: str
    text_score: float  # bm25RankToScore of the body match (0 for filename-only rows)
    score: float  # the ranking score: boosted body score, or the path score / 1 for filename-only rows
    path_score: float = 0.0
    exact: int = 0  # exactPathSpecificity: 3 full path, 2 basename, 1 stem, 0 none
    has_body: bool = True

    @property
    def range_key(self) -> tuple[str, str, int, int]:
        return (self.source, self.path, self.start_line, self.end_line)


# ---------------------------------------------------------------------------------------------------
# scoring helpers


def search_tokens(raw: str) -> list[str]:
    """`normalizeSearchTokens`: NFC, `[\\p{L}\\p{N}_]+` runs, lower-cased."""
    if raw.isascii():  # lower-casing ASCII first cannot change the runs; the common case, ~2× faster
        return _TOKEN_RE.findall(raw.lower())
    return [t.lower() for t in _TOKEN_RE.findall(unicodedata.normalize("NFC", raw)) if t.strip()]


def unique(items: Iterable[str]) -> list[str]:
    return list(dict.fromkeys(items))


def lexical_boost_score(fts_score: float, query_tokens: list[str], path: str, text: str) -> float:
    """`scoreFallbackKeywordResult`: min(1, ftsScore + (0.45·coverage + 0.2·density + 0.18·(query tokens found
    in the path) + min(len(text)/160, 0.18))). coverage = share of the unique query tokens that are tokens of
    the text; density = those tokens over the text's distinct tokens. No query tokens → ftsScore unchanged."""
    if not query_tokens:
        return fts_score
    return min(1.0, fts_score + lexical_boost(query_tokens, path, text))


def lexical_boost(query_tokens: list[str], path: str, text: str) -> float:
    """The boost term alone, summed in upstream's order (so the float result is the same)."""
    text_tokens = set(search_tokens(text))
    overlap = sum(1 for t in query_tokens if t in text_tokens)
    coverage = overlap / len(query_tokens)
    density = overlap / max(len(text_tokens), 1)
    npath = unicodedata.normalize("NFC", path).lower()
    path_boost = 0.0
    for t in query_tokens:
        if t in npath:
            path_boost = path_boost + 0.18
    length_boost = min(js_len(text) / 160, 0.18)
    return coverage * 0.45 + density * 0.2 + path_boost + length_boost


def _norm_path(value: str) -> str:
    v = value.strip().replace("\\", "/")
    if v.startswith("./"):
        v = v[2:]
    return unicodedata.normalize("NFC", v).lower()


def exact_path_matcher(query: str) -> Callable[[str], int]:
    """`prepareExactPathMatcher`: 3 when the query is the path, else (query without "/") 2 for the basename,
    1 for the stem (basename up to its last dot), else 0."""
    q = _norm_path(query)
    if not q or q == ".":
        return lambda _path: 0
    has_dir = "/" in q

    def match(path: str) -> int:
        p = _norm_path(path)
        if q == p:
            return 3
        if has_dir:
            return 0
        base = p.split("/")[-1]
        if q == base:
            return 2
        dot = base.rfind(".")
        stem = base[:dot] if dot > 0 else base
        return 1 if q == stem else 0

    return match


def _locale(s: str) -> tuple[str, str]:
    return (s.casefold(), s)  # approximates String.prototype.localeCompare


def keyword_sort_key(r: KeywordRow, prefer_exact_body: bool = True) -> tuple:
    """`compareKeywordSearchHits` as a sort key: exact-path specificity, then (exact rows, when preferred) body
    presence, score, text score, path score (non-exact rows), path, start line, id."""
    return (-r.exact, -(int(r.has_body) if prefer_exact_body and r.exact > 0 else 0), -r.score, -r.text_score,
            -(r.path_score if r.exact == 0 else 0.0), _locale(r.path), r.start_line, r.id)


def _path_sort_key(r: KeywordRow) -> tuple:
    """`comparePathKeywordSearchResults`."""
    return (-r.exact, -(r.path_score if r.exact == 0 else 0.0), _locale(r.path), r.start_line, r.id)


# ---------------------------------------------------------------------------------------------------
# the searches


class KeywordSearch:
    """The keyword leg over one namespace of an IndexStore, with 2026.9.6's rules."""

    def __init__(self, index, namespace: str, bm25: Callable[[float], float], snippet_max_chars: int = 700):
        self.index = index
        self.ns = namespace
        self.bm25 = bm25
        self.snippet_max_chars = snippet_max_chars
        # chunk id → boost for the ranking query of this search: every fallback leg boosts against the whole
        # query, so a chunk found by several legs is tokenised once
        self._boosts: dict[tuple[str, str], float] = {}

    def body(self, query: str, limit: int, ranking_query: str) -> list[KeywordRow]:
        fts_query = ftsmod.build_fts_query(query)
        matchers = unique(search_tokens(ranking_query))
        out = []
        for cid, path, source, s, e, text, rank in self.index.search_body_rows(self.ns, fts_query, limit):
            ts = self.bm25(rank)
            if matchers:
                key = (ranking_query, cid)
                boost = self._boosts.get(key)
                if boost is None:
                    boost = self._boosts[key] = lexical_boost(matchers, path, text)
                score = min(1.0, ts + boost)
            else:
                score = ts
            out.append(KeywordRow(cid, path, source, s, e, truncate_utf16_safe(text, self.snippet_max_chars), ts,
                                  score))
        return out

    def paths(self, query: str, exact_query: str, limit: int) -> list[KeywordRow]:
        """`searchPathKeyword` (unicode61, first plan): exact-path rows (first chunk of each file the exact
        matcher accepts, at most 200 files) plus up to `limit` partial path matches by path BM25."""
        match_exact = exact_path_matcher(exact_query)
        first = self.index.first_chunks(self.ns)
        fts_query = ftsmod.build_fts_query(query)
        lexical = self.index.search_path_rows(self.ns, fts_query)  # rank, path order

        def row(path: str, score: float, spec: int) -> KeywordRow:
            c = first[path]
            return KeywordRow(c.id, path, c.source, c.start_line, c.end_line,
                              truncate_utf16_safe(c.text, self.snippet_max_chars), 0.0, score, score, spec, False)

        # exact candidates: ASCII queries with tokens take them from the lexical matches, others from every path
        if exact_query.isascii() and fts_query is not None:
            pool = [p for p, _, _ in lexical]
        else:
            pool = list(first)
        exact_paths = sorted({p for p in pool if match_exact(p) > 0}, key=lambda p: (-match_exact(p), p))
        by_id: dict[str, KeywordRow] = {}
        for p in exact_paths[:EXACT_PATH_CANDIDATE_LIMIT]:
            r = row(p, 0.0, match_exact(p))
            by_id[r.id] = r
        if fts_query is None:
            return sorted(by_id.values(), key=_path_sort_key)
        exact_lex = [x for x in lexical if match_exact(x[0]) > 0][:EXACT_PATH_CANDIDATE_LIMIT]
        other_lex = [x for x in lexical if match_exact(x[0]) == 0][:limit]
        lexical_rows: dict[str, KeywordRow] = {}
        for p, _src, rank in exact_lex + other_lex:
            r = row(p, self.bm25(rank), match_exact(p))
            have = lexical_rows.get(r.id)
            if have is None:
                lexical_rows[r.id] = r
            else:
                have.path_score = max(have.path_score, r.path_score)
                have.score = max(have.score, r.score)
                have.exact = max(have.exact, r.exact)
        non_exact = 0
        for r in sorted(lexical_rows.values(), key=_path_sort_key):
            if r.exact > 0:
                e = by_id.get(r.id)
                if e is not None:
                    e.path_score = max(e.path_score, r.path_score)
                    e.score = max(e.score, r.score)
                    e.exact = max(e.exact, r.exact)
                continue
            if non_exact >= limit:
                continue
            by_id[r.id] = r
            non_exact += 1
        return sorted(by_id.values(), key=_path_sort_key)[: EXACT_PATH_CANDIDATE_LIMIT + limit]

    def search(self, query: str, limit: int, ranking_query: str | None = None,
               exact_query: str | None = None) -> list[KeywordRow]:
        """`searchKeyword` of the manager: body + filename search of one query, merged and limited."""
        body = self.body(query, limit, ranking_query if ranking_query is not None else query)  # path score 0
        eq = exact_query if exact_query is not None else query
        merged = merge_keyword_hits([body, self.paths(query, eq, limit)], eq)
        return limit_keyword_hits(merged, limit)

    def search_with_fallback(self, query: str, limit: int) -> tuple[list[KeywordRow], list[str]]:
        """`searchKeywordWithFallback`; returns the rows and the fallback terms searched (diagnostics)."""
        full = self.search(query, limit)
        if sum(1 for r in full if r.exact == 0) >= limit:
            return full, []
        norm = query.strip().lower()
        terms = [t for t in ftsmod.extract_keywords_2609(query) if t != norm][:FALLBACK_TERM_LIMIT]
        if not terms:
            return full, []
        strict = ftsmod.build_fts_query(query)
        kw = ftsmod.build_fts_query(" ".join(terms))
        if full and (strict or "").lower() == (kw or "").lower():
            return full, []
        sets = [self.search(t, limit, ranking_query=query, exact_query=query) for t in terms]
        return limit_keyword_hits(merge_keyword_hits([full, *sets], query), limit), terms


def merge_keyword_hits(result_sets: list[list[KeywordRow]], exact_query: str) -> list[KeywordRow]:
    """`mergeKeywordSearchHits`: union by chunk id (first row seen is kept and updated); text and path scores
    take their maximum, the body score its maximum over rows with a body match, the longer snippet wins among
    rows of equal body presence; rows without a body match finally score 1 (exact path) or their path score."""
    match_exact = exact_path_matcher(exact_query)
    seen: dict[str, KeywordRow] = {}
    for results in result_sets:
        for r in results:
            e = seen.get(r.id)
            if e is None:
                r.exact = match_exact(r.path)
                seen[r.id] = r
                continue
            e_body = e.score if e.has_body else 0.0
            r_body = r.score if r.has_body else 0.0
            had_body = e.has_body
            e.text_score = max(e.text_score, r.text_score)
            e.path_score = max(e.path_score, r.path_score)
            e.has_body = e.has_body or r.has_body
            best = max(e_body, r_body)
            e.score = best if best > 0 else e.path_score
            if (r.has_body and not had_body) or (r.has_body == had_body and js_len(r.snippet) > js_len(e.snippet)):
                e.snippet = r.snippet
    merged = list(seen.values())
    for r in merged:
        if not r.has_body:
            r.score = 1.0 if r.exact > 0 else r.path_score
    return sorted(merged, key=keyword_sort_key)


def limit_keyword_hits(results: list[KeywordRow], non_exact_limit: int) -> list[KeywordRow]:
    """`limitKeywordSearchHits`: exact-path rows (body-backed ones at most `limit`, of at most 200 files) then
    the best `limit` non-exact rows."""
    ranked = sorted(results, key=keyword_sort_key)
    exact_body = [r for r in ranked if r.exact > 0 and r.has_body][:non_exact_limit]
    exact_path_only = [r for r in ranked if r.exact > 0 and not r.has_body]
    bounded = sorted(exact_body + exact_path_only, key=keyword_sort_key)
    keys: set[tuple[str, str]] = set()
    for r in bounded:
        keys.add((r.source, r.path))
        if len(keys) == EXACT_PATH_CANDIDATE_LIMIT:
            break
    exact = [r for r in bounded if (r.source, r.path) in keys]
    return exact + [r for r in ranked if r.exact == 0][:non_exact_limit]
