"""The extractive answerer: answers a question only with a sentence taken from the context it was given.

Input is the user message of `prompts.answer_user`: optional context ("Here is context from previous
sessions:" then blocks) and the question as the last paragraph. Any earlier paragraphs count as context even
without the header, so unknown prompts of the same shape work too.

Rules (each a small function below):
- The context is split into lines, cleaned of speaker prefixes (`user:`), bullets, score tags (`[0.92]`) and
  XML-ish wrappers, then into sentences. Markdown headers, framing lines (the Cortex envelope's "[NOTE: ...]",
  memory_search citation lines) and sentences ending in "?" are never answers. A speaker's name ("Caroline:")
  is not part of the sentence: it never makes a sentence qualify, only breaks ties (after the matched
  count), and it is dropped from the reply.
- A sentence's score = the number of the question's content stems it contains, plus bonuses:
  +1 when one of those matched words sits within two content tokens of a number or code token the question
  does not already hold ("port 3001", "TTL is 300s": the question asks for X's value and the sentence
  states it); +1 for a "why" question when the sentence gives a reason (because, since, so, due to, to
  avoid, in order to); +1 for a how-many/much/long/often or when question when the sentence holds a number.
- A sentence qualifies when it matches a question stem and score >= 2 or it matches at least half
  (rounded up) of the question's content stems. Question words found in more than a quarter of the
  context's sentences (given >= 12 of them) are left out of this test (they still rank): in a chat between
  two people their names are everywhere and answer nothing.
- Ranking: score, then matched count, then the speaker's name being in the question, then the number of
  specifics (numbers/code), then earliest. The best wins; a runner-up is added (up to 3 sentences) when it
  ties on score (and on the name) or, with score >= 2, covers a question stem the picked sentences do not;
  near-duplicates (content stems a subset of a picked sentence's, or Jaccard >= 0.7) are skipped.
  Sentences are read back in context order.
- Nothing qualifies, no context, or a question without content words -> `prompts.ABSTAIN_TEXT`.
The answer is always text copied from the context, so the mock never invents a specific.
"""

from __future__ import annotations

import functools
import math
import re
from dataclasses import dataclass

from services.common.prompts import ABSTAIN_TEXT
from services.llm_mock.text import Token, content, content_stems, named_sentences, tokens

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
    specifics: int = 0
    stems: frozenset[str] = frozenset()
    name_hit: bool = False


_WHY_RE = re.compile(r"^\W*why\b|\bwhy (?:do|did|does|is|are|was|were|should|shouldn't|must|can't)\b", re.I)
_REASON_RE = re.compile(r"\b(?:because|since|so|due to|to avoid|in order to)\b", re.I)
_QUANTITY_RE = re.compile(r"\bhow (?:many|much|long|often|big|large|old)\b|^\W*when\b|\bwhat time\b", re.I)


def question_kind(question: str) -> str:
    """"why", "quantity" (how many/much/long/often, when) or "" (anything else)."""
    if _WHY_RE.search(question):
        return "why"
    if _QUANTITY_RE.search(question):
        return "quantity"
    return ""


@functools.lru_cache(maxsize=65536)
def _content_tokens(sentence: str) -> tuple[Token, ...]:
    # Contexts repeat across the questions of one conversation: tokenise each sentence once.
    return tuple(content(tokens(sentence)))


def _stems(text: str) -> frozenset[str]:
    return frozenset(t.norm for t in _content_tokens(text)) if text else frozenset()


def score_sentence(question_stems: set[str], sentence: str, kind: str = "") -> tuple[int, frozenset[str]]:
    toks = _content_tokens(sentence)
    matched = frozenset(question_stems & {t.norm for t in toks})
    if not matched:
        return 0, matched
    bonus = 0
    for i, t in enumerate(toks):
        if t.kind != "word" or t.norm not in matched:
            continue
        if any(toks[j].kind in ("number", "code") and toks[j].norm not in question_stems
               for j in range(max(0, i - 2), min(len(toks), i + 3))):
            bonus = 1
            break
    if kind == "why" and _REASON_RE.search(sentence):
        bonus += 1
    elif kind == "quantity" and any(t.kind == "number" for t in toks):
        bonus += 1
    return len(matched) + bonus, matched


def qualifies(question_stems: set[str], score: int, matched: frozenset[str]) -> bool:
    if not matched:
        return False
    return score >= 2 or len(matched) >= max(1, math.ceil(len(question_stems) / 2))


# A question word found in more than this share of the context's sentences (once there are at least
# COMMON_MIN_SENTENCES) says nothing about which sentence answers: in a chat between Caroline and Melanie,
# "Caroline" is everywhere. Such words still rank sentences but cannot make one qualify.
COMMON_SHARE = 0.25
COMMON_MIN_SENTENCES = 12


def candidates(context: str, question: str) -> list[Scored]:
    """Every qualifying context sentence, best first."""
    q = content_stems(question)
    if not q:
        return []
    kind = question_kind(question)
    seen: set[str] = set()
    rows: list[tuple[int, str, str]] = []  # (index, speaker name, sentence)
    for i, (name, sent) in enumerate(named_sentences(context)):
        key = " ".join(sent.lower().split())
        if key in seen or sent.rstrip().endswith("?"):
            continue
        seen.add(key)
        rows.append((i, name, sent))
    common: set[str] = set()
    if len(rows) >= COMMON_MIN_SENTENCES:
        df = dict.fromkeys(q, 0)
        for _, name, sent in rows:
            for w in q & (_stems(sent) | _stems(name)):
                df[w] += 1
        common = {w for w, n in df.items() if n > COMMON_SHARE * len(rows)}
    informative = q - common
    if not informative:
        return []
    out: list[Scored] = []
    for i, name, sent in rows:
        score, matched = score_sentence(q, sent, kind)
        inf_score = score - len(matched & common)
        if not qualifies(informative, inf_score, matched - common):
            continue
        toks = _content_tokens(sent)
        out.append(Scored(sent, score, matched, i, sum(t.kind != "word" for t in toks),
                          frozenset(t.norm for t in toks), bool(q & _stems(name))))
    out.sort(key=lambda c: (-c.score, -len(c.matched), -c.name_hit, -c.specifics, c.index))
    return out


def near_duplicate(a: frozenset[str], b: frozenset[str]) -> bool:
    if not a or not b:
        return a == b
    return a <= b or b <= a or len(a & b) / len(a | b) >= 0.7


MAX_SENTENCES = 3


def pick(ranked: list[Scored]) -> list[Scored]:
    if not ranked:
        return []
    best = ranked[0]
    picked = [best]
    covered = set(best.matched)
    for c in ranked[1:]:
        if len(picked) >= MAX_SENTENCES:
            break
        if any(near_duplicate(c.stems, p.stems) for p in picked):
            continue
        tie = c.score == best.score and c.name_hit == best.name_hit
        if tie or (c.score >= 2 and c.matched - covered):
            picked.append(c)
            covered |= c.matched
    return sorted(picked, key=lambda c: c.index)  # read back in context order


def answer(context: str, question: str) -> str:
    if not context.strip() or not question.strip():
        return ABSTAIN_TEXT
    picked = pick(candidates(context, question))
    if not picked:
        return ABSTAIN_TEXT
    return " ".join(c.text for c in picked)


def respond(user_text: str) -> str:
    context, question = split_context(user_text)
    return answer(context, question)
