"""`chunkMarkdown` as OpenClaw implements it (src/memory/internal.ts; reference/peers.md §1.2, §1.12b).

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
