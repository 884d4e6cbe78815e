"""CortexEngine: the tenant stores plus every operation the HTTP handlers and job workers perform.

One engine per process (server or worker). Blocking SQLite/numpy work goes through asyncio.to_thread.
"""

from __future__ import annotations

import asyncio
import json
import math
import random
import tempfile
import threading
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np

from services.common.embeddings import get_embedder
from services.cortex_mock.config import MockConfig
from services.cortex_mock.extract import SourceMessage, extract_messages, extract_text, llm_extract
from services.cortex_mock.ingest import IngestContext, apply_ingest
from services.cortex_mock.reflect import reflect
from services.cortex_mock.search import SearchOutput, SearchParams, search
from services.cortex_mock.store import TenantStore, forget_session, forget_user
from services.cortex_mock.validation import PROVENANCE_FIELDS

MATURITY = (("cold", 20), ("warming", 200))  # total FACT nodes below the bound -> label


def maturity(total_facts: int) -> tuple[str, int]:
    """(maturity label, pipeline tier 1..3) from the number of memories."""
    for tier, (label, bound) in enumerate(MATURITY, start=1):
        if total_facts < bound:
            return label, tier
    return "mature", 3


class CortexEngine:
    def __init__(self, config: MockConfig):
        self.config = config
        self.data_dir_is_temp = config.data_dir is None
        self.data_dir = Path(config.data_dir or tempfile.mkdtemp(prefix="cortex-mock-"))
        self.data_dir.mkdir(parents=True, exist_ok=True)
        self._stores: dict[str, TenantStore] = {}
        self._stores_lock = threading.Lock()
        self._embedder = None
        self._llm = None
        self._rng = random.Random(config.seed)

    # -- resources ----------------------------------------------------------------------------------------
    @property
    def embedder(self):
        if self._embedder is None:
            self._embedder = get_embedder(self.config.embedder, use_cache=self.config.embed_cache)
        return self._embedder

    def llm(self):
        if self._llm is None:
            from services.common.llm_client import LLMClient

            self._llm = LLMClient()
        return self._llm

    def store(self, tenant_id: str) -> TenantStore:
        with self._stores_lock:
            st = self._stores.get(tenant_id)
            if st is None:
                st = TenantStore(self.data_dir / f"cortex_{tenant_id}.sqlite", tenant_id)
                self._stores[tenant_id] = st
            return st

    def open_tenants(self) -> dict[str, TenantStore]:
        with self._stores_lock:
            return dict(self._stores)

    async def close(self) -> None:
        if self._llm is not None:
            await self._llm.close()
        for st in self.open_tenants().values():
            st.close()

    def added_latency_ms(self, mode: str) -> float:
        base = self.config.latency_full_ms if mode == "full" else self.config.latency_fast_ms
        if base <= 0:
            return 0.0
        if self.config.latency_sigma > 0:
            return base * math.exp(self.config.latency_sigma * self._rng.gauss(0.0, 1.0))
        return base

    # -- operations ---------------------------------------------------------------------------------------
    async def warmup(self, tenant_id: str) -> dict[str, Any]:
        st = await asyncio.to_thread(self.store, tenant_id)
        already = st.warm
        await asyncio.to_thread(st.index, self.embedder)
        return {"tenant_id": tenant_id, "already_warm": already}

    async def retrieve(self, tenant_id: str, p: SearchParams) -> SearchOutput:
        st = await asyncio.to_thread(self.store, tenant_id)
        t0 = time.perf_counter()
        qvec = (await self.embedder.aencode([p.query]))[0]
        t_embed = time.perf_counter() - t0
        t0 = time.perf_counter()
        idx = await asyncio.to_thread(st.index, self.embedder)
        t_index = time.perf_counter() - t0
        out = await asyncio.to_thread(search, idx, np.asarray(qvec, np.float32), p)
        out.timings_ms = {"embed": round(t_embed * 1000, 3), "index": round(t_index * 1000, 3), **out.timings_ms}
        if out.debug is not None:
            out.debug["timings_ms"] = out.timings_ms
        return out

    def _context(self, body: dict, source: str, job_id: str | None) -> IngestContext:
        return IngestContext(session_id=body.get("session_id"), source=source, job_id=job_id,
                             provenance={k: body.get(k) for k in PROVENANCE_FIELDS})

    async def ingest_text(self, tenant_id: str, body: dict, job_id: str | None = None) -> dict[str, Any]:
        said_at = body.get("reference_date") or datetime.now(UTC)
        ids = body.get("message_ids") or []
        if self.config.extractor == "llm":
            facts = await llm_extract(self.llm(), [SourceMessage("user", body["text"], said_at, ids[0] if ids else "")])
            for f in facts:
                f.message_ids = list(ids)
        else:
            facts = await asyncio.to_thread(extract_text, body["text"], said_at, ids)
        return await self._apply(tenant_id, facts, self._context(body, "text", job_id))

    async def ingest_conversation(self, tenant_id: str, body: dict, job_id: str | None = None) -> dict[str, Any]:
        ref = body.get("reference_date") or datetime.now(UTC)
        ids = body.get("message_ids")
        msgs = []
        for i, m in enumerate(body["messages"]):
            mid = m.get("id") or (ids[i] if ids else "")
            msgs.append(SourceMessage(m["role"], m["content"], m.get("timestamp") or m.get("created_at") or ref, mid))
        if self.config.extractor == "llm":
            facts = await llm_extract(self.llm(), msgs)
        else:
            facts = await asyncio.to_thread(extract_messages, msgs)
        return await self._apply(tenant_id, facts, self._context(body, "conversation", job_id))

    async def _apply(self, tenant_id: str, facts, ctx: IngestContext) -> dict[str, Any]:
        st = await asyncio.to_thread(self.store, tenant_id)
        res = await asyncio.to_thread(apply_ingest, st, self.embedder, facts, ctx,
                                      self.config.settle_delay_ms / 1000.0)
        res = dict(res)
        res["facts_extracted"] = len(facts)
        return res

    async def reflect(self, tenant_id: str) -> dict[str, Any]:
        st = await asyncio.to_thread(self.store, tenant_id)
        return await asyncio.to_thread(reflect, st, self.embedder)

    async def forget_session(self, tenant_id: str, session_id: str) -> dict[str, Any]:
        st = await asyncio.to_thread(self.store, tenant_id)
        return {"memories_removed": await asyncio.to_thread(forget_session, st, session_id)}

    async def forget_user(self, tenant_id: str, user_id: str) -> dict[str, Any]:
        st = await asyncio.to_thread(self.store, tenant_id)
        return {"user_id": user_id, "deleted": await asyncio.to_thread(forget_user, st, user_id)}

    async def knowledge(self, tenant_id: str, user_id: str | None = None) -> dict[str, Any]:
        st = await asyncio.to_thread(self.store, tenant_id)

        def compute() -> dict[str, Any]:
            idx = st.index(self.embedder)
            now = time.time()
            m_fact, m_ent = idx.visible_mentions(now)
            facts = idx.facts
            if user_id is not None:  # the plugin scopes knowledge by user_id inside a tenant
                keep = np.array([f.metadata.get("user_id") == user_id for f in idx.facts], dtype=bool)
                sel = keep[m_fact] if m_fact.size else np.zeros(0, dtype=bool)
                m_fact, m_ent = m_fact[sel], m_ent[sel]
                facts = [f for f, k in zip(idx.facts, keep, strict=True) if k]
            counts = np.bincount(m_ent, minlength=len(idx.entities)) if m_ent.size else np.zeros(len(idx.entities))
            last: dict[int, str] = {}
            for fp, ep in zip(m_fact.tolist(), m_ent.tolist(), strict=True):
                occ = idx.facts[fp].occurred_iso or ""
                if occ > last.get(ep, ""):
                    last[ep] = occ
            ents = [{"name": e.name, "memory_count": int(counts[i]), "last_seen": last.get(i)}
                    for i, e in enumerate(idx.entities) if counts[i] > 0]
            ents.sort(key=lambda e: (-e["memory_count"], e["name"].lower()))
            sessions = {s for f in facts for s in (f.metadata.get("session_ids") or [f.session_id]) if s}
            label, _ = maturity(len(facts))
            return {"total_memories": len(facts), "total_sessions": len(sessions), "maturity": label,
                    "entities": ents[:200]}

        return await asyncio.to_thread(compute)

    async def stats(self, tenant_id: str) -> dict[str, Any]:
        st = await asyncio.to_thread(self.store, tenant_id)
        c = await asyncio.to_thread(st.counts, time.time())
        label, tier = maturity(int(c["nodes"].get("FACT", 0)))
        return {"tenant_id": tenant_id, "pipeline_tier": tier, "pipeline_maturity": label,
                "nodes": c["nodes"], "edges": c["edges"], "pending_edges": c["pending_edges"],
                "total_sessions": c["sessions"], "embedder": self.embedder.name,
                "extractor": self.config.extractor, "settle_delay_ms": self.config.settle_delay_ms}

    # -- jobs -------------------------------------------------------------------------------------------------
    async def run_job(self, job: dict[str, Any]) -> dict[str, Any]:
        """Execute one job record {job_id, tenant_id, kind, payload}; returns its result (the job payload's
        dates travel as ISO strings and are parsed back here)."""
        if self.config.job_delay_ms > 0:
            await asyncio.sleep(self.config.job_delay_ms / 1000.0)
        t0 = time.perf_counter()
        body = decode_payload(job["payload"])
        kind, tenant = job["kind"], job["tenant_id"]
        if kind == "ingest":
            res = await self.ingest_text(tenant, body, job_id=job["job_id"])
        elif kind == "ingest_conversation":
            res = await self.ingest_conversation(tenant, body, job_id=job["job_id"])
        elif kind == "reflect":
            res = await self.reflect(tenant)
        else:
            raise ValueError(f"unknown job kind {kind!r}")
        res["processing_ms"] = round((time.perf_counter() - t0) * 1000.0, 3)
        return res


def encode_payload(body: dict[str, Any]) -> str:
    """JSON for a validated body (datetimes -> ISO strings) so a job can cross a process boundary."""

    def conv(v: Any) -> Any:
        if isinstance(v, datetime):
            return {"__dt__": v.isoformat()}
        if isinstance(v, dict):
            return {k: conv(x) for k, x in v.items()}
        if isinstance(v, list):
            return [conv(x) for x in v]
        return v

    return json.dumps(conv(body))


def decode_payload(s: str | dict) -> dict[str, Any]:
    def conv(v: Any) -> Any:
        if isinstance(v, dict):
            if set(v) == {"__dt__"}:
                return datetime.fromisoformat(v["__dt__"])
            return {k: conv(x) for k, x in v.items()}
        if isinstance(v, list):
            return [conv(x) for x in v]
        return v

    return conv(json.loads(s) if isinstance(s, str) else s)
