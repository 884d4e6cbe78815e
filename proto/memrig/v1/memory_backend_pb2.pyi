import datetime

from google.protobuf import struct_pb2 as _struct_pb2
from google.protobuf import timestamp_pb2 as _timestamp_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class RetrieveMode(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    RETRIEVE_MODE_UNSPECIFIED: _ClassVar[RetrieveMode]
    RETRIEVE_MODE_FAST: _ClassVar[RetrieveMode]
    RETRIEVE_MODE_FULL: _ClassVar[RetrieveMode]
RETRIEVE_MODE_UNSPECIFIED: RetrieveMode
RETRIEVE_MODE_FAST: RetrieveMode
RETRIEVE_MODE_FULL: RetrieveMode

class Message(_message.Message):
    __slots__ = ("id", "role", "content", "ts")
    ID_FIELD_NUMBER: _ClassVar[int]
    ROLE_FIELD_NUMBER: _ClassVar[int]
    CONTENT_FIELD_NUMBER: _ClassVar[int]
    TS_FIELD_NUMBER: _ClassVar[int]
    id: str
    role: str
    content: str
    ts: _timestamp_pb2.Timestamp
    def __init__(self, id: _Optional[str] = ..., role: _Optional[str] = ..., content: _Optional[str] = ..., ts: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class Session(_message.Message):
    __slots__ = ("session_id", "started_at", "messages")
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    STARTED_AT_FIELD_NUMBER: _ClassVar[int]
    MESSAGES_FIELD_NUMBER: _ClassVar[int]
    session_id: str
    started_at: _timestamp_pb2.Timestamp
    messages: _containers.RepeatedCompositeFieldContainer[Message]
    def __init__(self, session_id: _Optional[str] = ..., started_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., messages: _Optional[_Iterable[_Union[Message, _Mapping]]] = ...) -> None: ...

class Document(_message.Message):
    __slots__ = ("id", "text", "created_at", "path", "evidence_ids", "metadata")
    class MetadataEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    ID_FIELD_NUMBER: _ClassVar[int]
    TEXT_FIELD_NUMBER: _ClassVar[int]
    CREATED_AT_FIELD_NUMBER: _ClassVar[int]
    PATH_FIELD_NUMBER: _ClassVar[int]
    EVIDENCE_IDS_FIELD_NUMBER: _ClassVar[int]
    METADATA_FIELD_NUMBER: _ClassVar[int]
    id: str
    text: str
    created_at: _timestamp_pb2.Timestamp
    path: str
    evidence_ids: _containers.RepeatedScalarFieldContainer[str]
    metadata: _containers.ScalarMap[str, str]
    def __init__(self, id: _Optional[str] = ..., text: _Optional[str] = ..., created_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., path: _Optional[str] = ..., evidence_ids: _Optional[_Iterable[str]] = ..., metadata: _Optional[_Mapping[str, str]] = ...) -> None: ...

class Capability(_message.Message):
    __slots__ = ("name", "detail")
    NAME_FIELD_NUMBER: _ClassVar[int]
    DETAIL_FIELD_NUMBER: _ClassVar[int]
    name: str
    detail: str
    def __init__(self, name: _Optional[str] = ..., detail: _Optional[str] = ...) -> None: ...

class DescribeRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class DescribeResponse(_message.Message):
    __slots__ = ("name", "version", "config", "capabilities", "embedder", "embedding_dim")
    NAME_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    CONFIG_FIELD_NUMBER: _ClassVar[int]
    CAPABILITIES_FIELD_NUMBER: _ClassVar[int]
    EMBEDDER_FIELD_NUMBER: _ClassVar[int]
    EMBEDDING_DIM_FIELD_NUMBER: _ClassVar[int]
    name: str
    version: str
    config: _struct_pb2.Struct
    capabilities: _containers.RepeatedCompositeFieldContainer[Capability]
    embedder: str
    embedding_dim: int
    def __init__(self, name: _Optional[str] = ..., version: _Optional[str] = ..., config: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ..., capabilities: _Optional[_Iterable[_Union[Capability, _Mapping]]] = ..., embedder: _Optional[str] = ..., embedding_dim: _Optional[int] = ...) -> None: ...

class ResetRequest(_message.Message):
    __slots__ = ("namespace",)
    NAMESPACE_FIELD_NUMBER: _ClassVar[int]
    namespace: str
    def __init__(self, namespace: _Optional[str] = ...) -> None: ...

class ResetResponse(_message.Message):
    __slots__ = ("items_removed",)
    ITEMS_REMOVED_FIELD_NUMBER: _ClassVar[int]
    items_removed: int
    def __init__(self, items_removed: _Optional[int] = ...) -> None: ...

class IngestRequest(_message.Message):
    __slots__ = ("namespace", "sessions", "documents", "batch_id")
    NAMESPACE_FIELD_NUMBER: _ClassVar[int]
    SESSIONS_FIELD_NUMBER: _ClassVar[int]
    DOCUMENTS_FIELD_NUMBER: _ClassVar[int]
    BATCH_ID_FIELD_NUMBER: _ClassVar[int]
    namespace: str
    sessions: _containers.RepeatedCompositeFieldContainer[Session]
    documents: _containers.RepeatedCompositeFieldContainer[Document]
    batch_id: str
    def __init__(self, namespace: _Optional[str] = ..., sessions: _Optional[_Iterable[_Union[Session, _Mapping]]] = ..., documents: _Optional[_Iterable[_Union[Document, _Mapping]]] = ..., batch_id: _Optional[str] = ...) -> None: ...

class IngestResponse(_message.Message):
    __slots__ = ("batch_id", "sessions_accepted", "messages_accepted", "documents_accepted")
    BATCH_ID_FIELD_NUMBER: _ClassVar[int]
    SESSIONS_ACCEPTED_FIELD_NUMBER: _ClassVar[int]
    MESSAGES_ACCEPTED_FIELD_NUMBER: _ClassVar[int]
    DOCUMENTS_ACCEPTED_FIELD_NUMBER: _ClassVar[int]
    batch_id: str
    sessions_accepted: int
    messages_accepted: int
    documents_accepted: int
    def __init__(self, batch_id: _Optional[str] = ..., sessions_accepted: _Optional[int] = ..., messages_accepted: _Optional[int] = ..., documents_accepted: _Optional[int] = ...) -> None: ...

class SettleRequest(_message.Message):
    __slots__ = ("namespace", "timeout_seconds")
    NAMESPACE_FIELD_NUMBER: _ClassVar[int]
    TIMEOUT_SECONDS_FIELD_NUMBER: _ClassVar[int]
    namespace: str
    timeout_seconds: float
    def __init__(self, namespace: _Optional[str] = ..., timeout_seconds: _Optional[float] = ...) -> None: ...

class SettleResponse(_message.Message):
    __slots__ = ("settled", "items_indexed", "items_pending", "counts")
    class CountsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: int
        def __init__(self, key: _Optional[str] = ..., value: _Optional[int] = ...) -> None: ...
    SETTLED_FIELD_NUMBER: _ClassVar[int]
    ITEMS_INDEXED_FIELD_NUMBER: _ClassVar[int]
    ITEMS_PENDING_FIELD_NUMBER: _ClassVar[int]
    COUNTS_FIELD_NUMBER: _ClassVar[int]
    settled: bool
    items_indexed: int
    items_pending: int
    counts: _containers.ScalarMap[str, int]
    def __init__(self, settled: _Optional[bool] = ..., items_indexed: _Optional[int] = ..., items_pending: _Optional[int] = ..., counts: _Optional[_Mapping[str, int]] = ...) -> None: ...

class PrepareRequest(_message.Message):
    __slots__ = ("namespace",)
    NAMESPACE_FIELD_NUMBER: _ClassVar[int]
    namespace: str
    def __init__(self, namespace: _Optional[str] = ...) -> None: ...

class PrepareResponse(_message.Message):
    __slots__ = ("note", "server_duration_ns")
    NOTE_FIELD_NUMBER: _ClassVar[int]
    SERVER_DURATION_NS_FIELD_NUMBER: _ClassVar[int]
    note: str
    server_duration_ns: int
    def __init__(self, note: _Optional[str] = ..., server_duration_ns: _Optional[int] = ...) -> None: ...

class RetrieveRequest(_message.Message):
    __slots__ = ("namespace", "query", "top_k", "mode", "reference_time", "view")
    NAMESPACE_FIELD_NUMBER: _ClassVar[int]
    QUERY_FIELD_NUMBER: _ClassVar[int]
    TOP_K_FIELD_NUMBER: _ClassVar[int]
    MODE_FIELD_NUMBER: _ClassVar[int]
    REFERENCE_TIME_FIELD_NUMBER: _ClassVar[int]
    VIEW_FIELD_NUMBER: _ClassVar[int]
    namespace: str
    query: str
    top_k: int
    mode: RetrieveMode
    reference_time: _timestamp_pb2.Timestamp
    view: str
    def __init__(self, namespace: _Optional[str] = ..., query: _Optional[str] = ..., top_k: _Optional[int] = ..., mode: _Optional[_Union[RetrieveMode, str]] = ..., reference_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., view: _Optional[str] = ...) -> None: ...

class ChannelScore(_message.Message):
    __slots__ = ("channel", "score")
    CHANNEL_FIELD_NUMBER: _ClassVar[int]
    SCORE_FIELD_NUMBER: _ClassVar[int]
    channel: str
    score: float
    def __init__(self, channel: _Optional[str] = ..., score: _Optional[float] = ...) -> None: ...

class Memory(_message.Message):
    __slots__ = ("id", "text", "score", "kind", "created_at", "source", "evidence_ids", "channel_scores", "attributes", "evidence_spans")
    class AttributesEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    ID_FIELD_NUMBER: _ClassVar[int]
    TEXT_FIELD_NUMBER: _ClassVar[int]
    SCORE_FIELD_NUMBER: _ClassVar[int]
    KIND_FIELD_NUMBER: _ClassVar[int]
    CREATED_AT_FIELD_NUMBER: _ClassVar[int]
    SOURCE_FIELD_NUMBER: _ClassVar[int]
    EVIDENCE_IDS_FIELD_NUMBER: _ClassVar[int]
    CHANNEL_SCORES_FIELD_NUMBER: _ClassVar[int]
    ATTRIBUTES_FIELD_NUMBER: _ClassVar[int]
    EVIDENCE_SPANS_FIELD_NUMBER: _ClassVar[int]
    id: str
    text: str
    score: float
    kind: str
    created_at: _timestamp_pb2.Timestamp
    source: str
    evidence_ids: _containers.RepeatedScalarFieldContainer[str]
    channel_scores: _containers.RepeatedCompositeFieldContainer[ChannelScore]
    attributes: _containers.ScalarMap[str, str]
    evidence_spans: _containers.RepeatedCompositeFieldContainer[EvidenceSpan]
    def __init__(self, id: _Optional[str] = ..., text: _Optional[str] = ..., score: _Optional[float] = ..., kind: _Optional[str] = ..., created_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., source: _Optional[str] = ..., evidence_ids: _Optional[_Iterable[str]] = ..., channel_scores: _Optional[_Iterable[_Union[ChannelScore, _Mapping]]] = ..., attributes: _Optional[_Mapping[str, str]] = ..., evidence_spans: _Optional[_Iterable[_Union[EvidenceSpan, _Mapping]]] = ...) -> None: ...

class EvidenceSpan(_message.Message):
    __slots__ = ("evidence_id", "start", "end")
    EVIDENCE_ID_FIELD_NUMBER: _ClassVar[int]
    START_FIELD_NUMBER: _ClassVar[int]
    END_FIELD_NUMBER: _ClassVar[int]
    evidence_id: str
    start: int
    end: int
    def __init__(self, evidence_id: _Optional[str] = ..., start: _Optional[int] = ..., end: _Optional[int] = ...) -> None: ...

class ChannelDiagnostics(_message.Message):
    __slots__ = ("channel", "candidates", "duration_ns", "note")
    CHANNEL_FIELD_NUMBER: _ClassVar[int]
    CANDIDATES_FIELD_NUMBER: _ClassVar[int]
    DURATION_NS_FIELD_NUMBER: _ClassVar[int]
    NOTE_FIELD_NUMBER: _ClassVar[int]
    channel: str
    candidates: int
    duration_ns: int
    note: str
    def __init__(self, channel: _Optional[str] = ..., candidates: _Optional[int] = ..., duration_ns: _Optional[int] = ..., note: _Optional[str] = ...) -> None: ...

class RetrieveResponse(_message.Message):
    __slots__ = ("memories", "server_duration_ns", "channels", "formatted_context", "degraded", "degraded_reason", "context_spans")
    MEMORIES_FIELD_NUMBER: _ClassVar[int]
    SERVER_DURATION_NS_FIELD_NUMBER: _ClassVar[int]
    CHANNELS_FIELD_NUMBER: _ClassVar[int]
    FORMATTED_CONTEXT_FIELD_NUMBER: _ClassVar[int]
    DEGRADED_FIELD_NUMBER: _ClassVar[int]
    DEGRADED_REASON_FIELD_NUMBER: _ClassVar[int]
    CONTEXT_SPANS_FIELD_NUMBER: _ClassVar[int]
    memories: _containers.RepeatedCompositeFieldContainer[Memory]
    server_duration_ns: int
    channels: _containers.RepeatedCompositeFieldContainer[ChannelDiagnostics]
    formatted_context: str
    degraded: bool
    degraded_reason: str
    context_spans: _containers.RepeatedCompositeFieldContainer[EvidenceSpan]
    def __init__(self, memories: _Optional[_Iterable[_Union[Memory, _Mapping]]] = ..., server_duration_ns: _Optional[int] = ..., channels: _Optional[_Iterable[_Union[ChannelDiagnostics, _Mapping]]] = ..., formatted_context: _Optional[str] = ..., degraded: _Optional[bool] = ..., degraded_reason: _Optional[str] = ..., context_spans: _Optional[_Iterable[_Union[EvidenceSpan, _Mapping]]] = ...) -> None: ...

class StatsRequest(_message.Message):
    __slots__ = ("namespace",)
    NAMESPACE_FIELD_NUMBER: _ClassVar[int]
    namespace: str
    def __init__(self, namespace: _Optional[str] = ...) -> None: ...

class NamespaceStats(_message.Message):
    __slots__ = ("namespace", "sessions", "messages", "documents", "items")
    NAMESPACE_FIELD_NUMBER: _ClassVar[int]
    SESSIONS_FIELD_NUMBER: _ClassVar[int]
    MESSAGES_FIELD_NUMBER: _ClassVar[int]
    DOCUMENTS_FIELD_NUMBER: _ClassVar[int]
    ITEMS_FIELD_NUMBER: _ClassVar[int]
    namespace: str
    sessions: int
    messages: int
    documents: int
    items: int
    def __init__(self, namespace: _Optional[str] = ..., sessions: _Optional[int] = ..., messages: _Optional[int] = ..., documents: _Optional[int] = ..., items: _Optional[int] = ...) -> None: ...

class StatsResponse(_message.Message):
    __slots__ = ("namespaces", "disk_bytes", "rss_bytes", "counters")
    class CountersEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: int
        def __init__(self, key: _Optional[str] = ..., value: _Optional[int] = ...) -> None: ...
    NAMESPACES_FIELD_NUMBER: _ClassVar[int]
    DISK_BYTES_FIELD_NUMBER: _ClassVar[int]
    RSS_BYTES_FIELD_NUMBER: _ClassVar[int]
    COUNTERS_FIELD_NUMBER: _ClassVar[int]
    namespaces: _containers.RepeatedCompositeFieldContainer[NamespaceStats]
    disk_bytes: int
    rss_bytes: int
    counters: _containers.ScalarMap[str, int]
    def __init__(self, namespaces: _Optional[_Iterable[_Union[NamespaceStats, _Mapping]]] = ..., disk_bytes: _Optional[int] = ..., rss_bytes: _Optional[int] = ..., counters: _Optional[_Mapping[str, int]] = ...) -> None: ...
