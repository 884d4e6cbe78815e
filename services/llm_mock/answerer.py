"""The extractive answerer: answers a question only with a sentence taken from the context it was given.

Input is the user message of `prompts.answer_user`: optional context ("Here is context from previous
sessions:" then blocks) and the question as the last paragraph. Any earlier paragraphs count as context even
without the header, so unknown prompts of the same shape work too.

Rules (each a small function below):
- The context is split into lines, cleaned of speaker prefixes (`user:`), bullets, score tags (`[0.92]`) and
  XML-ish wrappers, then into sentences. Markdown headers, framing lines (the Cortex envelope's "[NOTE: ...]",
  memory_search citation lines) and sentences ending in "?" are never answers. A speaker's name ("Caroline:")
  counts for matching and is dropped from the reply.
- A sentence's score = the number of the question's content stems it contains, +1 when one of those matched
  words sits within two content tokens of a number or code token the question does not already hold
  ("port 3001", "TTL is 300s": the question asks for the value of X and the sentence states X's value).
- A sentence qualifies when score >= 2 or it matches at least half (rounded up) of the question's content
  stems (at least one). The best qualifying sentence wins (score, then matched count, then earliest);
  the runner-up is appended when it ties on score.
- Nothing qualifies, no context, or a question without content words -> `prompts.ABSTAIN_TEXT`.
The answer is always text copied from the context, so the mock never invents a specific.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

from services.common.prompts import ABSTAIN_TEXT
from services.llm_mock.text import content, content_stems, sentences_of_text, strip_name, tokens

CONTEXT_HEADER = "Here is context from previous sessions:"
_QUESTION_LABEL_RE = re.compile(r"^\s*(?:question|q)\s*:\s*", re.I)


def split_context(user_text: str) -> tuple[str, str]:
    """(context, question) of an answer prompt: the question is the last paragraph."""
    paras = [p.strip() for p in re.split(r"\n\s*\n", user_text.strip()) if p.strip()]
    if not paras:
        return "", ""
    question = _QUESTION_LABEL_RE.sub("", paras[-1]).strip()
    context = "\n\n".join(paras[:-1])
    if context.startswith(CONTEXT_HEADER):
        context = context[len(CONTEXT_HEADER):].strip()
    elif not context and question.startswith(CONTEXT_HEADER):
        # A context with no question after it: nothing to answer.
        return question[len(CONTEXT_HEADER):].strip(), ""
    return context, question


@dataclass(frozen=True)
class Scored:
    text: str
    score: int
    matched: frozenset[str]
    index: int


def score_sentence(question_stems: set[str], sentence: str) -> tuple[int, frozenset[str]]:
    toks = content(tokens(sentence))
    matched = frozenset(question_stems & {t.norm for t in toks})
    bonus = 0
    for i, t in enumerate(toks):
        if t.kind != "word" or t.norm not in matched:
            continue
        for j in range(max(0, i - 2), min(len(toks), i + 3)):
            if toks[j].kind in ("number", "code") and toks[j].norm not in question_stems:
                bonus = 1
                break
        if bonus:
            break
    return len(matched) + bonus, matched


def qualifies(question_stems: set[str], score: int, matched: frozenset[str]) -> bool:
    if not matched:
        return False
    return score >= 2 or len(matched) >= max(1, math.ceil(len(question_stems) / 2))


def candidates(context: str, question: str) -> list[Scored]:
    """Every qualifying context sentence, best first."""
    q = content_stems(question)
    if not q:
        return []
    seen: set[str] = set()
    out: list[Scored] = []
    for i, sent in enumerate(sentences_of_text(context)):
        key = " ".join(sent.lower().split())
        if key in seen or sent.rstrip().endswith("?"):
            continue
        seen.add(key)
        score, matched = score_sentence(q, sent)
        if qualifies(q, score, matched):
            out.append(Scored(sent, score, matched, i))
    out.sort(key=lambda c: (-c.score, -len(c.matched), c.index))
    return out


def answer(context: str, question: str) -> str:
    if not context.strip() or not question.strip():
        return ABSTAIN_TEXT
    ranked = candidates(context, question)
    if not ranked:
        return ABSTAIN_TEXT
    picked = [ranked[0]]
    if len(ranked) > 1 and ranked[1].score == ranked[0].score:
        picked.append(ranked[1])
    picked.sort(key=lambda c: c.index)  # read in context order
    return " ".join(strip_name(c.text) for c in picked)


def respond(user_text: str) -> str:
    context, question = split_context(user_text)
    return answer(context, question)
