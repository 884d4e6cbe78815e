"""Scoring and ranking math for retrieval: BM25, top-n ranking, RRF fusion, the rerank cross-score,
supersession demotion, coverage labels and token-budget packing. Pure functions, checked by hand in tests.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence

import numpy as np

RRF_K = 60  # Cormack et al. 2009; the usual default, also what the seed's Cortex notes call "RRF fusion"
BM25_K1 = 1.2
BM25_B = 0.75
SUPERSEDED_FACTOR = 0.5  # full-mode rerank: a superseded fact keeps half its cross-score
COVERAGE_THRESHOLDS = (("high", 0.6), ("partial", 0.35), ("low", 0.15))


def bm25_idf(df: int, n_docs: int) -> float:
    """Lucene's non-negative BM25 idf: ln(1 + (N - df + 0.5) / (df + 0.5))."""
    return math.log(1.0 + (n_docs - df + 0.5) / (df + 0.5))


def bm25_scores(query_terms: Iterable[str], postings: dict[str, tuple[np.ndarray, np.ndarray]],
                doc_len: np.ndarray, k1: float = BM25_K1, b: float = BM25_B, avgdl: float | None = None) -> np.ndarray:
    """Okapi BM25 over all docs at once. postings[term] = (doc indices, term frequencies). `avgdl`: the mean of
    `doc_len` when the caller keeps it (a snapshot computes it once), else computed here."""
    n = int(doc_len.shape[0])
    scores = np.zeros(n, dtype=np.float64)
    if n == 0:
        return scores
    avgdl = (float(doc_len.mean()) if avgdl is None else avgdl) or 1.0
    for term in dict.fromkeys(query_terms):  # a repeated query term counts once
        post = postings.get(term)
        if post is None:
            continue
        idx, tf = post
        idf = bm25_idf(len(idx), n)
        dl = doc_len[idx]
        scores[idx] += idf * tf * (k1 + 1.0) / (tf + k1 * (1.0 - b + b * dl / avgdl))
    return scores


def top_ranked(scores: np.ndarray, limit: int, min_score: float = 0.0, tie: np.ndarray | None = None) -> list[int]:
    """Indices of the `limit` best scores above `min_score`, best first; equal scores ordered by `tie`
    ascending (default: the index). A partial sort: only the candidates at or above the limit-th score are
    sorted, so the cost stays O(n) for a short list over many facts."""
    if scores.size == 0 or limit <= 0:
        return []
    ok = np.flatnonzero(scores > min_score)
    if ok.size == 0:
        return []
    s = scores[ok]
    if ok.size > limit:
        kth = np.partition(s, ok.size - limit)[ok.size - limit]  # the limit-th largest score
        keep = s >= kth  # every tie at the boundary stays in, so the tie rule alone decides who makes the cut
        ok, s = ok[keep], s[keep]
    key = ok if tie is None else tie[ok]
    order = np.lexsort((key, -s))  # primary: score desc; secondary: the tie key asc (deterministic)
    return ok[order[:limit]].tolist()  # Python ints


def rrf_fuse(rank_lists: Iterable[Sequence[int]], k: int = RRF_K) -> tuple[np.ndarray, np.ndarray]:
    """Reciprocal rank fusion of ranked lists of integer doc ids: score(d) = sum over lists of 1 / (k + rank),
    rank starting at 1. Returns (docs ascending, their fused scores). Each doc's terms are added list by list,
    best rank first (a dict accumulated in that order gives the same floats)."""
    lists = [np.asarray(r, dtype=np.int64) for r in rank_lists]
    if not lists or not sum(x.size for x in lists):
        return np.zeros(0, dtype=np.int64), np.zeros(0)
    ids = np.concatenate(lists)
    terms = np.concatenate([1.0 / (k + np.arange(1, x.size + 1, dtype=np.float64)) for x in lists])
    docs, inverse = np.unique(ids, return_inverse=True)
    return docs, np.bincount(inverse.reshape(-1), weights=terms, minlength=docs.size)


def fused_order(docs: np.ndarray, scores: np.ndarray, tie: np.ndarray) -> tuple[list[int], list[float]]:
    """Fused docs best first (ties by `tie[doc]` ascending), with their scores, as Python lists."""
    order = np.lexsort((tie[docs], -scores))
    return docs[order].tolist(), scores[order].tolist()


def rrf_normalised(score: float, n_lists: int, k: int = RRF_K) -> float:
    """RRF score as a fraction of the best possible (rank 1 in every list)."""
    return score / (n_lists / (k + 1.0)) if n_lists else 0.0


def lexical_coverage(query_tokens: Sequence[str], doc_tokens: Iterable[str]) -> float:
    """Fraction of distinct query content tokens present in the document."""
    q = set(query_tokens)
    if not q:
        return 0.0
    return len(q & set(doc_tokens)) / len(q)


def cross_score(coverage: float, cosine: float, w_lex: float = 0.5) -> float:
    """Deterministic stand-in for a cross-encoder: a blend of lexical coverage and clamped cosine."""
    return w_lex * coverage + (1.0 - w_lex) * min(1.0, max(0.0, cosine))


def demote(score: float, superseded: bool) -> float:
    return score * SUPERSEDED_FACTOR if superseded else score


def coverage_label(top_score: float | None) -> str:
    if top_score is None:
        return "none"
    for label, threshold in COVERAGE_THRESHOLDS:
        if top_score >= threshold:
            return label
    return "none"


def pack(token_counts: Sequence[int], budget: int, limit: int) -> tuple[list[int], int]:
    """Greedy packing in rank order: take items while they fit the token budget, up to `limit` items.
    The first item is always kept (an answer that does not fit is still better than none).
    Items that do not fit are skipped, not truncated. Returns (kept positions, tokens used)."""
    kept: list[int] = []
    used = 0
    for i, n in enumerate(token_counts):
        if len(kept) >= limit:
            break
        if kept and used + n > budget:
            continue
        kept.append(i)
        used += n
    return kept, used
