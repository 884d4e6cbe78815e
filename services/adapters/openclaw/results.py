"""What OpenClaw's agent is shown, for both OpenClaw backends (the port, `openclaw`, and OpenClaw itself,
`openclaw-real`): the memory_search results as the tool presents them, the recent notes block, and where each
message's text sits in them (evidence spans)."""

from __future__ import annotations

from services.adapters.openclaw import hybrid
from services.adapters.openclaw.spans import file_snippet_spans, join_blocks, shifted
from services.adapters.openclaw.workspace import Workspace
from services.common.types import EvidenceSpan


def citation(path: str, start: int, end: int) -> str:
    return f"{path}#L{start}-L{end}"


def search_results_block(results: list[hybrid.Scored], spans: list[list[EvidenceSpan]] | None = None
                         ) -> tuple[str, list[EvidenceSpan]]:
    """The memory_search results as the tool presents them (`[i] path#Lstart-Lend (score s)` + snippet), and each
    snippet's evidence spans (`spans`, one list per result) moved to where the snippet sits in the block."""
    if not results:
        return "## memory_search results\n(no results)", []
    parts = ["## memory_search results"]
    out: list[EvidenceSpan] = []
    pos = len(parts[0])
    for i, r in enumerate(results, 1):
        head = f"[{i}] {citation(r.path, r.start_line, r.end_line)} (score {r.score:.3f})\n"
        pos += 2  # the blank line between entries
        if spans is not None:
            out += shifted(spans[i - 1], pos + len(head))
        parts.append(head + r.snippet)
        pos += len(head) + len(r.snippet)
    return "\n\n".join(parts), out


def format_search_results(results: list[hybrid.Scored]) -> str:
    return search_results_block(results)[0]


def recent_notes_block(ws: Workspace | None, n: int) -> tuple[str, list[EvidenceSpan]]:
    """The notes of the namespace's n newest sessions (their flush-written lines under a `### path (session id)`
    heading), and one span per note line and evidence id over that line."""
    if ws is None or n <= 0:
        return "", []
    head = f"## Recent memory notes (last {n} sessions)\n"
    blocks = []
    for sn in ws.recent_notes(n):
        if not sn.lines:
            continue
        title = f"### {sn.path} (session {sn.session_id})\n"
        sp, pos = [], len(title)
        for line, ev in zip(sn.lines, sn.evidence, strict=True):
            if line:
                sp += [EvidenceSpan(e, pos, pos + len(line)) for e in ev]
            pos += len(line) + 1
        blocks.append((title + "\n".join(sn.lines), sp))
    if not blocks:
        return "", []
    text, sp = join_blocks(blocks)
    return head + text, shifted(sp, len(head))


def format_recent_notes(ws: Workspace | None, n: int) -> str:
    return recent_notes_block(ws, n)[0]


def context_with_spans(ws: Workspace | None, n: int, results: list[hybrid.Scored],
                       spans: list[list[EvidenceSpan]]) -> tuple[str, list[EvidenceSpan]]:
    """formatted_context (the recent notes block, then the memory_search results) and its evidence spans."""
    return join_blocks([recent_notes_block(ws, n), search_results_block(results, spans)])


def file_hit_spans(ws: Workspace | None, path: str, snippet: str, start: int, end: int) -> tuple[list[EvidenceSpan], int]:
    """A memory-file hit's snippet spans from the workspace's line evidence (no file is re-read); the file's lines
    as chunkMarkdown sees them: its lines, then the empty line after the final newline. A file the workspace does
    not hold (nothing the sessions wrote) gives no spans."""
    f = ws.files.get(path) if ws else None
    if f is None:
        return [], 0
    return file_snippet_spans(snippet, f.lines + [""], f.line_evidence(), start, end)
