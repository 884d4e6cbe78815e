"""`cortex`: a MemoryBackend over the Cortex HTTP API (the cortex-mock or a real URL, usually through the
fault proxy) that behaves like the `@ubundi/openclaw-cortex` plugin's client, so the rig measures what an
agent using the plugin would see, failures included.

Defaults are the plugin's v0.3.x era (Ubundi/openclaw-cortex at commit 22cc320, 2026-02-20,
src/core/config/schema.ts), where the recall hook still called `POST /v1/retrieve` with `recallTopK`, `recallMode`,
`recallTimeoutMs` 2000 and `recallQueryType` "combined". Two later behaviours are knobs: the full → fast retry on
5xx/timeout (HEAD, on by default because the issue asks for it) and HEAD's rule that timeouts do not trip the gate
(`cold_start_count_timeouts=False`).

Recall (Retrieve): skip prompts shorter than 5 characters; skip without any request while the cold-start
gate is open; one request bounded by `recall_timeout_ms`; on a 5xx or timeout in full mode, one retry in
fast mode (its own budget); any failure is silent: no memories, `degraded=True` and a `degraded_reason`
that starts with the kind (`cold_start_gate`, `timeout`, `http_503`, `connection_error`, `bad_response`).
The result's `formatted_context` is the `<cortex_memories>` block.

Capture (Ingest): a session is sent as the plugin's `agent_end` hook would have sent it, turn by turn, never
whole: one `POST /v1/jobs/ingest/conversation` per capture window of whole user-assistant turns, at most
`capture_window_messages` (20, v0.3's last-20 window) and `capture_max_chars` (50,000, the API's limit as the plugin
counts it) each, tiling the session so no message is sent twice or left out, and each message longer than
`capture_message_max_chars` (the API's 10,000) shortened to it (services/adapters/cortex/capture.py says where each
rule comes from). Before this a session went as one capture: BEAM's chat batches (82,000-450,000 characters) were
all refused and cortex stored nothing from BEAM. Documents: one `POST /v1/jobs/ingest` each.
A failed submit goes to the RetryQueue (5 retries, backoff, 100 tasks, drop-oldest) and Ingest still
succeeds, as the plugin's fire-and-forget capture does. Settle flushes the queue, polls the jobs until
completed/failed and then `/v1/knowledge` until its totals stop moving; it reports `items_pending` while
anything is queued or running, and the counts of what the queue dropped (lost captures are reported,
never hidden).

Namespaces: Cortex isolates tenants by API key; inside one, `user_id` = "<namespace_prefix>:<ns>" scopes
retrieve/knowledge/forget, and session ids are "<namespace_prefix>:<ns>:<session_id>", where <ns> is the
namespace percent-encoded (RFC 3986, every character but unreserved ones: `:` becomes %3A). The encoding is
what makes the id unambiguous: rig namespaces contain `:`, and with the raw namespace the session "x:s1" of
namespace "team" and the session "s1" of namespace "team:x" got the same id, so `Reset("team")` deleted the
other namespace's memories (issue 14).

Messages: Cortex reads only the roles "user" and "assistant"; any other role is refused with a
ValidationError naming the field (gRPC INVALID_ARGUMENT) instead of being accepted and dropped.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import os
import time
import urllib.parse
from collections import defaultdict
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from services.adapters.base import BackendContext, MemoryBackend
from services.adapters.cortex import capture
from services.adapters.cortex.client import (
    CortexBadResponse,
    CortexClient,
    CortexError,
    CortexHTTPError,
    CortexTimeout,
)
from services.adapters.cortex.envelope import ESCAPE_MODES, PREAMBLE, format_memories
from services.adapters.cortex.gate import ColdStartGate
from services.adapters.cortex.retry_queue import RetryQueue
from services.common.types import (
    ChannelDiagnostics,
    Document,
    IngestBatch,
    Memory,
    NamespaceStats,
    RetrieveQuery,
    RetrieveResult,
    Session,
    SettleResult,
    ValidationError,
)

log = logging.getLogger("memrig.cortex")

DEFAULTS_ERA = ("@ubundi/openclaw-cortex v0.3.x (22cc320, 2026-02-20): retrieve-based recall hook, "
                "recallTimeoutMs 2000, recallTopK 5, recallMode fast, recallQueryType combined; "
                "RetryQueue constants unchanged since v0.3; full->fast fallback from HEAD (knob)")


def js_iso(dt: datetime) -> str:
    """`Date.prototype.toISOString()`: UTC, milliseconds, a trailing Z."""
    dt = dt.astimezone(UTC) if dt.tzinfo else dt.replace(tzinfo=UTC)
    return dt.strftime("%Y-%m-%dT%H:%M:%S.") + f"{dt.microsecond // 1000:03d}Z"


def _parse_dt(v: Any) -> datetime | None:
    if not isinstance(v, str) or not v:
        return None
    try:
        dt = datetime.fromisoformat(v.replace("Z", "+00:00"))
    except ValueError:
        return None
    return dt if dt.tzinfo else dt.replace(tzinfo=UTC)


def debug_channel_scores(debug: Any) -> dict[str, dict[str, float]]:
    """node id → {channel: score} from a retrieve response's top-level `_debug` (the cortex-mock's shape:
    `_debug.channels.<channel>.top = [{node_id, rank, score}]`, the first few of each channel)."""
    out: dict[str, dict[str, float]] = {}
    chans = debug.get("channels") if isinstance(debug, dict) else None
    if not isinstance(chans, dict):
        return out
    for ch, info in chans.items():
        for row in (info.get("top") if isinstance(info, dict) else None) or []:
            if isinstance(row, dict) and isinstance(row.get("score"), int | float) and row.get("node_id") is not None:
                out.setdefault(str(row["node_id"]), {})[str(ch)] = float(row["score"])
    return out


def channel_scores(debug: Any) -> dict[str, float]:
    """Per-channel scores from a result's `_debug` (numbers at the top level or under channels/scores)."""
    out: dict[str, float] = {}
    if not isinstance(debug, dict):
        return out
    for k, v in debug.items():
        if isinstance(v, bool):
            continue
        if isinstance(v, int | float):
            out[str(k)] = float(v)
        elif isinstance(v, dict) and k in ("channels", "scores", "channel_scores"):
            out.update(channel_scores(v))
    return out


def refused(e: BaseException | None) -> bool:
    """The API refused the request as it is (a 4xx other than 408 timeout / 429 rate limit: a 400/413/422 names
    what is wrong with the body), so sending it again gets the same answer, however long one waits. Settle makes
    such a queued capture due at once: the plugin queue's five attempts are still sent and it is still dropped
    after them, exactly as the plugin does, but without waiting out 2 + 4 + 8 + 16 s of backoff. On LongMemEval S a
    session holding a message over the API's 10,000 characters was refused this way in about one haystack in four
    while the adapter sent messages whole (v0.3's plugin did; `capture_message_max_chars=0` still does), and each
    such haystack took 30 s more to settle."""
    return isinstance(e, CortexHTTPError) and 400 <= e.status < 500 and e.status not in (408, 429)


class CortexBackend(MemoryBackend):
    name = "cortex"
    description = "Cortex memory API through the plugin's client behaviour (gate, retry queue, envelope)."
    capabilities = (("sessions", ""), ("documents", ""), ("recall", "exact"), ("modes", "fast,full"),
                    ("reference_time", ""), ("degradation", "silent"), ("formatted_context", "cortex_memories"))
    defaults: dict[str, Any] = {
        # where and who
        "base_url": "http://127.0.0.1:8792",  # the fault proxy's default port (cortex-mock: 8791)
        "api_key": "",  # empty: $MEMRIG_CORTEX_API_KEY, else "memrig-dev" (the mock's dev mode takes any key)
        # api_key: one tenant per namespace (key "<api_key>:<namespace>"; the mock's dev mode makes every key
        # its own tenant) | user_id: one key, namespaces told apart by user_id (for a real Cortex account)
        "isolation": "api_key",
        "namespace_prefix": "memrig",
        "source_origin": "openclaw",
        "derivation_mode": "conversation",
        "source_app": "memrig",
        # recall hook (v0.3.x defaults)
        "mode": "fast",  # fast | full | query (use RetrieveQuery.mode)
        "top_k": 0,  # 0: the query's top_k (the plugin's recallTopK was 5, max 20)
        "query_type": "combined",
        "recall_timeout_ms": 2000,
        "min_query_chars": 5,
        "fallback_fast_on_error": True,  # HEAD: a 5xx/timeout in full mode retries once in fast
        "debug": False,  # ask for `_debug` and report per-channel scores
        "envelope_preamble": True,
        "envelope_escape": "strict",  # strict: content cannot break line structure or the tag | plugin: `</` only
        # cold-start gate
        "cold_start_window": 3,
        "cold_start_cooldown_ms": 30000,
        "cold_start_count_timeouts": True,  # False = HEAD: timeouts are undone and rarely trip the gate
        # capture (services/adapters/cortex/capture.py) + RetryQueue
        "capture_window_messages": capture.WINDOW_MESSAGES,
        "capture_max_chars": capture.MAX_CHARS,
        "capture_message_max_chars": capture.MAX_MESSAGE_CHARS,  # 0: send a message whole (v0.3; the API refuses)
        "submit_timeout_ms": 10000,
        "retry_queue_max_retries": 5,
        "retry_queue_base_delay_ms": 1000,
        "retry_queue_max_delay_ms": 60000,
        "retry_queue_capacity": 100,
        "retry_queue_flush_interval_ms": 5000,
        # settle
        "settle_timeout_s": 180.0,  # Ubundi engram-benchmark's settle time for cortex
        # ...at least this long an item still pending when Settle starts: 180 s fits a LoCoMo conversation, but
        # cortex-mock took 0.2-0.45 s a message for BEAM's 900-2,100-message conversations here, and a fixed 180 s
        # left most of them queued when the questions came (docs/results/beam.md). The caller's timeout still caps it.
        "settle_s_per_item": 1.0,
        "settle_poll_ms": 200,  # the longest wait between two polls
        "settle_poll_min_ms": 10,  # the first wait; each one doubles up to settle_poll_ms (= settle_poll_ms: fixed)
        "settle_knowledge_stable_polls": 2,
        "job_poll_timeout_ms": 10000,
        "knowledge_timeout_ms": 30000,
        "forget_timeout_ms": 30000,
    }

    def __init__(self, config: dict[str, Any] | None = None, context: BackendContext | None = None,
                 clock: Callable[[], float] | None = None):
        super().__init__(config, context)
        c = self.config
        if c["mode"] not in ("fast", "full", "query"):
            raise ValueError(f"cortex: config 'mode' must be fast|full|query, got {c['mode']!r}")
        if c["isolation"] not in ("api_key", "user_id"):
            raise ValueError(f"cortex: config 'isolation' must be api_key|user_id, got {c['isolation']!r}")
        if c["envelope_escape"] not in ESCAPE_MODES:
            raise ValueError(f"cortex: config 'envelope_escape' must be one of {ESCAPE_MODES}, "
                             f"got {c['envelope_escape']!r}")
        for k, least in (("capture_window_messages", 1), ("capture_max_chars", 1), ("capture_message_max_chars", 0)):
            if c[k] < least:  # its type is checked by configure()
                raise ValueError(f"cortex: config {k!r} must be an integer >= {least}, got {c[k]!r}")
        for k in ("settle_poll_ms", "settle_poll_min_ms"):
            if not c[k] > 0:  # 0 made the doubling wait stay 0: settle polled without pause
                raise ValueError(f"cortex: config {k!r} must be a number > 0, got {c[k]!r}")
        self.clock = clock or time.monotonic
        self.gate = ColdStartGate(c["cold_start_window"], c["cold_start_cooldown_ms"],
                                  c["cold_start_count_timeouts"], clock=self.clock)
        self.queue = RetryQueue(c["retry_queue_max_retries"], c["retry_queue_base_delay_ms"],
                                c["retry_queue_max_delay_ms"], c["retry_queue_capacity"],
                                c["retry_queue_flush_interval_ms"], clock=self.clock)
        self.api_key = c["api_key"] or os.environ.get("MEMRIG_CORTEX_API_KEY", "") or "memrig-dev"
        self.client = CortexClient(c["base_url"], self.api_key)
        # What was handed to Cortex per namespace (ids only: the texts live in Cortex or in the queue).
        self.sent_sessions: dict[str, dict[str, set[str]]] = defaultdict(dict)
        self.sent_documents: dict[str, set[str]] = defaultdict(set)
        self.jobs: dict[str, dict[str, int]] = defaultdict(dict)  # namespace -> job id -> items
        self.indexed: dict[str, int] = defaultdict(int)
        self.failed_jobs: dict[str, int] = defaultdict(int)
        self.unknown_jobs: dict[str, int] = defaultdict(int)  # items of jobs the service answered 404 for
        # cortex session id of a document -> its evidence ids, to map a result back when it has no message_ids
        # (a session's falls back to its own id, taken from the cortex session id)
        self.evidence_of: dict[str, dict[str, list[str]]] = defaultdict(dict)
        self._capture_n = 0
        self.stats: dict[str, int] = defaultdict(int)

    # -- lifecycle --------------------------------------------------------------------------------
    async def start(self) -> None:
        self.queue.start()

    async def close(self) -> None:
        await self.queue.stop()
        await self.client.close()

    def describe_config(self) -> dict[str, Any]:
        d = dict(self.config)
        d["api_key"] = "***" if (self.config["api_key"] or os.environ.get("MEMRIG_CORTEX_API_KEY")) else "memrig-dev"
        c = self.config
        d["defaults_era"] = DEFAULTS_ERA
        d["retry_backoff_s"] = [min(c["retry_queue_base_delay_ms"] * 2 ** r, c["retry_queue_max_delay_ms"]) / 1000
                                for r in range(1, c["retry_queue_max_retries"])]
        d["envelope_preamble_text"] = PREAMBLE if c["envelope_preamble"] else ""
        d["user_id_format"] = "<namespace_prefix>:<percent-encoded namespace>"
        d["session_id_format"] = "<namespace_prefix>:<percent-encoded namespace>:<session_id>"
        return d

    # -- ids --------------------------------------------------------------------------------------
    def user_id(self, namespace: str) -> str:
        return f"{self.config['namespace_prefix']}:{urllib.parse.quote(namespace, safe='')}"

    def key_for(self, namespace: str) -> str:
        if self.config["isolation"] != "api_key":
            return self.api_key
        ns = namespace if namespace.isascii() and namespace.isprintable() else hashlib.sha256(
            namespace.encode()).hexdigest()[:16]
        return f"{self.api_key}:{ns}"

    def cortex_session_id(self, namespace: str, session_id: str) -> str:
        return f"{self.user_id(namespace)}:{session_id}"

    def _provenance(self, namespace: str) -> dict[str, Any]:
        c = self.config
        return {"user_id": self.user_id(namespace), "source_origin": c["source_origin"],
                "derivation_mode": c["derivation_mode"], "source_app": c["source_app"]}

    # -- ingest (capture) -------------------------------------------------------------------------
    def session_bodies(self, namespace: str, s: Session) -> list[dict[str, Any]]:
        """One capture body per window of the session (module docstring, Capture), in order. Every window keeps
        the session's id, as the plugin's captures keep their session key, so Reset forgets them together. A
        window's reference date is the session's start for the first and its first message's time for the others
        (the start when that message is undated): the date an undated message of the window is given."""
        c = self.config
        msgs = [{"role": m.role, "content": capture.fit_message(m.content, c["capture_message_max_chars"]),
                 "id": m.id, **({"timestamp": js_iso(m.ts)} if m.ts else {})} for m in s.messages]
        shortened = sum(len(a["content"]) != len(m.content) for a, m in zip(msgs, s.messages, strict=True))
        if shortened:
            self.stats["capture_messages_shortened"] += shortened
        windows = capture.capture_windows([(m["role"], m["content"]) for m in msgs], c["capture_window_messages"],
                                          c["capture_max_chars"])
        out = []
        for a, b in windows:
            ref = s.started_at if a == 0 else (s.messages[a].ts or s.started_at)
            out.append({"messages": msgs[a:b], "session_id": self.cortex_session_id(namespace, s.session_id),
                        "reference_date": js_iso(ref), **self._provenance(namespace)})
        return out

    def document_body(self, namespace: str, d: Document) -> dict[str, Any]:
        return {
            "text": d.text,
            "session_id": self.cortex_session_id(namespace, f"doc:{d.id}"),
            "reference_date": js_iso(d.created_at) if d.created_at else None,
            "message_ids": list(d.evidence()),
            **self._provenance(namespace),
        }

    @staticmethod
    def check_roles(batch: IngestBatch) -> None:
        for i, s in enumerate(batch.sessions):
            for j, m in enumerate(s.messages):
                if m.role not in ("user", "assistant"):
                    raise ValidationError(f"sessions[{i}].messages[{j}].role",
                                          f"must be 'user' or 'assistant' for Cortex, got {m.role!r}")

    async def ingest(self, namespace: str, batch: IngestBatch) -> None:
        self.check_roles(batch)  # before anything is sent: nothing half-applied
        ev = self.evidence_of[namespace]
        for s in batch.sessions:
            self.sent_sessions[namespace].setdefault(s.session_id, set()).update(m.id for m in s.messages)
        self.sent_documents[namespace].update(d.id for d in batch.documents)
        for s in batch.sessions:
            for body in self.session_bodies(namespace, s):
                self.stats["capture_windows"] += 1
                await self._capture(namespace, "conversation", body, len(body["messages"]))
        for d in batch.documents:
            ev[self.cortex_session_id(namespace, f"doc:{d.id}")] = list(d.evidence())
            await self._capture(namespace, "text", self.document_body(namespace, d), 1)

    async def _submit(self, namespace: str, kind: str, body: dict[str, Any], items: int) -> None:
        t = self.config["submit_timeout_ms"]
        self.stats["ingest_submits"] += 1
        if kind == "conversation":
            res = await self.client.submit_ingest_conversation(body, t, self.key_for(namespace))
        else:
            res = await self.client.submit_ingest(body, t, self.key_for(namespace))
        job_id = res.get("job_id") if isinstance(res, dict) else None
        if not isinstance(job_id, str) or not job_id:
            raise CortexBadResponse(f"Cortex ingest job: no job_id in {str(res)[:200]}")
        if res.get("status") == "completed":
            self.indexed[namespace] += items
        else:
            self.jobs[namespace][job_id] = items

    async def _capture(self, namespace: str, kind: str, body: dict[str, Any], items: int) -> None:
        """Submit once; on failure hand the same submission to the RetryQueue (fire-and-forget capture)."""
        try:
            await self._submit(namespace, kind, body, items)
        except CortexError as e:
            self.stats["ingest_submit_failures"] += 1
            self._capture_n += 1
            log.debug("cortex capture failed, queued: %s", e)
            self.queue.enqueue(lambda: self._submit(namespace, kind, body, items), f"capture-{self._capture_n}",
                               items=items, namespace=namespace)

    # -- settle -----------------------------------------------------------------------------------
    def _queued_items(self, namespace: str) -> int:
        return sum(t.items for t in self.queue.tasks() if t.meta.get("namespace") == namespace)

    async def _poll_jobs(self, namespace: str, sweep: bool = True) -> None:
        """One GET per pending job, oldest first. Without `sweep`, stop at the first job still pending: the
        service runs its queue in about submission order, so the younger ones are pending too, and a GET per
        pending job per round (thousands after a large batch) would load the service under measurement with
        about five status requests per ingested item."""
        for job_id, items in list(self.jobs[namespace].items()):
            try:
                res = await self.client.get_job(job_id, self.config["job_poll_timeout_ms"], self.key_for(namespace))
            except CortexError as e:
                if e.status == 404:  # the service no longer knows the job (its record expired): stop waiting
                    if not self.unknown_jobs[namespace]:
                        log.warning("cortex ingest job %s: unknown to the service (404); not waited for (counted "
                                    "in items_job_unknown)", job_id)
                    self.unknown_jobs[namespace] += items
                    self.jobs[namespace].pop(job_id, None)
                    continue
                if not sweep:
                    break
                continue  # still pending as far as we know; try again next round
            status = res.get("status") if isinstance(res, dict) else None
            if status == "completed":
                self.indexed[namespace] += items
                self.jobs[namespace].pop(job_id, None)
            elif status == "failed":
                self.failed_jobs[namespace] += items
                self.jobs[namespace].pop(job_id, None)
                log.warning("cortex ingest job %s failed: %s", job_id, res.get("error"))
            elif not sweep:
                break

    def poll_intervals(self):
        """Settle's waits between polls, in seconds: settle_poll_min_ms, doubling up to settle_poll_ms. A fixed 200
        ms made settle idle up to 200 ms past each namespace's last job, and as long again between the knowledge
        polls after it (services/studies/ingest_profile.py measures it); doubling from 10 ms finds a job done within
        about its own run time or 200 ms, whichever is less, with a few more polls on short jobs only."""
        hi = self.config["settle_poll_ms"] / 1000.0
        wait = min(self.config["settle_poll_min_ms"] / 1000.0, hi)
        while True:
            yield wait
            wait = min(wait * 2, hi)

    def settle_budget(self, namespace: str, timeout_s: float) -> float:
        """Seconds a Settle of `namespace` may wait: settle_timeout_s, or settle_s_per_item for each item still
        queued or in a pending job if that is longer; the caller's `timeout_s` caps it (0 = no cap of its own)."""
        pending = self._queued_items(namespace) + sum(self.jobs[namespace].values())
        own = max(float(self.config["settle_timeout_s"]), float(self.config["settle_s_per_item"]) * pending)
        return min(timeout_s, own) if timeout_s else own

    async def settle(self, namespace: str, timeout_s: float) -> SettleResult:
        if timeout_s != timeout_s or timeout_s < 0:  # NaN made the deadline unreachable: settle never ended
            raise ValidationError("timeout_seconds", f"must be a number >= 0 (0 = the default), got {timeout_s!r}")
        deadline = time.monotonic() + self.settle_budget(namespace, timeout_s)
        polls = self.poll_intervals()
        poll = next(polls)
        settled = False
        knowledge: dict[str, Any] = {}
        while True:
            if self._queued_items(namespace):
                self.queue.due_now(lambda t: t.meta.get("namespace") == namespace and refused(t.last_error))
                await self.queue.flush()
            # The last round before the deadline asks about every job: what the result reports as pending must not
            # include jobs finished behind one that is not (requeued after a worker died, say). Before that, a
            # job is found done at the latest in the round after every older one is.
            swept = time.monotonic() + poll >= deadline
            await self._poll_jobs(namespace, sweep=swept)
            if not self._queued_items(namespace) and not self.jobs[namespace]:
                break
            if time.monotonic() >= deadline:
                if not swept:  # the deadline passed during a round that stopped early
                    await self._poll_jobs(namespace)
                break
            await asyncio.sleep(poll)
            poll = next(polls)
        if not self._queued_items(namespace) and not self.jobs[namespace]:
            # Jobs report "completed" before every edge is committed (the plugin's own v1.1 benchmark waits for
            # /v1/knowledge for this reason: Ubundi/openclaw-cortex @ 0855305, benchmark/v1.1/run.ts): wait for the
            # knowledge totals to hold still for a few polls.
            last, stable = None, 0
            polls = self.poll_intervals()
            while time.monotonic() < deadline:
                try:
                    knowledge = await self.client.knowledge(self.user_id(namespace),
                                                            self.config["knowledge_timeout_ms"], self.key_for(namespace))
                except CortexError:
                    knowledge = {}
                key = (knowledge.get("total_memories"), knowledge.get("total_sessions")) if knowledge else None
                stable = stable + 1 if key is not None and key == last else 0
                last = key
                if stable >= self.config["settle_knowledge_stable_polls"] - 1 and key is not None:
                    settled = True
                    break
                await asyncio.sleep(next(polls))
        pending = self._queued_items(namespace) + sum(self.jobs[namespace].values())
        qs = self.queue.stats
        counts = {
            "jobs_pending": len(self.jobs[namespace]),
            "items_failed": self.failed_jobs[namespace],
            "items_job_unknown": self.unknown_jobs[namespace],
            "queue_pending_tasks": self.queue.pending,
            "queue_dropped_capacity": qs["dropped_capacity"],
            "queue_dropped_retries": qs["dropped_retries"],
            "queue_dropped_items": qs["dropped_items"],
        }
        if isinstance(knowledge.get("total_memories"), int):
            counts["total_memories"] = knowledge["total_memories"]
        return SettleResult(settled=settled and pending == 0, items_indexed=self.indexed[namespace],
                            items_pending=pending, counts=counts)

    # -- recall -----------------------------------------------------------------------------------
    def _mode(self, q: RetrieveQuery) -> str:
        return q.mode if self.config["mode"] == "query" else self.config["mode"]

    def retrieve_body(self, namespace: str, q: RetrieveQuery, mode: str) -> dict[str, Any]:
        ref = q.reference_time or datetime.now(UTC)  # the plugin passes {referenceDate: now}
        body = {"query": q.query, "top_k": self.config["top_k"] or q.top_k, "mode": mode,
                "reference_date": js_iso(ref), "query_type": self.config["query_type"],
                "user_id": self.user_id(namespace)}
        if self.config["debug"]:
            body["debug"] = True
        return body

    @staticmethod
    def _retryable(e: CortexError) -> bool:
        return isinstance(e, CortexTimeout) or (isinstance(e, CortexHTTPError) and 500 <= e.status < 600)

    def to_memories(self, namespace: str, resp: Any) -> list[Memory]:
        """Results → Memory. Like the plugin's formatter, a result that is not an object with content and a
        numeric score fails the whole recall (the caller degrades)."""
        if not isinstance(resp, dict) or not isinstance(resp.get("results", []), list):
            raise CortexBadResponse("Cortex retrieve failed: no results list")
        prefix = self.user_id(namespace) + ":"
        ev_map = self.evidence_of.get(namespace, {})
        by_node = debug_channel_scores(resp.get("_debug")) if self.config["debug"] else {}
        out: list[Memory] = []
        for i, r in enumerate(resp.get("results", [])):
            if not isinstance(r, dict) or not isinstance(r.get("content"), str) or isinstance(r.get("score"), bool) \
                    or not isinstance(r.get("score"), int | float):
                raise CortexBadResponse(f"Cortex retrieve failed: malformed result {i}: {str(r)[:120]}")
            meta = r.get("metadata") if isinstance(r.get("metadata"), dict) else {}
            sid = meta.get("session_id") if isinstance(meta.get("session_id"), str) else ""
            evidence = [str(x) for x in meta.get("message_ids") or [] if x is not None]
            if not evidence and sid:
                evidence = list(ev_map.get(sid) or [sid[len(prefix):] if sid.startswith(prefix) else sid])
            attrs = {k: str(meta[k]) for k in ("speaker", "fact_type", "source_app", "derivation_mode") if meta.get(k)}
            if r.get("confidence") is not None:
                attrs["confidence"] = str(r["confidence"])
            if resp.get("coverage"):
                attrs["coverage"] = str(resp["coverage"])
            out.append(Memory(
                id=str(r.get("node_id") or f"result-{i}"), text=r["content"], score=float(r["score"]),
                kind=str(r.get("type") or "fact").lower(), created_at=_parse_dt(meta.get("occurred_at")),
                source=str(meta.get("source_origin") or r.get("source") or "cortex"), evidence_ids=evidence,
                channel_scores={**by_node.get(str(r.get("node_id")), {}), **channel_scores(r.get("_debug"))}
                if self.config["debug"] else {},
                attributes=attrs))
        return out

    def _degraded(self, reason: str, t0: int, note: str) -> RetrieveResult:
        self.stats["recall_degraded"] += 1
        return RetrieveResult(degraded=True, degraded_reason=reason,
                              channels=[ChannelDiagnostics("cortex", 0, time.perf_counter_ns() - t0, note)])

    async def retrieve(self, namespace: str, query: RetrieveQuery) -> RetrieveResult:
        t0 = time.perf_counter_ns()
        self.stats["recall_calls"] += 1
        if len(query.query.strip()) < self.config["min_query_chars"]:
            self.stats["recall_skipped_short"] += 1
            return RetrieveResult(channels=[ChannelDiagnostics("cortex", 0, 0, "skipped: prompt too short")])
        if self.gate.is_open():
            self.stats["recall_gate_skips"] += 1
            return self._degraded(
                f"cold_start_gate: recall disabled for another {self.gate.remaining_s():.1f}s after "
                f"{self.gate.window} consecutive failures", t0, "gate open: no request")
        mode = self._mode(query)
        timeout = self.config["recall_timeout_ms"]
        note = f"mode={mode}"
        try:
            try:
                resp = await self.client.retrieve(self.retrieve_body(namespace, query, mode), timeout,
                                                  self.key_for(namespace))
                memories = self.to_memories(namespace, resp)
            except CortexError as e:
                if not (mode == "full" and self.config["fallback_fast_on_error"] and self._retryable(e)):
                    raise
                self.stats["recall_fallbacks"] += 1
                note = f"mode=full->fast after {e.kind}"
                resp = await self.client.retrieve(self.retrieve_body(namespace, query, "fast"), timeout,
                                                  self.key_for(namespace))
                memories = self.to_memories(namespace, resp)
        except CortexError as e:
            self.gate.record_failure(timeout=isinstance(e, CortexTimeout))
            return self._degraded(f"{e.kind}: {e}", t0, note)
        self.gate.record_success()
        k = self.config["top_k"] or query.top_k
        memories = memories[:k]
        dur = time.perf_counter_ns() - t0
        ctx = format_memories(((m.score, m.text) for m in memories), preamble=self.config["envelope_preamble"],
                              escape=self.config["envelope_escape"])
        if isinstance(resp, dict) and resp.get("coverage"):
            note += f" coverage={resp['coverage']}"
        return RetrieveResult(memories=memories, formatted_context=ctx,
                              channels=[ChannelDiagnostics("cortex", len(memories), dur, note)])

    # -- bookkeeping ------------------------------------------------------------------------------
    async def reset(self, namespace: str) -> int:
        """Forget every session this adapter sent for the namespace (DELETE /v1/forget/session/{id}; Cortex
        has no per-namespace delete), and drop its queued captures and pending jobs."""
        self.queue.discard(lambda t: t.meta.get("namespace") == namespace)
        sessions = [self.cortex_session_id(namespace, s) for s in self.sent_sessions.get(namespace, {})]
        sessions += [self.cortex_session_id(namespace, f"doc:{d}") for d in self.sent_documents.get(namespace, ())]
        for sid in sessions:
            try:
                await self.client.forget_session(sid, self.config["forget_timeout_ms"], self.key_for(namespace))
            except CortexError as e:
                if isinstance(e, CortexHTTPError) and e.status == 404:  # nothing stored under that session
                    continue
                # still the Cortex API's error (its status says whether it refused), with the reset named
                raise CortexError(f"cortex reset of {namespace!r} failed: {e}", e.status) from e
        self.jobs.pop(namespace, None)
        self.indexed.pop(namespace, None)
        self.failed_jobs.pop(namespace, None)
        self.unknown_jobs.pop(namespace, None)
        self.evidence_of.pop(namespace, None)
        n = (await self.namespace_stats(namespace)).items
        self.sent_sessions.pop(namespace, None)
        self.sent_documents.pop(namespace, None)
        return n

    async def namespace_stats(self, namespace: str) -> NamespaceStats:
        ss = self.sent_sessions.get(namespace, {})
        msgs = sum(len(v) for v in ss.values())
        docs = len(self.sent_documents.get(namespace, ()))
        return NamespaceStats(namespace, sessions=len(ss), messages=msgs, documents=docs, items=msgs + docs)

    def namespaces(self) -> list[str]:
        return sorted(n for n in set(self.sent_sessions) | set(self.sent_documents)
                      if self.sent_sessions.get(n) or self.sent_documents.get(n))

    def counters(self) -> dict[str, int]:
        out = dict(self.stats)
        out.update({f"queue_{k}": v for k, v in self.queue.stats.items()})
        out["queue_pending"] = self.queue.pending
        out["gate_trips"] = self.gate.trips
        out["http_requests"] = self.client.requests
        return out

