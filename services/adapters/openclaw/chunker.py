"""`chunkMarkdown` as OpenClaw implements it (src/memory/internal.ts).

- maxChars = max(32, tokens*4); overlapChars = max(0, overlap*4): a 4-chars-per-token heuristic, no tokenizer.
- Line-aware: content split on "\\n"; a line longer than maxChars is cut into maxChars pieces that keep its
  line number; an empty line is pushed as "".
- Each piece costs len+1. Before adding a piece, if the buffer is non-empty and would exceed maxChars, the
  buffer is flushed and the overlap carried: whole lines taken from the end while they fit in
  min(overlapChars, floor(maxChars/2)), at least one line, stopping once the cap is reached.
- flush: lines joined by "\\n", hard-cut to maxChars (the "safety net"), 1-indexed start/end lines,
  sha256 of the text.
Strings count UTF-16 code units as in JavaScript (an emoji counts 2 and a cut may split it; the split half
becomes U+FFFD in the stored text, as V8 writes it). Consequences kept on purpose: with overlap on, a line
longer than a chunk can repeat a chunk and lose its last piece; empty content gives one empty chunk.
"""

from __future__ import annotations

from dataclasses import dataclass

import regex

from services.adapters.openclaw.jsstr import _from_units, _has_astral, _to_units, sha256_hex, well_formed


@dataclass(frozen=True)
class Chunk:
    start_line: int
    end_line: int
    text: str
    hash: str


def chunk_markdown(content: str, tokens: int = 400, overlap: int = 80) -> list[Chunk]:
    astral = _has_astral(content)
    units = _to_units(content) if astral else content  # one Python char per UTF-16 code unit
    lines = units.split("\n")
    max_chars = max(32, tokens * 4)
    overlap_chars = max(0, overlap * 4)
    chunks: list[Chunk] = []
    current: list[tuple[str, int]] = []  # (piece, 1-based line number)
    current_chars = 0

    def flush() -> None:
        if not current:
            return
        text = "\n".join(p for p, _ in current)
        if len(text) > max_chars:  # safety net: the carried overlap can push a chunk over maxChars
            text = text[:max_chars]
        if astral:
            text = well_formed(_from_units(text))
        chunks.append(Chunk(current[0][1], current[-1][1], text, sha256_hex(text)))

    def carry_overlap() -> None:
        nonlocal current, current_chars
        cap = min(overlap_chars, max_chars // 2)
        if cap <= 0 or not current:
            current, current_chars = [], 0
            return
        acc = 0
        kept: list[tuple[str, int]] = []
        for piece, line_no in reversed(current):
            size = len(piece) + 1
            if acc + size > cap and kept:
                break
            acc += size
            kept.insert(0, (piece, line_no))
            if acc >= cap:
                break
        current = kept
        current_chars = sum(len(p) + 1 for p, _ in kept)

    for i, line in enumerate(lines):
        line_no = i + 1
        if not line:
            pieces = [""]
        else:
            pieces = [line[s : s + max_chars] for s in range(0, len(line), max_chars)]
        for piece in pieces:
            size = len(piece) + 1
            if current_chars + size > max_chars and current:
                flush()
                carry_overlap()
            current.append((piece, line_no))
            current_chars += size
    flush()
    return chunks


# ---------------------------------------------------------------------------------------------------
# OpenClaw 2026.9.6: chunking version 5 (dist/markdown-chunks-DYWd0D11.mjs `chunkMarkdown`,
# packages/memory-host-sdk/src/host/markdown-chunks.ts; caller dist/manager-index-preparation-BEdGU4Rv.mjs
# `prepareMemoryIndexChunks`).

# dist/cjk-chars-6ld30jSx.mjs WEIGHTED_CJK_RANGES: code-point ranges by weight bucket. `estimateStringChars`
# counts a string's UTF-16 length plus, per weighted code point, 3 (bucket 1), 11 (2), 7 (3), 10 (4, astral)
# or 14 (5, astral) more: a common CJK character costs 4 "chars", an ASCII letter 1.
_CJK_WEIGHT_RANGES: tuple[tuple[int, tuple[tuple[int, int], ...]], ...] = (
    (3, ((183, 183), (12288, 12703), (19968, 40869), (44032, 55215), (65281, 65376))),
    (11, ((4352, 4607), (11904, 12287), (12704, 19967), (40870, 40959), (40960, 42239), (42752, 42759),
          (43360, 43391), (55216, 55295), (63744, 64255))),
    (7, ((711, 711), (713, 715), (729, 729), (746, 747), (773, 773), (803, 803), (65040, 65103), (65377, 65500),
         (65504, 65510))),
    (10, ((119648, 119665),)),
    (14, ((94176, 94207), (110576, 110591), (110592, 110959), (127488, 127743), (131072, 195103),
          (196608, 210047))),
)


def _cjk_extra(cp: int) -> int:
    for extra, ranges in _CJK_WEIGHT_RANGES:
        for lo, hi in ranges:
            if lo <= cp <= hi:
                return extra
    return 0


def estimate_string_chars(units: str) -> int:
    """`estimateStringChars` over a string held as UTF-16 units (one Python char per unit)."""
    if units.isascii():
        return len(units)
    extra = 0
    i = 0
    n = len(units)
    while i < n:
        cp = ord(units[i])
        if 0xD800 <= cp <= 0xDBFF and i + 1 < n and 0xDC00 <= ord(units[i + 1]) <= 0xDFFF:
            cp = 0x10000 + (cp - 0xD800) * 1024 + ord(units[i + 1]) - 0xDC00
            i += 1
        if cp >= 128:
            extra += _cjk_extra(cp)
        i += 1
    return n + extra


def _code_points(units: str) -> list[str]:
    """Iterate UTF-16 units as JS `for (const ch of s)` does: a valid surrogate pair is one element."""
    out: list[str] = []
    i = 0
    while i < len(units):
        c = units[i]
        if 0xD800 <= ord(c) <= 0xDBFF and i + 1 < len(units) and 0xDC00 <= ord(units[i + 1]) <= 0xDFFF:
            out.append(units[i : i + 2])
            i += 2
        else:
            out.append(c)
            i += 1
    return out


def _truncate_units_safe(units: str, cap: int) -> str:
    """truncateUtf16Safe on a units string: never end on a high surrogate followed by its low half."""
    if len(units) <= cap:
        return units
    end = cap
    if end > 0 and 0xD800 <= ord(units[end - 1]) <= 0xDBFF and 0xDC00 <= ord(units[end]) <= 0xDFFF:
        end -= 1
    return units[:end]


def _take_tail(units: str, budget: int) -> str:
    """`takeTailByEstimatedChars`: the longest tail whose estimated chars fit the budget, whole code points."""
    acc = 0
    start = len(units)
    while start > 0:
        prev = start - (2 if start >= 2 and 0xD800 <= ord(units[start - 2]) <= 0xDBFF
                        and 0xDC00 <= ord(units[start - 1]) <= 0xDFFF else 1)
        acc += estimate_string_chars(units[prev:start])
        if not acc <= budget:
            break
        start = prev
    return units[start:]


_HEADING_RE = regex.compile(r"^#{1,6}(?:\s|$)")


def curated_entry_kind(line: str) -> str | None:
    """`curatedMarkdownEntryKind`: "- " starts an entry, a Markdown heading (#..######) a section."""
    if line.startswith("- "):
        return "entry"
    if _HEADING_RE.match(line):
        return "section"
    return None


def chunk_markdown_v5(content: str, tokens: int = 400, overlap: int = 80, per_entry: bool = False) -> list[Chunk]:
    """chunkMarkdown of chunking version 5, then the blank-chunk filter of prepareMemoryIndexChunks.

    Differences from the early chunker: with `per_entry` (MEMORY.md and USER.md) every bullet ("- ") and
    heading line starts a new chunk with no overlap carried across it, so a short curated file becomes one
    chunk per bullet; lengths are `estimateStringChars` (CJK weighted); the overlap window is
    min(overlapChars, maxChars - size of the incoming line) and may carry the tail of one long line; there
    is no hard cut of the flushed text; chunks whose text is blank are dropped.
    """
    astral = _has_astral(content)
    units = _to_units(content) if astral else content
    lines = units.split("\n")
    max_chars = max(32, tokens * 4)
    overlap_chars = max(0, overlap * 4)
    chunks: list[Chunk] = []
    current: list[tuple[str, int]] = []
    current_chars = 0

    def flush() -> None:
        if not current:
            return
        text = "\n".join(p for p, _ in current)
        if astral:
            text = well_formed(_from_units(text))
        chunks.append(Chunk(current[0][1], current[-1][1], text, sha256_hex(text)))

    def carry_overlap(window: int) -> None:
        nonlocal current, current_chars
        if window <= 0 or not current:
            current, current_chars = [], 0
            return
        acc = 0
        kept: list[tuple[str, int]] = []
        for piece, line_no in reversed(current):
            size = estimate_string_chars(piece) + 1
            remaining = window - acc
            if size > remaining:
                if not kept:
                    tail = _take_tail(piece, remaining - 1)
                    if tail:
                        kept.insert(0, (tail, line_no))
                        acc += estimate_string_chars(tail) + 1
                break
            acc += size
            kept.insert(0, (piece, line_no))
            if acc >= window:
                break
        current, current_chars = kept, acc

    def append(segment: str, line_no: int, chars: int) -> None:
        nonlocal current_chars
        size = chars + 1
        if current_chars + size > max_chars and current:
            flush()
            carry_overlap(min(overlap_chars, max(0, max_chars - size)))
        current.append((segment, line_no))
        current_chars += size

    for i, line in enumerate(lines):
        line_no = i + 1
        kind = (curated_entry_kind(line) or ("section" if i == 0 else None)) if per_entry else None
        if kind:
            flush()
            current, current_chars = [], 0
        if not line:
            append("", line_no, 0)
            continue
        start = 0
        while start < len(line):
            coarse = _truncate_units_safe(line[start:], max_chars)
            coarse_chars = estimate_string_chars(coarse)
            if coarse_chars > max_chars:  # CJK weighting: split by code points within the budget
                part: list[str] = []
                part_chars = 0
                for ch in _code_points(coarse):
                    c = estimate_string_chars(ch)
                    if part_chars + c > max_chars:
                        append("".join(part), line_no, part_chars)
                        part, part_chars = [], 0
                    part.append(ch)
                    part_chars += c
                append("".join(part), line_no, part_chars)
            else:
                append(coarse, line_no, coarse_chars)
            start += len(coarse)
    flush()
    return [c for c in chunks if c.text.strip()]
