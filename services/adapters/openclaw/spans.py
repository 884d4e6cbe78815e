"""Evidence spans of OpenClaw results: which characters of a memory_search snippet, and of the formatted context,
come from which message (services/common/types.py `EvidenceSpan`; offsets are code points of the Python text).

A chunk's text is its lines joined by "\\n" (chunkMarkdown), where a line longer than a chunk is cut into pieces that
keep its line number, the first line may be only the tail of a piece (the carried overlap), and the snippet is the
text cut at 700 UTF-16 units (so its last line may be cut). A snippet is therefore a run of "segments" (its
"\\n"-separated parts), each a piece (or part of a piece) of one source line, in order. `align` maps each segment to
its source line by matching text: the first segment lies in the chunk's first line (or, for a transcript hit, in one
of the first message's rendered lines); each later segment either continues the line it is in (the line's unread
text starts with it) or starts the next line. A segment that matches neither is sent to the next line whose text
starts with it, else to the next line, and counted as misaligned (the caller reports the count).

Span rule: every segment of a line that carries evidence (a message's hook line, a flush note attributed to
messages, a document line, a transcript line) gets one span per evidence id over the segment's characters; header,
blank and unattributed lines get none. A message whose lines the snippet does not show gets no span; if the
snippet shows no message line at all while the memory still cites evidence ids, each id gets an empty span at 0
(an empty span list would read as "the whole text comes from every id").

Transcript hits (profile `sessions`): OpenClaw indexes a session as the lines `User: <text>` / `Assistant: <text>`
(dist/session-files-C0vpDol6.mjs `buildSessionEntryInProcess`: `normalizeSessionText` collapses whitespace,
`splitLongSessionLine` wraps at 800 UTF-16 units on the last space, every wrapped line labelled); `export_lines`
renders a message the same way (inbound-metadata stripping and secret redaction are not modelled: a message they
change is aligned by order and counted as misaligned).
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from services.adapters.openclaw.jsstr import _from_units, _has_astral, _to_units
from services.adapters.openclaw.lifecycle import hook_text
from services.common.types import EvidenceSpan

SESSION_WRAP_UNITS = 800  # SESSION_EXPORT_CONTENT_WRAP_CHARS (dist/session-files-C0vpDol6.mjs)
_NEWLINES_RE = re.compile(r"\s*\n+\s*")
_SPACES_RE = re.compile(r"\s+")


def segments(text: str) -> list[tuple[int, str]]:
    """The "\\n"-separated parts of `text` with their start offsets."""
    out, pos = [], 0
    for s in text.split("\n"):
        out.append((pos, s))
        pos += len(s) + 1
    return out


def _consistent(rest: str, nxt: str | None, following: str | None) -> bool:
    """Whether the segment after one that leaves `rest` unread in its line fits: it continues the line, or the line
    is done and it starts the following one."""
    if nxt is None:
        return True
    if rest:
        return nxt != "" and rest.startswith(nxt)
    return following is not None and following.startswith(nxt)


def align(segs: Sequence[str], lines: Sequence[str], first_choices: int = 1) -> tuple[list[int | None], int]:
    """The source line (index into `lines`) of each segment, and how many segments did not match (module doc)."""
    if not segs:
        return [], 0
    out: list[int | None] = []
    bad = 0
    s0 = segs[0]
    nxt = segs[1] if len(segs) > 1 else None
    found: list[tuple[int, str]] = []  # (line index, unread rest) of every place the first segment occurs
    for k in range(min(max(1, first_choices), len(lines))):
        line = lines[k]
        if s0 == "":
            if line == "":
                found.append((k, ""))
            continue
        pos = line.rfind(s0)
        while pos >= 0:  # last occurrence first: a carried overlap is the tail of a piece
            found.append((k, line[pos + len(s0):]))
            pos = line.rfind(s0, 0, pos + len(s0) - 1) if pos > 0 else -1
    pick = next(((k, r) for k, r in found
                 if _consistent(r, nxt, lines[k + 1] if k + 1 < len(lines) else None)), None)
    if pick is None:
        pick = found[0] if found else None
    if pick is None:
        bad += 1
        pick = (0, "") if lines else (None, "")
    idx, rest = pick
    out.append(idx)
    for s in segs[1:]:
        if idx is None:
            out.append(None)
            continue
        if s and rest and rest.startswith(s):
            rest = rest[len(s):]
            out.append(idx)
            continue
        j = idx + 1
        if j < len(lines) and not (rest == "" and lines[j].startswith(s)):
            bad += 1
            if s:  # skip to the next line that starts with it (a line OpenClaw dropped), else take the next one
                j = next((t for t in range(idx + 1, len(lines)) if lines[t].startswith(s)), j)
        if j >= len(lines):
            idx, rest = None, ""
            out.append(None)
            continue
        idx = j
        rest = lines[j][len(s):] if lines[j].startswith(s) else ""
        out.append(idx)
    return out, bad


def spans_for(text: str, lines: Sequence[str], evidence: Sequence[Sequence[str]], first_choices: int = 1
              ) -> tuple[list[EvidenceSpan], int]:
    """Spans of `text` (a snippet) whose segments come from `lines` (each with its evidence ids); returns the spans
    and the number of misaligned segments."""
    segs = segments(text)
    where, bad = align([s for _, s in segs], lines, first_choices)
    spans = []
    for (start, s), j in zip(segs, where, strict=True):
        if j is None or not s:
            continue
        for e in evidence[j] if j < len(evidence) else ():
            spans.append(EvidenceSpan(e, start, start + len(s)))
    return spans, bad


def file_snippet_spans(snippet: str, file_lines: Sequence[str], file_evidence: Sequence[Sequence[str]],
                       start_line: int, end_line: int) -> tuple[list[EvidenceSpan], int]:
    """Spans of a memory-file hit's snippet: lines start_line..end_line (1-based) of the file, each with its
    evidence (a file that ends with a newline has a last, empty line: chunkMarkdown sees it)."""
    lo, hi = max(0, start_line - 1), max(0, end_line)
    return spans_for(snippet, file_lines[lo:hi], file_evidence[lo:hi])


def normalize_session_text(text: str) -> str:
    """normalizeSessionText: newline runs (with the spaces around them) and whitespace runs become one space, trimmed."""
    return _SPACES_RE.sub(" ", _NEWLINES_RE.sub(" ", text)).strip()


def split_long_session_line(text: str, max_units: int = SESSION_WRAP_UNITS) -> list[str]:
    """splitLongSessionLine: wrap at `max_units` UTF-16 units, at the last space at or before the limit (a hard cut,
    never inside a surrogate pair, when there is none); pieces trimmed, empty ones dropped."""
    astral = _has_astral(text)
    s = (_to_units(text) if astral else text).strip()
    if not s:
        return []
    if len(s) <= max_units:
        return [_from_units(s) if astral else s]
    out, cur, n = [], 0, len(s)
    while cur < n:
        if n - cur <= max_units:
            out.append(s[cur:].strip())
            break
        limit = cur + max_units
        split = limit
        for i in range(limit, cur, -1):
            if s[i] == " ":
                split = i
                break
        if split < n and split > cur and "\ud800" <= s[split - 1] <= "\udbff" and "\udc00" <= s[split] <= "\udfff":
            split -= 1
        out.append(s[cur:split].strip())
        cur = split
        while cur < n and s[cur] == " ":
            cur += 1
    return [_from_units(p) if astral else p for p in out if p]


def export_lines(role: str, text: str) -> list[str]:
    """A transcript message as OpenClaw's session index renders it (`User: ...` / `Assistant: ...` lines); a silent
    reply renders nothing."""
    t = normalize_session_text(text)
    if not t or hook_text(t) is None:  # hook_text is None for NO_REPLY and its JSON form
        return []
    label = "User" if role == "user" else "Assistant"
    return [f"{label}: {p}" for p in split_long_session_line(t)]


def transcript_snippet_spans(snippet: str, messages: Sequence[tuple[str, str, str]]) -> tuple[list[EvidenceSpan], int]:
    """Spans of a transcript hit's snippet; `messages` = (message id, role, text) of the messages on the hit's JSONL
    lines, in order (the first is the one its start line maps to; the snippet starts in one of its rendered lines)."""
    lines: list[str] = []
    evidence: list[tuple[str, ...]] = []
    first = 0
    for i, (mid, role, text) in enumerate(messages):
        rendered = export_lines(role, text)
        if i == 0:
            first = len(rendered)
        lines += rendered
        evidence += [(mid,)] * len(rendered)
    return spans_for(snippet, lines, evidence, first_choices=max(1, first))


def with_hidden_evidence(spans: list[EvidenceSpan], evidence_ids: Sequence[str]) -> list[EvidenceSpan]:
    """`spans`, or, when the text shows no message line but the memory cites evidence, an empty span at 0 per id
    (so the list is not empty, which would credit the whole text to every id)."""
    if spans or not evidence_ids:
        return spans
    return [EvidenceSpan(e, 0, 0) for e in evidence_ids]


def shifted(spans: Sequence[EvidenceSpan], offset: int) -> list[EvidenceSpan]:
    return [EvidenceSpan(s.evidence_id, s.start + offset, s.end + offset) for s in spans]


def join_blocks(blocks: Sequence[tuple[str, list[EvidenceSpan]]], sep: str = "\n\n") -> tuple[str, list[EvidenceSpan]]:
    """Non-empty text blocks joined by `sep`, with each block's spans moved to where it lands."""
    parts: list[str] = []
    spans: list[EvidenceSpan] = []
    pos = 0
    for text, sp in blocks:
        if not text:
            continue
        if parts:
            pos += len(sep)
        spans += shifted(sp, pos)
        parts.append(text)
        pos += len(text)
    return sep.join(parts), spans
