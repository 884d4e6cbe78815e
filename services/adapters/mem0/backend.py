"""`mem0`: Mem0 OSS v3's `Memory` API as a memrig reference backend (mem0ai/mem0 @ 8d5b786,
`mem0/memory/main.py`).

- Ingest = `Memory.add(messages, user_id=namespace, infer=True, metadata=...)` once per session with the
  session's new messages. `infer=True` → LLM fact extraction (the rig's prompts.FACT_EXTRACTION_SYSTEM through the
  LLM client; Mem0's own extraction prompt is not reproduced), every fact ADDed: v3 is ADD-only, no UPDATE or
  DELETE, so a fact that restates or contradicts an older one is simply another memory. `infer=False` → raw
  storage, one memory per message. Each memory keeps Mem0's record shape (id, memory, hash = md5 of the text,
  created_at, user_id, metadata) with the source message ids in `metadata["evidence_ids"]`
  (services/adapters/fact_extraction.py attributes each fact to its messages). Documents are added like a
  one-message conversation and cite the document's evidence ids.
- Retrieve = `Memory.search(query, top_k=<request top_k>, filters={"user_id": namespace}, threshold=0.1,
  rerank=False)`: the embedding cosine of query and memory (the default vector store's cosine score), memories
  scoring below `threshold` dropped, the best `top_k` in descending score. No rerank (Mem0's default).

Choices where that API leaves the behaviour open (documented in README.md): memory ids are uuid5 of (namespace,
session, text) rather than uuid4 (reproducible runs); no deduplication of identical facts (ADD-only; a repeat keeps
its own evidence); `score >= threshold` keeps a memory; ties in score keep insertion order; `formatted_context` lists
the memories as `- YYYY-MM-DD: memory`, as Mem0's LoCoMo evaluation rendered "timestamp: memory" lines.
"""

from __future__ import annotations

import asyncio
import hashlib
import time
import uuid
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

SEARCH_TOP_K_DEFAULT = 20  # Memory.search(top_k=20)
SEARCH_THRESHOLD_DEFAULT = 0.1  # Memory.search(threshold=0.1)
_ID_NAMESPACE = uuid.UUID("6d656d30-0000-4000-8000-6d656d726967")  # fixed: reproducible memory ids


@dataclass
class Mem0Record:
    id: str
    memory: str
    hash: str
    created_at: datetime
    user_id: str
    metadata: dict[str, Any] = field(default_factory=dict)


@dataclass
class _Scope:
    records: list[Mem0Record] = field(default_factory=list)
    vecs: np.ndarray | None = None


def search_ranked(scores: np.ndarray, top_k: int, threshold: float | None) -> list[int]:
    """Mem0's search over one scope: indices of the memories with score >= threshold, best first, at most top_k
    (stable: equal scores keep insertion order)."""
    if top_k <= 0 or len(scores) == 0:
        return []
    order = np.argsort(-scores, kind="stable")
    if threshold is not None:
        order = order[scores[order] >= threshold]
    return [int(i) for i in order[:top_k]]


def make_record(namespace: str, f: ExtractedFact, kind: str, n: int) -> Mem0Record:
    rid = str(uuid.uuid5(_ID_NAMESPACE, f"{namespace}\0{f.session_id}\0{n}\0{f.text}"))
    return Mem0Record(rid, f.text, hashlib.md5(f.text.encode()).hexdigest(), utc(f.created_at), namespace,
                      {"evidence_ids": list(f.evidence_ids), "session_id": f.session_id, "source": kind})


def format_memories(memories: list[Memory]) -> str:
    if not memories:
        return ""
    lines = ["## Mem0 memories"]
    for m in memories:
        day = m.created_at.date().isoformat() if m.created_at else "undated"
        lines.append(f"- {day}: {m.text}")
    return "\n".join(lines)


class Mem0Backend(StoreBackedBackend):
    name = "mem0"
    description = "Mem0 OSS v3: LLM fact extraction, ADD-only; search = embedding cosine, threshold 0.1, no rerank."
    capabilities = (("sessions", ""), ("documents", "facts extracted from the text"), ("recall", "exact"))
    defaults: dict[str, Any] = {
        "infer": True,  # add(infer=True): LLM fact extraction; False: raw storage of each message
        "threshold": SEARCH_THRESHOLD_DEFAULT,
        "top_k_default": SEARCH_TOP_K_DEFAULT,  # recorded: the rig always passes its own top_k
        "rerank": False,  # search(rerank=False) is Mem0's default; no reranker is modelled
        "llm_temperature": 0.0,
    }
    uses_embedder = True

    def configure(self, overrides: dict[str, Any]) -> dict[str, Any]:
        cfg = super().configure(overrides)
        if cfg["rerank"]:
            raise ValueError("mem0: rerank=True is not modelled (Mem0's default is rerank=False)")
        if not isinstance(cfg["infer"], bool):
            raise ValueError("mem0: infer must be true or false")
        if not 0.0 <= float(cfg["threshold"]) <= 1.0:
            raise ValueError("mem0: threshold must be in [0, 1]")
        return cfg

    def __init__(self, config=None, context=None):
        super().__init__(config, context)
        self._scopes: dict[str, _Scope] = {}
        self.n = {"llm_calls": 0, "memories_added": 0, "searches": 0}

    async def start(self) -> None:
        await asyncio.to_thread(lambda: self.context.embedder)

    def describe_config(self) -> dict[str, Any]:
        d = dict(self.config)
        d.update({
            "api": "Memory.add(messages, user_id=ns, infer) / Memory.search(query, top_k, filters={'user_id': ns}, "
                   "threshold, rerank=False)",
            "algorithm": "v3 ADD-only (no UPDATE/DELETE)",
            "score": "embedding cosine (vector store score)",
            "top_k": "request top_k (Mem0 default 20)",
            "extraction_prompt": "prompts.FACT_EXTRACTION_SYSTEM, one add() per session" if self.config["infer"]
                                 else "none (infer=False: one memory per message)",
            "memory_id": "uuid5(namespace, session, n, text)",
            "dedup": "none",
            "prompts_hash": prompts.prompts_hash(),
        })
        return d

    # ------------------------------------------------------------------ add
    async def _add_session(self, s, msgs) -> list[ExtractedFact]:
        if not self.config["infer"]:
            return [ExtractedFact(m.content, (m.id,), m.ts or s.started_at, s.session_id) for m in msgs]
        self.n["llm_calls"] += 1
        return await extract_session_facts(self.context.llm, s, msgs, self.config["llm_temperature"])

    async def _add_document(self, d, now) -> list[ExtractedFact]:
        if not self.config["infer"]:
            return [ExtractedFact(d.text, tuple(d.evidence()), d.created_at or now, f"doc:{d.id}")]
        self.n["llm_calls"] += 1
        return await extract_document_facts(self.context.llm, d, now, self.config["llm_temperature"])

    async def reset(self, namespace: str) -> int:
        self._scopes.pop(namespace, None)
        return self.store.reset(namespace)

    async def ingest(self, namespace: str, batch: IngestBatch) -> None:
        work = new_messages(self.store.sessions.get(namespace, {}), batch.sessions)
        now = datetime.now(UTC)
        groups = await asyncio.gather(*(self._add_session(s, msgs) for s, msgs in work),
                                      *(self._add_document(d, now) for d in batch.documents))
        scope = self._scopes.get(namespace) or _Scope()
        base = len(scope.records)
        kind = "inferred" if self.config["infer"] else "raw"
        new = [make_record(namespace, f, kind, base + i)
               for i, f in enumerate(f for g in groups for f in g)]
        emb = self.context.embedder
        vecs = (await emb.aencode([r.memory for r in new])) if new else np.zeros((0, emb.dim), np.float32)
        # Commit (synchronous).
        self.store.apply(namespace, batch)
        scope.records = scope.records + new
        scope.vecs = vecs if scope.vecs is None else np.vstack([scope.vecs, vecs])
        self._scopes[namespace] = scope
        self.n["memories_added"] += len(new)

    async def settle(self, namespace: str, timeout_s: float) -> SettleResult:
        n = len(self._scopes[namespace].records) if namespace in self._scopes else 0
        return SettleResult(settled=True, items_indexed=n,
                            counts={"memories": n, "sessions": self.store.stats(namespace).sessions})

    # ------------------------------------------------------------------ search
    def search(self, query_vec: np.ndarray, top_k: int, filters: dict[str, str]) -> list[tuple[Mem0Record, float]]:
        scope = self._scopes.get(filters.get("user_id", ""))
        if scope is None or not scope.records:
            return []
        scores = scope.vecs @ query_vec
        return [(scope.records[i], float(scores[i]))
                for i in search_ranked(scores, top_k, float(self.config["threshold"]))]

    async def retrieve(self, namespace: str, query: RetrieveQuery) -> RetrieveResult:
        if namespace not in self._scopes:
            return RetrieveResult()
        t0 = time.perf_counter_ns()
        qvec = await self.context.embedder.aencode_query(query.query)
        hits = self.search(qvec, query.top_k, {"user_id": namespace})
        self.n["searches"] += 1
        memories = [Memory(id=r.id, text=r.memory, score=s, kind="fact" if self.config["infer"] else "message",
                           created_at=r.created_at, source=f"session:{r.metadata['session_id']}",
                           evidence_ids=list(r.metadata["evidence_ids"]), channel_scores={"vector": s},
                           attributes={"hash": r.hash, "user_id": r.user_id, "event": "ADD"})
                    for r, s in hits]
        diag = ChannelDiagnostics("vector", len(hits), time.perf_counter_ns() - t0,
                                  f"cosine, threshold {self.config['threshold']}")
        return RetrieveResult(memories=memories, channels=[diag], formatted_context=format_memories(memories))

    # ------------------------------------------------------------------ introspection
    def items_in(self, namespace: str) -> int:
        return len(self._scopes[namespace].records) if namespace in self._scopes else 0
