"""The pre-compaction memory flush (OpenClaw's silent turn before compaction; openclaw/openclaw,
src/auto-reply/reply/memory-flush.ts).

The conversation to remember is every user/assistant message before the final flush instruction (or, when
there is none, the paragraphs of the last user message other than the instruction itself). A sentence is
salient when it carries a specific or a decision signal (`is_salient`):
- a digit, a backticked span, or a code-like token (path, key format, `host:port`, `process.env`);
- a decision/convention/plan cue: we chose, chose, decided, decision, agreed, use/using, prefer, always,
  never, must, convention, rule, because, switched, migrat-, next sprint, plan, TTL, port, root cause,
  caused, fixed, deadline, remember.
- a personal event or plan, as a real model writes down about a person in a chat (LoCoMo-style sessions): a
  first-person sentence of at least five words with an event/plan/relationship verb or noun, or one with a
  time phrase (yesterday, last week, next month, ... ago), or one naming someone or something mid-sentence
  (a Capitalised word that does not start the sentence), each with at least three content words.
Questions (ending in "?") are never salient: the answer is what gets remembered. The reply is the salient
sentences as Markdown bullets `- ...` (speaker prefixes removed, deduplicated case-insensitively, in
order), or exactly `NO_REPLY` when nothing qualifies, as the flush prompt asks.
"""

from __future__ import annotations

import re

from services.llm_mock.text import content_stems, sentences_of_text, tokens

NO_REPLY = "NO_REPLY"
FLUSH_INSTRUCTION_START = "Pre-compaction memory flush"

_CUE_RE = re.compile(
    r"\b(?:we chose|chose|choose|chosen|decided|decide|decision|agreed|agree to|use|uses|using|prefer\w*|"
    r"always|never|must|convention|rule|because|switched|switch to|migrat\w*|next sprint|plan|planned|"
    r"planning|ttl|port|root cause|caused|fixed|deadline|remember)\b",
    re.I,
)


_FIRST_PERSON_RE = re.compile(r"\b(?:i|i'm|i've|i'd|i'll|we|we're|we've|my|our|me|us)\b", re.I)
_EVENT_RE = re.compile(
    r"\b(?:went|go|going|gonna|started|start|joined|join|moved|move|bought|buy|got|adopted|visited|visit|took|"
    r"made|finished|learned|learning|signed|won|married|graduated|attended|volunteer\w*|working|worked|"
    r"studying|studied|painted|painting|wrote|writing|read|reading|ran|running|hiked|trip|travel\w*|class|"
    r"course|job|career|school|family|kids?|children|friends?|sister|brother|mom|dad|mother|father|husband|"
    r"wife|partner|pet|dog|cat|birthday|wedding|concert|group|event|project|book|favorite|favourite|"
    r"want to|hope to|planning to|thinking of|decided to)\b",
    re.I,
)
_TIME_RE = re.compile(
    r"\b(?:yesterday|today|tonight|tomorrow|last (?:week|weekend|month|year|night|summer|winter|spring|fall)|"
    r"next (?:week|weekend|month|year|summer)|this (?:week|weekend|month|year)|recently|ago)\b",
    re.I,
)
_NAME_MID_RE = re.compile(r"(?<=[a-z,;:] )[A-Z][a-z]+")


def is_salient(sentence: str) -> bool:
    s = sentence.strip()
    if not s or s.endswith("?"):
        return False
    if "`" in s or any(ch.isdigit() for ch in s):
        return True
    if any(t.kind == "code" for t in tokens(s)):
        return True
    n_content = len(content_stems(s))
    if _CUE_RE.search(s) and n_content >= 2:
        return True
    if len(s.split()) < 5 or n_content < 3:
        return False
    if _TIME_RE.search(s):
        return True
    if _FIRST_PERSON_RE.search(s) and _EVENT_RE.search(s):
        return True
    return bool(_NAME_MID_RE.search(s))


def salient_sentences(texts: list[str]) -> list[str]:
    """Salient sentences of the given message texts, in order, deduplicated case-insensitively."""
    seen: set[str] = set()
    out: list[str] = []
    for text in texts:
        for sent in sentences_of_text(text):
            key = " ".join(sent.lower().split()).rstrip(".!")
            if key in seen or not is_salient(sent):
                continue
            seen.add(key)
            out.append(sent)
    return out


def conversation_texts(messages: list[dict[str, str]]) -> list[str]:
    """The message texts to remember: user/assistant turns before the final flush instruction."""
    turns = [m for m in messages if m.get("role") not in ("system", "developer")]
    if turns and FLUSH_INSTRUCTION_START in turns[-1]["content"]:
        last, turns = turns[-1], turns[:-1]
    else:
        last = None
    texts = [m["content"] for m in turns]
    if not texts and last is not None:
        paras = re.split(r"\n\s*\n", last["content"])
        texts = [p for p in paras if FLUSH_INSTRUCTION_START not in p]
    return texts


def flush(messages: list[dict[str, str]]) -> str:
    lines = salient_sentences(conversation_texts(messages))
    if not lines:
        return NO_REPLY
    return "\n".join(f"- {s}" for s in lines)
