"""Exact top-n inner-product search through an int8 copy of an embedding matrix.

The semantic and question channels rank every stored float32 row by its dot product with the query. Reading the
whole 10k x 384 float32 matrix (15 MB) per request is bound by memory bandwidth, and more so under load, where
that matrix-vector product is the retrieve path's main cost. An int8 copy is a quarter of the bytes. Each row keeps
its quantisation error, so the int8 product gives an interval that surely holds the row's exact score:

    e . q - s_e s_q (c_e . c_q) = (e - s_e c_e) . q + s_e c_e . (q - s_q c_q)
    |...| <= max|e - s_e c_e| * ||q||_1 + s_e ||c_e||_1 * max|q - s_q c_q|

(c = the int8 codes, s = the per-vector scale max|x| / 127). A row whose upper end lies below the n-th best
lower end, or below the channel's minimum, cannot be in the top n; only the remaining rows are scored exactly.
Exact means numkong's float32 dot with a float64 accumulator, each row on its own: the same whatever other rows
are scored with it, identical for identical rows. The returned list is the one scoring every row that way would
give (tests/test_cortex_quantized.py checks both against each other).

The int8 products run in numkong (the SIMD kernels usearch is built on); codes are per-row, so a snapshot that
grows by appended rows extends its copy instead of re-quantising everything.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numkong
import numpy as np

from services.cortex_mock.growth import GrowBuf
from services.cortex_mock.ranking import top_ranked

LEVELS = 127.0  # int8 codes in [-127, 127]: symmetric, so -128 is never produced
# Slack on every bound for floating-point rounding: the bound's own arithmetic and the exact scores (float64
# accumulation) are each off by < 1e-13 relative for 384-dimensional rows; 1e-9 of the largest possible |score|
# covers both.
ROUNDING_SLACK = 1e-9


def quantise(m: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per-row int8 codes of a float matrix: (codes, scale, max abs error), with row ~= scale * codes."""
    m64 = np.asarray(m, dtype=np.float64)
    amax = np.abs(m64).max(axis=1, initial=0.0)
    scale = np.where(amax > 0, amax / LEVELS, 1.0)
    codes = np.rint(m64 / scale[:, None]).astype(np.int8)
    return codes, scale, np.abs(m64 - codes * scale[:, None]).max(axis=1, initial=0.0)


def _code_l1(codes: np.ndarray, scale: np.ndarray) -> np.ndarray:
    return np.abs(codes.astype(np.int64)).sum(axis=1) * scale


def exact_scores(m: np.ndarray, rows: np.ndarray, q32: np.ndarray) -> np.ndarray:
    """Dot products of the float32 rows `rows` of `m` with the float32 query, as float64: numkong computes each
    pair on its own with a float64 accumulator (off by ~1e-14 from the exact real product), so a row's score is
    the same whatever other rows are scored with it, and identical rows score identically."""
    if rows.size == 0:  # numkong refuses empty inputs
        return np.zeros(0)
    return np.asarray(numkong.cdist(m.take(rows, axis=0), q32[None, :], "dot")).ravel()


@dataclass(frozen=True)
class QueryCodes:
    """A query vector (float32) with its int8 codes, scale, max abs quantisation error, L1 norm and max abs.
    Frozen: the engine's query cache shares one instance between search threads."""

    q32: np.ndarray
    codes: np.ndarray
    scale: float
    err: float
    l1: float
    amax: float

    @classmethod
    def of(cls, q: np.ndarray) -> QueryCodes:
        q32 = np.ascontiguousarray(q, dtype=np.float32).ravel()
        (codes,), (scale,), (err,) = quantise(q32[None, :])
        a = np.abs(q32.astype(np.float64))
        return cls(q32, codes, float(scale), float(err), float(a.sum()), float(a.max(initial=0.0)))


class QuantizedRows:
    """The int8 copy of one float32 matrix (n x d) with what the bounds need per row: `of(m)` codes a matrix.
    The float32 matrix itself is not kept: the snapshot may swap it for a shared file-mapped copy with the same
    bytes (shared_arrays.py), so the exact scores read whichever the caller passes."""

    def __init__(self, codes: np.ndarray, scale: np.ndarray, err: np.ndarray, code_l1: np.ndarray | None = None,
                 bufs: tuple[GrowBuf, ...] | None = None):
        self.codes, self.scale, self.err = codes, scale, err
        # ||s_e c_e||_1 (and + d * err >= ||e||_1); row by row, so the rows appended later add theirs
        self.code_l1 = _code_l1(codes, scale) if code_l1 is None else code_l1
        self._bufs = bufs  # the growth buffers the four arrays are views of, once rows were appended

    @classmethod
    def of(cls, m: np.ndarray) -> QuantizedRows:
        return cls(*quantise(m))

    def __len__(self) -> int:
        return int(self.codes.shape[0])

    def appended(self, m: np.ndarray) -> QuantizedRows:
        """The copy for `m` = the rows this copy coded, then more rows (rows are coded independently). The new
        rows go past the end of shared growth buffers (growth.py): the cost is theirs, not the matrix's."""
        n = len(self)
        codes, scale, err = quantise(m[n:])
        bufs = self._bufs or (GrowBuf(self.codes.reshape(n, m.shape[1])), GrowBuf(self.scale), GrowBuf(self.err),
                              GrowBuf(self.code_l1))
        bufs = tuple(b.append(n, x) for b, x in zip(bufs, (codes, scale, err, _code_l1(codes, scale)), strict=True))
        return QuantizedRows(*(b.view() for b in bufs), bufs=bufs)

    def bounds(self, qc: QueryCodes) -> tuple[np.ndarray, np.ndarray]:
        """(lower, upper) float64 per row: the exact score of row i lies in [lower[i], upper[i]]."""
        if len(self) == 0:  # numkong refuses empty inputs
            return np.zeros(0), np.zeros(0)
        dots = np.asarray(numkong.cdist(self.codes, qc.codes[None, :], "dot")).ravel()
        approx = dots * self.scale
        approx *= qc.scale
        # err * ||q||_1 + code_l1 * q.err + ROUNDING_SLACK * (row_l1 * max|q| + 1e-12), row_l1 = code_l1 + err * d
        # expanded so each row costs two products
        ra = ROUNDING_SLACK * qc.amax
        slack = self.err * (qc.l1 + ra * self.codes.shape[1])
        slack += self.code_l1 * (qc.err + ra)
        slack += ROUNDING_SLACK * 1e-12
        lower = approx - slack
        approx += slack
        return lower, approx


def threshold(lower: np.ndarray, limit: int, min_score: float, mask: np.ndarray | None = None) -> float:
    """The score an item's upper bound must reach to stay a candidate: `min_score`, raised to the `limit`-th
    largest lower bound within `mask` when more than `limit` items are bounded (at least `limit` items score at
    least that, so an item whose upper bound is below it ranks after all of them, ties included)."""
    lo = lower if mask is None else np.where(mask, lower, -np.inf)
    if lo.size > limit:
        return max(min_score, float(np.partition(lo, lo.size - limit)[lo.size - limit]))
    return min_score


def pruned(lower: np.ndarray, upper: np.ndarray, limit: int, min_score: float,
           mask: np.ndarray | None = None) -> np.ndarray:
    """Indices (ascending) of the items that can still be among the `limit` best exact scores above `min_score`,
    given lower/upper bounds on each item's exact score: upper >= threshold(...). Items outside `mask` are never
    returned."""
    if limit <= 0:
        return np.zeros(0, dtype=np.int64)
    keep = upper >= threshold(lower, limit, min_score, mask)
    if mask is not None:
        keep &= mask
    return np.flatnonzero(keep)


def top_rows(m: np.ndarray, qr: QuantizedRows, qc: QueryCodes, limit: int, min_score: float, tie: np.ndarray,
             mask: np.ndarray | None = None) -> tuple[list[int], np.ndarray, np.ndarray]:
    """The `limit` rows of `m` (coded as `qr`) with the best exact scores above `min_score` (ties by `tie`
    ascending), best first, as ranking.top_ranked would give over every row's exact score; also the rows scored
    exactly and their scores."""
    lower, upper = qr.bounds(qc)
    cand = pruned(lower, upper, limit, min_score, mask)
    scores = exact_scores(m, cand, qc.q32)
    pos = top_ranked(scores, limit, min_score, tie[cand])
    return cand[pos].tolist(), cand, scores


@dataclass(frozen=True)
class QuestionRows:
    """Rows grouped by owner (the question channel: a fact scores as its best generated question).
    `distinct`: the distinct rows, coded as `codes`; `owners`: the owners, ascending; `layout[:, i]`: the
    distinct rows of owner i's rows, padded with len(distinct), a slot that scores -inf (rows by owner are
    columns, so an owner's best is a reduction over the short first axis: numpy is slow along a short last one)."""

    distinct: np.ndarray
    codes: QuantizedRows
    owners: np.ndarray
    layout: np.ndarray


def top_groups(g: QuestionRows, qc: QueryCodes, limit: int, min_score: float, tie: np.ndarray,
               mask: np.ndarray | None = None) -> tuple[list[int], np.ndarray, np.ndarray]:
    """The `limit` owners whose best row has the best exact score above `min_score`, best first (ties by
    `tie[owner]`), plus the owners with a row scored exactly and their best such score. A
    distinct row is scored exactly only if its upper bound reaches the threshold set by the owners' best lower
    bounds, so an owner whose best row was left out scores below owners enough to fill the list, and cannot
    make it."""
    if limit <= 0:
        return [], np.zeros(0, dtype=np.int64), np.zeros(0)
    lower, upper = g.codes.bounds(qc)
    own_mask = None if mask is None else mask[g.owners]
    thr = threshold(np.append(lower, -np.inf)[g.layout].max(axis=0, initial=-np.inf), limit, min_score, own_mask)
    cand = np.flatnonzero(upper >= thr)
    scores = np.full(len(g.codes) + 1, -np.inf)
    scores[cand] = exact_scores(g.distinct, cand, qc.q32)
    best = scores[g.layout].max(axis=0, initial=-np.inf)
    if own_mask is not None:
        best = np.where(own_mask, best, -np.inf)
    top = top_ranked(best, limit, min_score, tie[g.owners])
    scored = np.flatnonzero(best > -np.inf)
    return g.owners[top].tolist(), g.owners[scored], best[scored]


def exact_lookup(m: np.ndarray, q32: np.ndarray, known: dict[int, float], rows: Sequence[int]) -> dict[int, float]:
    """`known` completed with the exact scores of `rows` not yet in it (same arithmetic as the channels)."""
    missing = sorted({int(r) for r in rows} - known.keys())
    if missing:
        for r, s in zip(missing, exact_scores(m, np.asarray(missing, dtype=np.int64), q32).tolist(), strict=True):
            known[r] = s
    return known
