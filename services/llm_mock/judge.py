"""The 0-3 rubric judge (seed 000, V1.4): grounded 3 / generic 2 / abstained 1 / hallucinated 0.

Input: "Question: ...\nGround truth: ...\nAnswer: ..." (prompts.judge_user). Output: JSON
`{"score": n, "reason": "<one sentence>"}`.

Definitions (all on text.tokens: lower-cased, stop words removed, suffix-stemmed):
- G = content stems of the ground truth; coverage = |G ∩ answer stems| / |G|.
- hard specifics (numbers, code-like tokens such as `cache:{entity}:{id}`, paths, `300`) of the ground truth:
  the key specifics a grounded answer must carry.
- named terms: CamelCase words and Capitalised words (not sentence-initial in the answer; any position in the
  ground truth, which is usually a bare noun phrase like "Drizzle"). ALL-CAPS acronyms are not names.
- the answer's own specifics: its hard specifics / named terms that appear in neither the ground truth nor
  the question (the question may name things, repeating them is not inventing).

Rules, first match wins:
1. The answer abstains (`text.is_abstention`: "don't have", "not mentioned", "I don't know", ... or empty)
   and does not carry all of the ground truth's hard specifics -> 1.
2. Every hard specific of the ground truth is in the answer, coverage >= 0.5, and, when the ground truth
   has named terms, at least one of them is in the answer -> 3.
3. Conflict -> 0: the answer states hard specifics of its own while missing more than half of the ground
   truth's hard specifics; or the ground truth's named terms are all missing, its hard specifics are not all
   present, and the answer names things of its own (Prisma for Drizzle).
4. Some overlap (coverage > 0) -> 2: on topic but without the project specifics.
5. No overlap: 0 if the answer states hard specifics of its own, else 2 (a generic answer).
An empty ground truth scores 2 unless the answer abstains.
"""

from __future__ import annotations

import json

from services.llm_mock.text import content_stems, hard_specifics, is_abstention, named_terms, parse_fields

JUDGE_LABELS = {
    "question": ("Question",),
    "truth": ("Ground truth", "Gold answer", "Gold", "Reference answer", "Expected answer"),
    "answer": ("Answer", "Generated answer", "Response", "Model answer"),
}


def grade(question: str, truth: str, answer: str) -> tuple[int, str]:
    """(score 0-3, one-sentence reason)."""
    g = content_stems(truth)
    a = content_stems(answer)
    q = content_stems(question)
    k_hard = hard_specifics(truth)
    a_hard = hard_specifics(answer)
    hard_present = k_hard & a_hard
    all_hard = bool(k_hard) and hard_present == k_hard
    if is_abstention(answer) and not all_hard:
        return 1, "The answer says it does not have the information."
    if not g:
        return 2, "The ground truth has no content words to check the answer against."
    coverage = len(g & a) / len(g)
    k_named = named_terms(truth, include_initial=True)
    named_ok = not k_named or bool(k_named & a)
    if hard_present == k_hard and coverage >= 0.5 and named_ok:
        return 3, f"The answer carries the ground truth's specifics (coverage {coverage:.2f})."
    own_hard = a_hard - hard_specifics(truth) - hard_specifics(question) - q - g
    own_named = named_terms(answer) - g - q
    missing_hard = k_hard - a_hard
    if own_hard and k_hard and len(missing_hard) * 2 > len(k_hard):
        return 0, "The answer states specifics that differ from the ground truth's."
    if k_named and not (k_named & a) and not all_hard and own_named:
        return 0, "The answer names something other than what the ground truth names."
    if coverage > 0:
        return 2, f"The answer is on topic but misses the project specifics (coverage {coverage:.2f})."
    if own_hard:
        return 0, "The answer states specifics that are not in the ground truth."
    return 2, "The answer is generic and shares nothing specific with the ground truth."


def respond(user_text: str) -> str:
    f = parse_fields(user_text, JUDGE_LABELS)
    score, reason = grade(f["question"], f["truth"], f["answer"])
    return json.dumps({"score": score, "reason": reason})
