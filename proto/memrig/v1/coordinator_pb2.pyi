from google.protobuf import struct_pb2 as _struct_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class RunState(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    RUN_STATE_UNSPECIFIED: _ClassVar[RunState]
    RUN_STATE_RUNNING: _ClassVar[RunState]
    RUN_STATE_SUCCEEDED: _ClassVar[RunState]
    RUN_STATE_PARTIAL: _ClassVar[RunState]
    RUN_STATE_FAILED: _ClassVar[RunState]
RUN_STATE_UNSPECIFIED: RunState
RUN_STATE_RUNNING: RunState
RUN_STATE_SUCCEEDED: RunState
RUN_STATE_PARTIAL: RunState
RUN_STATE_FAILED: RunState

class SuiteInfo(_message.Message):
    __slots__ = ("name", "description", "conditions")
    NAME_FIELD_NUMBER: _ClassVar[int]
    DESCRIPTION_FIELD_NUMBER: _ClassVar[int]
    CONDITIONS_FIELD_NUMBER: _ClassVar[int]
    name: str
    description: str
    conditions: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, name: _Optional[str] = ..., description: _Optional[str] = ..., conditions: _Optional[_Iterable[str]] = ...) -> None: ...

class BackendInfo(_message.Message):
    __slots__ = ("name", "description", "address")
    NAME_FIELD_NUMBER: _ClassVar[int]
    DESCRIPTION_FIELD_NUMBER: _ClassVar[int]
    ADDRESS_FIELD_NUMBER: _ClassVar[int]
    name: str
    description: str
    address: str
    def __init__(self, name: _Optional[str] = ..., description: _Optional[str] = ..., address: _Optional[str] = ...) -> None: ...

class ListSuitesRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class ListSuitesResponse(_message.Message):
    __slots__ = ("suites",)
    SUITES_FIELD_NUMBER: _ClassVar[int]
    suites: _containers.RepeatedCompositeFieldContainer[SuiteInfo]
    def __init__(self, suites: _Optional[_Iterable[_Union[SuiteInfo, _Mapping]]] = ...) -> None: ...

class ListBackendsRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class ListBackendsResponse(_message.Message):
    __slots__ = ("backends",)
    BACKENDS_FIELD_NUMBER: _ClassVar[int]
    backends: _containers.RepeatedCompositeFieldContainer[BackendInfo]
    def __init__(self, backends: _Optional[_Iterable[_Union[BackendInfo, _Mapping]]] = ...) -> None: ...

class RunSuiteRequest(_message.Message):
    __slots__ = ("suite", "backends", "out_dir", "seed", "options", "resume")
    SUITE_FIELD_NUMBER: _ClassVar[int]
    BACKENDS_FIELD_NUMBER: _ClassVar[int]
    OUT_DIR_FIELD_NUMBER: _ClassVar[int]
    SEED_FIELD_NUMBER: _ClassVar[int]
    OPTIONS_FIELD_NUMBER: _ClassVar[int]
    RESUME_FIELD_NUMBER: _ClassVar[int]
    suite: str
    backends: _containers.RepeatedScalarFieldContainer[str]
    out_dir: str
    seed: int
    options: _struct_pb2.Struct
    resume: bool
    def __init__(self, suite: _Optional[str] = ..., backends: _Optional[_Iterable[str]] = ..., out_dir: _Optional[str] = ..., seed: _Optional[int] = ..., options: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ..., resume: _Optional[bool] = ...) -> None: ...

class RunSuiteResponse(_message.Message):
    __slots__ = ("run_id", "state", "phase", "done", "total", "eta_seconds", "message", "out_dir")
    RUN_ID_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    PHASE_FIELD_NUMBER: _ClassVar[int]
    DONE_FIELD_NUMBER: _ClassVar[int]
    TOTAL_FIELD_NUMBER: _ClassVar[int]
    ETA_SECONDS_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    OUT_DIR_FIELD_NUMBER: _ClassVar[int]
    run_id: str
    state: RunState
    phase: str
    done: int
    total: int
    eta_seconds: float
    message: str
    out_dir: str
    def __init__(self, run_id: _Optional[str] = ..., state: _Optional[_Union[RunState, str]] = ..., phase: _Optional[str] = ..., done: _Optional[int] = ..., total: _Optional[int] = ..., eta_seconds: _Optional[float] = ..., message: _Optional[str] = ..., out_dir: _Optional[str] = ...) -> None: ...

class GetRunRequest(_message.Message):
    __slots__ = ("run",)
    RUN_FIELD_NUMBER: _ClassVar[int]
    run: str
    def __init__(self, run: _Optional[str] = ...) -> None: ...

class GetRunResponse(_message.Message):
    __slots__ = ("run_id", "state", "run", "metrics", "report_markdown")
    RUN_ID_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    RUN_FIELD_NUMBER: _ClassVar[int]
    METRICS_FIELD_NUMBER: _ClassVar[int]
    REPORT_MARKDOWN_FIELD_NUMBER: _ClassVar[int]
    run_id: str
    state: RunState
    run: _struct_pb2.Struct
    metrics: _struct_pb2.Struct
    report_markdown: str
    def __init__(self, run_id: _Optional[str] = ..., state: _Optional[_Union[RunState, str]] = ..., run: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ..., metrics: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ..., report_markdown: _Optional[str] = ...) -> None: ...
