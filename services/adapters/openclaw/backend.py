"""`openclaw`: OpenClaw's native memory as a memrig backend — the Markdown workspace a real install keeps (replayed by
replay.py, by `profile`: the flush notes OpenClaw's threshold lets the model write and the session-memory hook's files,
or the idealised flush after every session with a rule-curated MEMORY.md) searched by this port of OpenClaw's builtin
hybrid `memory_search`, faithful to OpenClaw's source (the package's `dist/`; constants in presets.py; the port does
not index session transcripts, so profile `sessions` runs on `openclaw-real` only).

Retrieve returns what the "OpenClaw native" condition adds to the compaction summary (which the suite adds
itself): `formatted_context` = the recent notes block (the notes of the namespace's two newest sessions, as the
agent's auto-loaded recent daily logs) followed by the memory_search results as the tool presents them
(path#Lstart-Lend, score, snippet). `memories` = the memory_search results alone, in OpenClaw's order; each
carries its path and lines (attributes) and its vector, text and final ("hybrid") scores (channel_scores). The request's top_k is
OpenClaw's maxResults (candidates per leg: 200 in the default `openclaw` preset, openclaw 2026.9.6; min(200,
floor(top_k × 4)) in the earlier presets); pass top_k=6 for OpenClaw's default.
Without an embedder (config embedder="none") it runs OpenClaw's FTS-only mode with keyword extraction.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import numpy as np

from services.adapters.openclaw import fts as ftsmod
from services.adapters.openclaw import hybrid, ranking_2609
from services.adapters.openclaw.index import FileInput, IndexStore
from services.adapters.openclaw.keyword_search import KeywordSearch
from services.adapters.openclaw.mmr_matrix import mmr_rerank_matrix
from services.adapters.openclaw.presets import candidate_count, resolve_preset
from services.adapters.openclaw.replay import WorkspaceReplayer
from services.adapters.openclaw.results import citation, context_with_spans, file_hit_spans
from services.adapters.openclaw.spans import with_hidden_evidence
from services.adapters.openclaw.workspace import Workspace
from services.common import prompts
from services.common.types import (
    ChannelDiagnostics,
    EvidenceSpan,
    Memory,
    RetrieveQuery,
    RetrieveResult,
    SettleResult,
    utc,
)

_KNOBS = ("vector_weight", "text_weight", "mmr_enabled", "decay_enabled")


class OpenClawBackend(WorkspaceReplayer):
    name = "openclaw"
    description = "OpenClaw native memory: Markdown workspace (flush-written daily logs + MEMORY.md) + hybrid memory_search."
    capabilities = (("sessions", ""), ("documents", "path → workspace file"), ("recall", "exact"),
                    ("reference_time", "temporal decay age"), ("static_context", "recent notes"))
    defaults: dict[str, Any] = {
        **WorkspaceReplayer.defaults,
        # Early-era knobs (None = the preset's value); the late preset hard-codes them and rejects overrides.
        "vector_weight": None,
        "text_weight": None,
        "mmr_enabled": None,
        "decay_enabled": None,
        "storage": "memory",  # "memory" | "file" (one SQLite file per process under the context data dir)
    }
    searches_sessions = False  # the port indexes memory files only; OpenClaw itself (openclaw-real) indexes transcripts

    def configure(self, overrides: dict[str, Any]) -> dict[str, Any]:
        cfg = super().configure(overrides)
        preset = resolve_preset(cfg["preset"])
        for k in _KNOBS:
            v = cfg[k]
            if v is None:
                continue
            if k not in preset["knobs_configurable"] and v != preset[k]:
                raise ValueError(f"openclaw: {k!r} is fixed in preset {cfg['preset']!r} (OpenClaw hard-codes it)")
            if k.endswith("_weight") and (not isinstance(v, int | float) or isinstance(v, bool) or v < 0):
                raise ValueError(f"openclaw: {k!r} must be a non-negative number")
            if k.endswith("_enabled") and not isinstance(v, bool):
                raise ValueError(f"openclaw: {k!r} must be true or false")
        if cfg["storage"] not in ("memory", "file"):
            raise ValueError("openclaw: storage must be 'memory' or 'file'")
        return cfg

    def __init__(self, config=None, context=None):
        super().__init__(config, context)
        for k in _KNOBS:
            if self.config[k] is not None:
                self.params[k] = self.config[k]
        self._index: IndexStore | None = None

    # ------------------------------------------------------------------ lifecycle
    @property
    def index(self) -> IndexStore:
        if self._index is None:
            path = None
            if self.config["storage"] == "file":
                path = self.context.data_dir / "openclaw" / f"index-{os.getpid()}-{id(self):x}.sqlite"
            p = self.params
            self._index = IndexStore(path, p["chunk_tokens"], p["chunk_overlap_tokens"], p["fts_tokenizer"],
                                     p["snippet_max_chars"], p.get("chunker", "v1"), p.get("per_entry_paths", ()),
                                     p["mmr_tokenizer"], p.get("memory_roots_only", False))
        return self._index

    async def start(self) -> None:
        _ = self.index
        await super().start()

    async def close(self) -> None:
        if self._index is not None:
            self._index.close()
            self._index = None

    def describe_config(self) -> dict[str, Any]:
        d = dict(self.config)
        d.update({k: (list(v) if isinstance(v, tuple) else v) for k, v in self.params.items()})
        d["max_chars"] = max(32, self.params["chunk_tokens"] * 4)
        d["overlap_chars"] = min(self.params["chunk_overlap_tokens"] * 4, d["max_chars"] // 2)
        d["max_results"] = "request top_k (OpenClaw default 6)"
        d["candidates"] = ("200 per leg (min(200, floor(max(200, top_k) * 4)))" if self.params.get("candidate_universe")
                           else "min(200, floor(top_k * 4))")
        d["mode"] = "fts-only" if self.fts_only else "hybrid"
        d["embedding_model"] = self.model
        d.update(self.profile_description())
        d["prompts_hash"] = prompts.prompts_hash()
        return d

    # ------------------------------------------------------------------ ingest
    async def reset(self, namespace: str) -> int:
        n = await super().reset(namespace)
        await asyncio.to_thread(self.index.drop_namespace, namespace)
        return n

    async def index_workspace(self, namespace: str, staged: Workspace) -> int:
        """Bring the namespace's search index to `staged`'s files; returns the number of chunks (re)indexed."""
        files = [FileInput(path, f.content, f.mtime_ms, f.line_evidence()) for path, f in sorted(staged.files.items())]
        model = self.model
        plan = await asyncio.to_thread(self.index.plan_sync, namespace, files, model)
        if not self.fts_only:
            texts = [c.text for c in plan.new_chunks]
            plan.vectors = (await self.embedder.aencode(texts)) if texts else np.zeros((0, self.embedder.dim), np.float32)
        await asyncio.to_thread(self.index.apply, plan, int(time.time() * 1000))
        return len(plan.new_chunks)

    async def settle(self, namespace: str, timeout_s: float) -> SettleResult:
        st = self.store.stats(namespace)
        c = await asyncio.to_thread(self.index.counts, namespace)
        return SettleResult(settled=True, items_indexed=st.items, counts={**c, "sessions": st.sessions})

    # ------------------------------------------------------------------ search
    def search(self, namespace: str, query: str, max_results: int, query_vec: np.ndarray | None,
               now_ms: int) -> tuple[list[hybrid.Scored], list[ChannelDiagnostics]]:
        """MemoryIndexManager.search (synchronous; run it off the event loop)."""
        p = self.params
        cleaned = query.strip()
        if not cleaned:
            return [], []
        candidates = candidate_count(max_results, p["candidate_multiplier"], p["candidate_cap"],
                                     p.get("candidate_universe", 0))
        rank_to_score = lambda r: ftsmod.bm25_rank_to_score(r, p["bm25_mapping"])  # noqa: E731
        diags: list[ChannelDiagnostics] = []
        if p.get("keyword_search") == "2026.9":
            return self._search_2609(namespace, cleaned, max_results, candidates, query_vec, now_ms, rank_to_score)
        if self.fts_only:
            t0 = time.perf_counter_ns()
            terms = ftsmod.extract_keywords(cleaned) or [cleaned]
            best: dict[str, hybrid.Scored] = {}
            for term in terms:
                for h in self.index.search_keyword(namespace, ftsmod.build_fts_query(term, p["fts_token_regex"]),
                                                   candidates, None, rank_to_score):
                    cur = best.get(h.id)
                    if cur is None or h.text_score > cur.score:
                        best[h.id] = hybrid.Scored(h.id, h.path, h.start_line, h.end_line, h.snippet, h.text_score,
                                                   0.0, h.text_score, h.source)
            ranked = sorted(best.values(), key=lambda r: -r.score)
            out = hybrid.select_fts_only(ranked, max_results, p["min_score"], p["fts_only_selection"])
            diags.append(ChannelDiagnostics("fts", len(best), time.perf_counter_ns() - t0,
                                            f"fts-only keywords={terms}"))
            return out, diags
        t0 = time.perf_counter_ns()
        keyword = []
        if p["hybrid_enabled"]:
            keyword = self.index.search_keyword(namespace, ftsmod.build_fts_query(cleaned, p["fts_token_regex"]),
                                                candidates, self.model, rank_to_score)
        t1 = time.perf_counter_ns()
        vector = self.index.search_vector(namespace, query_vec, candidates) if query_vec is not None else []
        t2 = time.perf_counter_ns()
        diags.append(ChannelDiagnostics("fts", len(keyword), t1 - t0, f"bm25={p['bm25_mapping']}"))
        diags.append(ChannelDiagnostics("vector", len(vector), t2 - t1, "cosine, numpy in-process"))
        if not p["hybrid_enabled"]:
            return [r for r in (hybrid.merge_hybrid(vector, [], 1.0, 0.0, "weighted-sum"))
                    if r.score >= p["min_score"]][:max_results], diags
        merged = hybrid.merge_hybrid(vector, keyword, p["vector_weight"], p["text_weight"], p["merge"])
        if p["decay_enabled"]:
            merged = hybrid.apply_temporal_decay(merged, now_ms, p["decay_half_life_days"], p["dated_path_regex"],
                                                 p["evergreen_paths"], self.index.file_mtimes(namespace))
        merged = hybrid.sort_results(merged, p["sort_tiebreak"])
        if p["mmr_enabled"]:
            merged = mmr_rerank_matrix(merged, p["mmr_lambda"], self.index.mmr_token_ids(namespace), self.index.vocab,
                                       p["mmr_tokenizer"])
        keys = {(h.source, h.path, h.start_line, h.end_line) for h in keyword}
        out = hybrid.select_results(merged, keys, max_results, p["min_score"], p["selection"], p["text_weight"])
        diags.append(ChannelDiagnostics("merge", len(merged), time.perf_counter_ns() - t2,
                                        f"{p['merge']} vw={p['vector_weight']} tw={p['text_weight']} "
                                        f"decay={p['decay_enabled']} mmr={p['mmr_enabled']} select={p['selection']}"))
        return out, diags

    def _search_2609(self, namespace: str, cleaned: str, max_results: int, candidates: int,
                     query_vec: np.ndarray | None, now_ms: int, rank_to_score
                     ) -> tuple[list[hybrid.Scored], list[ChannelDiagnostics]]:
        """MemorySearchOrchestration.searchCandidates of 2026.9.6 (manager-runtime.js): the keyword leg with
        fallback terms and filename search, the vector leg, the hybrid merge and the final cut; FTS-only mode
        finishes the keyword rows alone (finalizeKeywordOnlyResults)."""
        p = self.params
        diags: list[ChannelDiagnostics] = []
        decay = ranking_2609.Decay(p["decay_enabled"], now_ms, p["decay_half_life_days"], p["dated_path_regex"],
                                   p["evergreen_paths"], self.index.file_mtimes(namespace))
        t0 = time.perf_counter_ns()
        ks = KeywordSearch(self.index, namespace, rank_to_score, p["snippet_max_chars"])
        keyword, terms = ks.search_with_fallback(cleaned, candidates)
        t1 = time.perf_counter_ns()
        diags.append(ChannelDiagnostics("fts", len(keyword), t1 - t0, f"boosted body+path, fallback terms={terms}"))
        if self.fts_only:
            return ranking_2609.finalize_keyword_only_2609(keyword, decay, max_results, p["min_score"]), diags
        vector = self.index.search_vector(namespace, query_vec, candidates) if query_vec is not None else []
        t2 = time.perf_counter_ns()
        diags.append(ChannelDiagnostics("vector", len(vector), t2 - t1, "cosine, numpy in-process"))
        merged = ranking_2609.merge_hybrid_2609(cleaned, vector, keyword, decay, p["vector_weight"], p["text_weight"],
                                                p["mmr_enabled"], p["mmr_lambda"],
                                                self.index.mmr_token_ids(namespace), self.index.vocab)
        keys = {k.range_key for k in keyword}
        out = hybrid.select_results(merged, keys, max_results, p["min_score"], p["selection"], p["text_weight"])
        diags.append(ChannelDiagnostics("merge", len(merged), time.perf_counter_ns() - t2,
                                        f"2026.9 merge vw={p['vector_weight']} tw={p['text_weight']} "
                                        f"decay={p['decay_enabled']} mmr={p['mmr_enabled']} select={p['selection']}"))
        return out, diags

    async def retrieve(self, namespace: str, query: RetrieveQuery) -> RetrieveResult:
        if namespace not in self._ws:
            return RetrieveResult()
        ref = query.reference_time or datetime.now(UTC)
        now_ms = int(utc(ref).timestamp() * 1000)
        qvec = None
        if not self.fts_only:
            # The query is embedded every time (Embedder.encode_query): OpenClaw's memory search asks its provider for
            # each query's vector and keeps none (memory-core's embedQueryWithRetry, 2026.9.6).
            qvec = await self.embedder.aencode_query(query.query.strip())
        results, diags = await asyncio.to_thread(self.search, namespace, query.query, query.top_k, qvec, now_ms)
        self.n["searches"] += 1
        rows = self.index.chunk_rows(namespace)
        mtimes = self.index.file_mtimes(namespace) if results else {}
        memories = []
        all_spans: list[list[EvidenceSpan]] = []
        ws = self._ws.get(namespace)
        ceiling = float("inf")
        for r in results:
            # MMR re-orders by diversity, so OpenClaw's own scores need not fall monotonically down the list. The
            # rig's contract wants non-increasing scores: Memory.score is the running minimum of OpenClaw's score
            # (equal to it whenever the order is already descending); the score itself is channel "hybrid".
            ceiling = min(ceiling, float(r.score))
            row = rows.get(r.id)
            ts = hybrid.date_from_path(r.path, self.params["dated_path_regex"])
            if ts is None:
                ts = mtimes.get(r.path)
            evidence = list(row.evidence) if row else []
            spans, bad = file_hit_spans(ws, r.path, r.snippet, r.start_line, r.end_line)
            self.n["spans_misaligned"] += bad
            spans = with_hidden_evidence(spans, evidence)
            all_spans.append(spans)
            memories.append(Memory(
                id=r.id, text=r.snippet, score=ceiling, kind="chunk",
                created_at=datetime.fromtimestamp(ts / 1000, UTC) if ts is not None else None,
                source=r.path, evidence_ids=evidence, evidence_spans=spans,
                channel_scores={"hybrid": float(r.score), "vector": float(r.vector_score),
                                "text": float(r.text_score)},
                attributes={"path": r.path, "start_line": str(r.start_line), "end_line": str(r.end_line),
                            "citation": citation(r.path, r.start_line, r.end_line), "decay": f"{r.decay:.6f}",
                            "selected_by": "strict" if r.score >= self.params["min_score"] else "keyword-fallback",
                            "preset": self.config["preset"], "mode": "fts-only" if self.fts_only else "hybrid"},
            ))
        ctx, ctx_spans = context_with_spans(ws, self.config["recent_sessions"], results, all_spans)
        return RetrieveResult(memories=memories, channels=diags, formatted_context=ctx, context_spans=ctx_spans)

    def indexed_chunks(self, namespace: str) -> set[tuple[str, int, int]]:
        """(path, start line, end line) of every chunk the namespace's index holds."""
        return {(c.path, c.start_line, c.end_line) for c in self.index.chunk_rows(namespace).values()}

    @contextlib.contextmanager
    def search_params(self, *, min_score: float | None = None, decay: bool | None = None) -> Iterator[None]:
        """Search with OpenClaw's minScore and/or temporal decay set as given inside the block (a sensitivity
        study's knobs; None leaves one as it is); the backend's own values come back on exit."""
        saved = dict(self.params)
        if min_score is not None:
            self.params["min_score"] = float(min_score)
        if decay is not None:
            self.params["decay_enabled"] = bool(decay)
        try:
            yield
        finally:
            self.params.clear()
            self.params.update(saved)

    def disk_bytes(self) -> int:
        return self._index.disk_bytes() if self._index is not None else 0

