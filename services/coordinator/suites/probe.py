"""A probe (one question with its ground truth) and a condition (how one answer is produced): what a suite hands
the rig for each answer (suites/base.py) and what the probe context (context.py) works on. Here, below both, so that
neither imports the other for them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any


@dataclass
class Probe:
    id: str
    question: str
    category: str = ""
    ground_truth: str = ""
    # Strings whose presence in retrieved text counts as a retrieval hit (case-insensitive).
    expected: list[str] = field(default_factory=list)
    # Gold evidence ids (message ids) for evidence-based Recall@K.
    evidence_ids: list[str] = field(default_factory=list)
    namespace: str = "default"
    reference_time: datetime | None = None
    meta: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Condition:
    """How one answer is produced. `context` lists the blocks, in order: "compaction" (the one-shot summary of
    the namespace) or "backend:<name>" (that backend's retrieval for the probe). `answer` false means the
    condition is retrieval-only (no LLM answer, no judge)."""

    name: str
    context: tuple[str, ...] = ()
    answer: bool = True

    @property
    def backends(self) -> list[str]:
        return [c.split(":", 1)[1] for c in self.context if c.startswith("backend:")]
