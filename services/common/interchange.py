"""The interchange format for users' own data: sessions as JSONL, one session a line.

    {"session_id": "s1", "started_at": "2026-03-01T09:00:00Z",
     "messages": [{"id": "s1:0", "role": "user", "content": "...", "ts": "2026-03-01T09:00:05Z"}]}

`ts` is optional. Message ids are the evidence ids retrieval results carry back. Loading validates every
line and names the line and field of the first problem; nothing is returned half-parsed.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from services.common.types import Message, Session, ValidationError, parse_iso, utc


def session_from_json(obj: Any, where: str = "session") -> Session:
    if not isinstance(obj, dict):
        raise ValidationError(where, "expected a JSON object")
    for key in ("session_id", "started_at", "messages"):
        if key not in obj:
            raise ValidationError(f"{where}.{key}", "is required")
    sid = obj["session_id"]
    if not isinstance(sid, str) or not sid:
        raise ValidationError(f"{where}.session_id", "must be a non-empty string")
    started = parse_iso(obj["started_at"], f"{where}.started_at")
    msgs = obj["messages"]
    if not isinstance(msgs, list) or not msgs:
        raise ValidationError(f"{where}.messages", "must be a non-empty list")
    out = []
    for j, m in enumerate(msgs):
        mw = f"{where}.messages[{j}]"
        if not isinstance(m, dict):
            raise ValidationError(mw, "expected a JSON object")
        for key in ("id", "role", "content"):
            if key not in m:
                raise ValidationError(f"{mw}.{key}", "is required")
            if not isinstance(m[key], str):
                raise ValidationError(f"{mw}.{key}", "must be a string")
        ts = parse_iso(m["ts"], f"{mw}.ts") if m.get("ts") else None
        out.append(Message(id=m["id"], role=m["role"], content=m["content"], ts=ts))
    return Session(session_id=sid, started_at=started, messages=tuple(out))


def session_to_json(s: Session) -> dict[str, Any]:
    return {
        "session_id": s.session_id,
        "started_at": utc(s.started_at).isoformat(),
        "messages": [
            {"id": m.id, "role": m.role, "content": m.content, **({"ts": utc(m.ts).isoformat()} if m.ts else {})}
            for m in s.messages
        ],
    }


def parse_sessions_jsonl(lines: Iterable[str], source: str = "<input>") -> list[Session]:
    sessions = []
    for n, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as e:
            raise ValidationError(f"{source}:{n}", f"invalid JSON ({e.msg})") from e
        sessions.append(session_from_json(obj, where=f"{source}:{n}"))
    if not sessions:
        raise ValidationError(source, "holds no sessions")
    return sessions


def load_sessions_jsonl(path: str | Path) -> list[Session]:
    p = Path(path)
    with p.open(encoding="utf-8") as f:
        return parse_sessions_jsonl(f, source=p.name)


def write_sessions_jsonl(path: str | Path, sessions: Iterable[Session]) -> None:
    with Path(path).open("w", encoding="utf-8") as f:
        for s in sessions:
            f.write(json.dumps(session_to_json(s), ensure_ascii=False) + "\n")
