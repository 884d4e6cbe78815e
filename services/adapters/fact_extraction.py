"""LLM fact extraction with evidence attribution, shared by the fact-based reference adapters (quaid, mem0).

One chat call per session (prompts.FACT_EXTRACTION_SYSTEM, the session's new messages as `role: content`
lines), one fact per non-empty reply line. Each fact is attributed to the message(s) it came from, so a fact
memory carries the dataset ids of its source messages as `evidence_ids`:
1. every message whose text contains the fact verbatim (case and whitespace folded) — the usual case for an
   extractive model such as the llm-mock;
2. otherwise the message sharing the most content words with the fact (first on ties); a fact sharing no
   word with any message gets no evidence rather than a guessed one.
The fact's time is its first source message's timestamp, else the session start.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from services.common import prompts
from services.common.types import Message, Session

_BULLET_RE = re.compile(r"^\s*(?:[-*•]|\d+[.)])\s+")
_WORD_RE = re.compile(r"[a-z0-9]+")
# Small English stop list: attribution only needs to ignore the glue words every sentence shares.
STOP_WORDS = frozenset(
    "a an and are as at be been but by do does for from had has have i in is it its of on or our so that the "
    "their them then there these they this to was we were what when where which who why will with you your".split()
)


@dataclass(frozen=True)
class ExtractedFact:
    text: str
    evidence_ids: tuple[str, ...]
    created_at: datetime
    session_id: str


def words(text: str) -> set[str]:
    return {w for w in _WORD_RE.findall(text.lower()) if w not in STOP_WORDS and len(w) > 1}


def _fold(text: str) -> str:
    return " ".join(text.lower().split()).rstrip(".!?")


def transcript(messages: Sequence[Message]) -> str:
    return "\n".join(f"{m.role}: {m.content}" for m in messages)


def parse_fact_lines(reply: str) -> list[str]:
    """Reply → fact lines: bullets/numbering stripped, blank and NO_REPLY-like lines dropped, deduplicated."""
    out: list[str] = []
    seen: set[str] = set()
    for line in reply.splitlines():
        s = _BULLET_RE.sub("", line).strip()
        if not s or s.upper() in ("NO_REPLY", "NONE") or not _WORD_RE.search(s.lower()):
            continue
        key = _fold(s)
        if key in seen:
            continue
        seen.add(key)
        out.append(s)
    return out


def attribute(fact: str, messages: Sequence[Message]) -> tuple[str, ...]:
    """The ids of the messages a fact came from (see the module docstring)."""
    key = _fold(fact)
    exact = tuple(m.id for m in messages if key and key in " ".join(m.content.lower().split()))
    if exact:
        return exact
    fw = words(fact)
    best, best_n = None, 0
    for m in messages:
        n = len(fw & words(m.content))
        if n > best_n:
            best, best_n = m, n
    return (best.id,) if best is not None else ()


def facts_from_reply(reply: str, session: Session, messages: Sequence[Message]) -> list[ExtractedFact]:
    by_id = {m.id: m for m in messages}
    out = []
    for line in parse_fact_lines(reply):
        ev = attribute(line, messages)
        first = by_id.get(ev[0]) if ev else None
        ts = first.ts if first is not None and first.ts is not None else session.started_at
        out.append(ExtractedFact(line, ev, ts, session.session_id))
    return out


def extraction_messages(messages: Sequence[Message]) -> list[dict[str, str]]:
    return [{"role": "system", "content": prompts.FACT_EXTRACTION_SYSTEM},
            {"role": "user", "content": transcript(messages)}]


async def extract_session_facts(llm, session: Session, messages: Sequence[Message],
                                temperature: float = 0.0) -> list[ExtractedFact]:
    """One LLM call for a session's (new) messages → attributed facts."""
    if not messages:
        return []
    res = await llm.chat(extraction_messages(messages), temperature=temperature)
    return facts_from_reply(res.text, session, messages)


def new_messages(existing: dict[str, Session], batch_sessions: Sequence[Session]) -> list[tuple[Session, tuple[Message, ...]]]:
    """(session, messages not ingested before) per batch session, oldest session first; sessions with nothing
    new are skipped (re-ingesting a session id appends, as SessionStore.apply does)."""
    from services.common.types import utc

    out = []
    for s in sorted(batch_sessions, key=lambda s: (utc(s.started_at), s.session_id)):
        old = existing.get(s.session_id)
        have = {m.id for m in old.messages} if old is not None else set()
        fresh = tuple(m for m in s.messages if m.id not in have)
        if fresh:
            out.append((s, fresh))
    return out


async def extract_document_facts(llm, doc, now: datetime, temperature: float = 0.0) -> list[ExtractedFact]:
    """A document is extracted like a one-message conversation; its facts cite the document's evidence ids."""
    res = await llm.chat([{"role": "system", "content": prompts.FACT_EXTRACTION_SYSTEM},
                          {"role": "user", "content": doc.text}], temperature=temperature)
    when = doc.created_at or now
    return [ExtractedFact(line, tuple(doc.evidence()), when, f"doc:{doc.id}") for line in parse_fact_lines(res.text)]
