"""Context-cost metrics: tokens a retrieval puts into the prompt (cl100k, offline) and the efficiency ratio.

Seed 001 estimated tokens as chars/4; the rig counts real cl100k tokens (services/common/tokens.py), so token
numbers here are exact for OpenAI-family tokenisers and labelled as cl100k in reports.
"""

from __future__ import annotations

from collections.abc import Sequence

from services.common.tokens import count_tokens
from services.coordinator.metrics.registry import metric


@metric("token_spend", higher_is_better=False, unit="tokens")
def token_spend(context: str | Sequence[str]) -> int:
    """cl100k tokens of what one query injects: the formatted context (or the results joined by newlines)."""
    if not isinstance(context, str):
        context = "\n".join(t for t in context if t)
    return count_tokens(context) if context else 0


@metric("efficiency_ratio", higher_is_better=True, unit="ratio")
def efficiency_ratio(baseline_tokens: float | None, system_tokens: float | None) -> float | None:
    """mean baseline tokens per query / mean system tokens per query (seed 001: >1 means the system spends
    fewer tokens than the baseline); None when either is missing or the system spent none."""
    if baseline_tokens is None or system_tokens is None or system_tokens <= 0:
        return None
    return float(baseline_tokens) / float(system_tokens)


# The judged suites (Cortex V1, Arclight) name the tokens they inject per turn after the sample field
metric("context_tokens", higher_is_better=False, unit="tokens")(token_spend)
