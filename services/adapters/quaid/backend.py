"""`quaid`: memrig's re-implementation of Quaid's memory (Quaid-Labs/quaid @ 9262e69), held to Quaid itself
(`quaid-real`) by `memrig fidelity quaid`. Recall is recall.py (Quaid's `recall()` restated rule by rule); this module
owns ingestion and the node table.

Ingest: one LLM extraction call per session (prompts.FACT_EXTRACTION_SYSTEM via the rig's client; the llm-mock
extracts deterministically), one fact per reply line with the ids of its source messages as evidence
(services/adapters/fact_extraction.py) — the same facts quaid-real hands to Quaid's `store()` offline. Store follows
Quaid's `store()` where it acts without an LLM: a fact needs 3+ words; Quaid's exact dedup (SHA-256 of the lower-cased,
whitespace-collapsed text) turns a repeat into a confirmation of the first node (confirmations + 1, confidence + 0.02
up to 0.95, storage strength + 0.03) whose evidence gains the repeat's ids; new nodes are `pending`, confidence 0.5,
accessed now. Not modelled: Quaid's embedding near-duplicate rejection (cosine ≥ 0.98, or ≥ 0.95 in the gray zone
without an LLM, and word-level near-identity) — a difference `memrig fidelity quaid` would show as membership.
Retrieve: recall.recall(query, limit=top_k) on the wall clock (Quaid scores recency from the last access, not the
request's reference time). `Memory.score` = the recalled (rounded) composite, non-increasing.
"""

from __future__ import annotations

import asyncio
import hashlib
import time
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
from services.adapters.quaid import recall as rc
from services.common import prompts
from services.common.types import (
    ChannelDiagnostics,
    IngestBatch,
    Memory,
    RetrieveQuery,
    RetrieveResult,
    SettleResult,
    parse_iso,
    utc,
)


def content_hash(text: str) -> str:
    """Quaid's exact-dedup key: SHA-256 of the lower-cased, whitespace-collapsed text."""
    return hashlib.sha256(" ".join(text.lower().split()).encode("utf-8")).hexdigest()


def node_id(namespace: str, text: str) -> str:
    return "q-" + hashlib.sha1(f"{namespace}\0{content_hash(text)}".encode()).hexdigest()[:16]


def format_recall(memories: list[Memory]) -> str:
    if not memories:
        return ""
    return "\n".join(["## Quaid memory recall"] + [f"- {m.text}" for m in memories])


class QuaidBackend(StoreBackedBackend):
    name = "quaid"
    description = ("Quaid re-implemented (recall.py, held to quaid-real): LLM facts with exact dedup, semantic + FTS5 "
                   "weighted RRF by intent, composite score, min-similarity 0.6, multi-pass, MMR, access tracking.")
    capabilities = (("sessions", ""), ("documents", "facts extracted from the text"), ("recall", "exact"))
    defaults: dict[str, Any] = {
        "min_similarity": rc.MIN_SIMILARITY,
        "mmr_lambda": rc.MMR_LAMBDA,
        "rrf_k": rc.RRF_K,
        "default_confidence": 0.5,
        "track_access": True,
        "llm_temperature": 0.0,
    }
    uses_embedder = True

    def __init__(self, config=None, context=None):
        super().__init__(config, context)
        self._ns: dict[str, rc.NodeStore] = {}
        self.n = {"llm_calls": 0, "facts_added": 0, "confirmations": 0, "recalls": 0}

    async def start(self) -> None:
        await asyncio.to_thread(lambda: self.context.embedder)

    def describe_config(self) -> dict[str, Any]:
        d = dict(self.config)
        d.update({
            "release": "re-implementation of quaid @ 9262e69 (recall.py)",
            "fusion_weights": {k: list(v) for k, v in rc.FUSION.items()} | {"GENERAL": [0.7, 0.3]},
            "intents": [n for n, _, _ in rc.INTENTS],
            "composite": ".60 quality + .20 recency + .15 frequency + .05 confidence + confirmations + WHEN + storage",
            "multi_pass_gate": rc.MULTI_PASS_GATE,
            "recency": f"1 - days since last access / {rc.RECENCY_DAYS} (wall clock)",
            "extraction_prompt": "prompts.FACT_EXTRACTION_SYSTEM, one call per session",
            "prompts_hash": prompts.prompts_hash(),
            "not_modelled": ["embedding near-duplicate rejection", "aliases", "HyDE", "LLM rerank", "co-session",
                             "graph traversal", "temporal validity penalties"],
        })
        return d

    # ------------------------------------------------------------------ ingest
    async def reset(self, namespace: str) -> int:
        self._ns.pop(namespace, None)
        return self.store.reset(namespace)

    async def ingest(self, namespace: str, batch: IngestBatch) -> None:
        work = new_messages(self.store.sessions.get(namespace, {}), batch.sessions)
        now = datetime.now(UTC)
        temp = self.config["llm_temperature"]
        groups = await asyncio.gather(*(extract_session_facts(self.context.llm, s, m, temp) for s, m in work),
                                      *(extract_document_facts(self.context.llm, d, now, temp) for d in batch.documents))
        self.n["llm_calls"] += len(groups)
        st = self._ns.get(namespace) or rc.NodeStore()
        facts = [f for g in groups for f in g if len(f.text.split()) >= 3]
        new = [f for f in dict.fromkeys(facts)]
        texts = list(dict.fromkeys(f.text.strip() for f in new))
        emb = self.context.embedder
        vecs = dict(zip(texts, await emb.aencode(texts), strict=True)) if texts else {}
        self._apply(namespace, st, facts, vecs)
        self.store.apply(namespace, batch)
        self._ns[namespace] = st

    def _apply(self, namespace: str, st: rc.NodeStore, facts: list[ExtractedFact], vecs: dict[str, np.ndarray]) -> None:
        by_hash = {content_hash(n.text): n for n in st.nodes}
        added: list[rc.Node] = []
        for f in facts:
            text = f.text.strip()
            h = content_hash(text)
            n = by_hash.get(h)
            if n is not None:  # Quaid's hash dedup: a confirmation of the first node
                n.confirmation_count += 1
                n.confidence = min(n.confidence + 0.02, 0.95)
                n.storage_strength = min(10.0, n.storage_strength + 0.03)
                n.evidence_ids = tuple(dict.fromkeys((*n.evidence_ids, *f.evidence_ids)))
                self.n["confirmations"] += 1
                continue
            n = rc.Node(node_id(namespace, text), text, np.asarray(vecs[text], np.float32),
                        utc(f.created_at).isoformat(), datetime.now(), f.session_id, tuple(f.evidence_ids),
                        confidence=float(self.config["default_confidence"]))
            by_hash[h] = n
            added.append(n)
        st.add(added)
        self.n["facts_added"] += len(added)

    def adopt_nodes(self, namespace: str, nodes: list[dict[str, Any]], evidence: dict[str, list[str]],
                    batch: IngestBatch) -> None:
        """Index exactly the nodes Quaid stored (`quaid-real`'s `nodes` dump: id, text, embedding, timestamps, access
        and confirmation counts), so `memrig fidelity quaid` compares recall logic on one store."""
        import base64

        st = rc.NodeStore()
        out = []
        for d in nodes:
            vec = np.frombuffer(base64.b64decode(d["embedding"]), "<f4").copy() if d.get("embedding") else None
            if vec is None:
                continue
            acc = datetime.fromisoformat(d["accessed_at"]) if d.get("accessed_at") else datetime.now()
            out.append(rc.Node(d["id"], d["name"], vec, d.get("created_at"), acc.replace(tzinfo=None),
                               d.get("session_id") or "", tuple(evidence.get(d["id"], ())), d.get("type") or "Fact",
                               d.get("status") or "pending", float(d.get("confidence") or 0.0),
                               int(d.get("access_count") or 0), int(d.get("confirmation_count") or 0),
                               float(d.get("storage_strength") or 0.0), d.get("knowledge_type") or "fact",
                               d.get("keywords"), d.get("valid_from"), d.get("valid_until")))
        st.add(out)
        self._ns[namespace] = st
        self.store.apply(namespace, batch)

    async def settle(self, namespace: str, timeout_s: float) -> SettleResult:
        st = self.store.stats(namespace)
        n = self.items_in(namespace) or 0
        return SettleResult(settled=True, items_indexed=n, counts={"facts": n, "sessions": st.sessions})

    # ------------------------------------------------------------------ recall
    def recall_sync(self, namespace: str, query: str, limit: int) -> list[rc.Found]:
        st = self._ns.get(namespace)
        if st is None or not st.nodes:
            return []
        emb = self.context.embedder
        return rc.recall(st, query, limit, emb.encode_query,
                         min_similarity=float(self.config["min_similarity"]),
                         track=bool(self.config["track_access"]))

    async def retrieve(self, namespace: str, query: RetrieveQuery) -> RetrieveResult:
        t0 = time.perf_counter_ns()
        found = await asyncio.to_thread(self.recall_sync, namespace, query.query, query.top_k)
        self.n["recalls"] += 1
        memories = []
        for f in found:
            n = f.node
            created = parse_iso(n.created_at, "created_at") if n.created_at else None
            memories.append(Memory(
                id=n.id, text=n.text, score=f.score, kind="fact", created_at=utc(created) if created else None,
                source=f"session:{n.session_id}", evidence_ids=list(n.evidence_ids),
                channel_scores={"composite": f.score, "quality": f.channel.get("quality", 0.0)},
                attributes={"multi_pass": str(f.multi_pass), "access_count": str(n.access_count)}))
        return RetrieveResult(memories=memories, formatted_context=format_recall(memories), channels=[
            ChannelDiagnostics("recall", len(memories), time.perf_counter_ns() - t0, "Quaid recall, re-implemented")])

    # ------------------------------------------------------------------ introspection
    def items_in(self, namespace: str) -> int:
        return len(self._ns[namespace].nodes) if namespace in self._ns else 0
