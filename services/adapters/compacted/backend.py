"""`compacted`: a one-shot compaction summary of everything ingested, made through the LLM client, as
OpenClaw's `/compact` would (seed 000, V1.2). The summary is the memory: it keeps the gist and loses specifics.

The summary is (re)built at Settle (or on the first Retrieve after an ingest) and cached by the hash of the
transcripts, so identical inputs never pay for a second LLM call. Its evidence ids are empty: a summary of
everything is not evidence for any one message.
"""

from __future__ import annotations

import hashlib

from services.adapters.base import SessionStore, StoreBackedBackend
from services.common.transcripts import compact, render_session
from services.common.types import (
    IngestBatch,
    Memory,
    RetrieveQuery,
    RetrieveResult,
    SettleResult,
)


def transcripts_text(store: SessionStore, namespace: str) -> str:
    parts = [render_session(s) for s in store.ordered_sessions(namespace)]
    parts += [f"## {d.path or d.id}\n{d.text}" for d in store.ordered_documents(namespace)]
    return "\n\n".join(parts)


class CompactedBackend(StoreBackedBackend):
    name = "compacted"
    description = "Control: one-shot compaction summary through the LLM client (OpenClaw /compact)."
    capabilities = (("sessions", ""), ("documents", ""), ("recall", "lossy"), ("static_context", "summary"))
    defaults = {"temperature": 0.0}

    def __init__(self, config=None, context=None):
        super().__init__(config, context)
        self._summary: dict[str, tuple[str, str]] = {}  # namespace -> (transcripts hash, summary)
        self.n["llm_calls"] = 0

    async def reset(self, namespace: str) -> int:
        self._summary.pop(namespace, None)
        return self.store.reset(namespace)

    async def ingest(self, namespace: str, batch: IngestBatch) -> None:
        self.store.apply(namespace, batch)

    async def _ensure_summary(self, namespace: str) -> str:
        text = transcripts_text(self.store, namespace)
        if not text:
            return ""
        h = hashlib.sha256(text.encode()).hexdigest()
        cached = self._summary.get(namespace)
        if cached and cached[0] == h:
            return cached[1]
        summary = await compact(self.context.compaction_llm, text, self.config["temperature"])
        self.n["llm_calls"] += 1
        self._summary[namespace] = (h, summary)
        return summary

    async def settle(self, namespace: str, timeout_s: float) -> SettleResult:
        summary = await self._ensure_summary(namespace)
        st = self.store.stats(namespace)
        return SettleResult(settled=True, items_indexed=st.items, counts={"summary_chars": len(summary)})

    async def retrieve(self, namespace: str, query: RetrieveQuery) -> RetrieveResult:
        summary = await self._ensure_summary(namespace)
        if not summary:
            return RetrieveResult()
        mem = Memory(id=f"{namespace}:compaction", text=summary, score=1.0, kind="summary", source="compaction")
        return RetrieveResult(memories=[mem], formatted_context=summary)

