"""Scoring and ranking for the IR baselines: the BM25 tokeniser and index (bm25s), dense cosine scores, and
reciprocal rank fusion, all over whole-namespace numpy arrays.

Facts relied on (bm25s 0.3.16, `bm25s/scoring.py`): method "lucene" scores a term as
idf · tf / (tf + k1 · (1 - b + b · |d| / avgdl)) with idf = ln(1 + (N - n + 0.5) / (n + 0.5)); it has the
ranking of Okapi BM25 (the (k1 + 1) factor of Robertson's form is a constant per query) without Robertson's
negative idf for terms in more than half the documents. `BM25.get_scores(tokens)` returns one score per indexed
document and ignores unknown tokens. Ties are broken here, not in bm25s: by document order (documents.py).
"""

from __future__ import annotations

import re
from collections.abc import Sequence

import bm25s
import numpy as np
from bm25s.stopwords import STOPWORDS_EN

# scikit-learn's and bm25s's default token pattern: runs of 2+ word characters, lower-cased.
TOKEN_PATTERN = r"(?u)\b\w\w+\b"
_TOKEN_RE = re.compile(TOKEN_PATTERN)
STOPWORD_LISTS: dict[str, frozenset[str]] = {"none": frozenset(), "en": frozenset(STOPWORDS_EN)}


def tokenise(text: str, stopwords: str = "en") -> list[str]:
    """Lower-cased tokens of `text` matching TOKEN_PATTERN, without the named stopword list."""
    stop = STOPWORD_LISTS[stopwords]
    return [t for t in _TOKEN_RE.findall(text.lower()) if t not in stop]


class BM25Index:
    """An Okapi BM25 index (bm25s, method "lucene") over token lists; `scores` gives one float per document."""

    def __init__(self, token_lists: Sequence[Sequence[str]], k1: float, b: float):
        self.size = len(token_lists)
        self._bm25 = bm25s.BM25(k1=k1, b=b, method="lucene")
        if self.size:
            # bm25s needs at least one token per document in its vocabulary; an empty document scores 0.
            self._bm25.index([list(t) for t in token_lists], show_progress=False)

    def scores(self, query_tokens: Sequence[str]) -> np.ndarray:
        if not self.size or not query_tokens:
            return np.zeros(self.size, dtype=np.float64)
        return np.asarray(self._bm25.get_scores(list(query_tokens)), dtype=np.float64)


def stable_order(scores: np.ndarray) -> np.ndarray:
    """Document indices by score, highest first; equal scores keep document order (index ascending)."""
    n = scores.shape[0]
    return np.lexsort((np.arange(n), -scores))


def ranks_of(order: np.ndarray, keep: np.ndarray) -> np.ndarray:
    """1-based rank of every document in `order` restricted to documents where `keep` is True; 0 = unranked."""
    ranks = np.zeros(order.shape[0], dtype=np.int64)
    kept = order[keep[order]]
    ranks[kept] = np.arange(1, kept.shape[0] + 1)
    return ranks


def rrf(rank_lists: Sequence[np.ndarray], k: int) -> np.ndarray:
    """Reciprocal rank fusion (Cormack et al., SIGIR 2009): sum over channels of 1 / (k + rank), a channel that
    did not rank a document (rank 0) adding nothing."""
    fused = np.zeros(rank_lists[0].shape[0], dtype=np.float64)
    for r in rank_lists:
        ranked = r > 0
        fused[ranked] += 1.0 / (k + r[ranked])
    return fused
