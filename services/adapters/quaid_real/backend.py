"""`quaid-real`: Quaid itself (Quaid-Labs/quaid @ 9262e69, `modules/quaid`), driven through its own Python code in a
sidecar process (sidecar.py), beside memrig's re-implementation `quaid`.

Install: a standalone Quaid home per backend instance (under the rig's data dir) whose `config/memory.json` is what
Quaid's own installer (`setup-quaid.mjs`) writes for retrieval (minSimilarity 0.6, multi-pass gate 0.70, MMR 0.7,
co-session decay 0.6, recency over 90 days, RRF k 60, beam traversal), with the rig's services in place of Quaid's:
- embeddings: Quaid's `OllamaEmbeddingsProvider` (`POST /api/embed`) and its health check (`GET /api/tags`) reach the
  rig's embeddings service (services/embeddings_api, Ollama routes), served by this process on 127.0.0.1 from the
  rig's embedder object with the shared cache, so the re-implementation and Quaid get identical vectors;
- LLM: Quaid's `openai-compatible` provider at the flush role's endpoint (`MEMRIG_FLUSH_*`, else `MEMRIG_LLM_*`).
  The stages that call it (HyDE query routing, the LLM reranker, LLM-verified dedup and Quaid's own extraction) run
  only when that endpoint is a real model (`llm_stages: auto`); with the offline llm-mock they are off, since the mock
  does not speak Quaid's prompts, and describe() says which.

Write path (`extraction`):
- `quaid` (auto with a real model): each session's messages as a `User:`/`Assistant:` transcript through Quaid's
  `extract_from_transcript()` (its own extraction prompt, fact/edge JSON, `store()` with dedup, `create_edge()`).
  Quaid stores the session id on every fact (`session_id`, `source_id`); evidence ids are the message ids of that
  session (Quaid's extraction keeps no finer provenance). A fact Quaid dedups into one from an earlier session keeps
  the earlier session.
- `rig` (auto offline): the rig's fact extraction (the same call the re-implementation makes, through the llm-mock),
  then Quaid's own `store()` per fact (hash and embedding dedup, sqlite-vec index, FTS5). The fact's source message
  ids go into Quaid's `source_id` field (a JSON list; the field Quaid documents as "Source message ID"), and a
  duplicate `store()` answers with the existing node's id, whose evidence then gains the new fact's ids (kept
  beside Quaid's node, keyed by its id).
Retrieve: Quaid's `recall(query, limit=top_k)` with its defaults (alias resolution, intent classification, hybrid
search, composite score, multi-pass, MMR, co-session contiguity, graph traversal, low-signal retry). Each result's
node is read back (`get_node`) for its `source_id`/`session_id`, which give the evidence ids. Quaid scores with the
wall clock (recency from `accessed_at`), so the request's reference time is not used.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import sys
import time
import uuid
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from services.adapters.base import StoreBackedBackend
from services.adapters.external.embeddings import EmbeddingsBridge
from services.adapters.external.sidecar import Sidecar
from services.adapters.fact_extraction import extract_document_facts, extract_session_facts, new_messages
from services.adapters.quaid_real.source import QUAID_COMMIT, availability, modules_dir, quaid_version
from services.common.errors import DependencyError
from services.common.llm_roles import role_config
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

# Quaid's installer (setup-quaid.mjs) retrieval block: what a real install holds.
INSTALL_RETRIEVAL = {
    "defaultLimit": 5, "maxLimit": 8, "minSimilarity": 0.6, "notifyMinSimilarity": 0.85, "boostRecent": True,
    "boostFrequent": True, "maxTokens": 2000, "rrfK": 60, "rerankerBlend": 0.5, "compositeRelevanceWeight": 0.60,
    "compositeRecencyWeight": 0.20, "compositeFrequencyWeight": 0.15, "multiPassGate": 0.70, "mmrLambda": 0.7,
    "coSessionDecay": 0.6, "recencyDecayDays": 90,
    "traversal": {"useBeam": True, "beamWidth": 5, "maxDepth": 2, "hopDecay": 0.7},
}
SOURCE_PREFIX = "memrig:"  # source_id = "memrig:" + JSON list of message ids (the rig write path)


class QuaidSidecarError(DependencyError):
    """The Quaid sidecar is missing, did not start, or failed a request (the message says which)."""

    dependency = "Quaid's sidecar"
    hint = "make setup-quaid installs Quaid's Python dependencies; the sidecar's log is in the message"


def encode_source(evidence_ids: list[str] | tuple[str, ...]) -> str:
    return SOURCE_PREFIX + json.dumps(list(evidence_ids))


def decode_source(source_id: str | None) -> list[str] | None:
    """The message ids the rig wrote into a node's `source_id`; None when Quaid wrote it (its session id)."""
    if not source_id or not source_id.startswith(SOURCE_PREFIX):
        return None
    try:
        ids = json.loads(source_id[len(SOURCE_PREFIX):])
    except ValueError:
        return None
    return [str(x) for x in ids] if isinstance(ids, list) else None


def ready_reply(line: bytes) -> str:
    """The sidecar's first line: `{"ok": true, "ready": true, ...}`, or `{"ok": false, "error": ...}` when Quaid did
    not import."""
    try:
        rep = json.loads(line)
    except ValueError:
        return f"its first line is not JSON: {line[:200]!r}"
    return "" if isinstance(rep, dict) and rep.get("ok") else str(rep.get("error") if isinstance(rep, dict) else rep)


def transcript(messages) -> str:
    """Quaid's transcript form (`lib.adapter.build_transcript`): `User: ...` / `Assistant: ...` turns, blank-line
    separated (its chunker splits at blank lines); other roles are dropped as Quaid drops them."""
    names = {"user": "User", "assistant": "Assistant"}
    return "\n\n".join(f"{names[m.role]}: {m.content}" for m in messages if m.role in names)


def namespace_key(namespace: str) -> str:
    import hashlib

    return "ns-" + hashlib.sha256(namespace.encode()).hexdigest()[:24]


class QuaidRealBackend(StoreBackedBackend):
    name = "quaid-real"
    description = ("Quaid itself (Quaid-Labs/quaid @ 9262e69): its store()/extraction and recall() in a Python "
                   "sidecar, SQLite + sqlite-vec, embeddings through the rig's Ollama-shaped endpoint.")
    capabilities = (("sessions", ""), ("documents", "facts extracted from the text"), ("recall", "exact"),
                    ("library", "quaid"))
    uses_embedder = True
    defaults: dict[str, Any] = {
        "extraction": "auto",  # auto | quaid | rig
        "llm_stages": "auto",  # auto | on | off: HyDE, LLM rerank, LLM-verified dedup
        "sidecar_start_timeout_s": 120.0,
        "request_timeout_s": 900.0,
        "llm_temperature": 0.0,
        "persist": False,
    }

    def __init__(self, config=None, context=None):
        super().__init__(config, context)
        for key, allowed in (("extraction", ("auto", "quaid", "rig")), ("llm_stages", ("auto", "on", "off"))):
            if self.config[key] not in allowed:
                raise ValueError(f"quaid-real: config '{key}' must be {'|'.join(allowed)}, got {self.config[key]!r}")
        self.llm_cfg = role_config("flush")
        real_model = not self.llm_cfg.is_mock
        self.extraction = (self.config["extraction"] if self.config["extraction"] != "auto"
                           else ("quaid" if real_model else "rig"))
        self.llm_stages = (self.config["llm_stages"] == "on") or (self.config["llm_stages"] == "auto" and real_model)
        self.version = f"quaid {quaid_version()} @ {QUAID_COMMIT[:7]}"
        self.root = (Path(self.context.data_dir) / "quaid-real" / uuid.uuid4().hex[:12]).resolve()  # QUAID_HOME: absolute
        self._sidecar: Sidecar | None = None
        self._bridge = EmbeddingsBridge()
        self._embed_url = ""
        self._info: dict[str, Any] = {}
        self.evidence: dict[str, dict[str, list[str]]] = {}  # namespace → Quaid node id → evidence ids
        self.items: dict[str, int] = {}

    # -- install ------------------------------------------------------------------------------------
    def memory_json(self) -> dict[str, Any]:
        emb = self.context.embedder
        base = self.llm_cfg.base_url.rstrip("/")
        base = base[:-3] if base.endswith("/v1") else base
        return {
            "adapter": {"type": "standalone"},
            "models": {"llmProvider": "openai-compatible", "baseUrl": base if self.llm_stages or
                       self.extraction == "quaid" else "http://127.0.0.1:9", "apiKeyEnv": "MEMRIG_QUAID_LLM_KEY",
                       "deepReasoning": self.llm_cfg.model, "fastReasoning": self.llm_cfg.model,
                       "embeddingsProvider": "ollama"},
            "retrieval": {**INSTALL_RETRIEVAL, "useHyde": self.llm_stages,
                          "reranker": {"enabled": self.llm_stages, "topK": 20}},
            "janitor": {"dedup": {"similarityThreshold": 0.85, "highSimilarityThreshold": 0.95,
                                  "autoRejectThreshold": 0.98, "grayZoneLow": 0.88,
                                  "llmVerifyEnabled": self.llm_stages}},
            "capture": {"enabled": True, "skipPatterns": []},
            "users": {"defaultOwner": "default"},
            "database": {"path": "data/memory.db", "archivePath": "data/memory_archive.db", "walMode": True},
            "ollama": {"url": self._embed_url or "(set at start)", "embeddingModel": emb.name,
                       "embeddingDim": emb.dim},
        }

    async def start(self) -> None:
        if self._sidecar is not None:
            return
        try:
            await self._start()
        except BaseException:
            await self.close()
            raise

    async def _start(self) -> None:
        a = availability()
        if not a.ok:
            raise QuaidSidecarError(f"quaid-real unavailable: {a.reason}")
        emb = await asyncio.to_thread(lambda: self.context.embedder)
        self._embed_url = await self._bridge.start(emb)  # Ollama's routes at its root
        (self.root / "config").mkdir(parents=True, exist_ok=True)
        (self.root / "config" / "memory.json").write_text(json.dumps(self.memory_json(), indent=2))
        env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_")}  # Quaid relaxes fail-hard under pytest
        env.update({"QUAID_HOME": str(self.root), "OLLAMA_URL": self._embed_url, "QUAID_QUIET": "1",
                    "QUAID_DISABLE_NOTIFICATIONS": "1", "MEMRIG_QUAID_MODULES": str(modules_dir()),
                    "MEMRIG_QUAID_LLM_KEY": self.llm_cfg.api_key or "memrig-offline", "TZ": "UTC",
                    "PYTHONUNBUFFERED": "1"})
        env.pop("MOCK_EMBEDDINGS", None)
        self._sidecar = Sidecar("quaid-real", [sys.executable, "-m", "services.adapters.quaid_real.sidecar"],
                                cwd=self.root, env=env, log=self.root / "sidecar.log", error=QuaidSidecarError,
                                stdin=True, line_limit=512 * 1024 * 1024)
        line = await self._sidecar.start(float(self.config["sidecar_start_timeout_s"]), check=ready_reply)
        self._info = json.loads(line)
        if not self._info.get("sqlite_vec"):
            raise QuaidSidecarError("quaid-real: Quaid did not load sqlite-vec (run `make setup-quaid`)")

    async def call(self, op: str, **req: Any) -> dict[str, Any]:
        if self._sidecar is None:
            await self.start()
        assert self._sidecar is not None
        line = await self._sidecar.request(json.dumps({"op": op, **req}).encode(),
                                           float(self.config["request_timeout_s"]), op)
        if not line:
            raise QuaidSidecarError(f"quaid-real: the sidecar exited during {op}; log: {self._sidecar.log_tail()}")
        rep = json.loads(line)
        if not rep.get("ok"):
            raise QuaidSidecarError(f"quaid-real: {op} failed in Quaid: {rep.get('error')}\n{rep.get('trace', '')}")
        return rep

    async def close(self) -> None:
        if self._sidecar is not None:
            sidecar, self._sidecar = self._sidecar, None
            await sidecar.stop()
        await self._bridge.close()
        if not self.config["persist"]:
            shutil.rmtree(self.root, ignore_errors=True)

    def describe_config(self) -> dict[str, Any]:
        d = dict(self.config)
        emb = self.context.embedder_name if hasattr(self.context, "embedder_name") else None
        d.update({
            "release": f"quaid {quaid_version()} @ {QUAID_COMMIT[:7]}",
            "quaid_commit": QUAID_COMMIT,
            "source": str(modules_dir()),
            "extraction_effective": self.extraction,
            "extraction_model": (self.llm_cfg.model + " via Quaid's extraction prompt" if self.extraction == "quaid"
                                 else f"rig extraction (prompts.FACT_EXTRACTION_SYSTEM) with {self.llm_cfg.model}"),
            "llm_stages_effective": self.llm_stages,
            "llm": {"provider": "openai-compatible", "model": self.llm_cfg.model, "base_url": self.llm_cfg.base_url,
                    "offline_mock": self.llm_cfg.is_mock},
            "embedding_model": self._info.get("embedding_model") or emb or "the rig embedder",
            "embeddings_endpoint": "Ollama /api/embed on 127.0.0.1 (services/embeddings_api, the rig's embedder)",
            "sqlite": self._info.get("sqlite", ""),
            "retrieval_config": dict(INSTALL_RETRIEVAL),
            "evidence": ("session id stored by Quaid → the session's message ids" if self.extraction == "quaid"
                         else "message ids in Quaid's source_id (JSON), unioned over dedup hits"),
            "reference_time": "not used: Quaid scores recency with the wall clock (accessed_at)",
        })
        return d

    # -- ingest -------------------------------------------------------------------------------------
    async def reset(self, namespace: str) -> int:
        if self._sidecar is not None:
            await self.call("drop", ns=namespace_key(namespace))
        self.evidence.pop(namespace, None)
        self.items.pop(namespace, None)
        return self.store.reset(namespace)

    async def ingest(self, namespace: str, batch: IngestBatch) -> None:
        key = namespace_key(namespace)
        work = new_messages(self.store.sessions.get(namespace, {}), batch.sessions)
        if self.extraction == "quaid":
            added = 0
            for s, msgs in work:
                r = await self.call("extract", ns=key, transcript=transcript(msgs), session_id=s.session_id,
                                    label="memrig")
                added += r["facts_stored"]
                self.n["llm_calls"] = self.n.get("llm_calls", 0) + 1
            for d in batch.documents:
                r = await self.call("extract", ns=key, transcript=f"User: {d.text}", session_id=f"doc:{d.id}",
                                    label="memrig")
                added += r["facts_stored"]
            self.store.apply(namespace, batch)
            self.items[namespace] = self.items.get(namespace, 0) + added
            return
        now = datetime.now(UTC)
        temp = self.config["llm_temperature"]
        groups = await asyncio.gather(*(extract_session_facts(self.context.llm, s, m, temp) for s, m in work),
                                      *(extract_document_facts(self.context.llm, d, now, temp) for d in batch.documents))
        self.n["llm_calls"] = self.n.get("llm_calls", 0) + len(groups)
        facts = [f for g in groups for f in g]
        rep = await self.call("store", ns=key, facts=[
            {"text": f.text, "session_id": f.session_id, "source": "memrig-extraction",
             "source_id": encode_source(f.evidence_ids), "created_at": utc(f.created_at).isoformat()} for f in facts])
        ev = self.evidence.setdefault(namespace, {})
        created = 0
        for f, r in zip(facts, rep["results"], strict=True):
            if r["id"] is None:
                self.n["facts_rejected"] = self.n.get("facts_rejected", 0) + 1
                continue
            created += r["status"] == "created"
            have = ev.setdefault(r["id"], [])
            have.extend(e for e in f.evidence_ids if e not in have)
        self.n["facts_added"] = self.n.get("facts_added", 0) + created
        self.store.apply(namespace, batch)
        self.items[namespace] = self.items.get(namespace, 0) + created

    async def settle(self, namespace: str, timeout_s: float) -> SettleResult:
        st = self.store.stats(namespace)
        n = self.items.get(namespace, 0)
        return SettleResult(settled=True, items_indexed=n, counts={"facts": n, "sessions": st.sessions})

    def items_in(self, namespace: str) -> int | None:
        return self.items.get(namespace, 0) if namespace in self.store.namespaces() else None

    # -- retrieve -----------------------------------------------------------------------------------
    def evidence_for(self, namespace: str, node_id: str, node: dict[str, Any] | None) -> list[str]:
        """A recalled node's evidence ids: the rig's record for its id (rig write path, dedup hits unioned), else
        the ids in its source_id, else the message ids of the session Quaid stored on it."""
        have = self.evidence.get(namespace, {}).get(node_id)
        if have:
            return list(have)
        node = node or {}
        ids = decode_source(node.get("source_id"))
        if ids is not None:
            return ids
        sid = node.get("session_id") or ""
        if sid.startswith("doc:"):
            d = self.store.documents.get(namespace, {}).get(sid[4:])
            return list(d.evidence()) if d is not None else []
        s = self.store.sessions.get(namespace, {}).get(sid)
        return [m.id for m in s.messages] if s is not None else []

    async def retrieve(self, namespace: str, query: RetrieveQuery) -> RetrieveResult:
        if namespace not in self.store.namespaces():
            return RetrieveResult()
        t0 = time.perf_counter_ns()
        rep = await self.call("recall", ns=namespace_key(namespace), query=query.query, limit=query.top_k)
        took = time.perf_counter_ns() - t0
        memories = []
        ceiling = float("inf")
        for r in rep["results"]:
            node = rep["nodes"].get(r["id"])
            ceiling = min(ceiling, float(r["similarity"]))
            created = parse_iso(r["created_at"], "created_at") if r.get("created_at") else None
            attrs = {k: str(r[k]) for k in ("category", "via_relation", "hop_depth", "_multi_pass") if k in r}
            memories.append(Memory(
                id=r["id"], text=r["text"], score=ceiling, kind="fact",
                created_at=utc(created) if created else None,
                source=f"session:{(node or {}).get('session_id') or ''}",
                evidence_ids=self.evidence_for(namespace, r["id"], node),
                channel_scores={"composite": float(r["similarity"])}, attributes=attrs))
        lines = ["## Quaid memory recall"] + [f"- {m.text}" for m in memories] if memories else []
        return RetrieveResult(memories=memories, formatted_context="\n".join(lines), channels=[
            ChannelDiagnostics("quaid.recall", len(memories), took, "Quaid's recall() in the sidecar")])
