"""The retrieval pipeline over one tenant snapshot.

fast: BM25 + semantic + question matching + temporal -> RRF (k=60) -> token-budget packing.
full: the same channels + graph spreading activation over visible MENTIONS edges -> RRF -> rerank
(deterministic lexical+semantic cross-score, superseded facts demoted) -> packing.
Blocking numpy work: run `search` in a thread.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import numpy as np

from services.cortex_mock import ranking
from services.cortex_mock.quantized import QueryCodes, exact_lookup, top_groups, top_rows
from services.cortex_mock.snapshot import Fact, TenantIndex
from services.cortex_mock.temporal import find_time_window, proximity_all
from services.cortex_mock.text import content_tokens

CHANNEL_DEPTH = 50  # candidates each channel contributes to fusion
SEMANTIC_MIN = 0.2
QUESTION_MIN = 0.3
TEMPORAL_MIN = 0.05
GRAPH_SEEDS = 10
GRAPH_DECAY = 0.5
RERANK_DEPTH = 30


@dataclass
class SearchParams:
    query: str
    top_k: int = 5
    mode: str = "full"
    reference: datetime | None = None
    debug: bool = False
    token_budget: int = 2000
    session_filter: str | None = None
    min_confidence: float | None = None
    fact_type: str | None = None
    include_origins: list[str] | None = None
    exclude_origins: list[str] | None = None
    user_id: str | None = None
    derivation_mode: str | None = None


@dataclass
class SearchOutput:
    results: list[dict[str, Any]]
    coverage: str
    channels_used: list[str]
    timings_ms: dict[str, float]
    debug: dict[str, Any] | None = None
    relevance: list[float] = field(default_factory=list)


def _mask(idx: TenantIndex, p: SearchParams) -> np.ndarray:
    n = len(idx.facts)
    m = idx.user_mask(p.user_id).copy() if p.user_id else np.ones(n, dtype=bool)
    if not (p.session_filter or p.min_confidence is not None or p.fact_type or p.include_origins
            or p.exclude_origins or p.derivation_mode):
        return m
    for i in np.flatnonzero(m).tolist():
        f = idx.facts[i]
        origin = f.metadata.get("source_origin")
        sessions = f.metadata.get("session_ids") or ([f.session_id] if f.session_id else [])
        if p.session_filter and not any(s.startswith(p.session_filter) for s in sessions):
            m[i] = False
        elif p.min_confidence is not None and f.confidence < p.min_confidence:
            m[i] = False
        elif p.fact_type and p.fact_type not in (f.fact_type, f.source):
            m[i] = False
        elif p.include_origins and origin not in p.include_origins:
            m[i] = False
        elif p.exclude_origins and origin in p.exclude_origins:
            m[i] = False
        elif p.derivation_mode and f.metadata.get("derivation_mode") != p.derivation_mode:
            m[i] = False
    return m


def empty_output(p: SearchParams, window_found: bool = False) -> SearchOutput:
    """The answer for a tenant with no facts (or one that was never written)."""
    return SearchOutput([], "none", ["bm25", "semantic", "question"] + (["temporal"] if window_found else []),
                        {}, {"channels": {}, "fusion": {"candidates": 0}} if p.debug else None)


def _masked(scores: np.ndarray, mask: np.ndarray) -> np.ndarray:
    # No filter (the common case): the scores as they are, not a 10k-element copy equal to them.
    return scores if mask.all() else np.where(mask, scores, -np.inf)


def spread_activation(n_facts: int, n_entities: int, m_fact: np.ndarray, m_ent: np.ndarray,
                      seed_act: np.ndarray, entity_boost: np.ndarray | None = None,
                      decay: float = GRAPH_DECAY) -> np.ndarray:
    """Two hops fact -> entity -> fact over MENTIONS edges. Each hop splits a node's activation evenly over its
    edges and multiplies by `decay`; query-named entities get `entity_boost` added before the second hop."""
    if m_fact.size == 0:
        return np.zeros(n_facts)
    deg_f = np.bincount(m_fact, minlength=n_facts).astype(np.float64)
    deg_e = np.bincount(m_ent, minlength=n_entities).astype(np.float64)
    ent_act = np.bincount(m_ent, weights=seed_act[m_fact] / np.maximum(deg_f[m_fact], 1.0),
                          minlength=n_entities) * decay
    if entity_boost is not None:
        ent_act = ent_act + entity_boost
    return np.bincount(m_fact, weights=ent_act[m_ent] / np.maximum(deg_e[m_ent], 1.0), minlength=n_facts) * decay


def search(idx: TenantIndex, qvec: np.ndarray | QueryCodes, p: SearchParams, now_ts: float | None = None) -> SearchOutput:
    """`qvec`: the query embedding, or its QueryCodes (the engine keeps them with its query-vector cache)."""
    now_ts = time.time() if now_ts is None else now_ts
    t: dict[str, float] = {}
    ref = p.reference or datetime.fromtimestamp(now_ts, UTC)
    n = len(idx.facts)
    window = find_time_window(p.query, ref)
    channels: dict[str, list[int]] = {}
    chan_scores: dict[str, Any] = {}  # per channel: scores by fact position (an array, or a dict of those computed)
    if n == 0:
        return empty_output(p, window is not None)
    mask = _mask(idx, p)
    tie = idx.tie_rank()
    q_tokens = content_tokens(p.query)

    t0 = time.perf_counter()
    bm = ranking.bm25_scores(q_tokens, idx.postings, idx.doc_len, avgdl=idx.avg_doc_len())
    channels["bm25"] = ranking.top_ranked(_masked(bm, mask), CHANNEL_DEPTH, tie=tie)
    chan_scores["bm25"] = bm
    t["bm25"] = time.perf_counter() - t0

    # Semantic and question channels: exact top lists through the int8 copies (quantized.py); only rows that can
    # make a list are scored exactly, and `sem` fills in the others a later stage reads.
    t0 = time.perf_counter()
    qc = qvec if isinstance(qvec, QueryCodes) else QueryCodes.of(qvec)
    only = None if mask.all() else mask
    channels["semantic"], rows, vals = top_rows(idx.emb, idx.emb_codes(), qc, CHANNEL_DEPTH, SEMANTIC_MIN, tie, only)
    sem: dict[int, float] = dict(zip(rows.tolist(), vals.tolist(), strict=True))
    chan_scores["semantic"] = sem
    t["semantic"] = time.perf_counter() - t0

    t0 = time.perf_counter()
    if idx.q_owner.size:
        channels["question"], owners, best = top_groups(idx.question_rows(), qc, CHANNEL_DEPTH, QUESTION_MIN, tie,
                                                        only)
        if p.debug:  # read only by the debug view, and it often holds every owner: not built per request
            chan_scores["question"] = dict(zip(owners.tolist(), best.tolist(), strict=True))
    else:
        channels["question"], chan_scores["question"] = [], {}
    t["question"] = time.perf_counter() - t0

    if window is not None:
        t0 = time.perf_counter()
        prox = proximity_all(*idx.occurred_us(), window, ref)  # = proximity() per fact, vectorised
        tmask = mask
        if window.kind == "recency":  # "current"/"latest" orders matching facts by age; it selects nothing itself
            pool = np.zeros(n, dtype=bool)
            for ch in ("bm25", "semantic", "question"):
                pool[channels[ch]] = True
            tmask = mask & pool
        channels["temporal"] = ranking.top_ranked(_masked(prox, tmask), CHANNEL_DEPTH, TEMPORAL_MIN, tie)
        chan_scores["temporal"] = prox
        t["temporal"] = time.perf_counter() - t0

    t0 = time.perf_counter()
    order, fused_scores = ranking.fused_order(*ranking.rrf_fuse(channels.values()), tie)
    if p.mode == "full":
        tg = time.perf_counter()
        seed_act = np.zeros(n)
        n_lists = len(channels)
        for d, f in zip(order[:GRAPH_SEEDS], fused_scores[:GRAPH_SEEDS], strict=True):
            seed_act[d] = ranking.rrf_normalised(f, n_lists)
        m_fact, m_ent = idx.visible_mentions(now_ts)
        boost = np.zeros(len(idx.entities))
        qset = set(q_tokens)
        for e in idx.entities:
            etoks = content_tokens(e.name)
            if etoks and set(etoks) <= qset:
                boost[idx.entity_by_key[e.key]] = 1.0
        act = spread_activation(n, len(idx.entities), m_fact, m_ent, seed_act, boost)
        channels["graph"] = ranking.top_ranked(_masked(act, mask), CHANNEL_DEPTH, 1e-9, tie)
        chan_scores["graph"] = act
        order, fused_scores = ranking.fused_order(*ranking.rrf_fuse(channels.values()), tie)
        t["graph"] = time.perf_counter() - tg
    fused = dict(zip(order, fused_scores, strict=True))  # best first; ties by content then id, never by arrival
    n_lists = len(channels)
    t["fusion"] = time.perf_counter() - t0 - t.get("graph", 0.0)

    # Lexical coverage ignores the time phrase itself ("current", "last week") so it measures topic match.
    cov_tokens = [tok for tok in q_tokens if not window or tok not in set(content_tokens(window.phrase))] or q_tokens

    def relevance(d: int) -> float:
        return ranking.cross_score(ranking.lexical_coverage(cov_tokens, idx.facts[d].tokens), sem[d])

    pack_window = max(p.top_k * 4, 20)  # packing considers this many of the ranked facts
    t0 = time.perf_counter()
    demoted = 0
    if p.mode == "full":
        head = order[:max(RERANK_DEPTH, p.top_k * 3)]
        exact_lookup(idx.emb, qc.q32, sem, head)
        scored = []
        for d in head:
            sup = idx.facts[d].superseded_by is not None
            demoted += sup
            s = ranking.demote(relevance(d), sup)
            scored.append((s + 0.01 * ranking.rrf_normalised(fused[d], n_lists), d))
        scored.sort(key=lambda x: (-x[0], tie[x[1]]))
        ranked = [(d, min(1.0, s)) for s, d in scored]
    else:  # only the packing window is ever read
        ranked = [(d, ranking.rrf_normalised(fused[d], n_lists)) for d in order[:pack_window]]
    t["rerank"] = time.perf_counter() - t0

    t0 = time.perf_counter()
    window_items = ranked[:pack_window]
    counts = idx.token_counts()  # stored at ingest
    tokens = [int(counts[d]) for d, _ in window_items]
    kept, used = ranking.pack(tokens, p.token_budget, p.top_k)
    final = [window_items[i] for i in kept]
    t["packing"] = time.perf_counter() - t0

    exact_lookup(idx.emb, qc.q32, sem, [d for d, _ in final])
    rel = [relevance(d) for d, _ in final]
    top = (final[0][1] if p.mode == "full" else rel[0]) if final else None
    results = [_result(idx, d, s, r) for (d, s), r in zip(final, rel, strict=True)]
    timings = {k: round(v * 1000.0, 3) for k, v in t.items()}
    dbg = None
    if p.debug:
        dbg = {
            "channels": {ch: {"candidates": len(lst), "top": [
                {"node_id": idx.facts[d].id, "rank": r + 1, "score": round(float(chan_scores[ch][d]), 6)}
                for r, d in enumerate(lst[:10])]} for ch, lst in channels.items()},
            "fusion": {"method": "rrf", "k": ranking.RRF_K, "lists": n_lists, "candidates": len(fused),
                       "in_multiple_channels": sum(1 for d in fused if sum(d in set(lst) for lst in channels.values()) > 1)},
            "rerank": {"applied": p.mode == "full", "candidates": min(len(order), max(RERANK_DEPTH, p.top_k * 3))
                       if p.mode == "full" else 0, "superseded_demoted": demoted},
            "temporal": window.as_dict() if window else None,
            "packing": {"budget_tokens": p.token_budget, "used_tokens": used, "returned": len(final),
                        "skipped_over_budget": sum(1 for i in range((kept[-1] + 1) if kept else 0)
                                                   if i not in set(kept))},
            "timings_ms": timings,
            "index": {"rev": idx.rev, "facts": n, "questions": int(idx.q_owner.size), "entities": len(idx.entities)},
        }
    return SearchOutput(results, ranking.coverage_label(top), list(channels), timings, dbg, rel)


def _result(idx: TenantIndex, d: int, score: float, rel: float) -> dict[str, Any]:
    f = idx.facts[d]
    meta = f.result_meta
    if meta is None:  # the same for every request that returns this fact: built once (responses only read it)
        meta = f.result_meta = result_metadata(f)
    return {"node_id": f.id, "type": "FACT", "content": f.content, "score": round(float(score), 6),
            "source": f.source, "confidence": round(f.confidence, 4), "metadata": meta,
            "query_alignment": round(float(rel), 4)}


def result_metadata(f: Fact) -> dict[str, Any]:
    """A retrieve result's `metadata` (the plugin's RetrieveResultMetadata) for one fact."""
    md = f.metadata
    meta = {
        "speaker": md.get("speaker", f.speaker), "fact_type": f.fact_type, "entity_refs": f.entity_refs,
        "occurred_at": f.occurred_iso, "session_id": f.session_id,
        "message_ids": md.get("message_ids", []), "session_ids": md.get("session_ids", []),
        "mention_count": md.get("mention_count", 1), "superseded": f.superseded_by is not None,
        "superseded_by": f.superseded_by,
    }
    # Optional strings in the plugin's RetrieveResultMetadata (`source_origin?: string`): absent, never null.
    for k in ("source_origin", "derivation_mode", "source_app"):
        if isinstance(md.get(k), str):
            meta[k] = md[k]
    if f.source == "reflection":
        meta["source_fact_ids"] = md.get("source_fact_ids", [])
    return meta
