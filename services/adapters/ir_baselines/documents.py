"""The document list every IR baseline searches: one document per ingested message (its id is the message id,
which is also its only evidence id) and every ingested document as given.

The order is fixed by content, not by arrival: sessions by (start time, id) with their messages in order, then
documents by id. Rankings break score ties by this order, so two runs that ingest the same data in a different
order (concurrent ingest jobs) return the same lists.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from services.adapters.base import SessionStore


@dataclass(frozen=True)
class IRDocument:
    id: str
    text: str
    created_at: datetime | None
    source: str
    evidence_ids: tuple[str, ...]
    role: str = ""  # the message's role; "" for an ingested document


def documents_of(store: SessionStore, namespace: str) -> list[IRDocument]:
    out: list[IRDocument] = []
    for s in store.ordered_sessions(namespace):
        for m in s.messages:
            out.append(IRDocument(m.id, m.content, s.message_time(m), f"session:{s.session_id}", (m.id,), m.role))
    for d in sorted(store.ordered_documents(namespace), key=lambda d: d.id):
        out.append(IRDocument(d.id, d.text, d.created_at, d.path or "document", tuple(d.evidence())))
    return out


def session_documents(docs: list[IRDocument], joiner: str = " ",
                      roles: tuple[str, ...] | None = None) -> list[IRDocument]:
    """One document per session instead of one per message (LongMemEval's session granularity): the session's
    messages in `docs` of one of `roles` (None: every role) joined with `joiner`, its id the session id, its time
    the first message's, its evidence every joined message's id. A session with no message of those roles is an
    empty document citing nothing, as the official session corpus has it (`" ".join` of no user turn is ""): it
    is indexed (it counts in N and the average length, and `text.split(" ")` gives it one empty token) and ranked
    like any other. Ingested documents (role "") stay as they are, after the sessions, when `roles` admits ""."""
    out: list[IRDocument] = []
    by_session: dict[str, list[IRDocument]] = {}
    for d in docs:
        if d.source.startswith("session:"):
            by_session.setdefault(d.source, []).append(d)
    for source, msgs in by_session.items():  # dict order: the sessions' order in `docs`
        kept = [m for m in msgs if roles is None or m.role in roles]
        out.append(IRDocument(source[len("session:"):], joiner.join(m.text for m in kept), msgs[0].created_at,
                              source, tuple(e for m in kept for e in m.evidence_ids)))
    return out + [d for d in docs if not d.source.startswith("session:") and (roles is None or d.role in roles)]


def render(template: str, doc: IRDocument, date_format: str) -> str:
    """The text a channel indexes: `template` with {text} and {date} (the document's time in `date_format`,
    empty when it has none; a template starting "[{date}] " then drops the empty brackets)."""
    date = doc.created_at.strftime(date_format) if doc.created_at else ""
    if not date and template.startswith("[{date}] "):
        template = template[len("[{date}] "):]
    return template.format(text=doc.text, date=date)
