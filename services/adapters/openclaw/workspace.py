"""The Markdown workspace OpenClaw keeps, built from ingested sessions: `memory/YYYY-MM-DD.md` daily logs
written by the pre-compaction memory flush, and a curated `MEMORY.md` of durable facts.

Flush (profile `flush-every-session`): at the end of each session — one compaction cycle — the agent gets the flush
turn: system FLUSH_SYSTEM, the session transcript as the preceding messages, then the user prompt
`flush_user(<session date>)`. Its reply (Markdown lines, or NO_REPLY) is appended to memory/<session date>.md;
a new daily file starts with a `# YYYY-MM-DD` heading, as an agent creating it would write. The flush-skip
rate models the every-other-cycle bug (#12590; the seed's "~50% silently skipped"): a skipped flush writes
nothing for that session.

MEMORY.md curation (the agent curates it by hand upstream): deterministic rules — a written note is also
appended to MEMORY.md when it reads as durable (a preference, a convention, a rule or a decision: "always",
"never", "we chose", "decided", "convention", "prefer", ...), deduplicated by normalised text.

Evidence: every line written keeps the ids of the messages it came from (`attribute_line`): the messages that
contain the note verbatim; else those covering >= 60% of the note's word tokens; else the best one covering
>= 30%; else none. Document lines keep the document's evidence ids.
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass, field
from datetime import UTC, datetime

import regex

from services.adapters.openclaw.lifecycle import InstallState
from services.common import prompts
from services.common.types import Document, Message, Session, utc

NO_REPLY = "NO_REPLY"
MEMORY_FILE = "MEMORY.md"
DURABLE_RE = re.compile(
    r"\b(always|never|we (?:chose|decided|picked|agreed|settled|standardi[sz]ed)|chose|choose|decided|decision|"
    r"convention|conventions|prefer|prefers|preferred|preference|must|rule|policy|standard|don't|do not|"
    r"instead of)\b",
    re.IGNORECASE,
)
_WORD_RE = regex.compile(r"[\p{L}\p{N}_]+")
_BULLET_RE = re.compile(r"^\s*(?:[-*+]|\d+[.)])\s+")


def session_date(s: Session) -> str:
    return utc(s.started_at).date().isoformat()


def daily_path(date: str) -> str:
    return f"memory/{date}.md"


def chat_role(m: Message) -> tuple[str, str]:
    """Transcript messages as chat messages: user/assistant kept; any other speaker becomes a labelled user turn."""
    if m.role in ("user", "assistant"):
        return m.role, m.content
    return "user", f"{m.role}: {m.content}"


def flush_messages(session: Session, messages: tuple[Message, ...] | None = None) -> list[dict[str, str]]:
    msgs = [{"role": "system", "content": prompts.FLUSH_SYSTEM}]
    for m in messages if messages is not None else session.messages:
        role, content = chat_role(m)
        msgs.append({"role": role, "content": content})
    msgs.append({"role": "user", "content": prompts.flush_user(session_date(session))})
    return msgs


def parse_flush_reply(text: str) -> list[str]:
    """The Markdown lines to append; NO_REPLY (or nothing) → []."""
    t = (text or "").strip()
    if not t or t == NO_REPLY:
        return []
    out = []
    for line in t.splitlines():
        s = line.rstrip()
        if not s.strip() or s.strip() == NO_REPLY or s.strip().startswith("```"):
            continue
        out.append(s)
    return out


def _words(text: str) -> set[str]:
    return {w.lower() for w in _WORD_RE.findall(text)}


def note_core(line: str) -> str:
    return _BULLET_RE.sub("", line).strip()


def attribute_line(line: str, messages: tuple[Message, ...]) -> tuple[str, ...]:
    core = note_core(line)
    if not core or core.startswith("#"):
        return ()
    exact = tuple(m.id for m in messages if core in m.content)
    if exact:
        return exact
    words = _words(core)
    if not words:
        return ()
    cover = [(len(words & _words(m.content)) / len(words), m.id) for m in messages]
    strong = tuple(mid for c, mid in cover if c >= 0.6)
    if strong:
        return strong
    best = max((c for c, _ in cover), default=0.0)
    if best >= 0.3:
        return tuple(mid for c, mid in cover if c == best)
    return ()


def is_durable(line: str) -> bool:
    core = note_core(line)
    return bool(core) and not core.startswith("#") and DURABLE_RE.search(core) is not None


@dataclass
class WFile:
    lines: list[str] = field(default_factory=list)
    evidence: list[tuple[str, ...]] = field(default_factory=list)
    mtime_ms: int = 0

    def append(self, lines: list[str], evidence: list[tuple[str, ...]], mtime_ms: int, gap: bool = True) -> None:
        if gap and self.lines and self.lines[-1] != "":
            self.lines.append("")
            self.evidence.append(())
        self.lines.extend(lines)
        self.evidence.extend(evidence)
        self.mtime_ms = max(self.mtime_ms, mtime_ms)

    @property
    def content(self) -> str:
        # Files end with a newline, as an editor writes them (chunkMarkdown then sees a trailing empty line).
        return "\n".join(self.lines) + "\n" if self.lines else ""

    def line_evidence(self) -> tuple[tuple[str, ...], ...]:
        return tuple(self.evidence) + ((),)

    def copy(self) -> WFile:
        return WFile(list(self.lines), list(self.evidence), self.mtime_ms)


@dataclass
class SessionNotes:
    session_id: str
    started_at: datetime
    path: str
    lines: list[str]
    evidence: list[tuple[str, ...]]
    skipped: bool = False


@dataclass
class Workspace:
    files: dict[str, WFile] = field(default_factory=dict)
    notes: dict[str, SessionNotes] = field(default_factory=dict)  # session id → what its flush wrote
    flush_attempts: int = 0
    flushes_skipped: int = 0
    memory_seen: set[str] = field(default_factory=set)  # normalised MEMORY.md entries (dedup)
    install: InstallState = field(default_factory=InstallState)  # the live session (threshold profiles)
    # What staging decided the install does, for a backend that writes it with OpenClaw's own code
    # (openclaw-real): ("append", session id, Turn) and ("new", at ms, session id, predicted hook path). Not copied.
    pending: list[tuple] = field(default_factory=list)

    def copy(self) -> Workspace:
        return Workspace({p: f.copy() for p, f in self.files.items()},
                         {k: SessionNotes(v.session_id, v.started_at, v.path, list(v.lines), list(v.evidence),
                                          v.skipped) for k, v in self.notes.items()},
                         self.flush_attempts, self.flushes_skipped, set(self.memory_seen), self.install.copy())

    def recent_notes(self, n: int = 2) -> list[SessionNotes]:
        """The notes of the n newest sessions (a skipped flush contributes nothing), oldest first."""
        newest = sorted(self.notes.values(), key=lambda s: (utc(s.started_at), s.session_id))[-n:] if n > 0 else []
        return newest


class FlushSkipper:
    """Decides whether a flush is silently skipped. rate 0 → never. mode "alternate": a deterministic
    Bresenham pattern over flush attempts (rate 0.5 → flush, skip, flush, skip, ...). mode "random": a seeded
    draw per session id (order-independent)."""

    def __init__(self, rate: float = 0.0, mode: str = "alternate", seed: int = 0):
        if not 0.0 <= rate <= 1.0:
            raise ValueError("flush_skip_rate must be within [0, 1]")
        if mode not in ("alternate", "random"):
            raise ValueError("flush_skip_mode must be 'alternate' or 'random'")
        self.rate, self.mode, self.seed = rate, mode, seed

    def skip(self, attempt_index: int, session_id: str) -> bool:
        if self.rate <= 0:
            return False
        if self.mode == "alternate":
            import math

            return math.floor((attempt_index + 1) * self.rate) > math.floor(attempt_index * self.rate)
        return random.Random(f"{self.seed}:{session_id}").random() < self.rate


def _ms(dt: datetime) -> int:
    return int(utc(dt).timestamp() * 1000)


def apply_flush(ws: Workspace, session: Session, new_messages: tuple[Message, ...], reply_lines: list[str] | None,
                skipped: bool) -> None:
    """Write one session's flush into the workspace (mutates `ws`; call it on a copy to stage)."""
    date = session_date(session)
    path = daily_path(date)
    end_ms = max(_ms(session.message_time(m)) for m in session.messages)
    prev = ws.notes.get(session.session_id)
    notes = prev or SessionNotes(session.session_id, session.started_at, path, [], [], skipped)
    notes.skipped = notes.skipped and skipped if prev else skipped
    ws.notes[session.session_id] = notes
    if skipped or not reply_lines:
        return
    evidence = [attribute_line(line, new_messages) for line in reply_lines]
    f = ws.files.get(path)
    if f is None:
        f = ws.files[path] = WFile()
        f.append([f"# {date}"], [()], end_ms, gap=False)
    f.append(reply_lines, evidence, end_ms)
    notes.lines.extend(reply_lines)
    notes.evidence.extend(evidence)
    durable = []
    for line, ev in zip(reply_lines, evidence, strict=True):
        key = " ".join(note_core(line).lower().split())
        if is_durable(line) and key not in ws.memory_seen:
            ws.memory_seen.add(key)
            durable.append(("- " + note_core(line), ev))
    if durable:
        mf = ws.files.get(MEMORY_FILE)
        if mf is None:
            mf = ws.files[MEMORY_FILE] = WFile()
            mf.append(["# Memory"], [()], end_ms, gap=False)
        mf.append([d for d, _ in durable], [e for _, e in durable], end_ms, gap=False)


def document_path(d: Document) -> str:
    """Where a directly ingested document lands: its own path; else the daily log of its date; else MEMORY.md."""
    if d.path:
        p = d.path.replace("\\", "/")
        while p.startswith("./"):
            p = p[2:]
        return p.lstrip("/") or MEMORY_FILE
    if d.created_at is not None:
        return daily_path(utc(d.created_at).date().isoformat())
    return MEMORY_FILE


def apply_document(ws: Workspace, d: Document, now: datetime | None = None) -> None:
    path = document_path(d)
    lines = d.text.split("\n")
    ev = d.evidence()
    mtime = _ms(d.created_at or now or datetime.now(UTC))
    f = ws.files.setdefault(path, WFile())
    f.append(lines, [ev if ln.strip() else () for ln in lines], mtime)


def apply_plan_flush(ws: Workspace, session: Session, path: str, reply_lines: list[str],
                     window: tuple[Message, ...], at_ms: int) -> None:
    """One threshold flush of a real install: OpenClaw creates `path` (memory/<flush date>.md) before the turn, empty
    if the model stores nothing, and the model appends its lines; MEMORY.md is not touched."""
    f = ws.files.get(path)
    if f is None:
        f = ws.files[path] = WFile(mtime_ms=at_ms)
    notes = ws.notes.setdefault(session.session_id,
                                SessionNotes(session.session_id, session.started_at, path, [], [], False))
    if not reply_lines:
        return
    evidence = [attribute_line(line, window) for line in reply_lines]
    f.append(reply_lines, evidence, at_ms)
    notes.lines.extend(reply_lines)
    notes.evidence.extend(evidence)


def hook_wfile(content: str, evidence_of_line: dict[str, tuple[str, ...]], at_ms: int) -> WFile:
    """A session-memory hook file as a workspace file: each `role: "..."` line carries its message's id."""
    lines = content[:-1].split("\n") if content.endswith("\n") else content.split("\n")
    return WFile(lines, [evidence_of_line.get(ln, ()) for ln in lines], at_ms)
