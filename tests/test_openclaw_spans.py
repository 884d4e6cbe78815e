"""Evidence spans of OpenClaw results (services/adapters/openclaw/spans.py): which characters of a snippet and of the
formatted context come from which message, checked against hand-computed offsets."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta

from services.adapters.base import BackendContext
from services.adapters.openclaw import lifecycle as L
from services.adapters.openclaw.backend import OpenClawBackend
from services.adapters.openclaw.hybrid import Scored
from services.adapters.openclaw.results import recent_notes_block, search_results_block
from services.adapters.openclaw.spans import (
    align,
    export_lines,
    file_snippet_spans,
    join_blocks,
    split_long_session_line,
    transcript_snippet_spans,
    with_hidden_evidence,
)
from services.adapters.openclaw.workspace import SessionNotes, Workspace
from services.common.types import EvidenceSpan, IngestBatch, Message, RetrieveQuery, Session
from tests.inprocess_llm import InProcessMockLLM

HEAD = ["# Session: 2026-03-03 11:00:00 UTC", "", "- **Session Key**: k", "- **Session ID**: s", "- **Source**: webchat",
        "", "## Conversation Summary", ""]
HEAD_EV = [()] * len(HEAD)


def S(e: str, a: int, b: int) -> EvidenceSpan:
    return EvidenceSpan(e, a, b)


def test_multi_message_chunk_spans_each_message_line():
    lines = HEAD + ['user: "a b"', 'assistant: "cd"', ""]
    ev = HEAD_EV + [("m0",), ("m1",), ()]
    text = "\n".join(lines)
    # Header: 34+1 + 0+1 + 20+1 + 19+1 + 21+1 + 0+1 + 23+1 + 0+1 = 125; 'user: "a b"' is 11 long, then "\n".
    spans, bad = file_snippet_spans(text, lines + [""], ev + [()], 1, len(lines))
    assert bad == 0 and spans == [S("m0", 125, 136), S("m1", 137, 152)]
    assert text[125:136] == 'user: "a b"' and text[137:152] == 'assistant: "cd"'


def test_truncated_snippet_spans_only_what_it_shows():
    lines = HEAD + ['user: "' + "x" * 40 + '"', 'assistant: "' + "y" * 40 + '"', 'user: "zz"']
    ev = HEAD_EV + [("m0",), ("m1",), ("m2",)]
    snippet = "\n".join(lines)[:190]  # the 700-unit cut, scaled down: inside the assistant line
    spans, bad = file_snippet_spans(snippet, lines, ev, 1, len(lines))
    # user line 125..173 (48 chars), assistant line starts at 174 and is shown up to 190; m2 not shown at all.
    assert bad == 0 and spans == [S("m0", 125, 173), S("m1", 174, 190)]
    assert snippet[174:190] == 'assistant: "yyyy'
    # Evidence ids stay as the chunk's; an all-header snippet still cites them, with empty spans.
    assert with_hidden_evidence(file_snippet_spans("# Session", lines, ev, 1, 3)[0], ["m0"]) == [S("m0", 0, 0)]


def test_one_message_chunk_and_a_line_cut_into_pieces():
    # chunkMarkdown cuts a long line into pieces joined by "\n": every piece is the same message's line.
    line = "p" * 10 + "q" * 10
    spans, bad = file_snippet_spans("pppppppppp\nqqqqqqqqqq", ["# T", line, ""], [(), ("m0",), ()], 2, 2)
    assert bad == 0 and spans == [S("m0", 0, 10), S("m0", 11, 21)]
    # The carried overlap: the chunk starts with the tail of line 2, then line 3.
    spans, bad = file_snippet_spans("qqq\nuser: \"n\"", ["# T", line, 'user: "n"'], [(), ("m0",), ("m1",)], 2, 3)
    assert bad == 0 and spans == [S("m0", 0, 3), S("m1", 4, 13)]


def test_align_skips_a_line_the_index_dropped_and_counts_it():
    where, bad = align(["a", "c"], ["a", "b", "c"])
    assert where == [0, 2] and bad == 1
    where, bad = align(["tail", "next"], ["head tail", "next", "x"])
    assert where == [0, 1] and bad == 0


def test_session_export_lines_wrap_at_800_units_on_a_space():
    words = " ".join(["word"] * 300)  # 1499 chars: the last space at or before 800 is at index 799
    assert split_long_session_line(words) == [words[:799], words[800:]]
    assert export_lines("user", "  a\n\n b  c ") == ["User: a b c"]
    assert export_lines("assistant", "NO_REPLY") == []
    msgs = [("m0", "assistant", words), ("m1", "user", "ok then")]
    # The hit starts in m0's second rendered line (chunks split a session's lines, not its messages).
    snippet = "Assistant: " + words[800:] + "\nUser: ok then"
    spans, bad = transcript_snippet_spans(snippet, msgs)
    n = len("Assistant: ") + len(words[800:])
    assert bad == 0 and spans == [S("m0", 0, n), S("m1", n + 1, n + 14)]
    assert snippet[n + 1:n + 14] == "User: ok then"


def test_context_blocks_shift_spans_to_where_they_land():
    ws = Workspace()
    ws.notes["s1"] = SessionNotes("s1", datetime(2026, 3, 1, tzinfo=UTC), "memory/2026-03-01.md",
                                  ["- uses pnpm", "- port 3001"], [("m2",), ("m0", "m1")])
    text, sp = recent_notes_block(ws, 2)
    # "## Recent memory notes (last 2 sessions)\n" is 41, "### memory/2026-03-01.md (session s1)\n" 38.
    assert sp == [S("m2", 79, 90), S("m0", 91, 102), S("m1", 91, 102)]
    assert text[79:90] == "- uses pnpm" and text[91:102] == "- port 3001"
    r = Scored("id", "memory/x.md", 3, 4, 'user: "hi"', 0.5, 0.5, 0.5, "memory")
    block, bsp = search_results_block([r], [[S("m9", 0, 10)]])
    # "## memory_search results" 24 + "\n\n" + "[1] memory/x.md#L3-L4 (score 0.500)\n" 36 = 62
    assert bsp == [S("m9", 62, 72)] and block[62:72] == 'user: "hi"'
    ctx, csp = join_blocks([(text, sp), (block, bsp)])
    assert csp[-1] == S("m9", len(text) + 2 + 62, len(text) + 2 + 72)
    assert all(ctx[s.start:s.end] in ("- uses pnpm", "- port 3001", 'user: "hi"') for s in csp)


T0 = datetime(2026, 3, 1, 11, 0, tzinfo=UTC)
LONG_U, LONG_A = "The dev server runs on port 3001 " + "u" * 300, "Noted the port " + "a" * 300
A1 = Session("a1", T0, (Message("a1-m0", "user", LONG_U, T0),
                        Message("a1-m1", "assistant", LONG_A, T0 + timedelta(minutes=1)),
                        Message("a1-m2", "user", "We chose pnpm.", T0 + timedelta(minutes=2))))
A2 = Session("a2", T0 + timedelta(days=1), (Message("a2-m0", "user", "Deploys go out on Thursdays.",
                                                    T0 + timedelta(days=1)),))
A3 = Session("a3", T0 + timedelta(days=2), (Message("a3-m0", "user", "What now?", T0 + timedelta(days=2)),))


def test_port_retrieve_spans_hook_file_snippets_and_the_context(tmp_path):
    b = OpenClawBackend({"embedder": "hash", "profile": "default"},
                        BackendContext(data_dir=tmp_path, embedding_cache_path=str(tmp_path / "e.sqlite"),
                                       _llm=InProcessMockLLM()))

    async def go():
        await b.start()
        await b.ingest("demo", IngestBatch(sessions=(A1, A2, A3)))
        out = [await b.retrieve("demo", RetrieveQuery(q, 6, reference_time=T0 + timedelta(days=3)))
               for q in ("dev server port", "deploys Thursdays")]
        await b.close()
        return out

    r1, r2 = asyncio.run(go())
    hook1 = next(m for m in r1.memories if m.source == "memory/2026-03-02-1100.md")
    agent = L.agent_id("demo")
    head = len(L.render_hook_file(0, L.session_key(agent), L.stable_session_id(agent, 0), []))
    # render_hook_file without lines ends with "- **Source**: webchat\n"; with lines a blank line, the summary
    # heading and another blank line follow: 196 + 1 = 197 here (the hand count: 34+1, 1, 57+1, 54+1, 21+1, 1, 23+1, 1).
    first = head + len("\n## Conversation Summary\n\n")
    assert first == 197
    u_line = 'user: "' + LONG_U + '"'
    a_start = first + len(u_line) + 1
    assert hook1.evidence_ids == ["a1-m0", "a1-m1", "a1-m2"]
    # The snippet is cut at 700: m0's line whole, m1's cut, m2 not shown (no span; still an evidence id).
    assert len(hook1.text) == 700 and a_start < 700 < a_start + len('assistant: "' + LONG_A + '"')
    assert hook1.evidence_spans == [S("a1-m0", first, first + len(u_line)), S("a1-m1", a_start, 700)]
    assert hook1.text[first:first + len(u_line)] == u_line
    assert hook1.text[a_start:700] == ('assistant: "' + LONG_A)[:700 - a_start]
    hook2 = next(m for m in r2.memories if m.source == "memory/2026-03-03-1100.md")  # A2's hook: one message
    line = 'user: "Deploys go out on Thursdays."'
    assert hook2.evidence_spans == [S("a2-m0", first, first + len(line))] and hook2.text[first:] == line + "\n"
    for res in (r1, r2):
        ctx = res.formatted_context
        for m in res.memories:  # each memory's spans reappear where its snippet sits in the context
            at = ctx.index(m.text)
            for s in m.evidence_spans:
                if s.end > s.start:
                    assert EvidenceSpan(s.evidence_id, s.start + at, s.end + at) in res.context_spans
        assert all(ctx[s.start:s.end] for s in res.context_spans if s.end > s.start)
