"""The 1-5 continuity judge of the multi-session arc (prompts.CONTINUITY_JUDGE_SYSTEM, seed 000 V2.2).

Input: "Established in earlier sessions:\n- fact\n...\n\nNew session transcript:\nuser: ...\nassistant: ...".
Only the assistant's lines count: continuity is what the assistant carries over.

- A fact is *used* when the assistant text holds all of its keys: its hard specifics (numbers, code tokens)
  and named terms (Zod, WebSocket; text.named_terms), or, for a fact without keys, half of its content stems.
- A fact is *gisted* when the assistant text holds at least one of its content stems (not counting hard
  specifics).
- An *ask* is an assistant line that abstains (text.is_abstention) or ends with "?".
Score, first match wins: 5 all facts used and no ask; 4 at most one fact not used and at most one ask;
3 at least half of the facts gisted or used; 2 any fact gisted or used; 1 otherwise. No established facts
-> 5 unless the assistant asks (then 4). Output: `{"score": n, "reason": "..."}`.
"""

from __future__ import annotations

import json
import re

from services.llm_mock.text import (
    clean_line,
    content_stems,
    hard_specifics,
    is_abstention,
    named_terms,
    speaker_of,
)

_FACTS_HEAD = "Established in earlier sessions:"
_TRANSCRIPT_HEAD = "New session transcript:"


def parse(user_text: str) -> tuple[list[str], list[str]]:
    """(established facts, assistant lines)."""
    head, _, transcript = user_text.partition(_TRANSCRIPT_HEAD)
    facts_part = head.split(_FACTS_HEAD, 1)[-1]
    facts = [re.sub(r"^\s*[-*]\s*", "", ln).strip() for ln in facts_part.splitlines()]
    facts = [f for f in facts if f and f != "(nothing)"]
    assistant: list[str] = []
    speaker = ""
    for ln in transcript.splitlines():
        sp = speaker_of(ln)
        if sp is not None:
            speaker = sp
            if sp == "assistant":
                assistant.append(clean_line(ln))
        elif speaker == "assistant" and ln.strip() and assistant:
            assistant[-1] += " " + ln.strip()
    return facts, assistant


def rate(facts: list[str], assistant: list[str]) -> tuple[int, str]:
    said = " ".join(assistant)
    said_stems = content_stems(said)
    said_hard = hard_specifics(said)
    asks = sum(1 for a in assistant if is_abstention(a) or a.rstrip().endswith("?"))
    used = gisted = 0
    for f in facts:
        hard = hard_specifics(f)
        keys = named_terms(f)
        stems = content_stems(f)
        if hard or keys:
            ok = hard <= said_hard and keys <= said_stems
        else:
            ok = bool(stems) and len(stems & said_stems) >= len(stems) / 2
        used += ok
        gisted += ok or bool((stems - hard) & said_stems)
    n = len(facts)
    if n == 0:
        return (5, "Nothing was established earlier.") if asks == 0 else (4, "Nothing was established; it asked.")
    if used == n and asks == 0:
        return 5, f"Uses all {n} earlier specifics and asks for none."
    if n - used <= 1 and asks <= 1:
        return 4, f"Uses {used} of {n} earlier specifics."
    if gisted * 2 >= n:
        return 3, f"Keeps the gist of {gisted} of {n} earlier facts but uses only {used} specifics."
    if gisted > 0:
        return 2, f"Mostly starts over ({gisted} of {n} facts touched, {asks} questions asked back)."
    return 1, "No continuity with the earlier sessions."


def respond(user_text: str) -> str:
    score, reason = rate(*parse(user_text))
    return json.dumps({"score": score, "reason": reason})
