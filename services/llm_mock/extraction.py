"""Fact extraction: one self-contained fact per line from the conversation in the request.

The conversation is every non-system message (usually one user message holding `role: content` lines or
session transcripts). Facts are the salient sentences chosen exactly as the flush chooses them
(`flush.is_salient`: specifics or decision cues, never questions), cleaned of speaker prefixes, bullets and
headers, deduplicated, in order, one per line with no bullet. Sentences are kept whole so each keeps its
numbers, names, paths, formats and the "because ..." of a decision. Nothing salient -> an empty reply.
"""

from __future__ import annotations

from services.llm_mock.flush import salient_sentences


def extract_facts(messages: list[dict[str, str]]) -> str:
    texts = [m["content"] for m in messages if m.get("role") not in ("system", "developer")]
    return "\n".join(salient_sentences(texts))
