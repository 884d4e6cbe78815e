"""What `memrig ingest` / `retrieve` keep between commands when the backend runs in-process: a journal per backend
and namespace, `$MEMRIG_STATE_DIR/journal/<backend>/<namespace>.jsonl` (sessions JSONL, one session a line).

An in-process backend lives only as long as one command, so every command rebuilds the namespace by ingesting the
journal as one batch. The journal therefore only ever holds a batch that ingests:

- a session already stored with the same content is skipped (ingesting a file twice is idempotent, and says so);
- a session id already stored with other content, or a message id another stored session already uses, is refused
  before anything is written, with the session, the namespace and the reset command in the error;
- new sessions are journaled only after the backend has taken the whole batch (stored + new, exactly what the next
  replay ingests), by an atomic rewrite under a lock, so two commands never interleave;
- a journal that cannot be read (bad JSON, a torn line, a session that fails validation, or two different sessions
  with one id) is an error naming its file and line and how to clear it, never a lock-out: `memrig reset` does not
  read the journal it deletes. Journals written before this rule with the same session twice (identical copies)
  are read with the copy dropped.

Backend names and namespaces are percent-encoded in the file names (`a/b` -> `a%2Fb.jsonl`), so `reset --all`
recovers them.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import shlex
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import quote, unquote

from services.common.interchange import session_from_json, session_to_json
from services.common.types import IngestBatch, Session, ValidationError, validate_batch


def state_dir() -> Path:
    """Where the CLI keeps its state: $MEMRIG_STATE_DIR, default .memrig under the current directory."""
    return Path(os.environ.get("MEMRIG_STATE_DIR", ".memrig"))


def _enc(name: str) -> str:
    return quote(name, safe="-_.[]=,") if name not in (".", "..") else quote(name, safe="")


def reset_command(backend: str, namespace: str) -> str:
    return f"memrig reset --backend {shlex.quote(backend)} --namespace {shlex.quote(namespace)}"


@dataclass
class Plan:
    """What an ingest will do: sessions to add, and sessions skipped as already stored with the same content."""

    new: list[Session] = field(default_factory=list)
    skipped: list[Session] = field(default_factory=list)


class Journal:
    def __init__(self, backend: str, namespace: str, root: Path | None = None):
        self.backend, self.namespace = backend, namespace
        self.root = (root or state_dir()) / "journal"
        self.path = self.root / _enc(backend) / f"{_enc(namespace)}.jsonl"

    # ---------------------------------------------------------------------------------------------------
    def _damaged(self, where: str, what: str) -> ValidationError:
        return ValidationError(where, f"{what}; this journal of what `memrig ingest` stored in {self.backend}/"
                                      f"{self.namespace} cannot be replayed: clear it with "
                                      f"`{reset_command(self.backend, self.namespace)}` (deletes {self.path}) "
                                      "and ingest again")

    def load(self) -> list[Session]:
        """The journaled sessions in order; identical repeats (older journals) dropped; a ValidationError naming
        the file and line for anything a replay would reject."""
        if not self.path.exists():
            return []
        try:
            text = self.path.read_bytes().decode("utf-8")
        except (OSError, UnicodeDecodeError) as e:
            raise self._damaged(str(self.path), f"cannot be read ({e})") from None
        out: dict[str, Session] = {}
        lines: dict[str, int] = {}
        for n, line in enumerate(text.splitlines(), start=1):
            if not line.strip():
                continue
            where = f"{self.path}:{n}"
            try:
                s = session_from_json(json.loads(line), where=where)
            except json.JSONDecodeError as e:
                raise self._damaged(where, f"invalid JSON ({e.msg})") from None
            except ValidationError as e:
                raise self._damaged(e.field, e.message) from None
            old = out.get(s.session_id)
            if old is not None:
                if session_to_json(old) != session_to_json(s):
                    raise self._damaged(where, f"session {s.session_id!r} is journaled twice with different "
                                               f"content (first at line {lines[s.session_id]})")
                continue
            out[s.session_id], lines[s.session_id] = s, n
        sessions = list(out.values())
        try:
            validate_batch(IngestBatch(sessions=tuple(sessions)))
        except ValidationError as e:
            raise self._damaged(f"{self.path} ({e.field})", e.message) from None
        return sessions

    def plan(self, stored: list[Session], incoming: list[Session], source: str = "the file",
             line_of: list[int] | None = None) -> Plan:
        """Which incoming sessions are new and which are already stored with the same content; a ValidationError
        (nothing written) for a session id stored with other content or a message id another session holds."""
        by_id = {s.session_id: s for s in stored}
        msg_owner = {m.id: s.session_id for s in stored for m in s.messages}
        plan = Plan()
        for i, s in enumerate(incoming):
            where = f"{source}:{line_of[i]}" if line_of and i < len(line_of) else f"{source} sessions[{i}]"
            reset = f"clear the namespace first with `{reset_command(self.backend, self.namespace)}`"
            old = by_id.get(s.session_id)
            if old is not None:
                if session_to_json(old) == session_to_json(s):
                    plan.skipped.append(s)
                    continue
                raise ValidationError(f"{where} session_id", f"session {s.session_id!r} is already stored in "
                                      f"namespace {self.namespace!r} of {self.backend} with different content; ingest it "
                                      f"under a new session id, or {reset}")
            for m in s.messages:
                if m.id in msg_owner:
                    raise ValidationError(f"{where} messages.id", f"message id {m.id!r} of session {s.session_id!r} "
                                          f"is already stored in namespace {self.namespace!r} of {self.backend} (session "
                                          f"{msg_owner[m.id]!r}); message ids are evidence ids and must be unique: give it "
                                          f"a new id, or {reset}")
            plan.new.append(s)
        return plan

    def commit(self, stored: list[Session], new: list[Session]) -> None:
        """Write stored + new atomically (a temporary file renamed over the journal)."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_name(self.path.name + ".tmp")
        with tmp.open("w", encoding="utf-8") as f:
            for s in [*stored, *new]:
                f.write(json.dumps(session_to_json(s), ensure_ascii=False) + "\n")
            f.flush()
            os.fsync(f.fileno())
        tmp.replace(self.path)

    @contextlib.contextmanager
    def lock(self) -> Iterator[None]:
        """An exclusive lock on this journal for one command (ingest, retrieve's replay, reset)."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.path.with_name(self.path.name + ".lock"), "w") as fh:
            fcntl.flock(fh, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(fh, fcntl.LOCK_UN)

    def remove(self) -> int:
        """Delete the journal (without reading it); the number of files removed."""
        n = 0
        for p in (self.path, self.path.with_name(self.path.name + ".tmp")):
            if p.exists():
                p.unlink()
                n += 1
        return n


def journaled(root: Path | None = None, backend: str | None = None) -> list[tuple[str, str]]:
    """(backend, namespace) of every journal under the state dir (of one backend when given)."""
    base = (root or state_dir()) / "journal"
    if not base.is_dir():
        return []
    out = []
    for bdir in sorted(p for p in base.iterdir() if p.is_dir()):
        b = unquote(bdir.name)
        if backend is not None and b != backend:
            continue
        out += [(b, unquote(f.name[: -len(".jsonl")])) for f in sorted(bdir.glob("*.jsonl"))]
    return out
