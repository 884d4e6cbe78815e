r"""Scoring and ranking for the IR baselines: the BM25 tokenisers and indexes (bm25s; LongMemEval's own BM25), dense
cosine scores, and reciprocal rank fusion, all over whole-namespace numpy arrays.

Two BM25s, named so every figure can say which it is:
- the rig's (`bm25`): regex tokens `\w\w+` lower-cased, English stopwords out, bm25s "lucene" scoring (below);
- LongMemEval's (`bm25-official`): what the official `src/retrieval/run_retrieval.py` (flat-bm25) runs: tokens are
  `text.split(" ")` (split on single spaces, case and punctuation kept, so "Paris." and "paris" differ and two spaces
  make an empty token), scored as rank_bm25 0.2.2's `BM25Okapi` (k1 1.5, b 0.75, epsilon 0.25), restated in
  `OkapiBM25Index`: idf(t) = ln(N - n + 0.5) - ln(n + 0.5); a term in more than half the documents (negative idf)
  gets epsilon x the mean idf of the vocabulary instead; score(d) = sum over query tokens, repeats included, of
  idf(t) · tf · (k1 + 1) / (tf + k1 · (1 - b + b · |d| / avgdl)), a query token absent from the corpus adding 0.

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


def official_tokens(text: str) -> list[str]:
    """LongMemEval's BM25 tokens: `text.split(" ")`, nothing else (no lower-casing, no stopwords)."""
    return text.split(" ")


TOKENISERS = ("regex", "official")


def tokens_of(text: str, tokeniser: str, stopwords: str = "en") -> list[str]:
    """`tokenise` (regex) or `official_tokens` (official; the stopword list does not apply to it)."""
    return official_tokens(text) if tokeniser == "official" else tokenise(text, stopwords)


class OkapiBM25Index:
    """rank_bm25's BM25Okapi, restated (module docstring): `scores` gives one float per document."""

    def __init__(self, token_lists: Sequence[Sequence[str]], k1: float, b: float, epsilon: float = 0.25):
        self.size = len(token_lists)
        self.k1, self.b = k1, b
        lengths = np.array([len(t) for t in token_lists], dtype=np.float64)
        avgdl = float(lengths.sum()) / self.size if self.size else 0.0
        # k1 · (1 - b + b·|d|/avgdl) per document, the part of the denominator that does not depend on the term
        self._norm = k1 * (1.0 - b + b * lengths / avgdl) if avgdl > 0 else np.full(self.size, k1)
        postings: dict[str, dict[int, int]] = {}
        for i, toks in enumerate(token_lists):
            for t in toks:
                row = postings.setdefault(t, {})
                row[i] = row.get(i, 0) + 1
        self._postings = {t: (np.fromiter(r.keys(), np.int64, len(r)), np.fromiter(r.values(), np.float64, len(r)))
                          for t, r in postings.items()}
        idf = {t: float(np.log(self.size - len(r) + 0.5) - np.log(len(r) + 0.5)) for t, r in postings.items()}
        if idf:
            floor = epsilon * (sum(idf.values()) / len(idf))
            idf = {t: (floor if v < 0 else v) for t, v in idf.items()}
        self.idf = idf

    def scores(self, query_tokens: Sequence[str]) -> np.ndarray:
        out = np.zeros(self.size, dtype=np.float64)
        for q in query_tokens:
            hit = self._postings.get(q)
            if hit is None:
                continue
            docs, tf = hit
            out[docs] += self.idf[q] * tf * (self.k1 + 1.0) / (tf + self._norm[docs])
        return out


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
