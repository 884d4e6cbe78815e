"""`none`: no memory. It accepts and counts what it is given (nothing ingested is silently dropped from
its stats) but never recalls anything: the floor every memory system is compared with."""

from __future__ import annotations

from services.adapters.base import StoreBackedBackend
from services.common.types import IngestBatch, RetrieveQuery, RetrieveResult


class NoMemoryBackend(StoreBackedBackend):
    name = "none"
    description = "Control: no memory (a fresh session every time)."
    capabilities = (("sessions", ""), ("documents", ""), ("recall", "none"))

    def __init__(self, config=None, context=None):
        super().__init__(config, context)

    async def reset(self, namespace: str) -> int:
        return self.store.reset(namespace)

    async def ingest(self, namespace: str, batch: IngestBatch) -> None:
        self.store.apply(namespace, batch)

    async def retrieve(self, namespace: str, query: RetrieveQuery) -> RetrieveResult:
        return RetrieveResult()

