"""Ranking of OpenClaw 2026.9.6's memory search after both legs ran: the hybrid merge with exact-path tiers,
decay, importance and MMR, and the keyword-only finish of FTS-only mode.

Read off dist/extensions/memory-core/manager-runtime.js (openclaw@2026.9.6), regions hybrid.ts
(`mergeHybridResults`, `scoreExactPathTieForTemporalDecay`), importance.ts (`importanceMultiplier`),
temporal-decay.ts, mmr.ts, manager-keyword-retrieval.ts (`finalizeKeywordOnlyResults`,
`selectScoredResults`) and manager-search-orchestration.ts (`searchCandidates`).

Hybrid merge, per chunk (union of the vector rows and the keyword rows by id):
- keyword score k = the boosted body score when the row has a BM25 text score, else (filename-only rows) 0 for
  an exact path and the path score otherwise;
- content = vw·v + tw·k (0.7/0.3; not divided by vw+tw — the same for weights summing to 1);
- ranking score = content, or for an exact-path row (the query is its path, basename or stem) (1 + content)/2
  when decay is on; then × the temporal-decay multiplier × the importance multiplier (1 when absent);
- the reported score is that ranking score, 0 when content is 0, and 1 for exact-path rows, which come first
  (tiers 3, 2, 1, each MMR-ordered by ranking score) ahead of the other rows (sorted by score, then MMR).
The final cut is `selectHybridSearchResults` (hybrid.select_results, "spare-slots"): rows with score >=
minScore; spare places go to keyword-only rows; when nothing reaches minScore every keyword-backed row stays.
`search()` runs all of this with maxResults = 200 and keeps the first maxResults rows, which selects the same
rows as running the cut with maxResults itself.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Iterable, Sequence
from dataclasses import replace

import numpy as np

from services.adapters.openclaw import hybrid
from services.adapters.openclaw.hybrid import DAY_MS, Scored, VectorHit
from services.adapters.openclaw.keyword_search import KeywordRow, exact_path_matcher, keyword_sort_key
from services.adapters.openclaw.mmr_matrix import TokenVocab, mmr_rerank_matrix

SOURCES = ("memory", "sessions")  # normalizeSources: the memory files and (opt-in) the session transcripts


def importance_multiplier(importance: float | None) -> float:
    """`importanceMultiplier`: missing importance is neutral (1); else 0.75 + 0.05·clamp(floor(i), 1, 10)."""
    if importance is None:
        return 1.0
    return 0.75 + max(1, min(10, math.floor(importance))) * 0.05


def exact_tie_score(content: float) -> float:
    """`scoreExactPathTieForTemporalDecay`: (1 + clamp01(content)) / 2."""
    return (1 + max(0.0, min(1.0, content))) / 2


class Decay:
    """The temporal-decay multiplier of a result path (dated paths, evergreen files, else the file mtime)."""

    def __init__(self, enabled: bool, now_ms: int, half_life_days: float, dated_re: str,
                 evergreen: Iterable[str], mtimes_ms: dict[str, int] | None):
        self.enabled, self.now_ms, self.half_life = enabled, now_ms, half_life_days
        self.dated_re, self.evergreen, self.mtimes = dated_re, tuple(evergreen), mtimes_ms or {}
        self._cache: dict[tuple[str, str], float] = {}

    def __call__(self, path: str, source: str) -> float:
        if not self.enabled:
            return 1.0
        key = (source, path)
        m = self._cache.get(key)
        if m is None:
            kind, ts = _path_age_source(path, source, self.dated_re, self.evergreen)
            if kind == "mtime":
                ts = self.mtimes.get(path)
            m = 1.0 if ts is None else hybrid.decay_multiplier((self.now_ms - ts) / DAY_MS, self.half_life)
            self._cache[key] = m
        return m


@functools.lru_cache(maxsize=65536)
def _path_age_source(path: str, source: str, dated_re: str, evergreen: tuple[str, ...]) -> tuple[str, int | None]:
    """What a path's age comes from (hybrid.file_timestamp_ms, split so the path parsing is cached across
    searches): ("dated", ms of its date), ("evergreen", None) or ("mtime", None: look the file's mtime up).
    `source` is one of OpenClaw's two memory sources, "memory" or "sessions" (ValueError otherwise)."""
    if source not in SOURCES:
        raise ValueError(f"openclaw: unknown memory source {source!r}; known: {SOURCES}")
    ts = hybrid.date_from_path(path, dated_re)
    if ts is not None:
        return "dated", ts
    if source == "memory" and hybrid.is_evergreen(path, dated_re, evergreen):
        return "evergreen", None
    return "mtime", None


def _ranking_key(r: Scored) -> tuple:
    """`compareRankingScores`: ranking score, lexical rank, path, start line, end line."""
    return (-r.extra["ranking"], -r.extra["lexical"], (r.path.casefold(), r.path), r.start_line, r.end_line)


def merge_hybrid_2609(
    query: str,
    vector: Sequence[VectorHit],
    keyword: Sequence[KeywordRow],
    decay: Decay,
    vector_weight: float = 0.7,
    text_weight: float = 0.3,
    mmr_enabled: bool = True,
    mmr_lambda: float = 0.7,
    token_ids: dict[str, np.ndarray] | None = None,
    vocab: TokenVocab | None = None,
    importance: dict[str, float] | None = None,
) -> list[Scored]:
    """The merged, ranked candidate list (before the final cut). With `token_ids` + `vocab` (index-time MMR
    tokens) MMR runs vectorised; without, the reference loop of hybrid.mmr_rerank (same order)."""
    match_exact = exact_path_matcher(query)
    rows: dict[str, dict] = {}
    for r in vector:
        rows[r.id] = dict(id=r.id, path=r.path, start=r.start_line, end=r.end_line, source=r.source,
                          snippet=r.snippet, v=r.vector_score, t=0.0, ranking=0.0, path_score=0.0,
                          exact=match_exact(r.path), body=False)
    for k in keyword:
        e = rows.get(k.id)
        if e is not None:
            e.update(t=k.text_score, body=k.has_body, ranking=k.score, path_score=k.path_score,
                     exact=max(e["exact"], k.exact))
            if k.snippet:
                e["snippet"] = k.snippet
        else:
            rows[k.id] = dict(id=k.id, path=k.path, start=k.start_line, end=k.end_line, source=k.source,
                              snippet=k.snippet, v=0.0, t=k.text_score, ranking=k.score, path_score=k.path_score,
                              exact=k.exact, body=k.has_body)
    rankable: list[Scored] = []
    for e in rows.values():
        kscore = e["ranking"] if e["t"] > 0 else (0.0 if e["exact"] > 0 else e["path_score"])
        content = vector_weight * e["v"] + text_weight * kscore
        lexical = e["ranking"] if e["body"] and e["t"] == 0 else 0.0
        if e["exact"] > 0:
            base = exact_tie_score(content) if decay.enabled else (content if content > 0 else 1.0)
        else:
            base = lexical if content == 0 else content
        mult = decay(e["path"], e["source"])
        ranking = base * mult * importance_multiplier((importance or {}).get(e["id"]))
        score = 1.0 if e["exact"] > 0 else (0.0 if content == 0 else ranking)
        rankable.append(Scored(e["id"], e["path"], e["start"], e["end"], e["snippet"], score, e["v"], e["t"],
                               e["source"], mult, extra={"ranking": ranking, "lexical": lexical, "content": content,
                                                         "exact": e["exact"], "keyword": kscore}))

    def mmr(items: list[Scored]) -> list[Scored]:
        if not mmr_enabled or not items:
            return items
        if token_ids is not None and vocab is not None:
            return mmr_rerank_matrix(items, mmr_lambda, token_ids, vocab, "ascii+cjk", empty_by_text=True)
        return hybrid.mmr_rerank(items, mmr_lambda, "ascii+cjk", empty_by_text=True)

    out: list[Scored] = []
    for spec in (3, 2, 1):
        tier = sorted((r for r in rankable if r.extra["exact"] == spec), key=_ranking_key)

        def rerank(group: list[Scored]) -> list[Scored]:
            if not mmr_enabled:
                return group
            ranked = mmr([replace(r, score=r.extra["ranking"]) for r in group])
            return [replace(r, score=1.0) for r in ranked]

        if decay.enabled:
            out.extend(rerank(tier))
        else:
            backed = [r for r in tier if r.extra["content"] > 0 or r.extra["lexical"] > 0]
            path_only = [r for r in tier if not (r.extra["content"] > 0) and r.extra["lexical"] == 0]
            out.extend(rerank(backed) + rerank(path_only))
    non_exact = sorted((r for r in rankable if r.extra["exact"] == 0), key=lambda r: (-r.score, *_ranking_key(r)))
    return out + mmr(non_exact)


def finalize_keyword_only_2609(rows: Sequence[KeywordRow], decay: Decay, max_results: int, min_score: float,
                               importance: dict[str, float] | None = None) -> list[Scored]:
    """`finalizeKeywordOnlyResults` (FTS-only mode): exact-path rows score (1 + body score)/2 under decay; every
    score decays by its path and takes the importance multiplier; rows are ranked as keyword hits (exact paths
    first, then score); exact-path rows then score 1. Cut: rows >= minScore if any, else every row >= 0."""
    staged = []
    for k in rows:
        score = k.score
        if decay.enabled and k.exact > 0:
            score = exact_tie_score(k.score if k.has_body else 0.0)
        mult = decay(k.path, k.source)
        score *= mult * importance_multiplier((importance or {}).get(k.id))
        staged.append((replace(k, score=score), mult))
    staged.sort(key=lambda x: keyword_sort_key(x[0], prefer_exact_body=not decay.enabled))
    ranked = [Scored(k.id, k.path, k.start_line, k.end_line, k.snippet, 1.0 if k.exact > 0 else k.score, 0.0,
                     k.text_score, k.source, mult, extra={"exact": k.exact, "keyword": k.score})
              for k, mult in staged]
    strict = [r for r in ranked if r.score >= min_score]
    chosen = strict if strict else [r for r in ranked if r.score >= 0]
    return chosen[:max_results]
