"""`octybot-real`: Octybot (tbelfort/octybot @ 9d0d070) itself: its own Claude Code hooks, run by Bun, unmodified, from
../shared/third_party/octybot.

Ingest (Octybot's write path): every session is replayed exchange by exchange, as Claude Code would drive it: a user
message and the assistant replies after it are appended to the session's transcript (JSONL), then Octybot's Stop hook
(`src/memory/hooks/on-stop.ts`) runs with Claude Code's Stop hook input (`session_id`, `transcript_path`, `cwd`,
`hook_event_name`, `stop_hook_active`) on stdin. The hook classifies the last user message (the assistant reply is
only pronoun context: Octybot does not store what the assistant says), filters, and stores nodes in its SQLite graph.

Transcript lines. Claude Code writes `{"type", "message": {"role", "content"}, "uuid", "sessionId", "timestamp"}`;
Octybot 9d0d070's `parseTranscript` reads `role` and `content` at the top level of a line, so fed Claude Code's lines
as written it finds no exchange and stores nothing (profile `transcript: "claude-code"` shows it). The default
(`transcript: "octybot"`) writes each line with both: Claude Code's fields plus the top-level `role`/`content` the
hook reads.

Evidence ids. Octybot's nodes carry no reference to the message they came from, and its extraction rewrites text
(LLM classification, filtering, forced storage), so ids cannot ride inside the content. Instead the rig reads the
node ids in Octybot's database before and after each Stop hook run (`SELECT id FROM nodes`): every node that run
created, including a superseding replacement, is evidence of that exchange's user message (the only text the hook
extracts from). Nodes written while answering a query carry no evidence (and by default are discarded, below).

Retrieve (Octybot's read path): Octybot's UserPromptSubmit hook (`on-prompt.ts`) runs with `{"prompt", "session_id",
"cwd", "hook_event_name"}` and a fresh session id (each probe is a new conversation, so Octybot takes its full
pipeline, not the follow-up one). Its output, `hookSpecificOutput.additionalContext` (`<memory>...</memory>`), is the
formatted context as is. Its lines are mapped back to nodes by content (`nodes.content`, live nodes) and returned as
memories ranked the way Octybot's assembly ranks them before grouping by section: by the node's best search score
(cosine of the query and node vectors, as its safety nets score them; a global instruction, scope >= 0.8, at least
0.6 once its cosine passes 0.15; read back as Octybot's assembly parses it, see `assembly_score`). Octybot's prompt hook also runs its store pipeline on the prompt; `query_writes: "discard"` (default) runs each
query on a copy of the namespace's database so a probe cannot change what later probes see; `"keep"` writes through.

Services: Octybot calls Voyage (`https://api.voyageai.com/v1/embeddings`) and OpenRouter
(`https://openrouter.ai/api/v1/chat/completions`) at fixed URLs. A Bun preload (`runtime/redirect.ts`) sends those
URL prefixes to the rig: embeddings to this process's `/voyage/v1/embeddings` (services/embeddings_api, the rig's
embedder and cache, model named by `VOYAGE_MODEL`), chat to the memory writer's endpoint (`MEMRIG_LLM_BASE_URL`:
llm-mock or the local model; model by `LAYER1`/`LAYER2`), and refuses any other non-loopback URL. Keys are dummies
unless the endpoint has one.

Processes: one Bun process per hook run (Octybot's hooks are entry points that read stdin and exit; their modules
fix the database path at import); the hooks' LLM calls dominate their time.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import os
import re
import shutil
import sqlite3
import tempfile
import time
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np

from services.adapters.base import StoreBackedBackend
from services.adapters.external.embeddings import EmbeddingsBridge
from services.adapters.external.sidecar import run_once
from services.adapters.octybot_real.runtime import (
    BUN_VERSION,
    HOOKS,
    OCTYBOT_COMMIT,
    RUNTIME_DIR,
    availability,
)
from services.common.errors import DependencyError
from services.common.types import (
    ChannelDiagnostics,
    IngestBatch,
    Memory,
    Message,
    RetrieveQuery,
    RetrieveResult,
    Session,
    SettleResult,
)

VOYAGE_URL = "https://api.voyageai.com/v1/"
OPENROUTER_URL = "https://openrouter.ai/api/v1/"
GLOBAL_SCOPE = 0.8  # src/memory/db-queries.ts getGlobalInstructions: scope >= 0.8
GLOBAL_SCORE_FLOOR = 0.6  # src/memory/constants.ts SAFETY_NET.globalScoreFloor
GLOBAL_COSINE_BAR = 0.15  # SAFETY_NET.globalCosineBar: a global instruction is boosted only above it
_PROMOTED_RE = re.compile(r"^\[Was scheduled for .*? — now past\] ")


class OctybotError(DependencyError):
    """Bun or Octybot's hooks are missing, failed or timed out (the message says which, with the hook's log)."""

    dependency = "Octybot's hooks (Bun)"
    hint = "make setup-octybot installs Bun; Octybot's source is read from ../shared/third_party/octybot"


# ---------------------------------------------------------------------------------------------- the replay, pure
@dataclass(frozen=True)
class Exchange:
    """One Stop hook run: the user message, the assistant replies after it, and the transcript lines they add."""

    session_id: str
    user: Message
    replies: tuple[Message, ...]
    lines: tuple[dict[str, Any], ...]


def claude_session_id(namespace: str, session_id: str) -> str:
    return str(uuid.uuid5(uuid.NAMESPACE_URL, f"memrig:{namespace}:{session_id}"))


def transcript_line(session_uuid: str, m: Message, ts: datetime, fmt: str) -> dict[str, Any]:
    """A Claude Code transcript line for the message; `fmt == "octybot"` adds the top-level role/content that
    Octybot's parser reads."""
    content: Any = m.content if m.role == "user" else [{"type": "text", "text": m.content}]
    line: dict[str, Any] = {"type": m.role, "sessionId": session_uuid,
                            "uuid": str(uuid.uuid5(uuid.NAMESPACE_URL, f"memrig-msg:{session_uuid}:{m.id}")),
                            "timestamp": ts.astimezone(UTC).isoformat().replace("+00:00", "Z"),
                            "message": {"role": m.role, "content": content}}
    if fmt == "octybot":
        line["role"], line["content"] = m.role, content
    return line


def exchanges(namespace: str, session: Session, fmt: str) -> list[Exchange]:
    """Split a session into Stop hook runs: each user message with the assistant messages up to the next user
    message. Assistant messages before the first user message only join the transcript (no hook run: Claude Code
    fires Stop after a reply to a prompt); system and tool messages are not transcript text."""
    sid = claude_session_id(namespace, session.session_id)
    out: list[Exchange] = []
    pending: list[dict[str, Any]] = []
    user: Message | None = None
    replies: list[Message] = []
    for m in session.messages:
        if m.role not in ("user", "assistant"):
            continue
        if m.role == "user":
            if user is not None:
                out.append(Exchange(sid, user, tuple(replies), tuple(pending)))
                pending = []
            user, replies = m, []
        else:
            replies.append(m)
        pending.append(transcript_line(sid, m, session.message_time(m), fmt))
    if user is not None:
        out.append(Exchange(sid, user, tuple(replies), tuple(pending)))
    return out


def stop_hook_input(ex: Exchange, transcript: Path, cwd: Path) -> dict[str, Any]:
    return {"session_id": ex.session_id, "transcript_path": str(transcript), "cwd": str(cwd),
            "hook_event_name": "Stop", "stop_hook_active": False}


def new_evidence(before: set[str], after: set[str], ex: Exchange) -> dict[str, list[str]]:
    """The nodes a Stop hook run created, each mapped to the exchange's user message id."""
    return {nid: [ex.user.id] for nid in sorted(after - before)}


def memory_lines(additional_context: str) -> list[str]:
    """The record lines of the prompt hook's `<memory>` block, in order: bullets and entity lines, with
    relationship lines (`  - edge: target`) giving their target; section headers and wrapper tags dropped."""
    m = re.search(r"<memory>\n?(.*?)\n?</memory>", additional_context, re.S)
    if not m:
        return []
    out = []
    for raw in m.group(1).splitlines():
        if not raw.strip():
            continue
        if raw.startswith("  - "):  # an entity's relationship: "  - about: <target content>"
            _, _, target = raw[4:].partition(": ")
            text = target.strip()
        elif raw.startswith("- "):
            text = _PROMOTED_RE.sub("", raw[2:].strip())
        elif raw.rstrip().endswith(":") and raw.rstrip()[:-1] in ("People & things", "Instructions", "Facts", "Events",
                                                                 "Upcoming plans"):
            continue
        else:
            text = raw.strip()  # an entity line (its content as is)
        if text and text not in out:
            out.append(text)
    return out


@dataclass
class NodeRow:
    id: str
    type: str
    content: str
    scope: float | None
    created_at: str
    vector: np.ndarray | None


def read_nodes(db: Path) -> dict[str, NodeRow]:
    """Live nodes of an Octybot database with their embeddings (float32 blobs), read-only."""
    con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        rows = con.execute("SELECT n.id, n.node_type, n.content, n.scope, n.created_at, e.vector FROM nodes n "
                           "LEFT JOIN embeddings e ON e.node_id = n.id WHERE n.superseded_by IS NULL").fetchall()
    finally:
        con.close()
    return {r[0]: NodeRow(r[0], r[1], r[2], r[3], r[4] or "",
                          np.frombuffer(r[5], dtype="<f4") if r[5] is not None else None) for r in rows}


def node_ids(db: Path) -> set[str]:
    if not db.exists():
        return set()
    con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        return {r[0] for r in con.execute("SELECT id FROM nodes")}
    except sqlite3.OperationalError:  # no schema yet
        return set()
    finally:
        con.close()


def cosine(q: np.ndarray, v: np.ndarray | None) -> float:
    """Octybot's vectors.ts cosineSimilarity: over the shorter length, 0 for a zero vector."""
    if v is None:
        return 0.0
    n = min(len(q), len(v))
    a, b = q[:n].astype(np.float64), v[:n].astype(np.float64)
    d = float(np.linalg.norm(a) * np.linalg.norm(b))
    return 0.0 if d == 0 else float(a @ b) / d


def assembly_score(score: float) -> float:
    r"""What Octybot's assembly reads back from a search result line: the score printed with `toFixed(3)` and parsed
    with `/\[score:\s*([\d.]+)\]/`, so a negative score (the minus sign does not match) reads as the default 0.5,
    and 0.000 reads as 0 (never above the map's 0 start, so that node is left out)."""
    printed = f"{score:.3f}"
    return 0.5 if printed.startswith("-") else float(printed)


def octybot_score(node: NodeRow, qv: np.ndarray) -> float:
    """The node's score as Octybot's safety nets give it: cosine (a global instruction, scope >= 0.8, at least
    0.6), as the assembly reads it back."""
    s = cosine(qv, node.vector)
    if (node.type == "instruction" and node.scope is not None and node.scope >= GLOBAL_SCOPE
            and s > GLOBAL_COSINE_BAR):
        s = max(s, GLOBAL_SCORE_FLOOR)
    return assembly_score(s)


# ---------------------------------------------------------------------------------------------- the backend
class OctybotRealBackend(StoreBackedBackend):
    name = "octybot-real"
    version = f"octybot {OCTYBOT_COMMIT[:7]}"
    description = ("Octybot itself (tbelfort/octybot 9d0d070): its own Stop and UserPromptSubmit hooks run by Bun "
                   "over its SQLite graph; Voyage and OpenRouter served by the rig.")
    capabilities = (("sessions", "each exchange through Octybot's Stop hook"),
                    ("documents", "each document as a user message through the Stop hook"),
                    ("recall", "exact"), ("formatted_context", "the prompt hook's <memory> block"))
    uses_embedder = True
    defaults: dict[str, Any] = {
        "transcript": "octybot",  # "octybot" (Claude Code's lines + the top-level role/content Octybot reads) |
        # "claude-code" (Claude Code's lines only: Octybot 9d0d070's Stop hook then finds nothing)
        "query_writes": "discard",  # "discard": each query on a copy of the database | "keep": write through
        "hook_timeout_s": 600.0,
        "concurrency": 2,  # namespaces ingested at once (each namespace's exchanges run in order)
        "keep_dir": False,  # keep the databases and transcripts after close (for inspection)
    }

    def __init__(self, config=None, context=None):
        super().__init__(config, context)
        if self.config["transcript"] not in ("octybot", "claude-code"):
            raise ValueError("octybot-real: config 'transcript' must be 'octybot' or 'claude-code'")
        if self.config["query_writes"] not in ("discard", "keep"):
            raise ValueError("octybot-real: config 'query_writes' must be 'discard' or 'keep'")
        self._root: Path | None = None
        self._bridge = EmbeddingsBridge()
        self._routes: list[tuple[str, str]] = []
        self._llm_cfg = None
        self._avail = None
        self._evidence: dict[str, dict[str, list[str]]] = {}  # namespace -> node id -> evidence ids
        self._locks: dict[str, asyncio.Lock] = {}
        self._sem = asyncio.Semaphore(max(1, int(self.config["concurrency"])))
        self._queries = 0
        self.hook_ms: dict[str, list[float]] = {"stop": [], "prompt": []}

    # -------------------------------------------------------------------------------------- lifecycle
    async def start(self) -> None:
        try:
            await self._start()
        except BaseException:
            await self.close()
            raise

    async def _start(self) -> None:
        a = await asyncio.to_thread(availability)
        if not a.ok:
            raise OctybotError(f"octybot-real: Octybot unavailable: {a.reason}")
        self._avail = a
        base = (self.context.data_dir / "octybot-real").resolve()
        base.mkdir(parents=True, exist_ok=True)
        self._root = Path(tempfile.mkdtemp(prefix=f"run-{os.getpid()}-", dir=base))
        for d in ("home/.octybot", "cwd", "transcripts"):
            (self._root / d).mkdir(parents=True, exist_ok=True)
        emb = await asyncio.to_thread(lambda: self.context.embedder)
        voyage = await self._bridge.start(emb)
        self._llm_cfg = self.context.llm.config  # the memory writer's endpoint (the flush role's)
        self._routes = [(VOYAGE_URL, f"{voyage}/voyage/v1/"),
                        (OPENROUTER_URL, self._llm_cfg.base_url.rstrip("/") + "/")]

    async def close(self) -> None:
        await self._bridge.close()
        if self._root is not None and not self.config["keep_dir"]:
            shutil.rmtree(self._root, ignore_errors=True)
        self._root = None

    def describe_config(self) -> dict[str, Any]:
        d = dict(self.config)
        emb_name, emb_dim = self.embedder_info()
        d.update({
            "release": f"tbelfort/octybot {OCTYBOT_COMMIT}",
            "source": self._avail.source if self._avail else "",
            "runtime": f"Bun {self._avail.runtime_version if self._avail else BUN_VERSION} (npm `bun`, pinned)",
            "write_path": "src/memory/hooks/on-stop.ts per exchange (Claude Code Stop hook input on stdin)",
            "read_path": "src/memory/hooks/on-prompt.ts per query (UserPromptSubmit input, fresh session)",
            "embedder": f"{emb_name} ({emb_dim}-d) through the rig's Voyage stand-in (/voyage/v1/embeddings; Octybot "
                        "asks output_dimension 1024: zero-padded, cosines unchanged)",
            "extraction_model": (f"{self._llm_cfg.model} (the rig's memory-writer endpoint as Octybot's LAYER1/"
                                 "LAYER2; OpenRouter redirected)") if self._llm_cfg else "",
            "evidence": "node ids created by each Stop hook run -> that exchange's user message id",
            "ranking": "records of the <memory> block by Octybot's assembly score (cosine; global instructions "
                       ">= 0.6)",
        })
        return d

    # -------------------------------------------------------------------------------------- paths and processes
    def agent(self, namespace: str) -> str:
        return "ns-" + hashlib.sha256(namespace.encode()).hexdigest()[:16]

    def project_data(self, agent: str) -> Path:
        assert self._root is not None
        return self._root / "home" / ".octybot" / "data" / "memrig" / agent

    def db_path(self, namespace: str) -> Path:
        return self.project_data(self.agent(namespace)) / "memory.db"

    def _env(self, agent: str, db: Path) -> dict[str, str]:
        assert self._root is not None and self._llm_cfg is not None
        emb = self.context.embedder
        return {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"), "TZ": "UTC", "LANG": "C.UTF-8",
            "HOME": str(self._root / "home"), "TMPDIR": tempfile.gettempdir(),
            "OCTYBOT_HOME": str(self._root / "home" / ".octybot"), "OCTYBOT_PROJECT": "memrig", "OCTYBOT_AGENT": agent,
            "DB_PATH": str(db),
            "VOYAGE_API_KEY": "memrig-local", "VOYAGE_MODEL": emb.name,
            "OPENROUTER_API_KEY": self._llm_cfg.api_key or "memrig-local",
            "LAYER1": self._llm_cfg.model, "LAYER2": self._llm_cfg.model,
            "MEMRIG_OCTYBOT_ROUTES": json.dumps(self._routes), "LOG_LEVEL": "warn",
        }

    async def run_hook(self, hook: str, payload: dict[str, Any], agent: str, db: Path) -> str:
        """Run one Octybot hook entry point with the payload on stdin; returns its stdout."""
        assert self._avail is not None and self._root is not None
        script = Path(self._avail.source) / (HOOKS[0] if hook == "stop" else HOOKS[1])
        db.parent.mkdir(parents=True, exist_ok=True)
        t0 = time.perf_counter()
        done = await run_once(f"octybot-real: the {hook} hook",
                              [self._avail.runtime, "--preload", str(RUNTIME_DIR / "redirect.ts"), str(script)],
                              json.dumps(payload).encode(), cwd=self._root / "cwd", env=self._env(agent, db),
                              timeout_s=float(self.config["hook_timeout_s"]), error=OctybotError)
        out, log = done.stdout, done.stderr
        self.hook_ms[hook].append((time.perf_counter() - t0) * 1000)
        if done.returncode != 0:
            raise OctybotError(f"octybot-real: the {hook} hook exited {done.returncode}: {log[-800:]}")
        if "hook error" in log or "Config validation failed" in log:
            # Octybot's hooks exit 0 on their own errors (a hook must never block Claude Code): say it here.
            raise OctybotError(f"octybot-real: the {hook} hook failed: {log[-800:]}")
        self.n[f"{hook}_hooks"] = self.n.get(f"{hook}_hooks", 0) + 1
        return out

    # -------------------------------------------------------------------------------------- ingest
    def _lock(self, namespace: str) -> asyncio.Lock:
        return self._locks.setdefault(namespace, asyncio.Lock())

    def items_in(self, namespace: str) -> int | None:
        ev = self._evidence.get(namespace)
        return None if ev is None else len(ev)

    async def ingest(self, namespace: str, batch: IngestBatch) -> None:
        if self._root is None:
            raise OctybotError("octybot-real: start() was not called")
        async with self._sem, self._lock(namespace):
            self.store.apply(namespace, batch)
            ev = self._evidence.setdefault(namespace, {})
            agent, db = self.agent(namespace), self.db_path(namespace)
            sessions = sorted(batch.sessions, key=lambda s: s.started_at)
            for d in batch.documents:  # a document: a user message of its own session, its evidence its own
                when = d.created_at or datetime.now(UTC)
                sessions.append(Session(f"doc:{d.id}", when, (Message(d.id, "user", d.text, when),)))
            doc_ev = {d.id: list(d.evidence()) for d in batch.documents}
            for s in sessions:
                path = self._root / "transcripts" / agent / f"{claude_session_id(namespace, s.session_id)}.jsonl"
                path.parent.mkdir(parents=True, exist_ok=True)
                for ex in exchanges(namespace, s, self.config["transcript"]):
                    with open(path, "a", encoding="utf-8") as f:
                        f.writelines(json.dumps(line, ensure_ascii=False) + "\n" for line in ex.lines)
                    before = await asyncio.to_thread(node_ids, db)
                    await self.run_hook("stop", stop_hook_input(ex, path, self._root / "cwd"), agent, db)
                    after = await asyncio.to_thread(node_ids, db)
                    for nid, ids in new_evidence(before, after, ex).items():
                        ev[nid] = doc_ev.get(ex.user.id, ids)

    async def reset(self, namespace: str) -> int:
        async with self._lock(namespace):
            n = len(self._evidence.pop(namespace, {}))
            self.store.reset(namespace)
            if self._root is not None:
                agent = self.agent(namespace)
                await asyncio.to_thread(shutil.rmtree, self.project_data(agent), True)
                await asyncio.to_thread(shutil.rmtree, self._root / "transcripts" / agent, True)
            return n

    async def settle(self, namespace: str, timeout_s: float) -> SettleResult:
        st = self.store.stats(namespace)
        db = self.db_path(namespace) if self._root is not None else None
        counts: dict[str, int] = {"sessions": st.sessions}
        if db is not None and db.exists():
            nodes = await asyncio.to_thread(read_nodes, db)
            for n in nodes.values():
                counts[f"nodes_{n.type}"] = counts.get(f"nodes_{n.type}", 0) + 1
        return SettleResult(settled=True, items_indexed=len(self._evidence.get(namespace, {})), counts=counts)

    # -------------------------------------------------------------------------------------- retrieve
    def _query_db(self, namespace: str, agent: str) -> Path:
        """A copy of the namespace's database (SQLite's backup API) in a query-private agent dir."""
        dst = self.project_data(agent) / "memory.db"
        dst.parent.mkdir(parents=True, exist_ok=True)
        src = sqlite3.connect(f"file:{self.db_path(namespace)}?mode=ro", uri=True)
        out = sqlite3.connect(dst)
        try:
            src.backup(out)
        finally:
            src.close()
            out.close()
        return dst

    async def retrieve(self, namespace: str, query: RetrieveQuery) -> RetrieveResult:
        if self._root is None or namespace not in self._evidence or not self.db_path(namespace).exists():
            return RetrieveResult()
        t0 = time.perf_counter_ns()
        self._queries += 1
        sid = str(uuid.uuid4())
        payload = {"session_id": sid, "prompt": query.query, "cwd": str(self._root / "cwd"),
                   "hook_event_name": "UserPromptSubmit",
                   "transcript_path": str(self._root / "transcripts" / f"query-{sid}.jsonl")}
        if self.config["query_writes"] == "discard":
            agent = f"{self.agent(namespace)}.q{self._queries}"
            db = await asyncio.to_thread(self._query_db, namespace, agent)
            try:
                out = await self.run_hook("prompt", payload, agent, db)
                nodes = await asyncio.to_thread(read_nodes, db)
            finally:
                await asyncio.to_thread(shutil.rmtree, self.project_data(agent), True)
        else:
            async with self._lock(namespace):
                out = await self.run_hook("prompt", payload, self.agent(namespace), self.db_path(namespace))
                nodes = await asyncio.to_thread(read_nodes, self.db_path(namespace))
        ctx = ""
        if out.strip():
            try:
                ctx = json.loads(out.strip().splitlines()[-1])["hookSpecificOutput"]["additionalContext"]
            except (ValueError, KeyError, TypeError) as e:
                raise OctybotError(f"octybot-real: the prompt hook printed no hook output JSON ({e}): "
                                   f"{out[-400:]}") from e
        qv = (await asyncio.to_thread(self.context.embedder.encode, [query.query.strip()]))[0]
        memories = self.memories(namespace, memory_lines(ctx), nodes, np.asarray(qv, dtype=np.float32))
        dur = time.perf_counter_ns() - t0
        return RetrieveResult(memories=memories[: query.top_k], formatted_context=ctx, channels=[
            ChannelDiagnostics("octybot-prompt-hook", len(memories), dur,
                               f"on-prompt.ts: {len(memory_lines(ctx))} records injected")])

    def memories(self, namespace: str, lines: list[str], nodes: dict[str, NodeRow], qv: np.ndarray) -> list[Memory]:
        """The injected records as memories, ranked by Octybot's assembly score; a line matching several nodes
        (the same content stored twice) becomes one memory with the best-scoring node's id and all their
        evidence; a line matching none (a model's paraphrase) keeps its text with no id or evidence."""
        by_content: dict[str, list[NodeRow]] = {}
        for n in nodes.values():
            by_content.setdefault(n.content.strip(), []).append(n)
        ev = self._evidence.get(namespace, {})
        scored: list[tuple[float, int, Memory]] = []
        for i, line in enumerate(lines):
            cands = by_content.get(line, [])
            if not cands:
                scored.append((float("-inf"), i, Memory(id=f"line:{i}", text=line, score=0.0, kind="unmatched",
                                                        source="octybot-memory-block")))
                continue
            best = max(cands, key=lambda n: (octybot_score(n, qv), n.id))
            s = octybot_score(best, qv)
            evidence: dict[str, None] = {}
            for n in sorted(cands, key=lambda n: -octybot_score(n, qv)):
                for e in ev.get(n.id, []):
                    evidence.setdefault(e, None)
            created = None
            with contextlib.suppress(ValueError):
                created = datetime.fromisoformat(best.created_at).replace(tzinfo=UTC) if best.created_at else None
            scored.append((s, i, Memory(
                id=best.id, text=line, score=s, kind=best.type, created_at=created, source="octybot-graph",
                evidence_ids=list(evidence), channel_scores={"cosine": cosine(qv, best.vector)},
                attributes={"node_ids": ",".join(n.id for n in cands), "block_position": str(i),
                            "release": f"octybot {OCTYBOT_COMMIT[:7]}"})))
        scored.sort(key=lambda t: (-t[0], t[1]))
        out = [m for _, _, m in scored]
        for m in out:
            if m.kind == "unmatched":
                m.score = 0.0
        return out

    def store_rows(self, namespace: str) -> list[tuple[str, str, str, datetime | None, float | None, np.ndarray]]:
        """The namespace's live nodes in the order Octybot scans its embeddings (ties in its stable sort keep it):
        (id, type, content, created_at, scope, vector), for a re-implementation to adopt (`memrig fidelity
        octybot`)."""
        db = self.db_path(namespace)
        if not db.exists():
            return []
        con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
        try:
            rows = con.execute("SELECT n.id, n.node_type, n.content, n.created_at, n.scope, e.vector FROM nodes n "
                               "JOIN embeddings e ON e.node_id = n.id WHERE n.superseded_by IS NULL "
                               "ORDER BY e.rowid").fetchall()  # searchSimilar's scan order (ties)
        finally:
            con.close()
        out = []
        for nid, type_, content, created, scope, vec in rows:
            when = None
            with contextlib.suppress(TypeError, ValueError):
                when = datetime.fromisoformat(created).replace(tzinfo=UTC)
            out.append((nid, type_, content, when, scope, np.frombuffer(vec, dtype="<f4")))
        return out

    def evidence_of(self, namespace: str) -> dict[str, list[str]]:
        return {k: list(v) for k, v in self._evidence.get(namespace, {}).items()}

    def disk_bytes(self) -> int:
        if self._root is None or not self._root.exists():
            return 0
        return sum(p.stat().st_size for p in self._root.rglob("*") if p.is_file())

    def counters(self) -> dict[str, int]:
        out = dict(self.n)
        for k, v in self.hook_ms.items():
            if v:
                out[f"{k}_hook_ms_median"] = int(sorted(v)[len(v) // 2])
        return out
