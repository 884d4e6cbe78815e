"""`openclaw`: OpenClaw's native memory as a memrig backend — the Markdown workspace a real install keeps (by
`profile`, lifecycle.py: the flush notes OpenClaw's threshold lets the model write and the session-memory hook's files,
or the idealised flush after every session with a rule-curated MEMORY.md) and its builtin hybrid `memory_search` over
it, faithful to OpenClaw's source (the package's `dist/`; constants in presets.py; the port does not index session
transcripts, so profile `sessions` runs on `openclaw-real` only).

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

from services.adapters.base import MemoryBackend, SessionStore
from services.adapters.openclaw import fts as ftsmod
from services.adapters.openclaw import hybrid, lifecycle, ranking_2609
from services.adapters.openclaw.index import FileInput, IndexStore
from services.adapters.openclaw.keyword_search import KeywordSearch
from services.adapters.openclaw.mmr_matrix import mmr_rerank_matrix
from services.adapters.openclaw.presets import candidate_count, resolve_preset
from services.adapters.openclaw.spans import file_snippet_spans, join_blocks, shifted, with_hidden_evidence
from services.adapters.openclaw.workspace import (
    FlushSkipper,
    Workspace,
    apply_document,
    apply_flush,
    apply_plan_flush,
    chat_role,
    flush_messages,
    hook_wfile,
    parse_flush_reply,
)
from services.common import prompts
from services.common.transcripts import compact
from services.common.types import (
    ChannelDiagnostics,
    EvidenceSpan,
    IngestBatch,
    Memory,
    Message,
    NamespaceStats,
    RetrieveQuery,
    RetrieveResult,
    Session,
    SettleResult,
    utc,
)

FTS_ONLY_MODEL = "fts-only"
_KNOBS = ("vector_weight", "text_weight", "mmr_enabled", "decay_enabled")


def citation(path: str, start: int, end: int) -> str:
    return f"{path}#L{start}-L{end}"


def search_results_block(results: list[hybrid.Scored], spans: list[list[EvidenceSpan]] | None = None
                         ) -> tuple[str, list[EvidenceSpan]]:
    """The memory_search results as the tool presents them (`[i] path#Lstart-Lend (score s)` + snippet), and each
    snippet's evidence spans (`spans`, one list per result) moved to where the snippet sits in the block."""
    if not results:
        return "## memory_search results\n(no results)", []
    parts = ["## memory_search results"]
    out: list[EvidenceSpan] = []
    pos = len(parts[0])
    for i, r in enumerate(results, 1):
        head = f"[{i}] {citation(r.path, r.start_line, r.end_line)} (score {r.score:.3f})\n"
        pos += 2  # the blank line between entries
        if spans is not None:
            out += shifted(spans[i - 1], pos + len(head))
        parts.append(head + r.snippet)
        pos += len(head) + len(r.snippet)
    return "\n\n".join(parts), out


def format_search_results(results: list[hybrid.Scored]) -> str:
    return search_results_block(results)[0]


def recent_notes_block(ws: Workspace | None, n: int) -> tuple[str, list[EvidenceSpan]]:
    """The notes of the namespace's n newest sessions (their flush-written lines under a `### path (session id)`
    heading), and one span per note line and evidence id over that line."""
    if ws is None or n <= 0:
        return "", []
    head = f"## Recent memory notes (last {n} sessions)\n"
    blocks = []
    for sn in ws.recent_notes(n):
        if not sn.lines:
            continue
        title = f"### {sn.path} (session {sn.session_id})\n"
        sp, pos = [], len(title)
        for line, ev in zip(sn.lines, sn.evidence, strict=True):
            if line:
                sp += [EvidenceSpan(e, pos, pos + len(line)) for e in ev]
            pos += len(line) + 1
        blocks.append((title + "\n".join(sn.lines), sp))
    if not blocks:
        return "", []
    text, sp = join_blocks(blocks)
    return head + text, shifted(sp, len(head))


def format_recent_notes(ws: Workspace | None, n: int) -> str:
    return recent_notes_block(ws, n)[0]


def context_with_spans(ws: Workspace | None, n: int, results: list[hybrid.Scored],
                       spans: list[list[EvidenceSpan]]) -> tuple[str, list[EvidenceSpan]]:
    """formatted_context (the recent notes block, then the memory_search results) and its evidence spans."""
    return join_blocks([recent_notes_block(ws, n), search_results_block(results, spans)])


def file_hit_spans(ws: Workspace | None, path: str, snippet: str, start: int, end: int) -> tuple[list[EvidenceSpan], int]:
    """A memory-file hit's snippet spans from the workspace's line evidence (no file is re-read); the file's lines
    as chunkMarkdown sees them: its lines, then the empty line after the final newline. A file the workspace does
    not hold (nothing the sessions wrote) gives no spans."""
    f = ws.files.get(path) if ws else None
    if f is None:
        return [], 0
    return file_snippet_spans(snippet, f.lines + [""], f.line_evidence(), start, end)


class OpenClawBackend(MemoryBackend):
    name = "openclaw"
    description = "OpenClaw native memory: Markdown workspace (flush-written daily logs + MEMORY.md) + hybrid memory_search."
    capabilities = (("sessions", ""), ("documents", "path → workspace file"), ("recall", "exact"),
                    ("reference_time", "temporal decay age"), ("static_context", "recent notes"))
    defaults: dict[str, Any] = {
        "preset": "openclaw",
        # Early-era knobs (None = the preset's value); the late preset hard-codes them and rejects overrides.
        "vector_weight": None,
        "text_weight": None,
        "mmr_enabled": None,
        "decay_enabled": None,
        "embedder": "",  # "" = the process embedder; "none" = OpenClaw's FTS-only mode
        "flush_skip_rate": 0.0,  # the every-other-cycle flush bug (#12590); 0.5 ≈ the seed's ~50%
        "flush_skip_mode": "alternate",  # "alternate" (deterministic pattern) | "random" (seeded per session)
        "flush_seed": 0,
        "recent_sessions": 2,  # the seeds' "last two sessions' notes" in the shared foundation
        "storage": "memory",  # "memory" | "file" (one SQLite file per process under the context data dir)
        "llm_temperature": 0.0,
        # OpenClaw's memory.search.query.minScore (None = the preset's 0.35); a sensitivity knob, not a preset fact.
        "min_score": None,
        # What a real install holds (lifecycle.PROFILES). The class keeps the rig's earlier idealisation; the
        # registered `openclaw` and `openclaw-real` backends run "default", OpenClaw 2026.9.6 as installed.
        "profile": "flush-every-session",
        "context_window": lifecycle.DEFAULT_CONTEXT_WINDOW,  # the model's window: the flush and compaction thresholds
        "session_boundary": "new",  # "new": each session ends with /new (the hook fires); "continue": one session
        # prompt tokens a real turn adds beyond the messages: OpenClaw 2026.9.6's system prompt + tool definitions for
        # a default install, measured (lifecycle.SYSTEM_PROMPT_TOKENS); the flush threshold counts them
        "system_prompt_tokens": lifecycle.SYSTEM_PROMPT_TOKENS,
        # "open": the newest session of an ingest is the live conversation the question is asked in (no /new, no
        # hook file); "closed": it is ended with /new at its last message like the others (the earlier replay).
        "last_session": "open",
        # Start each namespace's workspace with what onboarding writes (lifecycle.BOOTSTRAP_FILES, read from the
        # installed openclaw package's templates); BOOTSTRAP.md goes once the workspace holds memory, as OpenClaw's
        # next turn deletes it. USER.md is indexed and searched (evergreen); the others are not.
        "bootstrap": True,
    }
    uses_embedder = True
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
        ms = cfg["min_score"]
        if ms is not None and (not isinstance(ms, int | float) or isinstance(ms, bool) or not 0.0 <= ms <= 1.0):
            raise ValueError("openclaw: 'min_score' must be a number in [0, 1] (or null for the preset's)")
        if cfg["storage"] not in ("memory", "file"):
            raise ValueError("openclaw: storage must be 'memory' or 'file'")
        if cfg["embedder"] not in ("", "none", "minilm", "wordllama", "hash", "remote"):
            raise ValueError("openclaw: embedder must be '', 'none', 'minilm', 'wordllama', 'hash' or 'remote'")
        FlushSkipper(float(cfg["flush_skip_rate"]), cfg["flush_skip_mode"], int(cfg["flush_seed"]))
        if not isinstance(cfg["recent_sessions"], int) or cfg["recent_sessions"] < 0:
            raise ValueError("openclaw: recent_sessions must be an integer >= 0")
        prof = lifecycle.resolve_profile(cfg["profile"])
        if prof.search_sessions and not self.searches_sessions:
            raise ValueError(f"openclaw: profile {prof.name!r} searches session transcripts, which the port does not "
                             "index; run it on OpenClaw itself: openclaw-real[profile=sessions]")
        th = lifecycle.thresholds(cfg["context_window"])
        if cfg["session_boundary"] not in lifecycle.SESSION_BOUNDARIES:
            raise ValueError("openclaw: session_boundary must be 'new' or 'continue'")
        if cfg["last_session"] not in lifecycle.LAST_SESSION:
            raise ValueError(f"openclaw: last_session must be 'open' or 'closed', got {cfg['last_session']!r}")
        lifecycle.check_system_prompt_tokens(cfg["system_prompt_tokens"], th if prof.flush == "threshold" else None)
        if prof.flush == "threshold" and float(cfg["flush_skip_rate"]) > 0:
            raise ValueError("openclaw: flush_skip_rate models the idealised every-session flush; use it with "
                             "profile 'flush-every-session'")
        return cfg

    def __init__(self, config=None, context=None):
        super().__init__(config, context)
        p = resolve_preset(self.config["preset"])
        for k in _KNOBS:
            if self.config[k] is not None:
                p[k] = self.config[k]
        if self.config["min_score"] is not None:
            p["min_score"] = float(self.config["min_score"])
        self.params = p
        self.skipper = FlushSkipper(float(self.config["flush_skip_rate"]), self.config["flush_skip_mode"],
                                    int(self.config["flush_seed"]))
        self.profile = lifecycle.resolve_profile(self.config["profile"])
        self.thresholds = lifecycle.thresholds(int(self.config["context_window"]))
        self.store = SessionStore()
        self._ws: dict[str, Workspace] = {}
        self._live: dict[str, tuple[int, int]] = {}  # namespace → the live session's (messages, cl100k tokens)
        self._index: IndexStore | None = None
        self._embedder = None
        # onboarding's files (name → content) and where they came from; ({}, "off") with bootstrap false
        if not self.config["bootstrap"]:
            self.bootstrap_files, self.bootstrap_source = {}, "off (bootstrap false)"
        elif p["release"] != "openclaw 2026.9.6":
            self.bootstrap_files, self.bootstrap_source = {}, (f"off: onboarding's templates are 2026.9.6's, this "
                                                                f"preset is {p['release']}")
        else:
            self.bootstrap_files, self.bootstrap_source = lifecycle.bootstrap_templates()
        self.n = {"llm_calls": 0, "flushes": 0, "flushes_skipped": 0, "chunks_indexed": 0, "searches": 0,
                  "compactions": 0, "hook_files": 0, "spans_misaligned": 0}

    # ------------------------------------------------------------------ lifecycle
    @property
    def fts_only(self) -> bool:
        return self.config["embedder"] == "none"

    @property
    def embedder(self):
        if self.fts_only:
            return None
        if self._embedder is None:
            if self.config["embedder"]:
                from services.common.embeddings import get_embedder

                self._embedder = get_embedder(self.config["embedder"], cache_path=self.context.embedding_cache_path)
            else:
                self._embedder = self.context.embedder
        return self._embedder

    @property
    def model(self) -> str:
        return FTS_ONLY_MODEL if self.fts_only else self.embedder.name

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

    def embedder_info(self) -> tuple[str, int]:
        if self.fts_only:
            return "", 0
        e = self.embedder
        return e.name, e.dim

    async def start(self) -> None:
        _ = self.index
        if not self.fts_only:
            await asyncio.to_thread(lambda: self.embedder)  # load the model once, before serving

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

    def profile_description(self) -> dict[str, Any]:
        prof, th = self.profile, self.thresholds
        d: dict[str, Any] = {"profile": prof.name, "profile_summary": prof.summary}
        d["bootstrap_files"] = (f"{', '.join(self.bootstrap_files)} from {self.bootstrap_source}; memory_search "
                                "indexes USER.md (evergreen) only; BOOTSTRAP.md is deleted once the workspace holds "
                                "memory/ or MEMORY.md (OpenClaw's next turn)" if self.bootstrap_files
                                else self.bootstrap_source)
        if prof.flush == "every-session":
            d["flush"] = "after every session (idealisation)"
            d["flush_prompt"] = "prompts.FLUSH_SYSTEM + flush_user(session date) (the earlier upstream wording)"
            d["memory_md_curation"] = "rules: durable-language regex over flushed notes (workspace.DURABLE_RE)"
            return d
        d["flush"] = (f"OpenClaw's rule at context_window {th.context_window}: after a turn at >= {th.flush_tokens} "
                      f"tokens or >= {th.force_flush_bytes} transcript bytes, once per compaction cycle; before a turn "
                      f"that would reach {th.compact_tokens}: flush, then compact (tokens = ceil(chars/4) per message + "
                      f"system_prompt_tokens {self.config['system_prompt_tokens']})")
        d["flush_prompt"] = "OpenClaw 2026.9.6 buildMemoryFlushPlan (prompt + systemPrompt, memory/<flush date>.md)"
        d["memory_md_curation"] = "none: MEMORY.md is read-only to the flush; dreaming promotes nothing in a replay"
        d["session_boundary"] = self.config["session_boundary"]
        open_last = self.config["last_session"] == "open"
        d["session_memory_hook"] = ("memory/YYYY-MM-DD-HHMM.md (the date and time of the /new) with the last 15 "
                                    "messages at each /new: a session's /new comes at the next session's start; the "
                                    + ("newest session stays open (no /new)" if open_last else
                                       "newest session's at its last message")
                                    if self.config["session_boundary"] == "new" else "never fires (no /new)")
        d["last_session"] = (("open: the newest session of an ingest is the live conversation the question is asked "
                              "in (automatic reset is off by default), so it writes no hook file and is flushed only "
                              "if OpenClaw's threshold fires inside it") if open_last else
                             "closed: the newest session is ended with /new at its last message (a hook file)")
        m, t = (sum(x) for x in zip(*self._live.values(), strict=True)) if self._live else (0, 0)
        d["live_session"] = (f"{m} messages, {t} cl100k tokens over {len(self._live)} namespaces (Stats: "
                             "live_session_messages, live_session_tokens, per namespace live_session_*:<namespace>)")
        d["transcripts"] = ("indexed and searched (sources memory + sessions)" if prof.search_sessions
                            else "indexed by OpenClaw (rememberAcrossConversations), not searched"
                            if self.searches_sessions else "not modelled by the port (memory_search does not "
                                                           "search them in this profile)")
        return d

    # ------------------------------------------------------------------ ingest
    async def _flush(self, session: Session, new_msgs) -> list[str]:
        res = await self.context.llm.chat(flush_messages(session, new_msgs), temperature=self.config["llm_temperature"])
        self.n["llm_calls"] += 1
        return parse_flush_reply(res.text)

    async def reset(self, namespace: str) -> int:
        self._ws.pop(namespace, None)
        self._live.pop(namespace, None)
        n = self.store.reset(namespace)
        await asyncio.to_thread(self.index.drop_namespace, namespace)
        return n

    async def ingest(self, namespace: str, batch: IngestBatch) -> None:
        # Stage everything (LLM flushes, workspace, chunking, embeddings) before touching any state, then commit.
        staged, work = await self.stage_workspace(namespace, batch)
        chunks = await self.index_workspace(namespace, staged)
        # Commit (synchronous from here: nothing can fail half-way on the event loop).
        self.store.apply(namespace, batch)
        self._ws[namespace] = staged
        self._live[namespace] = lifecycle.live_session_size(staged.install)
        self.n["flushes"] += sum(1 for _, _, skip in work if not skip)
        self.n["flushes_skipped"] += sum(1 for _, _, skip in work if skip)
        self.n["chunks_indexed"] += chunks

    def _segments(self, namespace: str, batch: IngestBatch) -> list[tuple[Session, tuple[Message, ...]]]:
        """The batch's sessions in time order, each with the messages the namespace does not hold yet."""
        existing = self.store.sessions.get(namespace, {})
        out = []
        for s in sorted(batch.sessions, key=lambda s: (utc(s.started_at), s.session_id)):
            old = existing.get(s.session_id)
            if old is not None:
                have = {m.id for m in old.messages}
                new_msgs = tuple(m for m in s.messages if m.id not in have)
                s = Session(old.session_id, old.started_at, old.messages + new_msgs)
            else:
                new_msgs = s.messages
            if new_msgs:
                out.append((s, new_msgs))
        return out

    async def stage_workspace(self, namespace: str, batch: IngestBatch) -> tuple[Workspace, list]:
        """The namespace's workspace with `batch` applied (flush notes, MEMORY.md curation or the install's hook files,
        documents), on a copy: nothing is committed. Shared by `openclaw-real`, so port and real OpenClaw index the
        same files."""
        prev = self._ws.get(namespace)
        staged = (prev or Workspace()).copy()
        staged.pending = []
        now = datetime.now(UTC)
        segments = self._segments(namespace, batch)
        if prev is None and self.bootstrap_files:
            # Onboarding writes them before the first conversation (mtime: the first message, or now).
            first = min((utc(s.message_time(m)) for s, msgs in segments for m in msgs), default=now)
            at_ms = int(first.timestamp() * 1000)
            for name, content in self.bootstrap_files.items():
                staged.files[name] = hook_wfile(content, {}, at_ms)
        if self.profile.flush == "threshold":
            work = await self._replay_install(namespace, staged, segments)
        else:
            work = await self._flush_every_session(staged, segments)
        for d in batch.documents:
            apply_document(staged, d, now)
        if lifecycle.BOOTSTRAP_RITUAL in staged.files and lifecycle.bootstrap_consumed(
                {p: f.content if p in lifecycle.PROFILE_FILES else "" for p, f in staged.files.items()},
                self.bootstrap_files):
            del staged.files[lifecycle.BOOTSTRAP_RITUAL]  # the question's turn runs ensureAgentWorkspace first
        return staged, work

    async def _flush_every_session(self, staged: Workspace, segments) -> list:
        work: list[tuple[Session, tuple, bool]] = []
        for s, new_msgs in segments:
            skip = self.skipper.skip(staged.flush_attempts, s.session_id)
            staged.flush_attempts += 1
            staged.flushes_skipped += int(skip)
            work.append((s, new_msgs, skip))
        replies = await asyncio.gather(*(self._flush(s, new) for s, new, skip in work if not skip))
        it = iter(replies)
        for s, new, skip in work:
            apply_flush(staged, s, new, None if skip else next(it), skip)
        return work

    # ------------------------------------------------------------------ a real install's lifecycle
    async def flush_plan(self, now_ms: int) -> lifecycle.FlushPlan:
        """The flush's prompts and target file (openclaw-real asks OpenClaw's own buildMemoryFlushPlan)."""
        return lifecycle.flush_plan(now_ms)

    async def _replay_install(self, namespace: str, staged: Workspace, segments) -> list:
        """Replay the sessions through a real install's rules (lifecycle.py): every message joins the live session's
        transcript; after an assistant turn the flush runs when OpenClaw's threshold says so; before a user turn that
        would reach the compaction threshold it flushes (once per cycle) and compacts; with session_boundary "new"
        each session ends with /new (typed when the next one starts), where the session-memory hook writes the
        departing session's last messages. The newest session stays open with last_session "open" (the live
        conversation the question is asked in; the next ingest's first session closes it), and is closed at its last
        message with "closed"."""
        st, th = staged.install, self.thresholds
        spt = int(self.config["system_prompt_tokens"])
        boundary_new = self.config["session_boundary"] == "new"
        work: list = []
        for s, new_msgs in segments:
            if boundary_new and st.open_session is not None and st.open_session != s.session_id:
                self._close_session(namespace, staged, int(utc(s.started_at).timestamp() * 1000))
            st.open_session = s.session_id
            for m in new_msgs:
                role, text = chat_role(m)
                ms = int(utc(s.message_time(m)).timestamp() * 1000)
                if role == "user" and lifecycle.should_compact_before(st, text, th, spt):
                    if not st.flushed_this_cycle():
                        await self._plan_flush(staged, s, ms)
                        work.append((s, (), False))
                    await self._compact(st)
                turn = lifecycle.Turn(m.id, role, text, ms)
                if st.first_ms is None:
                    st.first_ms = ms
                st.window.append(turn)
                st.open_turns.append(turn)
                staged.pending.append(("append", s.session_id, turn))
                if role == "assistant" and lifecycle.should_flush_after_turn(st, th, spt):
                    await self._plan_flush(staged, s, ms)
                    work.append((s, (), False))
        if (boundary_new and self.config["last_session"] == "closed" and st.open_session is not None
                and st.open_turns):
            self._close_session(namespace, staged, st.open_turns[-1].ms)
        return work

    async def _plan_flush(self, staged: Workspace, session: Session, at_ms: int) -> None:
        st = staged.install
        plan = await self.flush_plan(at_ms)
        msgs = [{"role": "system", "content": plan.system_prompt}]
        msgs += [{"role": r, "content": t} for r, t in lifecycle.flush_context(st)]
        msgs.append({"role": "user", "content": plan.prompt})
        res = await self.context.llm.chat(msgs, temperature=self.config["llm_temperature"])
        self.n["llm_calls"] += 1
        window = tuple(Message(t.message_id, t.role, t.text) for t in st.window)
        apply_plan_flush(staged, session, plan.relative_path, parse_flush_reply(res.text), window, at_ms)
        st.flushed_cycle = st.compactions

    async def _compact(self, st: lifecycle.InstallState) -> None:
        text = "\n".join(f"{r}: {t}" for r, t in lifecycle.flush_context(st))
        st.summary = await compact(self.context.llm, text, self.config["llm_temperature"])
        self.n["llm_calls"] += 1
        self.n["compactions"] += 1
        st.window = st.keep_recent()
        st.compactions += 1

    def _close_session(self, namespace: str, staged: Workspace, at_ms: int) -> None:
        """/new at `at_ms`: the session-memory hook's file (the port renders it; openclaw-real replaces it with the
        file OpenClaw's own handler writes), then a fresh context."""
        st = staged.install
        lines, evidence = [], {}
        for t in st.open_turns:
            line = lifecycle.hook_line(t.role, t.text)
            if line is not None:
                lines.append(line)
                evidence[line] = evidence.get(line, ()) + (t.message_id,)
        path = lifecycle.hook_path(at_ms, set(staged.files))
        agent = lifecycle.agent_id(namespace)
        content = lifecycle.render_hook_file(at_ms, lifecycle.session_key(agent),
                                             lifecycle.stable_session_id(agent, st.first_ms or at_ms), lines)
        staged.files[path] = hook_wfile(content, evidence, at_ms)
        staged.pending.append(("new", at_ms, st.open_session, path, evidence))
        st.closed.append(st.open_session)
        st.open_session, st.open_turns = None, []
        st.reset_window()
        self.n["hook_files"] += 1

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
            # A query vector is not written to the shared cache (persist=False): queries rarely repeat, and a
            # SQLite write per query cost more than the search itself at 100k chunks.
            qvec = (await self.embedder.aencode([query.query.strip()], persist=False))[0]
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

    # ------------------------------------------------------------------ introspection
    async def namespace_stats(self, namespace: str) -> NamespaceStats:
        return self.store.stats(namespace)

    def namespaces(self) -> list[str]:
        return self.store.namespaces()

    def workspace(self, namespace: str) -> dict[str, str]:
        """The Markdown files of a namespace's workspace (path → content), for inspection and reports."""
        ws = self._ws.get(namespace)
        return {p: f.content for p, f in sorted(ws.files.items())} if ws else {}

    # ------------------------------------------------------------------ for studies that pair two OpenClaw backends
    def workspace_state(self, namespace: str) -> Workspace | None:
        """The namespace's workspace as ingested (files, their line evidence, the install's state); None before any
        ingest. Another OpenClaw backend can `adopt_workspace` it, so both search the very same files."""
        return self._ws.get(namespace)

    async def adopt_workspace(self, namespace: str, ws: Workspace, batch: IngestBatch | None = None) -> int:
        """Hold `ws` (another OpenClaw backend's workspace_state) as the namespace's workspace, indexed by this backend,
        instead of staging one from the sessions; `batch` (the ingest that produced it) goes into the session store.
        Returns the number of chunks (re)indexed."""
        chunks = await self.index_workspace(namespace, ws)
        self._ws[namespace] = ws
        self._live[namespace] = lifecycle.live_session_size(ws.install)
        if batch is not None:
            self.store.apply(namespace, batch)
        return chunks

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

    def live_sessions(self) -> dict[str, tuple[int, int]]:
        """namespace → (messages, cl100k tokens) of the session still open after its last ingest (the live
        conversation, with last_session "open"; (0, 0) when the newest session was closed)."""
        return dict(self._live)

    def counters(self) -> dict[str, int]:
        out = dict(self.n)
        out["live_sessions"] = sum(1 for m, _ in self._live.values() if m)
        out["live_session_messages"] = sum(m for m, _ in self._live.values())
        out["live_session_tokens"] = sum(t for _, t in self._live.values())
        for ns, (m, t) in sorted(self._live.items()):
            out[f"live_session_messages:{ns}"] = m
            out[f"live_session_tokens:{ns}"] = t
        return out
