"""`quaid`: Quaid's recall pipeline as a memrig reference backend (../shared/reference/peers.md §3; Quaid-Labs/quaid @
9262e69, `modules/quaid/datastore/memorydb/memory_graph.py`: `search_hybrid`, `_get_fusion_weights`,
`_compute_composite_score`, `recall`). Scoring lives in scoring.py as pure functions; this module owns storage,
ingestion and the orchestration.

Memories are facts. Ingestion is offline: one LLM call per session (prompts.FACT_EXTRACTION_SYSTEM; the llm-mock
extracts deterministically), one fact per reply line, each keeping the ids of its source messages as evidence
(services/adapters/fact_extraction.py). Facts are embedded with the rig's shared embedder (numpy matrix per
namespace) and indexed in SQLite FTS5 (fts.py, per-namespace tables).

`recall(query, limit)` with limit = the request's top_k:
1. intent = classify_intent(query) → fusion weights (semantic, fts);
2. hybrid search with limit×3: semantic (cosine) and FTS each return (limit×3)×2 = limit×6 hits; weighted RRF
   `w/(60 + rank)`; the fused list is cut to limit×3;
3. relevance = the cosine of a semantic hit; an FTS-only hit gets quality max(0.4, 0.7 − 0.02·rank);
4. composite = .60·relevance + .20·recency (linear over 90 days, age at the request's reference time)
   + .15·log(1+access_count)/log 51 + .05·confidence; sorted by composite;
5. filter relevance ≥ min_similarity (0.60), broadening to ×0.75 then ×0.5 when nothing passes;
6. MMR (λ 0.7, embedding cosine, the top result always kept) down to `limit`;
7. the returned facts' access counts go up by one (Quaid tracks accesses per memory; later recalls see it).

Not modelled (documented choices; peers.md lists them but the rig has no data or switch for them): gateway
metadata stripping and alias resolution (no aliases), the Ollama health check (the embedder is local), HyDE (off by
default upstream), the cross-encoder/LLM rerank (optional upstream; off), confirmation/storage bonuses, the
temporal-validity and future-fact penalties (facts carry no validity window), the temporal-contiguity co-session
bonus and the beam graph traversal (no graph edges are extracted). Missing facts chosen here: the intent
classifier's rules, 1-based RRF ranks, 0-based FTS-only ranks, log(1+n) for the frequency term, the filter on
relevance (not the composite), the broadening multiples, default confidence 0.5, and the FTS query form.
`Memory.score` is the running minimum of the composite down the list (MMR can place a lower score first; the
contract wants non-increasing scores); the composite itself is `channel_scores["composite"]`.
"""

from __future__ import annotations

import asyncio
import hashlib
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import numpy as np

from services.adapters.base import StoreBackedBackend
from services.adapters.fact_extraction import (
    ExtractedFact,
    extract_document_facts,
    extract_session_facts,
    new_messages,
)
from services.adapters.quaid import scoring
from services.adapters.quaid.fts import FTS_TOKENIZER, FactFts
from services.common import prompts
from services.common.types import (
    ChannelDiagnostics,
    IngestBatch,
    Memory,
    RetrieveQuery,
    RetrieveResult,
    SettleResult,
    utc,
)


@dataclass
class Fact:
    id: str
    text: str
    evidence_ids: tuple[str, ...]
    created_at: datetime
    session_id: str
    confidence: float
    access_count: int = 0


@dataclass
class _Namespace:
    facts: list[Fact] = field(default_factory=list)
    vecs: np.ndarray | None = None
    pos: dict[str, int] = field(default_factory=dict)  # fact id → index


@dataclass
class Candidate:
    fact: int  # index into the namespace's facts
    rrf: float
    semantic_rank: int | None
    fts_rank: int | None
    cosine: float
    relevance: float
    recency: float = 0.0
    frequency: float = 0.0
    composite: float = 0.0


def fact_id(namespace: str, f: ExtractedFact) -> str:
    return "q-" + hashlib.sha1(f"{namespace}\0{f.session_id}\0{f.text}".encode()).hexdigest()[:16]


def format_recall(memories: list[Memory]) -> str:
    if not memories:
        return ""
    lines = ["## Quaid memory recall"]
    for m in memories:
        day = m.created_at.date().isoformat() if m.created_at else "undated"
        lines.append(f"- [{day}] {m.text}")
    return "\n".join(lines)


class QuaidBackend(StoreBackedBackend):
    name = "quaid"
    description = ("Quaid-style recall: LLM-extracted facts, semantic + FTS5 weighted RRF by intent, composite "
                   "score, min-similarity filter with broadening, embedding MMR.")
    capabilities = (("sessions", ""), ("documents", "facts extracted from the text"), ("recall", "exact"),
                    ("reference_time", "recency age"))
    defaults: dict[str, Any] = {
        "rrf_k": scoring.RRF_K,
        "hybrid_multiplier": 3,  # recall() runs the hybrid search with limit*3
        "channel_multiplier": 2,  # search_hybrid asks each channel for limit*2
        "min_similarity": scoring.MIN_SIMILARITY,  # config retrieval.min_similarity, fallback 0.60
        "mmr_lambda": scoring.MMR_LAMBDA,
        "recency_window_days": scoring.RECENCY_WINDOW_DAYS,
        "default_confidence": 0.5,
        "track_access": True,
        "llm_temperature": 0.0,
    }
    uses_embedder = True

    def __init__(self, config=None, context=None):
        super().__init__(config, context)
        self._ns: dict[str, _Namespace] = {}
        self._fts: FactFts | None = None
        self.n = {"llm_calls": 0, "facts_added": 0, "recalls": 0, "broadened": 0}

    @property
    def fts(self) -> FactFts:
        if self._fts is None:
            self._fts = FactFts()
        return self._fts

    async def start(self) -> None:
        _ = self.fts
        await asyncio.to_thread(lambda: self.context.embedder)

    async def close(self) -> None:
        if self._fts is not None:
            self._fts.close()
            self._fts = None

    def describe_config(self) -> dict[str, Any]:
        d = dict(self.config)
        d.update({
            "fusion_weights": {k: list(v) for k, v in scoring.FUSION_WEIGHTS.items()},
            "intent_rules": {k: v for k, v in scoring.INTENT_RULES},
            "composite_weights": dict(scoring.COMPOSITE_WEIGHTS),
            "frequency": "min(1, log(1+access_count)/log(51))",
            "fts_only_quality": "max(0.4, 0.7 - 0.02*rank0)",
            "broadening_passes": list(scoring.BROADENING_PASSES),
            "filter_on": "relevance (cosine; FTS-only quality)",
            "limit": "request top_k (Quaid recall default 5)",
            "fts_tokenizer": FTS_TOKENIZER,
            "fts_query": "quoted content tokens OR-joined",
            "extraction_prompt": "prompts.FACT_EXTRACTION_SYSTEM, one call per session",
            "prompts_hash": prompts.prompts_hash(),
            "not_modelled": ["alias resolution", "HyDE", "rerank", "confirmation/storage bonuses",
                             "temporal validity / future-fact penalties", "co-session bonus", "graph traversal"],
        })
        return d

    # ------------------------------------------------------------------ ingest
    async def _extract(self, s, msgs) -> list[ExtractedFact]:
        self.n["llm_calls"] += 1
        return await extract_session_facts(self.context.llm, s, msgs, self.config["llm_temperature"])

    async def _extract_doc(self, d, now) -> list[ExtractedFact]:
        self.n["llm_calls"] += 1
        return await extract_document_facts(self.context.llm, d, now, self.config["llm_temperature"])

    async def reset(self, namespace: str) -> int:
        self._ns.pop(namespace, None)
        await asyncio.to_thread(self.fts.drop, namespace)
        return self.store.reset(namespace)

    async def ingest(self, namespace: str, batch: IngestBatch) -> None:
        # Stage (LLM extraction, embeddings) before touching state; the FTS insert is one transaction; then commit.
        work = new_messages(self.store.sessions.get(namespace, {}), batch.sessions)
        now = datetime.now(UTC)
        groups = await asyncio.gather(*(self._extract(s, msgs) for s, msgs in work),
                                      *(self._extract_doc(d, now) for d in batch.documents))
        st = self._ns.get(namespace) or _Namespace()
        new: list[Fact] = []
        seen = set(st.pos)
        for g in groups:
            for f in g:
                fid = fact_id(namespace, f)
                if fid in seen:
                    continue
                seen.add(fid)
                new.append(Fact(fid, f.text, f.evidence_ids, utc(f.created_at), f.session_id,
                                float(self.config["default_confidence"])))
        emb = self.context.embedder
        vecs = (await emb.aencode([f.text for f in new])) if new else np.zeros((0, emb.dim), np.float32)
        if new:
            await asyncio.to_thread(self.fts.add, namespace, [(f.id, f.text) for f in new])
        # Commit (synchronous from here).
        self.store.apply(namespace, batch)
        st.facts = st.facts + new
        st.vecs = vecs if st.vecs is None else np.vstack([st.vecs, vecs])
        st.pos = {**st.pos, **{f.id: len(st.facts) - len(new) + i for i, f in enumerate(new)}}
        self._ns[namespace] = st
        self.n["facts_added"] += len(new)

    async def settle(self, namespace: str, timeout_s: float) -> SettleResult:
        st = self.store.stats(namespace)
        n = len(self._ns[namespace].facts) if namespace in self._ns else 0
        return SettleResult(settled=True, items_indexed=n, counts={"facts": n, "sessions": st.sessions})

    # ------------------------------------------------------------------ recall
    def search(self, namespace: str, query: str, limit: int, qvec: np.ndarray,
               ref: datetime) -> tuple[list[Candidate], list[ChannelDiagnostics], dict[str, Any]]:
        """search_hybrid + composite + filter + MMR (synchronous; run it off the event loop)."""
        st = self._ns.get(namespace)
        if st is None or not st.facts:
            return [], [], {}
        cfg = self.config
        intent = scoring.classify_intent(query)
        w_sem, w_fts = scoring.fusion_weights(intent)
        pool = limit * int(cfg["hybrid_multiplier"])
        per_channel = pool * int(cfg["channel_multiplier"])
        t0 = time.perf_counter_ns()
        cos = st.vecs @ qvec
        order = np.argsort(-cos, kind="stable")[:per_channel]
        sem_ids = [st.facts[i].id for i in order]
        t1 = time.perf_counter_ns()
        fts_ids = self.fts.search(namespace, query, per_channel)
        t2 = time.perf_counter_ns()
        fused = scoring.rrf_fuse(sem_ids, fts_ids, w_sem, w_fts, int(cfg["rrf_k"]))[:pool]
        cands: list[Candidate] = []
        for h in fused:
            i = st.pos[h.id]
            c = float(cos[i])
            rel = c if h.semantic_rank is not None else scoring.fts_only_quality(h.fts_rank - 1)
            cands.append(Candidate(i, h.rrf, h.semantic_rank, h.fts_rank, c, rel))
        for c in cands:
            f = st.facts[c.fact]
            age_days = (ref - f.created_at).total_seconds() / 86400.0
            c.recency = scoring.recency_score(age_days, float(cfg["recency_window_days"]))
            c.frequency = scoring.frequency_score(f.access_count)
            c.composite = scoring.composite_score(c.relevance, c.recency, c.frequency, f.confidence)
        cands.sort(key=lambda c: -c.composite)  # stable: RRF order on ties
        kept, threshold, npass = scoring.broaden_filter([c.relevance for c in cands], float(cfg["min_similarity"]))
        cands = [cands[i] for i in kept]
        picked = scoring.mmr_select([c.composite for c in cands], st.vecs[[c.fact for c in cands]], limit,
                                    float(cfg["mmr_lambda"])) if cands else []
        out = [cands[i] for i in picked]
        diags = [ChannelDiagnostics("semantic", len(sem_ids), t1 - t0, f"cosine, weight {w_sem}"),
                 ChannelDiagnostics("fts", len(fts_ids), t2 - t1, f"FTS5 bm25, weight {w_fts}"),
                 ChannelDiagnostics("filter", len(kept), 0, f"pass {npass}, relevance >= {threshold:.3f}")]
        return out, diags, {"intent": intent, "pass": npass, "threshold": threshold}

    async def retrieve(self, namespace: str, query: RetrieveQuery) -> RetrieveResult:
        st = self._ns.get(namespace)
        if st is None or not st.facts:
            return RetrieveResult()
        qvec = (await self.context.embedder.aencode([query.query]))[0]
        ref = utc(query.reference_time) if query.reference_time else datetime.now(UTC)
        picked, diags, info = await asyncio.to_thread(self.search, namespace, query.query, query.top_k, qvec, ref)
        self.n["recalls"] += 1
        self.n["broadened"] += int(info.get("pass", 1) > 1)
        memories = []
        ceiling = float("inf")
        for c in picked:
            f = st.facts[c.fact]
            ceiling = min(ceiling, c.composite)
            memories.append(Memory(
                id=f.id, text=f.text, score=ceiling, kind="fact", created_at=f.created_at,
                source=f"session:{f.session_id}", evidence_ids=list(f.evidence_ids),
                channel_scores={"composite": c.composite, "relevance": c.relevance, "semantic": c.cosine,
                                "rrf": c.rrf, "recency": c.recency, "frequency": c.frequency},
                attributes={"intent": info["intent"], "semantic_rank": str(c.semantic_rank or ""),
                            "fts_rank": str(c.fts_rank or ""), "filter_pass": str(info["pass"]),
                            "access_count": str(f.access_count)},
            ))
        if self.config["track_access"]:
            for c in picked:
                st.facts[c.fact].access_count += 1
        return RetrieveResult(memories=memories, channels=diags, formatted_context=format_recall(memories))

    # ------------------------------------------------------------------ introspection
    def items_in(self, namespace: str) -> int:
        return len(self._ns[namespace].facts) if namespace in self._ns else 0
