"""Quaid's recall scoring as small pure functions (../shared/reference/peers.md §3; Quaid-Labs/quaid @ 9262e69,
`modules/quaid/datastore/memorydb/memory_graph.py`).

- `classify_intent` — the rig's deterministic stand-in for Quaid's intent classification (question words and
  keywords; Quaid's own classifier is not in peers.md, so this one is a documented choice).
- `fusion_weights` — `_get_fusion_weights`: (semantic, fts) per intent.
- `rrf_fuse` — `search_hybrid`'s weighted reciprocal-rank fusion `w/(RRF_K + rank)`, RRF_K = 60, ranks 1-based.
- `fts_only_quality` — the quality an FTS-only hit gets: `max(0.4, 0.7 − 0.02·rank)` (rank 0-based).
- `recency_score`, `frequency_score`, `composite_score` — `_compute_composite_score`: relevance .60, recency
  .20 (linear over 90 days), frequency .15 (log access count / log 51), confidence · 0.05.
- `broaden_filter` — the `min_similarity` filter (fallback 0.60) with multi-pass broadening on a low top score.
- `mmr_select` — MMR, λ 0.7, embedding cosine, the top result always kept.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

RRF_K = 60
# _get_fusion_weights: (semantic weight, fts weight) by intent.
FUSION_WEIGHTS: dict[str, tuple[float, float]] = {
    "WHO": (0.5, 0.5),
    "WHERE": (0.5, 0.5),
    "RELATION": (0.5, 0.5),
    "WHEN": (0.4, 0.6),
    "PREFERENCE": (0.8, 0.2),
    "WHY": (0.8, 0.2),
    "PROJECT": (0.6, 0.4),
    "GENERAL": (0.7, 0.3),
}
COMPOSITE_WEIGHTS = {"relevance": 0.60, "recency": 0.20, "frequency": 0.15, "confidence": 0.05}
RECENCY_WINDOW_DAYS = 90.0
FREQUENCY_LOG_BASE = 51.0
FTS_ONLY_QUALITY = (0.7, 0.02, 0.4)  # start, step per rank, floor
MIN_SIMILARITY = 0.60
BROADENING_PASSES = (1.0, 0.75, 0.5)  # multiples of min_similarity tried in turn (the rig's reading)
MMR_LAMBDA = 0.7

# Intent cues, checked in this order; the first rule that matches wins. Question words lead (they say what kind
# of answer is wanted), topic keywords follow. Word-boundary matches on the lower-cased query.
INTENT_RULES: tuple[tuple[str, str], ...] = (
    ("WHY", r"\bwhy\b|\breason\b|\brationale\b|\bhow come\b|\bmotivation\b"),
    ("WHEN", r"\bwhen\b|\bwhat (?:time|date|day|year|month)\b|\bhow long ago\b|\bsince when\b|\bwhich (?:day|date|year|month)\b"),
    ("WHO", r"\bwho\b|\bwhom\b|\bwhose\b"),
    ("WHERE", r"\bwhere\b|\bwhich (?:city|country|place)\b"),
    ("RELATION", r"\brelat(?:ed|ion|ionship)\b|\bfriends?\b|\bsister\b|\bbrother\b|\bmother\b|\bfather\b|\bmom\b|"
                 r"\bdad\b|\bwife\b|\bhusband\b|\bpartner\b|\bmarried\b|\bfamily\b|\bkids?\b|\bchildren\b"),
    ("PREFERENCE", r"\bprefer\w*\b|\blikes?\b|\bfavou?rite\b|\bconvention\w*\b|\bstyle\b|\balways\b|\bnever\b|"
                   r"\benjoy\w*\b|\bhate\w*\b|\bdislike\w*\b"),
    ("PROJECT", r"\bproject\b|\brepo\w*\b|\bcodebase\b|\bservice\b|\bbuild\b|\bdeploy\w*\b|\barchitecture\b|"
                r"\bapi\b|\bmodule\b|\bendpoint\b|\bdatabase\b|\bconfig\w*\b|\bport\b|\bcache\b|\bschema\b"),
)
_INTENT_RES = tuple((name, re.compile(rx)) for name, rx in INTENT_RULES)


def classify_intent(query: str) -> str:
    q = query.lower()
    for name, rx in _INTENT_RES:
        if rx.search(q):
            return name
    return "GENERAL"


def fusion_weights(intent: str) -> tuple[float, float]:
    return FUSION_WEIGHTS.get(intent, FUSION_WEIGHTS["GENERAL"])


@dataclass(frozen=True)
class Fused:
    id: str
    rrf: float
    semantic_rank: int | None  # 1-based; None = not in the semantic list
    fts_rank: int | None


def rrf_fuse(semantic: Sequence[str], fts: Sequence[str], w_sem: float, w_fts: float, k: int = RRF_K) -> list[Fused]:
    """Weighted RRF over two ranked id lists: Σ w/(k + rank), ranks 1-based. Sorted by fused score, ties broken
    by the better semantic rank, then the better FTS rank, then id (deterministic)."""
    sem_rank = {i: r for r, i in enumerate(semantic, 1)}
    fts_rank = {i: r for r, i in enumerate(fts, 1)}
    out = []
    for i in dict.fromkeys([*semantic, *fts]):
        s, f = sem_rank.get(i), fts_rank.get(i)
        score = (w_sem / (k + s) if s else 0.0) + (w_fts / (k + f) if f else 0.0)
        out.append(Fused(i, score, s, f))
    big = 1 << 30
    out.sort(key=lambda x: (-x.rrf, x.semantic_rank or big, x.fts_rank or big, x.id))
    return out


def fts_only_quality(rank0: int) -> float:
    """Quality of a hit found by FTS alone at 0-based FTS rank `rank0`: max(0.4, 0.7 − 0.02·rank)."""
    start, step, floor = FTS_ONLY_QUALITY
    return max(floor, start - step * rank0)


def recency_score(age_days: float, window_days: float = RECENCY_WINDOW_DAYS) -> float:
    """1 for a fact from now, falling linearly to 0 at `window_days`; future-dated facts count as new."""
    if window_days <= 0:
        return 0.0
    return min(1.0, max(0.0, 1.0 - max(0.0, age_days) / window_days))


def frequency_score(access_count: int, base: float = FREQUENCY_LOG_BASE) -> float:
    """log(1 + n)/log(51), capped at 1: 0 for a never-recalled fact, 1 from 50 recalls on."""
    return min(1.0, math.log1p(max(0, access_count)) / math.log(base))


def composite_score(relevance: float, recency: float, frequency: float, confidence: float,
                    weights: dict[str, float] = COMPOSITE_WEIGHTS) -> float:
    return (weights["relevance"] * relevance + weights["recency"] * recency
            + weights["frequency"] * frequency + weights["confidence"] * confidence)


def broaden_filter(relevances: Sequence[float], min_similarity: float = MIN_SIMILARITY,
                   passes: Sequence[float] = BROADENING_PASSES) -> tuple[list[int], float, int]:
    """Indices kept by the `min_similarity` filter, the threshold used and the pass number (1-based).

    Pass 1 keeps relevance >= min_similarity. When the top relevance is below that (nothing passes), the filter
    broadens: pass 2 uses min_similarity × 0.75, pass 3 × 0.5. Nothing passing even pass 3 → empty (pass 0)."""
    for n, mult in enumerate(passes, 1):
        th = min_similarity * mult
        kept = [i for i, r in enumerate(relevances) if r >= th]
        if kept:
            return kept, th, n
    return [], min_similarity * (passes[-1] if passes else 1.0), 0


def mmr_select(scores: Sequence[float], vectors: np.ndarray, k: int, lam: float = MMR_LAMBDA) -> list[int]:
    """Greedy MMR: the highest-scoring candidate is always kept first; then argmax λ·score − (1−λ)·max cosine to
    the selected ones (ties → the earlier candidate). `vectors` are unit rows, so cosine = dot product."""
    n = len(scores)
    if n == 0 or k <= 0:
        return []
    s = np.asarray(scores, dtype=np.float64)
    first = int(np.argmax(s))  # np.argmax returns the first maximum
    selected = [first]
    if n == 1 or k == 1:
        return selected
    sims = np.asarray(vectors, dtype=np.float64) @ np.asarray(vectors, dtype=np.float64).T
    max_sim = sims[first].copy()
    remaining = np.ones(n, dtype=bool)
    remaining[first] = False
    while len(selected) < min(k, n):
        mmr = lam * s - (1 - lam) * max_sim
        mmr[~remaining] = -np.inf
        best = int(np.argmax(mmr))
        selected.append(best)
        remaining[best] = False
        max_sim = np.maximum(max_sim, sims[best])
    return selected
