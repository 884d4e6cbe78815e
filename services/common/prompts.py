"""Every prompt the rig sends to a language model, in one place.

The offline llm-mock recognises the task by the first line of the system prompt (the `*_MARKER` constants),
exactly as a real model would read the instructions; with a real endpoint these are ordinary prompts.
Reports record the prompt ids and a hash of this file's texts, so a number is tied to the prompt behind it.
"""

from __future__ import annotations

import hashlib

ANSWER_MARKER = "You are a coding assistant."
COMPACTION_MARKER = "Summarize the following conversation sessions into a concise memory summary."
FLUSH_MARKER = "Pre-compaction memory flush turn."
JUDGE_MARKER = "You are grading an AI coding assistant's answer against the ground truth."
BINARY_JUDGE_MARKER = "Your task is to label an answer to a question as 'CORRECT' or 'WRONG'."
FACT_EXTRACTION_MARKER = "Extract durable facts from the conversation."
CONTINUITY_JUDGE_MARKER = "You are rating how well a coding session continues the earlier sessions of a project."
PAIRWISE_JUDGE_MARKER = "You are comparing two answers to the same question."
MEMORY_HOOK_EXTRACTION_MARKER = "Turn the conversation into memory-hook memories."
MEMORY_HOOK_RERANK_MARKER = "Decide which memory-hook memories apply to the current request."
SUFFICIENCY_MARKER = "You are deciding whether a question's gold answer can be given from a context alone."
NUGGET_JUDGE_MARKER = "You are checking an answer against the points a good answer should cover."

# Says "not mentioned" so LoCoMo's official category-5 rule (prediction contains "not mentioned") recognises it.
ABSTAIN_TEXT = "I don't have that information: it is not mentioned in the context I was given."

# Seed 000, V1.4: the answer prompt for every condition. Memory context goes before the question.
ANSWER_SYSTEM = ANSWER_MARKER + (
    " Answer the question using the context from previous sessions when it is relevant. If the context does"
    " not contain the answer, say you don't have that information rather than guessing."
)


def answer_user(question: str, context_blocks: list[str]) -> str:
    blocks = [b for b in context_blocks if b and b.strip()]
    if not blocks:
        return question
    return "Here is context from previous sessions:\n" + "\n\n".join(blocks) + "\n\n" + question


# Seed 000, V1.2: the one-shot compaction prompt (as OpenClaw's /compact would summarise).
COMPACTION_SYSTEM = COMPACTION_MARKER + (
    " Capture the key topics, decisions, and direction of work. Be concise — this summary replaces the full"
    " transcripts."
)

# OpenClaw's pre-compaction memory flush (openclaw/openclaw, src/auto-reply/reply/memory-flush.ts: its system and user
# prompts), used to write daily notes.
FLUSH_SYSTEM = FLUSH_MARKER + (
    " The session is near auto-compaction; capture durable memories to disk. You may reply, but usually"
    " NO_REPLY is correct."
)


def flush_user(date: str) -> str:
    return (
        f"Pre-compaction memory flush. Store durable memories now (use memory/{date}.md; create memory/ if"
        " needed). IMPORTANT: If the file already exists, APPEND new content only and do not overwrite existing"
        " entries. If nothing to store, reply with NO_REPLY. Reply with the exact Markdown lines to append."
    )


# Seed 000, V1.4: the 0-3 rubric judge.
JUDGE_SYSTEM = JUDGE_MARKER + """
Score the answer on this 4-point scale:
3 = grounded correct: correct, with the project-specific detail from the ground truth.
2 = generic correct: correct in general terms but missing the project specifics.
1 = abstained: says it does not have the information; honest, not harmful.
0 = hallucinated: states a specific answer that is wrong or contradicts the ground truth.
Reply with JSON only: {"score": <0-3>, "reason": "<one sentence>"}"""


def judge_user(question: str, ground_truth: str, answer: str) -> str:
    return f"Question: {question}\nGround truth: {ground_truth}\nAnswer: {answer}"


# Mem0's LoCoMo evaluation style binary judge ("J"): generous on paraphrase and date format.
BINARY_JUDGE_SYSTEM = BINARY_JUDGE_MARKER + """
You will be given a question, a gold (ground truth) answer, and a generated answer. Be generous: if the
generated answer touches the same topic and carries the gold answer's facts (same date or time period in any
format), it is CORRECT; otherwise it is WRONG. Reply with JSON only: {"label": "CORRECT"} or {"label": "WRONG"}"""

# The model judge of `memrig credit-agreement --judge`: the blind reader's question, asked of a model.
SUFFICIENCY_SYSTEM = SUFFICIENCY_MARKER + """
You get a question, its gold answer, the date it was asked and a context an assistant was shown. Use only the
context: no outside knowledge. Reply 2 if the gold answer can be given from the context alone (its facts are stated
there; a date may be worked out from dates the context states), 1 if only part of it can (some of a list, the
event without its date), 0 if not. Reply with JSON only: {"label": <0|1|2>}"""


def sufficiency_user(question: str, gold_answer: str, question_date: str, context: str) -> str:
    return (f"Question: {question}\nGold answer: {gold_answer}\nAsked on: {question_date or 'not given'}\n"
            f"Context:\n{context}")


# BEAM's rubric judging (services/coordinator/judges.nugget_judge): each rubric point ("nugget") scored 0 / 0.5 / 1 from
# the answer alone. Written for memrig; BEAM's own prompt is not used. Two forms: every point of a question in one call
# (NUGGET_JUDGE_SYSTEM, a list of scores back) or one point a call (NUGGET_JUDGE_ONE_SYSTEM, one score back).
_NUGGET_RULE = """
A point says what the answer should state or do, sometimes after a prefix like "LLM response should state:". Read only
the answer, not your own knowledge, and score each point on its own:
1 = the answer states the point's content (any wording; extra detail is fine) or does what the point asks;
0.5 = the answer states part of it (some of the items, the right topic without the specific value);
0 = the answer does not state it, or states something that contradicts it.
A point that says what the answer should avoid or not do scores 1 when the answer keeps to that, 0 when it does not."""
NUGGET_JUDGE_SYSTEM = NUGGET_JUDGE_MARKER + _NUGGET_RULE + """
Reply with JSON only, one score per point in the points' order: {"scores": [<0, 0.5 or 1>, ...]}"""
NUGGET_JUDGE_ONE_SYSTEM = NUGGET_JUDGE_MARKER + _NUGGET_RULE + """
You get one point. Reply with JSON only: {"score": <0, 0.5 or 1>}"""


def nugget_judge_user(question: str, answer: str, nuggets: list[str]) -> str:
    """The question, the answer, then the points numbered from 1 (one point: the one-point form)."""
    points = "\n".join(f"{i}. {' '.join(n.split())}" for i, n in enumerate(nuggets, 1))
    return f"Question: {question}\nAnswer: {answer}\nPoints:\n{points}"


# Blind pairwise comparison (seed 001 §10.1, MT-Bench style): the caller randomises which answer is X.
PAIRWISE_JUDGE_SYSTEM = PAIRWISE_JUDGE_MARKER + """
Decide which response answers the question better, using the ground truth: correct project-specific detail
beats a generic answer, an honest abstention beats a wrong specific claim. Ignore the order and the length of
the responses. Reply with JSON only: {"winner": "X"}, {"winner": "Y"} or {"winner": "TIE"}"""


def pairwise_judge_user(question: str, ground_truth: str, response_x: str, response_y: str) -> str:
    return (f"Question: {question}\nGround truth: {ground_truth}\nResponse X: {response_x}\n"
            f"Response Y: {response_y}")


FACT_EXTRACTION_SYSTEM = FACT_EXTRACTION_MARKER + (
    " Return one fact per line, each self-contained and specific (keep numbers, names, paths, formats and the"
    " reason for a decision). Return nothing else."
)


# Seed 000, V2.2: the continuity judge (1-5) of the multi-session arc, one call per session after the first.
CONTINUITY_JUDGE_SYSTEM = CONTINUITY_JUDGE_MARKER + """
You are given the decisions and specifics the earlier sessions established, then the transcript of the new
session. Rate how seamlessly the assistant continues the work:
5 = uses the earlier specifics (values, names, formats) wherever they matter; never asks for them again.
4 = uses most earlier specifics; at most one gap.
3 = keeps the gist of earlier decisions but loses several specifics.
2 = mostly starts over; asks again for information it was given.
1 = no continuity at all.
Reply with JSON only: {"score": <1-5>, "reason": "<one sentence>"}"""


def continuity_judge_user(established: list[str], transcript: list[tuple[str, str]]) -> str:
    facts = "\n".join(f"- {f}" for f in established) or "- (nothing)"
    lines = "\n".join(f"{role}: {text}" for role, text in transcript)
    return f"Established in earlier sessions:\n{facts}\n\nNew session transcript:\n{lines}"


# memory-hook (as gbasin/memory-hook-bench describes it, SPEC.md): memories {trigger (embedded), rule (injected),
# section}. The upstream
# extraction prompt is not public; this one asks for exactly that schema, one JSON object per line.
MEMORY_HOOK_EXTRACTION_SYSTEM = MEMORY_HOOK_EXTRACTION_MARKER + """
A memory has a trigger (when it applies: the situation or topic in a few words; it is embedded and searched), a
rule (the guidance or fact injected into the agent's context when the trigger matches: one self-contained
sentence that keeps numbers, names, paths, formats and the reason for a decision) and a section (decisions,
conventions or facts). Reply with one JSON object per line: {"trigger": "...", "rule": "...", "section": "..."}.
Reply with nothing else; nothing worth remembering means an empty reply."""

# memory-hook's LLM rerank (upstream: Claude Haiku, RERANK_PROVIDER=claude): keep the candidates that apply.
MEMORY_HOOK_RERANK_SYSTEM = MEMORY_HOOK_RERANK_MARKER + """
You are given the agent's current request and numbered candidate memories (trigger and rule). Keep only the
memories whose rule helps with this request. Reply with JSON only: {"relevant": [<candidate numbers>]}"""

MEMORY_HOOK_CANDIDATES_HEADER = "Candidates:"


def memory_hook_rerank_user(request: str, candidates: list[tuple[str, str]]) -> str:
    """The request, then one `[n] trigger: ... | rule: ...` line per candidate (numbered from 1)."""
    lines = [f"[{i}] trigger: {' '.join(t.split())} | rule: {' '.join(r.split())}"
             for i, (t, r) in enumerate(candidates, 1)]
    return f"Request: {request}\n{MEMORY_HOOK_CANDIDATES_HEADER}\n" + "\n".join(lines)


def prompts_hash() -> str:
    """The first 16 hex digits of the sha256 of every system prompt of this module (each `*_SYSTEM` string, by name),
    so a prompt added later is covered without being listed."""
    texts = [v for k, v in sorted(globals().items()) if k.endswith("_SYSTEM") and isinstance(v, str)]
    return hashlib.sha256("\n\x00".join(texts).encode()).hexdigest()[:16]
