"""The adapter framework: the Python interface a memory backend implements.

A backend subclasses `MemoryBackend` and implements five coroutines. The gRPC edge (`server.py`) validates
every request before the backend sees it, serialises writers per namespace (an ingest never interleaves
with another ingest or a retrieve of the same namespace, so a retrieve never sees half a batch), times each
call and exports metrics. Backends must keep ingestion atomic: raise before mutating anything, or roll back.
"""

from __future__ import annotations

import abc
import asyncio
import os
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from services.common.types import (
    Document,
    IngestBatch,
    NamespaceStats,
    RetrieveQuery,
    RetrieveResult,
    Session,
    SettleResult,
)


@dataclass
class BackendContext:
    """Shared services a backend may use. Built once per process; never per request."""

    embedder_name: str | None = None  # None → $MEMRIG_EMBEDDER or the default (minilm)
    embedding_cache_path: str | None = None
    data_dir: Path = field(default_factory=lambda: Path(os.environ.get("MEMRIG_DATA_ROOT", ".memrig/data")))
    llm_base_url: str | None = None  # None → the flush role's endpoint (services/common/llm_roles.py)
    llm_config: Any = None  # an LLMConfig for the flush role, instead of the environment's
    compaction_llm_config: Any = None  # an LLMConfig for the compaction role, instead of the environment's
    _embedder: Any = None
    _llm: Any = None
    _compaction_llm: Any = None

    @property
    def embedder(self):
        if self._embedder is None:
            from services.common.embeddings import get_embedder

            self._embedder = get_embedder(self.embedder_name, cache_path=self.embedding_cache_path)
        return self._embedder

    @property
    def llm(self):
        """The memory writer's model (the `flush` role): flush notes, fact extraction, in-backend compaction."""
        if self._llm is None:
            from services.common.llm_client import LLMClient

            self._llm = LLMClient(self._role_config("flush", self.llm_config))
        return self._llm

    @property
    def compaction_llm(self):
        """The one-shot compaction summary's model (the `compaction` role): the flush client when both roles
        name the same endpoint."""
        if self._compaction_llm is None:
            from services.common.llm_client import LLMClient

            cfg = self._role_config("compaction", self.compaction_llm_config)
            same = cfg == self._role_config("flush", self.llm_config)
            self._compaction_llm = self.llm if same else LLMClient(cfg)
        return self._compaction_llm

    def _role_config(self, role: str, explicit: Any):
        """`explicit`, else the role's endpoint from the environment; `llm_base_url` (the URL of the rig's LLM
        when the caller started one) stands in for a role that names no URL of its own."""
        from services.common.llm_roles import ROLES, role_config

        if explicit is not None:
            return explicit
        cfg = role_config(role)
        if self.llm_base_url and not os.environ.get(f"{ROLES[role]}_BASE_URL"):
            cfg.base_url = self.llm_base_url.rstrip("/")
        return cfg

    async def close(self) -> None:
        if self._compaction_llm is not None and self._compaction_llm is not self._llm:
            await self._compaction_llm.close()
        if self._llm is not None:
            await self._llm.close()


class MemoryBackend(abc.ABC):
    """Subclass, set `name`, implement the abstract coroutines. Config keys are validated by `configure`."""

    name: ClassVar[str] = ""
    version: ClassVar[str] = "0.1.0"
    description: ClassVar[str] = ""
    # (capability, detail) pairs reported by Describe: "sessions", "documents", "modes", "reference_time", ...
    capabilities: ClassVar[tuple[tuple[str, str], ...]] = (("sessions", ""),)
    # Default configuration; every key a backend reads must be here so Describe can list it.
    defaults: ClassVar[dict[str, Any]] = {}
    uses_embedder: ClassVar[bool] = False

    def __init__(self, config: dict[str, Any] | None = None, context: BackendContext | None = None):
        self.context = context or BackendContext()
        self.config = self.configure(dict(config or {}))

    def configure(self, overrides: dict[str, Any]) -> dict[str, Any]:
        unknown = sorted(set(overrides) - set(self.defaults))
        if unknown:
            raise ValueError(f"{self.name}: unknown config key(s) {unknown}; known: {sorted(self.defaults)}")
        cfg = dict(self.defaults)
        for k, v in overrides.items():
            default = self.defaults[k]
            if default is not None and not isinstance(v, type(default)) and not (
                isinstance(default, float) and isinstance(v, int)
            ):
                raise ValueError(f"{self.name}: config {k!r} expects {type(default).__name__}, got {v!r}")
            cfg[k] = v
        return cfg

    def describe_config(self) -> dict[str, Any]:
        """Every constant and knob in force. Override to add derived constants."""
        return dict(self.config)

    def embedder_info(self) -> tuple[str, int]:
        if not self.uses_embedder:
            return "", 0
        e = self.context.embedder
        return e.name, e.dim

    async def start(self) -> None:  # noqa: B027 - an optional hook, empty by default
        """Called once before serving (load models, open files)."""

    async def close(self) -> None:  # noqa: B027 - an optional hook, empty by default
        """Called once at shutdown."""

    @abc.abstractmethod
    async def reset(self, namespace: str) -> int:
        """Drop the namespace; return how many items were removed."""

    @abc.abstractmethod
    async def ingest(self, namespace: str, batch: IngestBatch) -> None:
        """Store a validated batch atomically."""

    async def settle(self, namespace: str, timeout_s: float) -> SettleResult:
        st = await self.namespace_stats(namespace)
        return SettleResult(settled=True, items_indexed=st.items, counts={"sessions": st.sessions})

    async def prepare(self, namespace: str) -> str:
        """Untimed setup for search, called once per namespace after settle and right before its first timed
        retrieve (the proto's Prepare): do here what that first search would do lazily, so a timed retrieve is the
        search alone. Returns a few words on what was done; "" (the default) = nothing to do."""
        return ""

    @abc.abstractmethod
    async def retrieve(self, namespace: str, query: RetrieveQuery) -> RetrieveResult:
        """Search; an unknown namespace returns an empty result, not an error."""

    @abc.abstractmethod
    async def namespace_stats(self, namespace: str) -> NamespaceStats: ...

    @abc.abstractmethod
    def namespaces(self) -> list[str]: ...

    def disk_bytes(self) -> int:
        return 0

    def counters(self) -> dict[str, int]:
        return {}

    def loaded_embedder(self) -> Any:
        """The embedder this backend has made so far, its own or the context's, or None: never loads one."""
        return getattr(self, "_embedder", None) or self.context._embedder

    def views(self) -> tuple[str, ...]:
        """Search-time views of the memory this backend stores (RetrieveQuery.view), besides its own search: what
        another configuration of the same system would search over the same state. Listed in Describe as the
        capability ("views", "a,b"); the rig may then answer that configuration's probes from this backend's state
        instead of storing the same thing twice (services/coordinator/views.py). None by default."""
        return ()


class SessionStore:
    """Per-namespace storage of ingested sessions and documents, for backends that keep them in memory.

    `apply` stages the whole batch and commits it in one synchronous step, so it is atomic on the event loop.
    """

    def __init__(self) -> None:
        self.sessions: dict[str, dict[str, Session]] = defaultdict(dict)
        self.documents: dict[str, dict[str, Document]] = defaultdict(dict)

    def apply(self, namespace: str, batch: IngestBatch) -> None:
        sessions = dict(self.sessions.get(namespace, {}))
        docs = dict(self.documents.get(namespace, {}))
        for s in batch.sessions:
            if s.session_id in sessions:
                # Re-ingesting a session id appends messages not already present (nothing ingested is lost).
                old = sessions[s.session_id]
                have = {m.id for m in old.messages}
                merged = old.messages + tuple(m for m in s.messages if m.id not in have)
                sessions[s.session_id] = Session(old.session_id, old.started_at, merged)
            else:
                sessions[s.session_id] = s
        for d in batch.documents:
            docs[d.id] = d
        self.sessions[namespace] = sessions
        self.documents[namespace] = docs

    def reset(self, namespace: str) -> int:
        n = self.stats(namespace).items
        self.sessions.pop(namespace, None)
        self.documents.pop(namespace, None)
        return n

    def ordered_sessions(self, namespace: str) -> list[Session]:
        return sorted(self.sessions.get(namespace, {}).values(), key=lambda s: (s.started_at, s.session_id))

    def ordered_documents(self, namespace: str) -> list[Document]:
        return list(self.documents.get(namespace, {}).values())

    def stats(self, namespace: str) -> NamespaceStats:
        ss = self.sessions.get(namespace, {})
        ds = self.documents.get(namespace, {})
        msgs = sum(len(s.messages) for s in ss.values())
        return NamespaceStats(namespace, sessions=len(ss), messages=msgs, documents=len(ds), items=msgs + len(ds))

    def namespaces(self) -> list[str]:
        return sorted(set(self.sessions) | set(self.documents))


class StoreBackedBackend(MemoryBackend):
    """A backend that keeps everything it was given in `self.store` (so nothing ingested is lost, and Stats
    counts it) and may derive its own items from it (facts, memories, chunks): `items_in` says how many."""

    def __init__(self, config: dict[str, Any] | None = None, context: BackendContext | None = None):
        super().__init__(config, context)
        self.store = SessionStore()
        self.n: dict[str, int] = {}  # counters reported by Stats

    def items_in(self, namespace: str) -> int | None:
        """Derived items in the namespace; None means the ingested messages + documents are the items."""
        return None

    async def namespace_stats(self, namespace: str) -> NamespaceStats:
        s = self.store.stats(namespace)
        n = self.items_in(namespace)
        return s if n is None else NamespaceStats(namespace, s.sessions, s.messages, s.documents, n)

    def namespaces(self) -> list[str]:
        return self.store.namespaces()

    def counters(self) -> dict[str, int]:
        return dict(self.n)


class NamespaceLocks:
    """A writer-preferring read/write lock per namespace: ingest/reset exclusive, retrieves shared."""

    def __init__(self) -> None:
        self._locks: dict[str, _RWLock] = {}

    def get(self, namespace: str) -> _RWLock:
        lock = self._locks.get(namespace)
        if lock is None:
            lock = self._locks[namespace] = _RWLock()
        return lock


class _RWLock:
    def __init__(self) -> None:
        self._readers = 0
        self._writer = False
        self._waiting_writers = 0
        self._cond = asyncio.Condition()

    async def acquire_read(self) -> None:
        async with self._cond:
            await self._cond.wait_for(lambda: not self._writer and self._waiting_writers == 0)
            self._readers += 1

    async def release_read(self) -> None:
        async with self._cond:
            self._readers -= 1
            self._cond.notify_all()

    async def acquire_write(self) -> None:
        async with self._cond:
            self._waiting_writers += 1
            try:
                await self._cond.wait_for(lambda: not self._writer and self._readers == 0)
            finally:
                self._waiting_writers -= 1
            self._writer = True

    async def release_write(self) -> None:
        async with self._cond:
            self._writer = False
            self._cond.notify_all()

    def read(self):
        return _Guard(self.acquire_read, self.release_read)

    def write(self):
        return _Guard(self.acquire_write, self.release_write)


class _Guard:
    def __init__(self, acq, rel):
        self._acq, self._rel = acq, rel

    async def __aenter__(self):
        await self._acq()

    async def __aexit__(self, *exc):
        await self._rel()
