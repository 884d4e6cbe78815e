"""Recognise the task of a chat request and produce the reply text (pure: same messages, same text).

The task is read from the first line of the first system (or developer) message, matched against the
`*_MARKER` constants of services/common/prompts.py, as a real model would read its instructions. A request
without a known marker is answered by the extractive answerer (task "default").
"""

from __future__ import annotations

from services.common import prompts
from services.llm_mock import (
    answerer,
    binary_judge,
    compaction,
    continuity,
    extraction,
    flush,
    judge,
    memory_hook,
    octybot,
    pairwise,
)

_MARKER_NAMES = (
    ("ANSWER_MARKER", "answer"),
    ("COMPACTION_MARKER", "compaction"),
    ("FLUSH_MARKER", "flush"),
    ("JUDGE_MARKER", "judge"),
    ("BINARY_JUDGE_MARKER", "binary_judge"),
    ("FACT_EXTRACTION_MARKER", "extraction"),
    ("PAIRWISE_JUDGE_MARKER", "pairwise_judge"),
    ("CONTINUITY_JUDGE_MARKER", "continuity_judge"),
    ("MEMORY_HOOK_EXTRACTION_MARKER", "memory_hook_extraction"),
    ("MEMORY_HOOK_RERANK_MARKER", "memory_hook_rerank"),
)
# getattr: a marker added to prompts.py later is picked up here without a code change elsewhere.
MARKERS: tuple[tuple[str, str], ...] = tuple(
    (getattr(prompts, const), name) for const, name in _MARKER_NAMES if getattr(prompts, const, None)
)
TASKS = tuple(name for _, name in MARKERS) + octybot.TASKS + ("default",)


def detect_task(messages: list[dict[str, str]]) -> str:
    for m in messages:
        if m["role"] in ("system", "developer"):
            lines = m["content"].strip().splitlines()
            first = lines[0].strip() if lines else ""
            for marker, name in MARKERS:
                if first.startswith(marker):
                    return name
            return octybot.detect(m["content"]) or "default"  # Octybot's prompts: by the schema they ask for
    return "default"


def last_user_text(messages: list[dict[str, str]]) -> str:
    for m in reversed(messages):
        if m["role"] == "user":
            return m["content"]
    return ""


def respond(task: str, messages: list[dict[str, str]]) -> str:
    if task == "compaction":
        body = "\n\n".join(m["content"] for m in messages if m["role"] not in ("system", "developer"))
        return compaction.summarize(body)
    if task == "flush":
        return flush.flush(messages)
    if task == "judge":
        return judge.respond(last_user_text(messages))
    if task == "binary_judge":
        return binary_judge.respond(last_user_text(messages))
    if task == "extraction":
        return extraction.extract_facts(messages)
    if task == "pairwise_judge":
        return pairwise.respond(last_user_text(messages))
    if task == "continuity_judge":
        return continuity.respond(last_user_text(messages))
    if task == "memory_hook_extraction":
        return memory_hook.extract(messages)
    if task == "memory_hook_rerank":
        return memory_hook.rerank(last_user_text(messages))
    if task in octybot.TASKS:
        return octybot.respond(task, messages)
    return answerer.respond(last_user_text(messages))
