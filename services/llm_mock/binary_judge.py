"""The binary CORRECT/WRONG judge (Mem0's LoCoMo "J" style: generous on paraphrase).

Input: "Question: ...\nGold answer: ...\nGenerated answer: ..." (also "Ground truth:" / "Answer:").
Output: JSON `{"label": "CORRECT"}` or `{"label": "WRONG"}`.

Rules:
- Token F1 between gold and answer over normalised tokens (`text.tokens`: lower-cased, punctuation and
  articles removed, suffix-stemmed, stop words kept as LoCoMo's F1 keeps them; counts are multisets).
- CORRECT when F1 >= 0.5, or when every content stem of the gold (stop words removed) is in the answer.
- An abstaining answer is CORRECT only when the gold itself is an abstention ("Not mentioned in the
  conversation", LoCoMo's adversarial category); otherwise it is WRONG.
Dates in different formats are not reconciled (a real judge would be kinder there).
"""

from __future__ import annotations

import json
from collections import Counter

from services.llm_mock.judge import JUDGE_LABELS
from services.llm_mock.text import content_stems, is_abstention, parse_fields, tokens

ARTICLES = frozenset({"a", "an", "the"})


def norm_tokens(text: str) -> list[str]:
    return [t.norm for t in tokens(text) if t.norm not in ARTICLES]


def token_f1(gold: str, answer: str) -> float:
    g, a = Counter(norm_tokens(gold)), Counter(norm_tokens(answer))
    common = sum((g & a).values())
    if common == 0:
        return 0.0
    p = common / sum(a.values())
    r = common / sum(g.values())
    return 2 * p * r / (p + r)


def label(gold: str, answer: str) -> str:
    if is_abstention(answer) or is_abstention(gold):
        return "CORRECT" if is_abstention(answer) and is_abstention(gold) and gold.strip() else "WRONG"
    if token_f1(gold, answer) >= 0.5:
        return "CORRECT"
    g = content_stems(gold)
    return "CORRECT" if g and g <= content_stems(answer) else "WRONG"


def respond(user_text: str) -> str:
    f = parse_fields(user_text, JUDGE_LABELS)
    return json.dumps({"label": label(f["truth"], f["answer"])})
