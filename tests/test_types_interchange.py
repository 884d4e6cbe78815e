"""Validation and the sessions-JSONL interchange format: errors name the field (and line)."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest

from services.common.interchange import load_sessions_jsonl, parse_sessions_jsonl, session_to_json
from services.common.types import (
    IngestBatch,
    Message,
    RetrieveQuery,
    Session,
    ValidationError,
    batch_from_pb,
    batch_to_pb,
    validate_batch,
    validate_query,
)

T0 = datetime(2026, 3, 1, 9, 0, tzinfo=UTC)


def line(**kw):
    base = {"session_id": "s1", "started_at": "2026-03-01T09:00:00Z",
            "messages": [{"id": "s1:0", "role": "user", "content": "port is 3001"}]}
    base.update(kw)
    return json.dumps(base)


def test_jsonl_roundtrip(tmp_path):
    p = tmp_path / "s.jsonl"
    p.write_text(line() + "\n\n" + line(session_id="s2", messages=[
        {"id": "s2:0", "role": "assistant", "content": "ok", "ts": "2026-03-02T10:00:00+02:00"}]) + "\n")
    sessions = load_sessions_jsonl(p)
    assert [s.session_id for s in sessions] == ["s1", "s2"]
    assert sessions[0].started_at == T0
    # +02:00 is converted to UTC
    assert sessions[1].messages[0].ts == datetime(2026, 3, 2, 8, 0, tzinfo=UTC)
    assert session_to_json(sessions[0])["messages"][0] == {"id": "s1:0", "role": "user", "content": "port is 3001"}


@pytest.mark.parametrize("text, field", [
    ("{not json", "f.jsonl:1"),
    (json.dumps({"started_at": "2026-03-01", "messages": []}), "f.jsonl:1.session_id"),
    (line(started_at="yesterday"), "f.jsonl:1.started_at"),
    (line(messages=[{"role": "user", "content": "x"}]), "f.jsonl:1.messages[0].id"),
    (line(messages=[{"id": "a", "role": "user", "content": 5}]), "f.jsonl:1.messages[0].content"),
    (line(messages=[]), "f.jsonl:1.messages"),
])
def test_jsonl_errors_name_line_and_field(text, field):
    with pytest.raises(ValidationError) as e:
        parse_sessions_jsonl([text], source="f.jsonl")
    assert e.value.field == field


def test_empty_file_rejected():
    with pytest.raises(ValidationError, match="no sessions"):
        parse_sessions_jsonl(["", "  "], source="empty.jsonl")


def _s(sid="s1", ids=("a",), contents=("hello",)):
    return Session(sid, T0, tuple(Message(i, "user", c) for i, c in zip(ids, contents, strict=True)))


@pytest.mark.parametrize("batch, field", [
    (IngestBatch(), "sessions"),
    (IngestBatch(sessions=(_s(), _s())), "sessions[1].session_id"),
    (IngestBatch(sessions=(_s(ids=("a", "a"), contents=("x", "y")),)), "sessions[0].messages[1].id"),
    (IngestBatch(sessions=(_s(contents=("   ",)),)), "sessions[0].messages[0].content"),
    (IngestBatch(sessions=(_s(ids=("",)),)), "sessions[0].messages[0].id"),
])
def test_batch_validation(batch, field):
    with pytest.raises(ValidationError) as e:
        validate_batch(batch)
    assert e.value.field == field


@pytest.mark.parametrize("q, field", [
    (RetrieveQuery(""), "query"),
    (RetrieveQuery("x" * 2001), "query"),
    (RetrieveQuery("ok", top_k=0), "top_k"),
    (RetrieveQuery("ok", top_k=201), "top_k"),
    (RetrieveQuery("ok", mode="slow"), "mode"),
])
def test_query_validation(q, field):
    with pytest.raises(ValidationError) as e:
        validate_query(q)
    assert e.value.field == field


def test_query_at_limit_is_valid():
    validate_query(RetrieveQuery("x" * 2000, top_k=200))


def test_proto_roundtrip_keeps_ids_and_times():
    b = IngestBatch(sessions=(Session("s", T0, (Message("m1", "user", "hi", ts=datetime(2026, 3, 1, 9, 5, tzinfo=UTC)),
                                                Message("m2", "assistant", "yo"))),), batch_id="b1")
    back = batch_from_pb(batch_to_pb("ns", b))
    assert back == b


def test_a_struct_comes_back_with_its_keys_sorted_at_every_depth():
    """A Struct is a protobuf map: its order is not the sender's and changes between processes, so the rig sorts."""
    from google.protobuf import struct_pb2

    from services.common.types import struct_to_dict

    s = struct_pb2.Struct()
    s.update({"k1": 1.2, "b": {"z": 1, "a": [{"y": 1, "x": 2}]}, "a": "x"})
    d = struct_to_dict(s)
    assert list(d) == ["a", "b", "k1"]
    assert list(d["b"]) == ["a", "z"] and list(d["b"]["a"][0]) == ["x", "y"]
    assert d == {"a": "x", "b": {"a": [{"x": 2.0, "y": 1.0}], "z": 1.0}, "k1": 1.2}
