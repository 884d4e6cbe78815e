"""`openclaw-real`: the native baseline run by OpenClaw 2026.9.6 itself, over the memory a real install holds.

Ingest replays the sessions through a real install's rules (the workspace replayer the port shares,
services/adapters/openclaw/replay.py, by `profile`): the flush notes the model writes when OpenClaw's threshold says so go to
`memory/YYYY-MM-DD.md`; the messages go into OpenClaw's own session transcript store, and each `/new` runs OpenClaw's
own session-memory hook handler and reset boundary, all through the Node sidecar (`sidecar/sidecar.mjs`), which then
has OpenClaw sync its index. The `flush-every-session` profile keeps the earlier idealisation (a flush after every
session, MEMORY.md curated by rule). Retrieve is OpenClaw's own `memory_search` (its manager's
`search(query, {maxResults})` with every other setting at OpenClaw's defaults: minScore 0.35, hybrid, MMR, decay;
profile `sessions` adds the transcripts to its sources), with OpenClaw's clock set to the query's reference time.
Results carry OpenClaw's path, lines, score, vector and text scores, and the evidence ids of the lines the chunk
covers: a memory file's from the workspace writer, a transcript hit's from the transcript line each message landed on.

Embeddings: OpenClaw reaches an OpenAI-compatible `/v1/embeddings`. By default this process serves one on
127.0.0.1 from the rig's embedder object (the one the port uses, with the shared cache; services/adapters/external/
embeddings.py), so port and real get identical vectors. With `MEMRIG_EMBED_BASE_URL` (+ `MEMRIG_EMBED_MODEL`, key in `MEMRIG_EMBED_API_KEY`) OpenClaw uses
that endpoint instead. `embedder: "none"` runs OpenClaw's FTS-only mode (`provider: "none"`).
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import os
import shutil
import tempfile
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path, PurePosixPath
from typing import Any

import aiohttp

from services.adapters.external.embeddings import EmbeddingsBridge
from services.adapters.external.sidecar import Sidecar
from services.adapters.openclaw import hybrid, lifecycle
from services.adapters.openclaw.lifecycle import agent_id
from services.adapters.openclaw.replay import WorkspaceReplayer
from services.adapters.openclaw.results import citation, context_with_spans, file_hit_spans
from services.adapters.openclaw.spans import transcript_snippet_spans, with_hidden_evidence
from services.adapters.openclaw.workspace import Workspace, hook_wfile
from services.adapters.openclaw_real.node import (
    OPENCLAW_VERSION,
    SIDECAR_DIR,
    availability,
    compile_cache_dir,
)
from services.common.embeddings import RemoteEmbedder
from services.common.errors import DependencyError
from services.common.types import (
    ChannelDiagnostics,
    EvidenceSpan,
    IngestBatch,
    Memory,
    RetrieveQuery,
    RetrieveResult,
    SettleResult,
    ValidationError,
    utc,
)

# OpenClaw indexes these roots by default (the installed package's docs/concepts/memory-search.md, under
# sidecar/node_modules/openclaw: "default memory roots (`MEMORY.md`, `memory/*.md`)"; USER.md is evergreen curated
# memory too). A document the rig writes elsewhere is kept in the
# workspace but OpenClaw does not search it, as it would not for a user.
OPENCLAW_DEFAULTS = {"maxResults": 6, "minScore": 0.35, "hybrid": True, "mmr_lambda": 0.7, "decay_half_life_days": 30}


class SidecarError(DependencyError):
    """The OpenClaw sidecar is missing, did not start, or failed a request (the message says which)."""

    dependency = "OpenClaw's sidecar"
    hint = "make setup-openclaw installs OpenClaw and Node; the sidecar's log is in the message"


def safe_relpath(path: str) -> str:
    p = PurePosixPath(path)
    if p.is_absolute() or not p.parts or any(part in ("..", "") for part in p.parts):
        raise ValidationError("documents[].path", f"{path!r} must be a relative path inside the workspace")
    return str(p)


def line_evidence(ws: Workspace | None, path: str, start: int, end: int) -> list[str]:
    """The evidence ids of lines start..end (1-based, inclusive) of a workspace file, in first-seen order."""
    f = ws.files.get(path) if ws else None
    if f is None:
        return []
    out: dict[str, None] = {}
    for ev in f.evidence[max(0, start - 1):max(0, end)]:
        for e in ev:
            out.setdefault(e, None)
    return list(out)


def transcript_messages(ws: Workspace | None, path: str, start: int, end: int) -> list[tuple[str, str, str]]:
    """(message id, role, text) of the messages on transcript lines start..end, in order (for evidence spans)."""
    if ws is None:
        return []
    lines, turns = ws.install.transcript_lines.get(path, {}), ws.install.transcript_turns
    return [(lines[n], *turns[lines[n]]) for n in range(start, end + 1) if n in lines and lines[n] in turns]


def transcript_evidence(ws: Workspace | None, path: str, start: int, end: int) -> list[str]:
    """The message ids of transcript lines start..end (OpenClaw maps a session hit to the lines of the transcript's
    JSONL form, header = line 1, one line an event), in order."""
    lines = ws.install.transcript_lines.get(path, {}) if ws else {}
    out: dict[str, None] = {}
    for n in range(start, end + 1):
        if n in lines:
            out.setdefault(lines[n], None)
    return list(out)


class OpenClawRealBackend(WorkspaceReplayer):
    name = "openclaw-real"
    description = (f"OpenClaw {OPENCLAW_VERSION} itself: its builtin memory manager (Node sidecar, public plugin SDK) "
                   "over the workspace files the port writes.")
    capabilities = (("sessions", ""), ("documents", "path → workspace file (OpenClaw searches MEMORY.md, USER.md, "
                    "memory/**)"), ("recall", "exact"), ("reference_time", "OpenClaw's clock for temporal decay"),
                    ("static_context", "recent notes"))
    defaults: dict[str, Any] = {
        **WorkspaceReplayer.defaults,
        "sidecar_start_timeout_s": 180.0,  # the first start loads OpenClaw's modules (slow disks take longer)
        "request_timeout_s": 300.0,  # every call to the sidecar, at least
        # A forced /sync after an Ingest embeds every chunk of what it brought (chunks already embedded come from
        # OpenClaw's cache): its timeout is the larger of request_timeout_s and this many seconds per message of the
        # Ingest. BEAM's conversations arrive whole: a 500K one (~1,000 messages) took over 300 s in one sync on
        # this 2-core host under load, 0.2-0.4 s a message (docs/results/beam.md); a 1M one holds ~2,000.
        "sync_s_per_message": 2.0,
    }
    searches_sessions = True  # OpenClaw indexes the session transcripts the sidecar writes with its own code

    def __init__(self, config=None, context=None):
        super().__init__(config, context)
        self._sidecar: Sidecar | None = None
        self._root: Path | None = None
        self._sock_dir: Path | None = None
        self._session: aiohttp.ClientSession | None = None
        self._bridge = EmbeddingsBridge()
        self._sync_timeout: dict[str, float] = {}  # per namespace, while its Ingest runs
        self._embed_url = ""
        self._embed_model = ""
        self._health: dict[str, Any] = {}
        # each agent's manager answers one throwaway search after its first sync (sidecar /sync): counted here
        self.n.update(first_searches=0, first_search_ms_total=0)
        # Describe says which replay this is and which profile searches it: the rig pairs a `default` and a
        # `sessions` backend of one run by the key and answers the second's probes through the first's views()
        self.capabilities = (*type(self).capabilities, ("replay", self.replay_key()),
                             ("profile", self.profile.name))

    def replay_key(self) -> str:
        """What decides the state a replay writes, besides the run's shared services (its embedder and flush model,
        the same for every backend of one run): the backend and its configuration with the profile replaced by what
        the profile writes (lifecycle.same_writes). Equal keys within one run, equal state."""
        p = self.profile
        cfg = {**self.config, "profile": f"writes:{p.flush}/{p.memory_md}/hook={p.hook}/transcripts={p.transcripts}"}
        blob = json.dumps({"backend": self.name, "config": cfg,
                           "embedder": self.context.embedder_name or os.environ.get("MEMRIG_EMBEDDER", "")},
                          sort_keys=True, default=str)
        return hashlib.sha256(blob.encode()).hexdigest()[:16]

    def views(self) -> tuple[str, ...]:
        """The other profiles whose writes are this one's: OpenClaw indexes the session transcripts in `default` and
        `sessions` alike (memory.search.rememberAcrossConversations), so `sessions` is this state searched with
        OpenClaw's own per-search source filter ["memory", "sessions"] (what its memory_search tool passes), and
        `default` is `sessions`' state searched with ["memory"] (tests/test_openclaw_real_views.py checks the lists
        equal a backend of that profile's own, to the last bit)."""
        return tuple(n for n, p in lifecycle.PROFILES.items()
                     if n != self.profile.name and lifecycle.same_writes(p, self.profile) and p.transcripts)

    # ------------------------------------------------------------------ lifecycle
    async def start(self) -> None:
        try:
            await self._start()
        except BaseException:
            await self.close()  # nothing left behind: no sidecar, no embeddings server, no temp dirs
            raise

    async def _start(self) -> None:
        a = await asyncio.to_thread(availability)
        if not a.ok:
            raise SidecarError(f"openclaw-real: OpenClaw unavailable: {a.reason}")
        base = (self.context.data_dir / "openclaw-real").resolve()  # the sidecar runs in its own cwd
        base.mkdir(parents=True, exist_ok=True)
        self._root = Path(tempfile.mkdtemp(prefix=f"run-{os.getpid()}-", dir=base))
        provider = "none"
        # A Unix socket path must fit in 108 bytes: keep it in a short private temp dir, not under data_dir.
        self._sock_dir = Path(tempfile.mkdtemp(prefix="memrig-ocr-"))
        sidecar_conf: dict[str, Any] = {"socket": str(self._sock_dir / "s.sock"),
                                        "stateDir": str(self._root / "state"),
                                        "sessionSearch": self.profile.search_sessions}
        env = dict(os.environ)
        if cache := compile_cache_dir(env):
            env["NODE_COMPILE_CACHE"] = cache  # as OpenClaw's launcher runs a gateway (node.compile_cache_dir)
        if not self.fts_only:
            provider = "openai-compatible"
            emb = await asyncio.to_thread(lambda: self.embedder)
            if isinstance(emb, RemoteEmbedder):
                # A real endpoint: OpenClaw calls it itself, with the same model the port embeds with.
                self._embed_url, self._embed_model = emb.base_url, emb.model
                env["MEMRIG_OPENCLAW_EMBED_API_KEY"] = emb.api_key
            else:
                self._embed_model = emb.name
                # OpenClaw asks for a query's vector alone and indexes chunks in batches (memory-core's
                # embedQueryWithRetry, embedBatch): one text a request is its query, embedded anew.
                self._embed_url = f"{await self._bridge.start(emb, single_text_is_query=True)}/v1"
            sidecar_conf.update({"baseUrl": self._embed_url, "model": self._embed_model})
        sidecar_conf["provider"] = provider
        conf_path = self._root / "sidecar.json"
        conf_path.write_text(json.dumps(sidecar_conf))
        env["PATH"] = f"{Path(a.runtime).parent}{os.pathsep}{env.get('PATH', '')}"
        env["TZ"] = "UTC"  # dated notes and the decay clock read the same calendar on every machine
        # stdin a pipe held for the sidecar's life (--parent-pipe): it ends when this process stops it or dies
        self._sidecar = Sidecar("openclaw-real", [a.runtime, str(SIDECAR_DIR / "sidecar.mjs"), "--config",
                                                  str(conf_path), "--parent-pipe"], cwd=SIDECAR_DIR, env=env,
                                log=self._root / "sidecar.log", error=SidecarError, stdin=True)
        await self._sidecar.start(float(self.config["sidecar_start_timeout_s"]), drain_stdout=True)
        self._session = aiohttp.ClientSession(
            connector=aiohttp.UnixConnector(path=sidecar_conf["socket"]),
            timeout=aiohttp.ClientTimeout(total=float(self.config["request_timeout_s"])))
        self._health = await self._call("GET", "/health")

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None
        if self._sidecar is not None:
            await self._sidecar.stop()
        await self._bridge.close()
        for d in (self._root, self._sock_dir):
            if d is not None:
                shutil.rmtree(d, ignore_errors=True)
        self._root = self._sock_dir = None

    def sync_timeout_s(self, messages: int) -> float:
        """The /sync timeout after an Ingest of `messages` messages (the `sync_s_per_message` default's comment)."""
        return max(float(self.config["request_timeout_s"]), float(self.config["sync_s_per_message"]) * messages)

    async def ingest(self, namespace: str, batch: IngestBatch) -> None:
        self._sync_timeout[namespace] = self.sync_timeout_s(batch.message_count)
        try:
            await super().ingest(namespace, batch)
        finally:
            self._sync_timeout.pop(namespace, None)

    async def _call(self, method: str, route: str, body: dict[str, Any] | None = None,
                    timeout_s: float | None = None) -> dict[str, Any]:
        """One request to the sidecar; `timeout_s` replaces the session's request_timeout_s for it."""
        if self._session is None:
            raise SidecarError("openclaw-real: the sidecar is not running (start() was not called or failed)")
        extra = {"timeout": aiohttp.ClientTimeout(total=timeout_s)} if timeout_s else {}
        try:
            async with self._session.request(method, f"http://openclaw-sidecar{route}", json=body, **extra) as r:
                data = await r.json(content_type=None)
        except (aiohttp.ClientError, TimeoutError, ValueError) as e:
            sc = self._sidecar
            raise SidecarError(f"openclaw-real: sidecar {route} failed ({type(e).__name__}: {e}); sidecar "
                               f"{'alive' if sc is not None and sc.alive else 'exited'}; "
                               f"log: {sc.log_tail(600) if sc is not None else ''}") from e
        if r.status != 200:
            raise SidecarError(f"openclaw-real: sidecar {route} answered {r.status}: {data.get('error', data)}")
        return data

    def workspace_dir(self, namespace: str) -> Path:
        assert self._root is not None
        return self._root / "workspaces" / agent_id(namespace)

    def describe_config(self) -> dict[str, Any]:
        d = dict(self.config)
        d.update({
            "release": f"openclaw {OPENCLAW_VERSION}",
            "search": "OpenClaw's own MemoryIndexManager.search via openclaw/plugin-sdk/memory-host-search",
            "openclaw_defaults": dict(OPENCLAW_DEFAULTS),
            "min_score": self.config["min_score"] if self.config["min_score"] is not None else "OpenClaw default 0.35",
            "max_results": "request top_k (OpenClaw default 6)",
            "provider": "none (FTS-only)" if self.fts_only else "openai-compatible",
            "embedding_model": "" if self.fts_only else (self._embed_model or self.embedder_info()[0]),
            "embeddings_endpoint": ("" if self.fts_only else self._embed_url if not self._bridge.running
                                    else "in-process /v1/embeddings on 127.0.0.1 (the rig's embedder + cache)"),
            "node": self._health.get("node", ""),
            "node_compile_cache": ("as OpenClaw's launcher sets it (NODE_COMPILE_CACHE=<base>/openclaw/<version>/"
                                   "<marker>; off with NODE_DISABLE_COMPILE_CACHE)"),
            "openclaw_version": self._health.get("openclaw", OPENCLAW_VERSION),
            "clock": "reference_time → OpenClaw's Date.now() for each search (wall clock when absent)",
            "latency": ("each namespace's OpenClaw manager answers one throwaway search after its first sync (a new "
                        "manager's first search costs several times a later one), counted in Stats (first_searches, "
                        "first_search_ms_total); the first search after a namespace's ingest still costs ~1 s here, "
                        "so the rig's Prepare (OpenClaw's sync + one more throwaway search, untimed, right before the "
                        "namespace's first timed search; Stats prepares, prepare_ms_total) pays it instead "
                        "(services/studies/openclaw_prepare.py)"),
            "workspace_writer": ("the flush notes: services.adapters.openclaw.workspace (same files, dates and mtimes "
                                 "as the port); hook files and transcripts: OpenClaw's own code (session-memory "
                                 "handler, session transcript store)" if self.profile.flush == "threshold" else
                                 "services.adapters.openclaw.workspace (the port's; same files, dates and mtimes)"),
            "preset_note": "'preset' only shapes the workspace writer's flush-skip and recent notes here; "
                           "search is OpenClaw's",
        })
        d.update(self.profile_description())
        return d

    # ------------------------------------------------------------------ a real install's state, by OpenClaw's code
    async def flush_plan(self, now_ms: int) -> lifecycle.FlushPlan:
        p = await self._call("POST", "/flush-plan", {"nowMs": now_ms,
                                                     "contextWindowTokens": self.thresholds.context_window})
        return lifecycle.FlushPlan(p["relativePath"], p["systemPrompt"], p["prompt"])

    async def _apply_pending(self, namespace: str, staged: Workspace, root: Path) -> None:
        """Write what staging decided with OpenClaw's own code: transcript messages through its session transcript
        store, each /new through its session-memory hook handler (whose file replaces the port's rendering of it) and
        reset boundary. Records which transcript line holds which message, so transcript hits carry evidence."""
        agent, ops, i = agent_id(namespace), staged.pending, 0
        while i < len(ops):
            if ops[i][0] == "append":
                turns = []
                while i < len(ops) and ops[i][0] == "append":
                    turns.append(ops[i][2])
                    i += 1
                res = await self._call("POST", "/session/append", {
                    "agent": agent, "workspace": str(root),
                    "messages": [{"role": t.role, "text": t.text, "ms": t.ms} for t in turns]})
                lines = staged.install.transcript_lines.setdefault(
                    f"sessions/{agent}/{res['sessionId']}.jsonl", {})
                for t, line in zip(turns, res["lines"], strict=True):
                    lines[int(line)] = t.message_id
                    staged.install.transcript_turns[t.message_id] = (t.role, t.text)
                continue
            _, at_ms, _session, predicted, evidence = ops[i]
            i += 1
            res = await self._call("POST", "/session/new", {"agent": agent, "workspace": str(root), "nowMs": at_ms})
            staged.files.pop(predicted, None)
            written = res.get("hookFile")
            if written:
                path = root / written
                content = await asyncio.to_thread(path.read_text, encoding="utf-8")
                os.utime(path, ns=(at_ms * 1_000_000, at_ms * 1_000_000))
                staged.files[written] = hook_wfile(content, evidence, at_ms)
        staged.pending = []

    # ------------------------------------------------------------------ ingest
    async def reset(self, namespace: str) -> int:
        n = await super().reset(namespace)
        if self._root is not None:
            await self._call("POST", "/drop", {"agent": agent_id(namespace)})
            await asyncio.to_thread(shutil.rmtree, self.workspace_dir(namespace), True)
        return n

    def _write_files(self, root: Path, files: dict[str, tuple[str, int]]) -> dict[str, tuple[str, int] | None]:
        """Write changed files (content, mtime ms); returns what each changed path held before (None: absent)."""
        before: dict[str, tuple[str, int] | None] = {}
        for rel, (content, mtime_ms) in files.items():
            p = root / rel
            old = None
            if p.exists():
                old = (p.read_text(encoding="utf-8"), int(p.stat().st_mtime_ns // 1_000_000))
                if old[0] == content:
                    continue
            before[rel] = old
            p.parent.mkdir(parents=True, exist_ok=True)
            p.write_text(content, encoding="utf-8")
            if mtime_ms > 0:
                os.utime(p, ns=(mtime_ms * 1_000_000, mtime_ms * 1_000_000))
        return before

    def _restore(self, root: Path, before: dict[str, tuple[str, int] | None]) -> None:
        for rel, old in before.items():
            p = root / rel
            if old is None:
                p.unlink(missing_ok=True)
            else:
                p.write_text(old[0], encoding="utf-8")
                os.utime(p, ns=(old[1] * 1_000_000, old[1] * 1_000_000))

    async def _ensure_workspace(self, namespace: str, staged: Workspace, root: Path) -> None:
        """OpenClaw's own ensureAgentWorkspace on the namespace's workspace (onboarding's, and each reply's): it writes
        the bootstrap files into a new workspace and deletes BOOTSTRAP.md once the workspace holds memory. The staged
        workspace then holds the bootstrap files exactly as OpenClaw left them on disk."""
        res = await self._call("POST", "/workspace/ensure", {"agent": agent_id(namespace), "workspace": str(root)})
        on_disk = set(res["files"])
        for name in lifecycle.BOOTSTRAP_FILES:
            if name in on_disk:
                content = await asyncio.to_thread((root / name).read_text, encoding="utf-8")
                f = staged.files.get(name)
                if f is None or f.content != content:
                    staged.files[name] = hook_wfile(content, {}, f.mtime_ms if f else 0)
            else:
                staged.files.pop(name, None)

    async def index_workspace(self, namespace: str, staged: Workspace) -> int:
        root = self.workspace_dir(namespace)
        root.mkdir(parents=True, exist_ok=True)
        if self.bootstrap_files and namespace not in self._ws:
            await self._ensure_workspace(namespace, staged, root)  # onboarding, before the first conversation
        if staged.pending:
            await self._apply_pending(namespace, staged, root)
        files = {safe_relpath(p): (f.content, f.mtime_ms) for p, f in staged.files.items()}
        before = await asyncio.to_thread(self._write_files, root, files)
        if self.bootstrap_files:
            await self._ensure_workspace(namespace, staged, root)  # the question's turn runs it before answering
        # force: OpenClaw's incremental sync re-reads memory files only once its file watcher has marked them dirty
        # (debounced, so timing-dependent); a forced sync re-reads them now. Unchanged chunks keep their cached
        # embeddings (OpenClaw's embedding cache), so this costs chunking, not re-embedding.
        timeout = self._sync_timeout.get(namespace)
        try:
            st = await self._call("POST", "/sync", {"agent": agent_id(namespace), "workspace": str(root),
                                                    "force": True}, timeout)
        except SidecarError:
            # Nothing half-applied: put the files back and let OpenClaw index what was there before.
            await asyncio.to_thread(self._restore, root, before)
            with contextlib.suppress(SidecarError):
                await self._call("POST", "/sync", {"agent": agent_id(namespace), "workspace": str(root),
                                                   "force": True}, timeout)
            raise
        if st.get("firstSearchMs") is not None:
            self.n["first_searches"] += 1
            self.n["first_search_ms_total"] += round(float(st["firstSearchMs"]))
        return int(st.get("chunks") or 0)

    async def settle(self, namespace: str, timeout_s: float) -> SettleResult:
        st = self.store.stats(namespace)
        counts: dict[str, int] = {"sessions": st.sessions}
        if namespace in self._ws:
            s = await self._call("POST", "/status", {"agent": agent_id(namespace)})
            counts.update({"files": int(s.get("files") or 0), "chunks": int(s.get("chunks") or 0)})
        return SettleResult(settled=True, items_indexed=st.items, counts=counts)

    # ------------------------------------------------------------------ search
    async def prepare(self, namespace: str) -> str:
        """The rig's untimed setup before the namespace's first timed search (sidecar /prepare): OpenClaw's sync and
        one throwaway search on this agent, so the switch to it (one process hosts every namespace's agent) and a
        new manager's first search are paid here, counted in Stats (prepares, prepare_ms_total), not in Retrieve."""
        if namespace not in self._ws or self._root is None:
            return ""
        r = await self._call("POST", "/prepare", {"agent": agent_id(namespace),
                                                  "workspace": str(self.workspace_dir(namespace))})
        self.n["prepares"] = self.n.get("prepares", 0) + 1
        self.n["prepare_ms_total"] = self.n.get("prepare_ms_total", 0) + round(float(r["prepareMs"]))
        return "OpenClaw sync + one throwaway search on the namespace's agent"

    async def retrieve(self, namespace: str, query: RetrieveQuery) -> RetrieveResult:
        ws = self._ws.get(namespace)
        if ws is None:
            return RetrieveResult()
        ref = query.reference_time or datetime.now(UTC)
        now_ms = int(utc(ref).timestamp() * 1000)
        body = {"agent": agent_id(namespace), "query": query.query, "maxResults": int(query.top_k), "nowMs": now_ms}
        if query.view:  # Host checked it is one of views()
            body["sources"] = ["memory", "sessions"] if lifecycle.resolve_profile(query.view).search_sessions else ["memory"]
        if self.config["min_score"] is not None:
            body["minScore"] = float(self.config["min_score"])  # OpenClaw's search option; default 0.35
        res = await self._call("POST", "/search", body)
        self.n["searches"] += 1
        scored: list[hybrid.Scored] = []
        memories: list[Memory] = []
        all_spans: list[list[EvidenceSpan]] = []
        ceiling = float("inf")
        min_score = self.config["min_score"] if self.config["min_score"] is not None else OPENCLAW_DEFAULTS["minScore"]
        for r in res["results"]:
            path, start, end = str(r["path"]), int(r["startLine"]), int(r["endLine"])
            score = float(r["score"])
            vec = r.get("vectorScore")
            txt = r.get("textScore")
            rid = f"{path}#L{start}-L{end}"
            scored.append(hybrid.Scored(rid, path, start, end, r.get("snippet") or "", score,
                                        float(vec or 0.0), float(txt or 0.0), r.get("source") or "memory"))
            ceiling = min(ceiling, score)  # MMR may reorder: the contract wants non-increasing scores
            ts = hybrid.date_from_path(path, self.params["dated_path_regex"])
            if ts is None and path in ws.files:
                ts = ws.files[path].mtime_ms or None
            channels = {"hybrid": score}
            if vec is not None:
                channels["vector"] = float(vec)
            if txt is not None:
                channels["text"] = float(txt)
            snippet = r.get("snippet") or ""
            if r.get("source") == "sessions":
                evidence = transcript_evidence(ws, path, start, end)
                spans, bad = transcript_snippet_spans(snippet, transcript_messages(ws, path, start, end))
            else:
                evidence = line_evidence(ws, path, start, end)
                spans, bad = file_hit_spans(ws, path, snippet, start, end)
            self.n["spans_misaligned"] += bad
            spans = with_hidden_evidence(spans, evidence)
            all_spans.append(spans)
            memories.append(Memory(
                id=rid, text=snippet, score=ceiling, kind="chunk",
                created_at=datetime.fromtimestamp(ts / 1000, UTC) if ts is not None else None,
                source=path, evidence_ids=evidence, evidence_spans=spans, channel_scores=channels,
                attributes={"path": path, "start_line": str(start), "end_line": str(end),
                            "citation": citation(path, start, end),
                            "selected_by": "strict" if score >= min_score else "keyword-fallback",
                            "release": f"openclaw {OPENCLAW_VERSION}",
                            "mode": "fts-only" if self.fts_only else "hybrid"},
            ))
        ctx, ctx_spans = context_with_spans(ws, self.config["recent_sessions"], scored, all_spans)
        diag = ChannelDiagnostics("openclaw", len(memories), int(float(res.get("searchMs") or 0) * 1e6),
                                  f"OpenClaw {OPENCLAW_VERSION} memory_search (sidecar)")
        return RetrieveResult(memories=memories, channels=[diag], formatted_context=ctx, context_spans=ctx_spans)

    @contextlib.contextmanager
    def search_params(self, *, min_score: float | None = None, decay: bool | None = None) -> Iterator[None]:
        """Search with OpenClaw's own `minScore` search option set as given inside the block (None: as configured);
        OpenClaw 2026.9.6 has no setting for temporal decay, so `decay` is refused."""
        if decay is not None:
            raise ValueError(f"openclaw-real: OpenClaw {OPENCLAW_VERSION} has no setting for temporal decay")
        saved = self.config["min_score"]
        if min_score is not None:
            self.config["min_score"] = float(min_score)
        try:
            yield
        finally:
            self.config["min_score"] = saved

    def disk_bytes(self) -> int:
        if self._root is None or not self._root.exists():
            return 0
        return sum(p.stat().st_size for p in self._root.rglob("*") if p.is_file())
