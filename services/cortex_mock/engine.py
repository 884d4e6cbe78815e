"""CortexEngine: the tenant stores plus every operation the HTTP handlers and job workers perform.

One engine per process (server or worker). Blocking SQLite/numpy work goes through asyncio.to_thread.
"""

from __future__ import annotations

import asyncio
import json
import logging
import math
import os
import random
import tempfile
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np

from services.common.embeddings import get_embedder
from services.cortex_mock.config import MockConfig
from services.cortex_mock.extract import SourceMessage, extract_messages, extract_text, llm_extract
from services.cortex_mock.ingest import IngestContext, apply_ingest
from services.cortex_mock.quantized import QueryCodes
from services.cortex_mock.reflect import reflect
from services.cortex_mock.search import SearchOutput, SearchParams, empty_output, search
from services.cortex_mock.shared_arrays import SharedArrays
from services.cortex_mock.store import TenantStore, forget_entity, forget_session, forget_user
from services.cortex_mock.validation import PROVENANCE_FIELDS

log = logging.getLogger("cortex_mock")

QUERY_CACHE_SIZE = 4096
CHEAP_EMBEDDERS = frozenset({"wordllama", "hash"})  # faster than the embedding cache (CortexEngine.uses_embed_cache)
MATURITY = (("cold", 20), ("warming", 200))  # total FACT nodes below the bound -> label


def name_os_thread() -> None:
    """Give the calling thread's OS-level name its Python name (Python 3.11 leaves every thread named after the
    process), so tools reading /proc — `make load-bench`'s CPU split (loadtests/cpu_meter.py), top -H — can tell
    the search threads from the event loop."""
    import setproctitle

    setproctitle.setthreadtitle(threading.current_thread().name)


def maturity(total_facts: int) -> tuple[str, int]:
    """(maturity label, pipeline tier 1..3) from the number of memories."""
    for tier, (label, bound) in enumerate(MATURITY, start=1):
        if total_facts < bound:
            return label, tier
    return "mature", 3


class CortexEngine:
    """`clock` (wall-clock seconds, default `time.time`) decides when MENTIONS edges become visible (the settle
    delay) and when an idle tenant is closed; tests inject a fake one instead of sleeping."""

    def __init__(self, config: MockConfig, clock: Callable[[], float] | None = None):
        self.config = config
        self.clock = clock or time.time
        self.data_dir_is_temp = config.data_dir is None
        self.data_dir = Path(config.data_dir or tempfile.mkdtemp(prefix="cortex-mock-"))
        self.data_dir.mkdir(parents=True, exist_ok=True)
        # Open tenants, least recently used first. At most `max_open_tenants` stay open and one idle longer
        # than `tenant_idle_s` is closed: dev mode makes a tenant per key, and each holds 3 fds + its index.
        self._stores: OrderedDict[str, TenantStore] = OrderedDict()
        self._last_used: dict[str, float] = {}
        self._stores_lock = threading.Lock()
        self.tenants_evicted = 0
        self.tenants_released = 0  # closed because a forget left them empty
        self.search_pool = ThreadPoolExecutor(max_workers=max(1, config.search_threads),
                                              thread_name_prefix="cortex-search", initializer=name_os_thread)
        self._qcache: OrderedDict[str, QueryCodes] = OrderedDict()
        self._qcache_lock = threading.Lock()
        self._embedder = None
        self._llm = None
        self._rng = random.Random(config.seed)

    # -- resources ----------------------------------------------------------------------------------------
    @property
    def embedder(self):
        if self._embedder is None:
            self._embedder = get_embedder(self.config.embedder, use_cache=self.uses_embed_cache())
        return self._embedder

    def uses_embed_cache(self) -> bool:
        """`embed_cache`, or when unset, whether the embedder is slower than the cache: a wordllama or hash vector
        costs less than the SQLite lookup and commit the cache adds to every ingest (the same vectors either way)."""
        if self.config.embed_cache is not None:
            return self.config.embed_cache
        name = (self.config.embedder or os.environ.get("MEMRIG_EMBEDDER") or "").lower()
        return name not in CHEAP_EMBEDDERS

    def llm(self):
        if self._llm is None:
            from services.common.llm_client import LLMClient
            from services.common.llm_roles import role_config

            self._llm = LLMClient(role_config("flush"))  # extraction is memory writing: the flush role's model
        return self._llm

    def tenant_path(self, tenant_id: str) -> Path:
        return self.data_dir / f"cortex_{tenant_id}.sqlite"

    def store(self, tenant_id: str, create: bool = True) -> TenantStore | None:
        """The tenant's store, opened on demand. With create=False (every read-only request) a tenant that
        was never written is not created: the answer is None and the caller replies as for an empty one."""
        with self._stores_lock:
            now = self.clock()
            st = self._stores.get(tenant_id)
            if st is None:
                if not create and not self.tenant_path(tenant_id).exists():
                    return None
                shared = None
                if self.config.shares_arrays():
                    shared = SharedArrays(self.data_dir / f"cortex_{tenant_id}.arrays",
                                          self.config.shared_arrays_min_bytes)
                st = TenantStore(self.tenant_path(tenant_id), tenant_id, shared, self.config.share_after_s)
                self._stores[tenant_id] = st
            self._stores.move_to_end(tenant_id)
            self._last_used[tenant_id] = now
            victims = self._evict_locked(now, keep=tenant_id)
        for v in victims:  # outside the lock: closing waits for a write or index build in progress
            v.close()  # a request still holding it reopens the connection (TenantStore.conn)
        return st

    def _evict_locked(self, now: float, keep: str) -> list[TenantStore]:
        cap, idle = self.config.max_open_tenants, self.config.tenant_idle_s
        victims: list[TenantStore] = []
        while self._stores:
            tid = next(iter(self._stores))
            if tid == keep:
                break
            if len(self._stores) <= cap and now - self._last_used.get(tid, now) <= idle:
                break
            victims.append(self._stores.pop(tid))
            self._last_used.pop(tid, None)
            self.tenants_evicted += 1
        return victims

    def open_tenants(self) -> dict[str, TenantStore]:
        with self._stores_lock:
            return dict(self._stores)

    async def close(self) -> None:
        self.search_pool.shutdown(wait=False, cancel_futures=True)
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
        def warm() -> bool:
            st = self.store(tenant_id)
            already = st.warm
            st.index(self.embedder)
            return already

        return {"tenant_id": tenant_id, "already_warm": await asyncio.to_thread(warm)}

    def query_codes(self, query: str) -> QueryCodes:
        """The query's embedding, with its int8 codes for the semantic and question channels, from an in-memory
        LRU (load tests repeat queries; the shared SQLite cache behind the embedder costs a lookup per call)."""
        with self._qcache_lock:
            v = self._qcache.get(query)
            if v is not None:
                self._qcache.move_to_end(query)
                return v
        v = QueryCodes.of(np.asarray(self.embedder.encode_query(query), np.float32))
        with self._qcache_lock:
            self._qcache[query] = v
            while len(self._qcache) > QUERY_CACHE_SIZE:
                self._qcache.popitem(last=False)
        return v

    def retrieve_sync(self, tenant_id: str, p: SearchParams) -> SearchOutput:
        """Blocking: open the tenant (never creating it), embed, refresh the snapshot, search."""
        st = self.store(tenant_id, create=False)
        if st is None:
            out = empty_output(p)
            if out.debug is not None:
                out.debug["timings_ms"] = out.timings_ms
            return out
        t0 = time.perf_counter()
        qvec = self.query_codes(p.query)
        t_embed = time.perf_counter() - t0
        t0 = time.perf_counter()
        idx = st.index(self.embedder)
        t_index = time.perf_counter() - t0
        out = search(idx, qvec, p, now_ts=self.clock())
        out.timings_ms = {"embed": round(t_embed * 1000, 3), "index": round(t_index * 1000, 3), **out.timings_ms}
        if out.debug is not None:
            out.debug["timings_ms"] = out.timings_ms
        return out

    async def retrieve(self, tenant_id: str, p: SearchParams) -> SearchOutput:
        # One hand-off per request, to the engine's own small pool: the loop's default pool has cpu+4 threads,
        # which on 2 cores only fight over the GIL (processes, not threads, add throughput: --processes N).
        return await asyncio.get_running_loop().run_in_executor(self.search_pool, self.retrieve_sync, tenant_id, p)

    def _context(self, body: dict, source: str, job_id: str | None) -> IngestContext:
        return IngestContext(session_id=body.get("session_id"), source=source, job_id=job_id,
                             provenance={k: body.get(k) for k in PROVENANCE_FIELDS})

    async def ingest_text(self, tenant_id: str, body: dict, job_id: str | None = None,
                          timings: dict[str, float] | None = None) -> dict[str, Any]:
        said_at = body.get("reference_date") or datetime.now(UTC)
        ids = body.get("message_ids") or []
        t0 = time.perf_counter()
        if self.config.extractor == "llm":
            facts = await llm_extract(self.llm(), [SourceMessage("user", body["text"], said_at, ids[0] if ids else "")])
            for f in facts:
                f.message_ids = list(ids)
        else:
            facts = await asyncio.to_thread(extract_text, body["text"], said_at, ids)
        if timings is not None:
            timings["extract"] = timings.get("extract", 0.0) + time.perf_counter() - t0
        return await self._apply(tenant_id, facts, self._context(body, "text", job_id), timings)

    async def ingest_conversation(self, tenant_id: str, body: dict, job_id: str | None = None,
                                  timings: dict[str, float] | None = None) -> dict[str, Any]:
        t0 = time.perf_counter()
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
        if timings is not None:
            timings["extract"] = timings.get("extract", 0.0) + time.perf_counter() - t0
        return await self._apply(tenant_id, facts, self._context(body, "conversation", job_id), timings)

    async def _apply(self, tenant_id: str, facts, ctx: IngestContext,
                     timings: dict[str, float] | None = None) -> dict[str, Any]:
        def apply() -> dict[str, Any]:
            return apply_ingest(self.store(tenant_id), self.embedder, facts, ctx,
                                self.config.settle_delay_ms / 1000.0, now=self.clock(), timings=timings)

        res = dict(await asyncio.to_thread(apply))
        res["facts_extracted"] = len(facts)
        return res

    async def ingest_batch(self, tenant_id: str, items: list[dict]) -> dict[str, Any]:
        """`POST /v1/ingest/batch`: each item as `POST /v1/ingest`, in order. An item whose extraction fails
        is counted in `failed_count`/`errors` (its own transaction rolled back); the others still commit."""
        results: list[dict[str, Any]] = []
        errors: list[str] = []
        for i, body in enumerate(items):
            try:
                results.append(await self.ingest_text(tenant_id, body))
            except Exception as e:  # reported per item, as the API's batch response does
                log.warning("batch item %d failed: %s", i, e)
                errors.append(f"items[{i}]: {type(e).__name__}: {e}")
        return {"results": results, "total_nodes_created": sum(r["nodes_created"] for r in results),
                "total_edges_created": sum(r["edges_created"] for r in results), "failed_count": len(errors),
                "errors": errors}

    async def reflect(self, tenant_id: str) -> dict[str, Any]:
        return await asyncio.to_thread(lambda: reflect(self.store(tenant_id), self.embedder))

    async def _on_existing(self, tenant_id: str, fn, default):
        """Run fn(store) in a thread if the tenant exists; `default` if it was never written."""
        def run():
            st = self.store(tenant_id, create=False)
            return default if st is None else fn(st)

        return await asyncio.to_thread(run)

    def _close_if_empty(self, tenant_id: str, st: TenantStore) -> None:
        """After a forget: a tenant left holding no node at all is compacted and closed (its file shrunk to its
        tables, its connection, page cache and snapshot freed; the next request reopens it, as after an eviction).
        A client that releases what it stored, as the rig does after each LongMemEval haystack, otherwise kept up to
        `max_open_tenants` empty tenants open, cortex-mock's RSS grew with every one, and each left ~20 MB of free
        pages on disk (8 GB over LongMemEval S's 398 haystacks)."""
        if not st.is_empty():
            return
        st.compact()
        with self._stores_lock:
            if self._stores.get(tenant_id) is not st:
                return
            del self._stores[tenant_id]
            self._last_used.pop(tenant_id, None)
            self.tenants_released += 1
        st.close()

    def _forget(self, tenant_id: str, fn, default):
        def run(st: TenantStore):
            out = fn(st)
            self._close_if_empty(tenant_id, st)
            return out

        return self._on_existing(tenant_id, run, default)

    async def forget_session(self, tenant_id: str, session_id: str) -> dict[str, Any]:
        n = await self._forget(tenant_id, lambda st: forget_session(st, session_id), 0)
        return {"memories_removed": n}

    async def forget_entity(self, tenant_id: str, name: str) -> dict[str, Any]:
        n = await self._forget(tenant_id, lambda st: forget_entity(st, name), 0)
        return {"memories_removed": n}

    async def forget_user(self, tenant_id: str, user_id: str) -> dict[str, Any]:
        """The plugin's ForgetUserResponse (client.ts 2.22.1): `deleted` counts engraved memories (the mock's
        FACT nodes), resonated memories (emotions/values/beliefs: the mock extracts none, so 0), all nodes
        removed (facts + entities left unreferenced) and codex suggestions/suppressions (not modelled: 0)."""
        d = await self._forget(tenant_id, lambda st: forget_user(st, user_id), {"facts": 0, "edges": 0, "entities": 0})
        return {"user_id": user_id, "deleted": {
            "engraved_memories": d["facts"], "resonated_memories": 0, "nodes": d["facts"] + d["entities"],
            "codex_suggestions": 0, "codex_suggestion_suppressions": 0}}

    async def node(self, tenant_id: str, node_id: str) -> dict[str, Any] | None:
        """`GET /v1/nodes/{id}`: the node and its visible edges (NodeDetailResponse), None if unknown."""
        return await self._on_existing(tenant_id, lambda st: st.node_detail(node_id, self.clock()), None)

    async def knowledge(self, tenant_id: str, user_id: str | None = None) -> dict[str, Any]:
        def compute(st: TenantStore) -> dict[str, Any]:
            idx = st.index(self.embedder)
            m_fact, m_ent = idx.visible_mentions(self.clock())
            facts = idx.facts
            if user_id is not None:  # the plugin scopes knowledge by user_id inside a tenant
                keep = idx.user_mask(user_id)
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

        return await self._on_existing(tenant_id, compute, {"total_memories": 0, "total_sessions": 0,
                                                            "maturity": "cold", "entities": []})

    async def stats(self, tenant_id: str, user_id: str | None = None) -> dict[str, Any]:
        """Node/edge counts of the tenant, or with `user_id` (the plugin always sends one) of that user's
        facts, the entities they mention and the edges touching those facts."""
        empty = {"nodes": {}, "edges": {}, "pending_edges": 0, "sessions": 0}
        c = await self._on_existing(tenant_id, lambda st: st.counts(self.clock(), user_id), empty)
        label, tier = maturity(int(c["nodes"].get("FACT", 0)))
        return {"tenant_id": tenant_id, "user_id": user_id, "pipeline_tier": tier, "pipeline_maturity": label,
                "nodes": c["nodes"], "edges": c["edges"], "pending_edges": c["pending_edges"],
                "total_sessions": c["sessions"], "embedder": self.embedder.name,
                "extractor": self.config.extractor, "settle_delay_ms": self.config.settle_delay_ms}

    async def applied_job(self, tenant_id: str, job_id: str) -> dict[str, Any] | None:
        """The recorded result of a job whose ingest committed (None if it never did)."""
        return await self._on_existing(tenant_id, lambda st: st.applied_job(job_id), None)

    # -- jobs -------------------------------------------------------------------------------------------------
    async def run_job(self, job: dict[str, Any]) -> dict[str, Any]:
        """Execute one job record {job_id, tenant_id, kind, payload}; returns its result (the job payload's
        dates travel as ISO strings and are parsed back here)."""
        if self.config.job_delay_ms > 0:
            await asyncio.sleep(self.config.job_delay_ms / 1000.0)
        t0 = time.perf_counter()
        body = decode_payload(job["payload"])
        kind, tenant = job["kind"], job["tenant_id"]
        spans: dict[str, float] = {}
        if kind == "ingest":
            res = await self.ingest_text(tenant, body, job_id=job["job_id"], timings=spans)
        elif kind == "ingest_conversation":
            res = await self.ingest_conversation(tenant, body, job_id=job["job_id"], timings=spans)
        elif kind == "reflect":
            res = await self.reflect(tenant)
        else:
            raise ValueError(f"unknown job kind {kind!r}")
        res["processing_ms"] = round((time.perf_counter() - t0) * 1000.0, 3)
        if spans:  # where an ingest job's time went (extract, embed, lock, snapshot, write, install)
            res["timings_ms"] = {k: round(v * 1000.0, 3) for k, v in spans.items()}
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
