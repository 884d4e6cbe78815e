"""Plain Python value types shared by backends, suites and the coordinator, and their proto mapping.

Backends written in Python never see protobuf objects: the adapter server converts at the edge, so a
backend class is testable in-process with these dataclasses alone.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from typing import Any

from google.protobuf import json_format, struct_pb2, timestamp_pb2

from memrig.v1 import memory_backend_pb2 as pb
from services.common.errors import InputError

MAX_QUERY_CHARS = 2000
MAX_TOP_K = 200
# Ingest limits (stated in proto/memrig/v1/memory_backend.proto too). One message or document of at most 200k
# characters (~50k tokens: a long pasted log; LongMemEval's longest turn is ~5k characters); a 4.8 MB message
# took minutes to chunk and embed and is a client bug, not a memory.
MAX_CONTENT_CHARS = 200_000
MAX_ID_CHARS = 512
MAX_BATCH_ITEMS = 100_000  # messages + documents in one Ingest
MAX_BATCH_CHARS = 32_000_000  # all contents of one Ingest together
MESSAGE_ROLES = ("user", "assistant", "system", "tool")


class ValidationError(InputError):
    """Bad input to the rig's types and RPCs. `field` names the offending field (dotted path) so the caller can fix
    it; str(e) is "field: message" (services/common/errors.py InputError)."""

    def __init__(self, field_name: str, message: str):
        super().__init__(field_name, message, text=f"{field_name}: {message}")


@dataclass(frozen=True)
class Message:
    id: str
    role: str
    content: str
    ts: datetime | None = None


@dataclass(frozen=True)
class Session:
    session_id: str
    started_at: datetime
    messages: tuple[Message, ...]

    def message_time(self, m: Message) -> datetime:
        return m.ts or self.started_at


@dataclass(frozen=True)
class Document:
    id: str
    text: str
    created_at: datetime | None = None
    path: str = ""
    evidence_ids: tuple[str, ...] = ()
    metadata: dict[str, str] = field(default_factory=dict)

    def evidence(self) -> tuple[str, ...]:
        return self.evidence_ids or (self.id,)


@dataclass(frozen=True)
class IngestBatch:
    sessions: tuple[Session, ...] = ()
    documents: tuple[Document, ...] = ()
    batch_id: str = ""

    @property
    def message_count(self) -> int:
        return sum(len(s.messages) for s in self.sessions)


@dataclass(frozen=True)
class RetrieveQuery:
    query: str
    top_k: int = 6
    mode: str = "fast"  # "fast" | "full"
    reference_time: datetime | None = None
    view: str = ""  # a search-time view the backend lists in its "views" capability; "" = its own search


@dataclass(frozen=True)
class EvidenceSpan:
    """Characters [start, end) (Unicode code points) of a text that come from message `evidence_id`."""

    evidence_id: str
    start: int
    end: int


@dataclass
class Memory:
    id: str
    text: str
    score: float
    kind: str = "chunk"
    created_at: datetime | None = None
    source: str = ""
    evidence_ids: list[str] = field(default_factory=list)
    channel_scores: dict[str, float] = field(default_factory=dict)
    attributes: dict[str, str] = field(default_factory=dict)
    # Which characters of `text` come from which evidence id; empty = the whole text from every evidence id.
    evidence_spans: list[EvidenceSpan] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        d = asdict(self)
        d["created_at"] = self.created_at.isoformat() if self.created_at else None
        return d


@dataclass
class ChannelDiagnostics:
    channel: str
    candidates: int = 0
    duration_ns: int = 0
    note: str = ""


@dataclass
class RetrieveResult:
    memories: list[Memory] = field(default_factory=list)
    server_duration_ns: int = 0
    channels: list[ChannelDiagnostics] = field(default_factory=list)
    formatted_context: str = ""
    degraded: bool = False
    degraded_reason: str = ""
    # Which characters of `formatted_context` come from which evidence id; empty = the rig locates each memory's
    # text in formatted_context and carries the memory's own spans over.
    context_spans: list[EvidenceSpan] = field(default_factory=list)


@dataclass
class SettleResult:
    settled: bool = True
    items_indexed: int = 0
    items_pending: int = 0
    counts: dict[str, int] = field(default_factory=dict)


@dataclass
class PrepareResult:
    """What Prepare did for one namespace: a note ("" = nothing), the server's and the caller's time, and whether the
    backend implements Prepare at all (a gRPC backend without it answers UNIMPLEMENTED: nothing to prepare)."""

    note: str = ""
    server_duration_ns: int = 0
    client_duration_ns: int = 0
    implemented: bool = True


@dataclass
class NamespaceStats:
    namespace: str
    sessions: int = 0
    messages: int = 0
    documents: int = 0
    items: int = 0


# ---------------------------------------------------------------------------------------------------
# Time helpers


def utc(dt: datetime) -> datetime:
    """Naive datetimes are taken as UTC; aware ones are converted."""
    return dt.replace(tzinfo=UTC) if dt.tzinfo is None else dt.astimezone(UTC)


def parse_iso(value: str, field_name: str) -> datetime:
    if not isinstance(value, str) or not value:
        raise ValidationError(field_name, "expected an ISO 8601 timestamp string")
    try:
        return utc(datetime.fromisoformat(value.replace("Z", "+00:00")))
    except ValueError as e:
        raise ValidationError(field_name, f"not an ISO 8601 timestamp: {value!r}") from e


def ts_to_dt(ts: timestamp_pb2.Timestamp) -> datetime | None:
    if ts.seconds == 0 and ts.nanos == 0:
        return None
    return ts.ToDatetime(tzinfo=UTC)


def dt_to_ts(dt: datetime | None) -> timestamp_pb2.Timestamp:
    ts = timestamp_pb2.Timestamp()
    if dt is not None:
        ts.FromDatetime(utc(dt))
    return ts


# ---------------------------------------------------------------------------------------------------
# Validation: one place, used by the gRPC edge, the JSONL loader and in-process callers alike.


def validate_namespace(ns: str, field_name: str = "namespace") -> str:
    if not isinstance(ns, str) or not ns.strip():
        raise ValidationError(field_name, "must be a non-empty string")
    if len(ns) > 256:
        raise ValidationError(field_name, "must be at most 256 characters")
    return ns


def validate_batch(batch: IngestBatch) -> None:
    """Reject the whole batch on the first problem, before anything is stored."""
    if not batch.sessions and not batch.documents:
        raise ValidationError("sessions", "a batch needs at least one session or document")
    seen_sessions: set[str] = set()
    seen_ids: set[str] = set()
    items = batch.message_count + len(batch.documents)
    if items > MAX_BATCH_ITEMS:
        raise ValidationError("sessions", f"a batch holds at most {MAX_BATCH_ITEMS} messages + documents "
                              f"(got {items}); split it")
    total_chars = 0
    for i, s in enumerate(batch.sessions):
        where = f"sessions[{i}]"
        if not s.session_id:
            raise ValidationError(f"{where}.session_id", "is required")
        _check_id_length(f"{where}.session_id", s.session_id)
        if s.session_id in seen_sessions:
            raise ValidationError(f"{where}.session_id", f"duplicate session id {s.session_id!r} in batch")
        seen_sessions.add(s.session_id)
        if s.started_at is None:
            raise ValidationError(f"{where}.started_at", "is required")
        if not s.messages:
            raise ValidationError(f"{where}.messages", "must hold at least one message")
        for j, m in enumerate(s.messages):
            mw = f"{where}.messages[{j}]"
            if not m.id:
                raise ValidationError(f"{mw}.id", "is required (it is the evidence id)")
            if m.id in seen_ids:
                raise ValidationError(f"{mw}.id", f"duplicate message id {m.id!r} in batch")
            seen_ids.add(m.id)
            _check_id_length(f"{mw}.id", m.id)
            if not m.role:
                raise ValidationError(f"{mw}.role", "is required")
            if m.role not in MESSAGE_ROLES:
                raise ValidationError(f"{mw}.role", f"must be one of {', '.join(MESSAGE_ROLES)} (got {m.role[:40]!r})")
            if not isinstance(m.content, str) or not m.content.strip():
                raise ValidationError(f"{mw}.content", "must be non-empty text")
            total_chars += _check_content_length(f"{mw}.content", m.content)
    for i, d in enumerate(batch.documents):
        where = f"documents[{i}]"
        if not d.id:
            raise ValidationError(f"{where}.id", "is required")
        if d.id in seen_ids:
            raise ValidationError(f"{where}.id", f"duplicate id {d.id!r} in batch")
        seen_ids.add(d.id)
        _check_id_length(f"{where}.id", d.id)
        if not isinstance(d.text, str) or not d.text.strip():
            raise ValidationError(f"{where}.text", "must be non-empty text")
        total_chars += _check_content_length(f"{where}.text", d.text)
    if total_chars > MAX_BATCH_CHARS:
        raise ValidationError("sessions", f"a batch holds at most {MAX_BATCH_CHARS} characters of content "
                              f"(got {total_chars}); split it")


def _check_id_length(field_name: str, value: str) -> None:
    if len(value) > MAX_ID_CHARS:
        raise ValidationError(field_name, f"must be at most {MAX_ID_CHARS} characters (got {len(value)})")


def _check_content_length(field_name: str, text: str) -> int:
    if len(text) > MAX_CONTENT_CHARS:
        raise ValidationError(field_name, f"must be at most {MAX_CONTENT_CHARS} characters (got {len(text)}); "
                              "split long text into several messages or documents")
    return len(text)


def validate_query(q: RetrieveQuery) -> None:
    if not isinstance(q.query, str) or not q.query.strip():
        raise ValidationError("query", "must be non-empty text")
    if len(q.query) > MAX_QUERY_CHARS:
        raise ValidationError("query", f"must be at most {MAX_QUERY_CHARS} characters (got {len(q.query)})")
    if not (1 <= q.top_k <= MAX_TOP_K):
        raise ValidationError("top_k", f"must be between 1 and {MAX_TOP_K} (got {q.top_k})")
    if q.mode not in ("fast", "full"):
        raise ValidationError("mode", f"must be 'fast' or 'full' (got {q.mode!r})")


# ---------------------------------------------------------------------------------------------------
# proto <-> python

_MODE_FROM_PB = {pb.RETRIEVE_MODE_UNSPECIFIED: "fast", pb.RETRIEVE_MODE_FAST: "fast", pb.RETRIEVE_MODE_FULL: "full"}
_MODE_TO_PB = {"fast": pb.RETRIEVE_MODE_FAST, "full": pb.RETRIEVE_MODE_FULL}


def batch_from_pb(req: pb.IngestRequest) -> IngestBatch:
    sessions = []
    for i, s in enumerate(req.sessions):
        started = ts_to_dt(s.started_at)
        if started is None:
            raise ValidationError(f"sessions[{i}].started_at", "is required")
        sessions.append(
            Session(
                session_id=s.session_id,
                started_at=started,
                messages=tuple(
                    Message(id=m.id, role=m.role, content=m.content, ts=ts_to_dt(m.ts)) for m in s.messages
                ),
            )
        )
    docs = tuple(
        Document(
            id=d.id,
            text=d.text,
            created_at=ts_to_dt(d.created_at),
            path=d.path,
            evidence_ids=tuple(d.evidence_ids),
            metadata=dict(d.metadata),
        )
        for d in req.documents
    )
    return IngestBatch(sessions=tuple(sessions), documents=docs, batch_id=req.batch_id)


def batch_to_pb(namespace: str, batch: IngestBatch) -> pb.IngestRequest:
    return pb.IngestRequest(
        namespace=namespace,
        batch_id=batch.batch_id,
        sessions=[
            pb.Session(
                session_id=s.session_id,
                started_at=dt_to_ts(s.started_at),
                messages=[
                    pb.Message(id=m.id, role=m.role, content=m.content, ts=dt_to_ts(m.ts)) for m in s.messages
                ],
            )
            for s in batch.sessions
        ],
        documents=[
            pb.Document(
                id=d.id,
                text=d.text,
                created_at=dt_to_ts(d.created_at),
                path=d.path,
                evidence_ids=list(d.evidence_ids),
                metadata=d.metadata,
            )
            for d in batch.documents
        ],
    )


def query_from_pb(req: pb.RetrieveRequest) -> RetrieveQuery:
    if req.mode not in _MODE_FROM_PB:
        raise ValidationError("mode", f"unknown retrieve mode {req.mode}")
    return RetrieveQuery(
        query=req.query,
        top_k=req.top_k,
        mode=_MODE_FROM_PB[req.mode],
        reference_time=ts_to_dt(req.reference_time),
        view=req.view,
    )


def query_to_pb(namespace: str, q: RetrieveQuery) -> pb.RetrieveRequest:
    return pb.RetrieveRequest(
        namespace=namespace,
        query=q.query,
        top_k=q.top_k,
        mode=_MODE_TO_PB.get(q.mode, pb.RETRIEVE_MODE_UNSPECIFIED),
        reference_time=dt_to_ts(q.reference_time),
        view=q.view,
    )


def memory_to_pb(m: Memory) -> pb.Memory:
    return pb.Memory(
        id=m.id,
        text=m.text,
        score=float(m.score),
        kind=m.kind,
        created_at=dt_to_ts(m.created_at),
        source=m.source,
        evidence_ids=list(m.evidence_ids),
        channel_scores=[pb.ChannelScore(channel=k, score=float(v)) for k, v in m.channel_scores.items()],
        attributes={k: str(v) for k, v in m.attributes.items()},
        evidence_spans=spans_to_pb(m.evidence_spans),
    )


def memory_from_pb(m: pb.Memory) -> Memory:
    return Memory(
        id=m.id,
        text=m.text,
        score=m.score,
        kind=m.kind,
        created_at=ts_to_dt(m.created_at),
        source=m.source,
        evidence_ids=list(m.evidence_ids),
        channel_scores={c.channel: c.score for c in m.channel_scores},
        attributes=dict(m.attributes),
        evidence_spans=spans_from_pb(m.evidence_spans),
    )


def result_to_pb(r: RetrieveResult) -> pb.RetrieveResponse:
    return pb.RetrieveResponse(
        memories=[memory_to_pb(m) for m in r.memories],
        server_duration_ns=int(r.server_duration_ns),
        channels=[
            pb.ChannelDiagnostics(channel=c.channel, candidates=c.candidates, duration_ns=c.duration_ns, note=c.note)
            for c in r.channels
        ],
        formatted_context=r.formatted_context,
        degraded=r.degraded,
        degraded_reason=r.degraded_reason,
        context_spans=spans_to_pb(r.context_spans),
    )


def spans_to_pb(spans: list[EvidenceSpan]) -> list[pb.EvidenceSpan]:
    return [pb.EvidenceSpan(evidence_id=s.evidence_id, start=int(s.start), end=int(s.end)) for s in spans]


def spans_from_pb(spans: Any) -> list[EvidenceSpan]:
    return [EvidenceSpan(s.evidence_id, s.start, s.end) for s in spans]


def result_from_pb(r: pb.RetrieveResponse) -> RetrieveResult:
    return RetrieveResult(
        memories=[memory_from_pb(m) for m in r.memories],
        server_duration_ns=r.server_duration_ns,
        channels=[ChannelDiagnostics(c.channel, c.candidates, c.duration_ns, c.note) for c in r.channels],
        formatted_context=r.formatted_context,
        degraded=r.degraded,
        degraded_reason=r.degraded_reason,
        context_spans=spans_from_pb(r.context_spans),
    )


def dict_to_struct(d: dict[str, Any]) -> struct_pb2.Struct:
    s = struct_pb2.Struct()
    s.update(json_safe(d))
    return s


def struct_to_dict(s: struct_pb2.Struct) -> dict[str, Any]:
    """A Struct as a dict with its keys sorted, at every depth: a Struct is a protobuf map, whose iteration order
    changes from one process to the next, so a backend's Describe config came out in a new order in every run.json."""
    return _keys_sorted(json_format.MessageToDict(s))


def _keys_sorted(v: Any) -> Any:
    if isinstance(v, dict):
        return {k: _keys_sorted(v[k]) for k in sorted(v)}
    if isinstance(v, list):
        return [_keys_sorted(x) for x in v]
    return v


def json_safe(v: Any) -> Any:
    """Make config values JSON/Struct friendly (tuples → lists, datetimes → ISO, paths → str)."""
    if isinstance(v, dict):
        return {str(k): json_safe(x) for k, x in v.items()}
    if isinstance(v, list | tuple | set):
        return [json_safe(x) for x in v]
    if isinstance(v, datetime):
        return v.isoformat()
    if v is None or isinstance(v, bool | int | float | str):
        return v
    return str(v)
