"""`full-context`: everything ingested, returned as static context on every query (AGENTS.md-style).

The context is the chronological transcript of every session (and every document), cut to `token_budget`
cl100k tokens by dropping the oldest sessions first. It does not depend on the query: the memories list holds
one entry per session kept (newest first, top_k of them), and `formatted_context` holds the whole kept text.
"""

from __future__ import annotations

from services.adapters.base import StoreBackedBackend
from services.common.tokens import count_tokens
from services.common.transcripts import render_session
from services.common.types import (
    IngestBatch,
    Memory,
    RetrieveQuery,
    RetrieveResult,
)


class FullContextBackend(StoreBackedBackend):
    name = "full-context"
    description = "Control: everything ingested as static context, cut to a token budget."
    capabilities = (("sessions", ""), ("documents", ""), ("recall", "exact"), ("static_context", "query-independent"))
    defaults = {"token_budget": 16000, "header": "# Project memory (static context)"}

    def __init__(self, config=None, context=None):
        super().__init__(config, context)
        # namespace -> (memories newest first, formatted context); rebuilt on ingest, not per query
        self._cache: dict[str, tuple[list[Memory], str]] = {}

    async def reset(self, namespace: str) -> int:
        self._cache.pop(namespace, None)
        return self.store.reset(namespace)

    async def ingest(self, namespace: str, batch: IngestBatch) -> None:
        self.store.apply(namespace, batch)
        self._cache.pop(namespace, None)

    def _build(self, namespace: str) -> tuple[list[Memory], str]:
        blocks: list[tuple[Memory, str]] = []
        for d in self.store.ordered_documents(namespace):
            text = f"## {d.path or d.id}\n{d.text}"
            blocks.append((Memory(id=d.id, text=text, score=1.0, kind="static", created_at=d.created_at,
                                  source=d.path or "document", evidence_ids=list(d.evidence())), text))
        for s in self.store.ordered_sessions(namespace):
            text = render_session(s)
            blocks.append((Memory(id=s.session_id, text=text, score=1.0, kind="static", created_at=s.started_at,
                                  source=f"session:{s.session_id}", evidence_ids=[m.id for m in s.messages]), text))
        budget = self.config["token_budget"] - count_tokens(self.config["header"])
        kept: list[tuple[Memory, str]] = []
        used = 0
        for mem, text in reversed(blocks):  # newest first; drop the oldest when over budget
            t = count_tokens(text) + 1
            if used + t > budget:
                break
            kept.append((mem, text))
            used += t
        formatted = "\n\n".join([self.config["header"], *(t for _, t in reversed(kept))]) if kept else ""
        for m, _ in kept:
            m.attributes["tokens_total"] = str(used)
            m.attributes["blocks_dropped"] = str(len(blocks) - len(kept))
        return [m for m, _ in kept], formatted

    async def retrieve(self, namespace: str, query: RetrieveQuery) -> RetrieveResult:
        if namespace not in self._cache:
            self._cache[namespace] = self._build(namespace)
        memories, formatted = self._cache[namespace]
        return RetrieveResult(memories=[Memory(**vars(m)) for m in memories[: query.top_k]],
                              formatted_context=formatted)

