"""The workspace replayer: what an OpenClaw install writes while a user chats, replayed from the sessions, for both
OpenClaw backends (the port, `openclaw`, backend.py, and OpenClaw itself, `openclaw-real`).

By `profile` (lifecycle.py): every message joins the live session's transcript; the flush notes go to
`memory/YYYY-MM-DD.md` when OpenClaw's threshold lets the model write them (or after every session, with a
rule-curated MEMORY.md, in the idealised profile); each /new writes the session-memory hook's file; onboarding
writes the bootstrap files before the first conversation; documents become workspace files. Each namespace's
workspace is staged on a copy and committed only once the backend has brought its search to it, so a failed ingest
changes nothing.

A backend built on it says how the workspace is searched: `index_workspace` (bring its index to a staged workspace;
the port indexes the files itself, openclaw-real has OpenClaw sync them), `retrieve` and `settle`; and may replace
`flush_plan` and the pending transcript and /new operations with OpenClaw's own code (openclaw-real does).
"""

from __future__ import annotations

import abc
import asyncio
from datetime import UTC, datetime
from typing import Any

from services.adapters.base import MemoryBackend, SessionStore
from services.adapters.openclaw import lifecycle
from services.adapters.openclaw.presets import resolve_preset
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
from services.common.transcripts import compact
from services.common.types import IngestBatch, Message, NamespaceStats, Session, utc

FTS_ONLY_MODEL = "fts-only"


class WorkspaceReplayer(MemoryBackend):
    """The OpenClaw backends' common part: configuration of the install being replayed, the namespaces' workspaces
    (`_ws`) and sessions (`store`), ingest = stage the workspace, have the search index it, commit."""

    defaults: dict[str, Any] = {
        "preset": "openclaw",
        "embedder": "",  # "" = the process embedder; "none" = OpenClaw's FTS-only mode
        "flush_skip_rate": 0.0,  # the every-other-cycle flush bug (#12590); 0.5 ≈ the seed's ~50%
        "flush_skip_mode": "alternate",  # "alternate" (deterministic pattern) | "random" (seeded per session)
        "flush_seed": 0,
        "recent_sessions": 2,  # the seeds' "last two sessions' notes" in the shared foundation
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
    searches_sessions = False  # whether the backend's search indexes the session transcripts (profile `sessions`)

    def configure(self, overrides: dict[str, Any]) -> dict[str, Any]:
        cfg = super().configure(overrides)
        resolve_preset(cfg["preset"])
        ms = cfg["min_score"]
        if ms is not None and (not isinstance(ms, int | float) or isinstance(ms, bool) or not 0.0 <= ms <= 1.0):
            raise ValueError("openclaw: 'min_score' must be a number in [0, 1] (or null for the preset's)")
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

    # ------------------------------------------------------------------ what the backend's search provides
    @abc.abstractmethod
    async def index_workspace(self, namespace: str, staged: Workspace) -> int:
        """Bring the namespace's search index to `staged`'s files; returns the number of chunks (re)indexed. On
        failure nothing of the namespace's previous index may be lost."""

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

    def embedder_info(self) -> tuple[str, int]:
        if self.fts_only:
            return "", 0
        e = self.embedder
        return e.name, e.dim

    async def start(self) -> None:
        if not self.fts_only:
            await asyncio.to_thread(lambda: self.embedder)  # load the model once, before serving

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
        return self.store.reset(namespace)
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
