"""memory-hook's two LLM tasks (prompts.MEMORY_HOOK_EXTRACTION_SYSTEM / MEMORY_HOOK_RERANK_SYSTEM), deterministic.

Extraction: the salient sentences of the conversation, chosen exactly as the flush and fact extraction choose them
(`flush.salient_sentences`), each becoming one memory, one JSON object per line:
- rule = the sentence (speaker prefix removed);
- trigger = its topic words: the surfaces of its content tokens (`text.content`), lower-cased, deduplicated, in
  order, at most `TRIGGER_WORDS` of them;
- section = "conventions" for a convention cue (always, never, prefer, convention, must, rule, style), else
  "decisions" for a decision cue (decided, chose, because, switched, agreed, instead of), else "facts".
Nothing salient → an empty reply.

Rerank: the request and the numbered candidates are read back from `prompts.memory_hook_rerank_user`'s layout; a
candidate is relevant when its rule shares at least one content stem (`text.content_stems`) with the request.
Reply `{"relevant": [numbers in candidate order]}`.
"""

from __future__ import annotations

import json
import re

from services.common import prompts
from services.llm_mock.flush import salient_sentences
from services.llm_mock.text import content, content_stems, tokens

TRIGGER_WORDS = 8
_CONVENTION_RE = re.compile(r"\b(?:always|never|prefer\w*|convention\w*|must|rules?|style)\b", re.I)
_DECISION_RE = re.compile(r"\b(?:decid\w*|decision|chose|chosen|choose|because|switched|agreed|instead of)\b", re.I)
_CANDIDATE_RE = re.compile(r"^\[(\d+)\]\s+trigger:\s*(.*?)\s+\|\s+rule:\s*(.*)$")


def trigger_words(sentence: str, limit: int = TRIGGER_WORDS) -> str:
    out: list[str] = []
    for t in content(tokens(sentence)):
        w = t.surface.lower()
        if w not in out:
            out.append(w)
        if len(out) >= limit:
            break
    return " ".join(out)


def section_of(sentence: str) -> str:
    if _CONVENTION_RE.search(sentence):
        return "conventions"
    if _DECISION_RE.search(sentence):
        return "decisions"
    return "facts"


def extract(messages: list[dict[str, str]]) -> str:
    texts = [m["content"] for m in messages if m.get("role") not in ("system", "developer")]
    lines = []
    for s in salient_sentences(texts):
        trig = trigger_words(s)
        if not trig:
            continue
        lines.append(json.dumps({"trigger": trig, "rule": s, "section": section_of(s)}, ensure_ascii=False))
    return "\n".join(lines)


def parse_rerank_request(text: str) -> tuple[str, list[tuple[int, str]]]:
    """(request, [(number, rule)]) from the rerank user message."""
    head, sep, tail = text.rpartition("\n" + prompts.MEMORY_HOOK_CANDIDATES_HEADER + "\n")
    if not sep:
        head, tail = text, ""
    request = head[len("Request: "):] if head.startswith("Request: ") else head
    cands = []
    for line in tail.splitlines():
        m = _CANDIDATE_RE.match(line.strip())
        if m:
            cands.append((int(m.group(1)), m.group(3)))
    return request, cands


def rerank(user_text: str) -> str:
    request, cands = parse_rerank_request(user_text)
    q = content_stems(request)
    keep = [n for n, rule in cands if q & content_stems(rule)]
    return json.dumps({"relevant": keep})
