"""BackendHost: validation, per-namespace locking, timing and metrics around a `MemoryBackend`.

Both the gRPC servicer and the in-process client go through this class, so a backend behaves the same
whether it is called over the network or in the rig's own process.
"""

from __future__ import annotations

import time
from typing import Any

import psutil
from prometheus_client import Counter, Histogram

from collectors.buckets import LATENCY_BUCKETS_S
from services.adapters.base import MemoryBackend, NamespaceLocks
from services.common.embeddings import embedder_counters
from services.common.types import (
    IngestBatch,
    PrepareResult,
    RetrieveQuery,
    RetrieveResult,
    SettleResult,
    ValidationError,
    validate_batch,
    validate_namespace,
    validate_query,
)

REQUESTS = Counter(
    "memrig_backend_requests_total", "Backend RPCs handled", ["backend", "method", "outcome"]
)
DURATION = Histogram(
    "memrig_backend_request_duration_seconds",
    "Backend RPC handling time",
    ["backend", "method"],
    buckets=(0.0005, *LATENCY_BUCKETS_S),  # on the rig's delays and timeouts (collectors/buckets.py)
)
ITEMS = Counter("memrig_backend_ingested_items_total", "Messages and documents ingested", ["backend"])


class BackendHost:
    def __init__(self, backend: MemoryBackend):
        self.backend = backend
        self.locks = NamespaceLocks()
        self._started = False

    @property
    def name(self) -> str:
        return self.backend.name

    async def start(self) -> None:
        if not self._started:
            await self.backend.start()
            self._started = True

    async def close(self) -> None:
        if self._started:
            await self.backend.close()
            await self.backend.context.close()
            self._started = False

    def _observe(self, method: str, t0: float, outcome: str) -> None:
        REQUESTS.labels(self.name, method, outcome).inc()
        DURATION.labels(self.name, method).observe(time.perf_counter() - t0)

    async def describe(self) -> dict[str, Any]:
        emb, dim = self.backend.embedder_info()
        return {
            "name": self.backend.name,
            "version": self.backend.version,
            "description": self.backend.description,
            "config": self.backend.describe_config(),
            "capabilities": [{"name": n, "detail": d} for n, d in self.backend.capabilities]
            + ([{"name": "views", "detail": ",".join(self.backend.views())}] if self.backend.views() else []),
            "embedder": emb,
            "embedding_dim": dim,
        }

    async def reset(self, namespace: str) -> int:
        t0 = time.perf_counter()
        try:
            validate_namespace(namespace)
            async with self.locks.get(namespace).write():
                n = await self.backend.reset(namespace)
            self._observe("Reset", t0, "ok")
            return n
        except ValidationError:
            self._observe("Reset", t0, "invalid")
            raise

    async def ingest(self, namespace: str, batch: IngestBatch) -> dict[str, int]:
        t0 = time.perf_counter()
        try:
            validate_namespace(namespace)
            validate_batch(batch)
            async with self.locks.get(namespace).write():
                await self.backend.ingest(namespace, batch)
        except ValidationError:
            self._observe("Ingest", t0, "invalid")
            raise
        except Exception:
            self._observe("Ingest", t0, "error")
            raise
        self._observe("Ingest", t0, "ok")
        ITEMS.labels(self.name).inc(batch.message_count + len(batch.documents))
        return {
            "sessions_accepted": len(batch.sessions),
            "messages_accepted": batch.message_count,
            "documents_accepted": len(batch.documents),
        }

    async def settle(self, namespace: str, timeout_s: float) -> SettleResult:
        validate_namespace(namespace)
        if timeout_s < 0:
            raise ValidationError("timeout_seconds", "must be >= 0")
        return await self.backend.settle(namespace, timeout_s or 60.0)

    async def prepare(self, namespace: str) -> PrepareResult:
        """The backend's prepare under the namespace's read lock (never beside an ingest of it), timed apart."""
        t0 = time.perf_counter()
        try:
            validate_namespace(namespace)
        except ValidationError:
            self._observe("Prepare", t0, "invalid")
            raise
        try:
            async with self.locks.get(namespace).read():
                t_in = time.perf_counter_ns()
                note = await self.backend.prepare(namespace)
                took = time.perf_counter_ns() - t_in
        except Exception:
            self._observe("Prepare", t0, "error")
            raise
        self._observe("Prepare", t0, "ok")
        return PrepareResult(note=note or "", server_duration_ns=took)

    async def retrieve(self, namespace: str, query: RetrieveQuery) -> RetrieveResult:
        t0 = time.perf_counter()
        try:
            validate_namespace(namespace)
            validate_query(query)
            if query.view and query.view not in self.backend.views():
                listed = ", ".join(self.backend.views()) or "none"
                raise ValidationError("view", f"{self.backend.name} has no search view {query.view!r} (its views: "
                                              f"{listed})")
        except ValidationError:
            self._observe("Retrieve", t0, "invalid")
            raise
        try:
            async with self.locks.get(namespace).read():
                t_in = time.perf_counter_ns()
                res = await self.backend.retrieve(namespace, query)
                if not res.server_duration_ns:
                    res.server_duration_ns = time.perf_counter_ns() - t_in
        except Exception:
            self._observe("Retrieve", t0, "error")
            raise
        res.memories = res.memories[: query.top_k]
        self._observe("Retrieve", t0, "degraded" if res.degraded else "ok")
        return res

    async def stats(self, namespace: str = "") -> dict[str, Any]:
        names = [namespace] if namespace else self.backend.namespaces()
        per_ns = [await self.backend.namespace_stats(n) for n in names]
        return {
            "namespaces": per_ns,
            "disk_bytes": self.backend.disk_bytes(),
            "rss_bytes": psutil.Process().memory_info().rss,
            "counters": {**self.backend.counters(), **embedder_counters(self.backend.loaded_embedder())},
        }
