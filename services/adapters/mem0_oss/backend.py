"""`mem0-oss`: Mem0 itself, through its own Python library (`mem0ai` 2.2.1, `mem0.Memory`), not a reading of it.

Configuration (all Mem0's own config objects, every value listed by Describe):
- vector store: Mem0's `qdrant` provider in local mode, on disk under the rig's data dir (a directory per
  process, removed at close unless `persist`); history DB (SQLite) beside it.
- embedder: the rig's embedder (shared cache) as Mem0 embedder provider "memrig" (see library.py).
- LLM: Mem0's `openai` provider pointed at `$MEMRIG_LLM_BASE_URL`/`$MEMRIG_LLM_MODEL`. `infer="auto"` runs
  `add(infer=True)` (Mem0's extraction + dedup path) only when a real model is configured there; the rig's
  offline llm-mock does not speak Mem0's extraction prompt, so offline the messages are stored raw
  (`add(infer=False)`), one Mem0 memory per message.
- one Mem0 user per namespace (`user_id` = the namespace; a namespace with whitespace, which Mem0 rejects, is
  hashed); evidence ids ride in Mem0 metadata (`memrig_evidence_ids`, `memrig_session_id`) and come back in
  `search` results' `metadata`.
- search: `Memory.search(query, top_k, filters={"user_id": ...}, threshold)`; Mem0's hybrid channels that need
  runtime downloads stay off: BM25 keyword scoring (needs `fastembed` and its Qdrant/bm25 model) and entity
  boosts + lemmatisation (need spaCy and `en_core_web_sm`). Neither package is installed, so Mem0 falls back
  to semantic similarity only (its own documented fallback) and Describe says so.

Mem0's calls are synchronous; they run on one worker thread (Mem0's local Qdrant client is not meant for
concurrent use), so the event loop never blocks.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import hashlib
import importlib.util
import shutil
import time
import uuid
from importlib.metadata import version as dist_version
from pathlib import Path
from typing import Any

from services.adapters.base import BackendContext, StoreBackedBackend
from services.adapters.mem0_oss.library import MEM0_VERSION_PIN, embedder_config, import_mem0, searching
from services.common.llm_roles import role_config
from services.common.types import (
    ChannelDiagnostics,
    IngestBatch,
    Memory,
    RetrieveQuery,
    RetrieveResult,
    Session,
    parse_iso,
)

EVIDENCE_KEY = "memrig_evidence_ids"
SESSION_KEY = "memrig_session_id"


def mem0_user_id(namespace: str) -> str:
    ns = namespace.strip()
    if ns and not any(c.isspace() for c in ns) and len(ns) <= 200:
        return ns
    return "ns-" + hashlib.sha256(namespace.encode()).hexdigest()[:24]


def disabled_channels() -> dict[str, str]:
    """Mem0 search channels that are off here, and why (they would download models at runtime)."""
    out = {}
    if importlib.util.find_spec("fastembed") is None:
        out["bm25"] = "off: fastembed not installed (Qdrant/bm25 sparse model is a runtime download)"
    if importlib.util.find_spec("spacy") is None:
        out["entity_boost"] = "off: spaCy not installed (en_core_web_sm is a runtime download)"
        out["bm25_lemmatization"] = "off: spaCy not installed"
    return out


class Mem0OssBackend(StoreBackedBackend):
    name = "mem0-oss"
    description = "Mem0 through its own library (mem0ai): Memory.add / Memory.search, local Qdrant on disk."
    capabilities = (("sessions", ""), ("documents", ""), ("recall", "exact"), ("library", "mem0ai"))
    uses_embedder = True
    defaults: dict[str, Any] = {
        "infer": "auto",  # auto | true | false
        "search_threshold": 0.1,  # Memory.search default (mem0/memory/main.py @ 2.2.1)
        "collection_name": "memrig",
        "qdrant_on_disk": True,
        "persist": False,  # keep the on-disk store after close
        "llm_temperature": 0.1,
        "llm_max_tokens": 2000,
    }

    def __init__(self, config: dict[str, Any] | None = None, context: BackendContext | None = None):
        super().__init__(config, context)
        if self.config["infer"] not in ("auto", "true", "false"):
            raise ValueError(f"mem0-oss: config 'infer' must be auto|true|false, got {self.config['infer']!r}")
        if importlib.util.find_spec("mem0") is None:
            raise ValueError(f"mem0-oss: Mem0's library is not installed; run `pip install --no-deps "
                             f"mem0ai=={MEM0_VERSION_PIN}` and `pip install -e '.[mem0-oss]'` (or `make setup`)")
        self.llm_cfg = role_config("flush")  # Mem0's extraction writes memories: the flush role's model
        self.infer = (self.config["infer"] == "true") or (self.config["infer"] == "auto" and not self.llm_cfg.is_mock)
        self.root = Path(self.context.data_dir) / "mem0-oss" / uuid.uuid4().hex[:12]
        self.version = f"mem0ai {self._mem0_version()}"
        self.memory = None
        self.mem0_items: dict[str, int] = {}
        self._pool = concurrent.futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix="mem0")

    @staticmethod
    def _mem0_version() -> str:
        try:
            return dist_version("mem0ai")
        except Exception:  # not installed: Describe still works, start() explains
            return "not installed"

    def mem0_config_dict(self) -> dict[str, Any]:
        """Mem0's MemoryConfig as plain values (the embedder object named, not dumped)."""
        e = self.context.embedder
        return {
            "vector_store": {"provider": "qdrant", "config": {
                "collection_name": self.config["collection_name"], "embedding_model_dims": e.dim,
                "path": str(self.root / "qdrant"), "on_disk": self.config["qdrant_on_disk"]}},
            "embedder": {"provider": "memrig", "config": {"model": f"rig embedder {e.name}", "embedding_dims": e.dim}},
            "llm": {"provider": "openai", "config": {
                "model": self.llm_cfg.model, "openai_base_url": self.llm_cfg.base_url,
                "temperature": self.config["llm_temperature"], "max_tokens": self.config["llm_max_tokens"],
                "api_key": "***" if self.llm_cfg.api_key else "(none)"}},
            "history_db_path": str(self.root / "history.db"),
            "version": "v1.1",
            "reranker": None,
        }

    def describe_config(self) -> dict[str, Any]:
        d = dict(self.config)
        d["mem0ai_version"] = self._mem0_version()
        d["mem0ai_pin"] = MEM0_VERSION_PIN
        d["infer_effective"] = self.infer
        d["infer_reason"] = ("config infer=true" if self.config["infer"] == "true" else
                             "config infer=false" if self.config["infer"] == "false" else
                             f"auto: {'a real model' if self.infer else 'only the offline llm-mock'} at MEMRIG_LLM_*")
        d["mem0_config"] = self.mem0_config_dict()
        d["disabled_channels"] = disabled_channels()
        d["telemetry"] = "off (MEM0_TELEMETRY=False)"
        d["user_id"] = "the namespace (hashed when it holds whitespace)"
        d["evidence_metadata_keys"] = [EVIDENCE_KEY, SESSION_KEY]
        d["add_granularity"] = "one add() per session (infer)" if self.infer else "one add(infer=False) per message"
        return d

    # -- lifecycle ---------------------------------------------------------------------------------
    def _build(self):
        mem0 = import_mem0(self.root / "home")
        from mem0.configs.base import MemoryConfig

        cfg = self.mem0_config_dict()
        llm = dict(cfg["llm"]["config"])
        llm["api_key"] = self.llm_cfg.api_key or "memrig-offline"  # never sent unless infer runs
        mc = MemoryConfig(
            vector_store=cfg["vector_store"],
            embedder=embedder_config(self.context.embedder),
            llm={"provider": "openai", "config": llm},
            history_db_path=cfg["history_db_path"],
            version=cfg["version"],
        )
        return mem0.Memory(mc)

    async def _run(self, fn, *args, **kwargs):
        return await asyncio.get_running_loop().run_in_executor(self._pool, lambda: fn(*args, **kwargs))

    async def start(self) -> None:
        if self.memory is None:
            self.memory = await self._run(self._build)

    async def _mem(self):
        if self.memory is None:
            await self.start()
        return self.memory

    async def close(self) -> None:
        if self.memory is not None:
            mem = self.memory

            def shut():
                mem.close()  # Memory.close() releases SQLite only; the local Qdrant client holds a file lock
                mem.vector_store.client.close()

            await self._run(shut)
            self.memory = None
        self.mem0_items: dict[str, int] = {}
        self._pool.shutdown(wait=True)
        if not self.config["persist"]:
            shutil.rmtree(self.root, ignore_errors=True)

    # -- operations --------------------------------------------------------------------------------
    def _add_session(self, mem, user: str, s: Session) -> int:
        if self.infer:
            msgs = [{"role": m.role, "content": m.content} for m in s.messages]
            meta = {EVIDENCE_KEY: [m.id for m in s.messages], SESSION_KEY: s.session_id,
                    "created_at": s.started_at.isoformat()}
            return len(mem.add(msgs, user_id=user, metadata=meta, infer=True)["results"])
        n = 0
        for m in s.messages:
            meta = {EVIDENCE_KEY: [m.id], SESSION_KEY: s.session_id,
                    "created_at": s.message_time(m).isoformat()}
            n += len(mem.add([{"role": m.role, "content": m.content}], user_id=user, metadata=meta,
                             infer=False)["results"])
        return n

    def _ingest_sync(self, mem, user: str, batch: IngestBatch) -> int:
        """Add the batch; on any failure delete what it added (Mem0 has no transaction) and re-raise."""
        before = {r["id"] for r in self._list(mem, user)}
        added = 0
        try:
            for s in batch.sessions:
                added += self._add_session(mem, user, s)
            for d in batch.documents:
                meta = {EVIDENCE_KEY: list(d.evidence()), SESSION_KEY: f"doc:{d.id}"}
                if d.created_at:
                    meta["created_at"] = d.created_at.isoformat()
                added += len(mem.add([{"role": "user", "content": d.text}], user_id=user, metadata=meta,
                                     infer=self.infer)["results"])
        except Exception:
            for row in self._list(mem, user):
                if row["id"] not in before:
                    mem.delete(row["id"])
            raise
        return added

    @staticmethod
    def _list(mem, user: str) -> list[dict]:
        return mem.get_all(filters={"user_id": user}, top_k=1_000_000)["results"]

    async def ingest(self, namespace: str, batch: IngestBatch) -> None:
        mem = await self._mem()
        added = await self._run(self._ingest_sync, mem, mem0_user_id(namespace), batch)
        self.store.apply(namespace, batch)
        self.n["mem0_memories_added"] = self.n.get("mem0_memories_added", 0) + added
        self.mem0_items[namespace] = self.mem0_items.get(namespace, 0) + added

    def items_in(self, namespace: str) -> int | None:
        """Mem0 memories in the namespace (with infer, extracted facts, not messages)."""
        return self.mem0_items.get(namespace, 0) if namespace in self.store.namespaces() else None

    async def retrieve(self, namespace: str, query: RetrieveQuery) -> RetrieveResult:
        if namespace not in self.store.sessions and namespace not in self.store.documents:
            return RetrieveResult()
        mem = await self._mem()
        t0 = time.perf_counter_ns()
        res = await self._run(searching, mem.search, query.query, top_k=query.top_k,
                              filters={"user_id": mem0_user_id(namespace)},
                              threshold=self.config["search_threshold"])
        memories = [self.to_memory(r) for r in res["results"]]
        return RetrieveResult(memories=memories, channels=[
            ChannelDiagnostics("mem0.search", len(memories), time.perf_counter_ns() - t0,
                               "semantic only" if disabled_channels() else "")])

    @staticmethod
    def to_memory(r: dict) -> Memory:
        meta = r.get("metadata") or {}
        created = None
        if r.get("created_at"):
            try:
                created = parse_iso(r["created_at"], "created_at")
            except ValueError:
                created = None
        return Memory(id=str(r["id"]), text=r["memory"], score=float(r["score"]), kind="memory",
                      created_at=created, source=f"mem0:{meta.get(SESSION_KEY, '')}",
                      evidence_ids=[str(x) for x in meta.get(EVIDENCE_KEY) or []],
                      attributes={k: str(r[k]) for k in ("role", "hash") if r.get(k)})

    async def reset(self, namespace: str) -> int:
        n = (await self.namespace_stats(namespace)).items
        if self.memory is not None:
            await self._run(self.memory.delete_all, user_id=mem0_user_id(namespace))
        self.store.reset(namespace)
        self.mem0_items.pop(namespace, None)
        return n

    def disk_bytes(self) -> int:
        return sum(p.stat().st_size for p in self.root.rglob("*") if p.is_file()) if self.root.exists() else 0
