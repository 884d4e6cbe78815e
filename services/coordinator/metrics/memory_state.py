"""Memory-state metrics from seed 001 (Quaid's weekly corpus): old memories, adversarial queries, facts that
changed (current state vs change awareness), null queries, and the composite headline "Accuracy".

Per-query functions return 1.0/0.0 (or None for "not applicable"); the aggregate is the mean over queries.
"""

from __future__ import annotations

from collections.abc import Sequence

from services.coordinator.metrics.registry import metric
from services.coordinator.metrics.retrieval import hit_at_k, relevance_flags


def _has_any(text: str, keywords: Sequence[str]) -> bool:
    low = " ".join(text.lower().split())
    return any(" ".join(k.lower().split()) in low for k in keywords if k and k.strip())


@metric("old_memory_recall_at_5", higher_is_better=True, unit="rate")
def old_memory_recall(texts: Sequence[str], expected: Sequence[str]) -> float:
    """hit_at_k(relevance_flags(texts, expected), 5) for a week-0 (old-memory) query."""
    return hit_at_k(relevance_flags(texts, expected), 5)


@metric("adversarial_hit_rate", higher_is_better=True, unit="rate")
def adversarial_hit(texts: Sequence[str], expected: Sequence[str], k: int = 5) -> float | None:
    """hit_at_k(relevance, k) for an adversarial query; None (N/A, not counted) when it has no expected
    strings — seed 001 scores such hard queries as N/A for every system."""
    if not [e for e in expected if e and e.strip()]:
        return None
    return hit_at_k(relevance_flags(texts, expected), k)


@metric("current_state_accuracy", higher_is_better=True, unit="rate")
def current_state_correct(texts: Sequence[str], old_keywords: Sequence[str], new_keywords: Sequence[str]
                          ) -> float:
    """1 when the first result that mentions either value mentions the NEW value and not the old one
    (the latest fact outranks the superseded one), else 0 (also 0 when neither value is returned)."""
    for t in texts:
        has_new, has_old = _has_any(t, new_keywords), _has_any(t, old_keywords)
        if has_new or has_old:
            return 1.0 if has_new and not has_old else 0.0
    return 0.0


@metric("change_awareness", higher_is_better=True, unit="rate")
def change_aware(texts: Sequence[str], old_keywords: Sequence[str], new_keywords: Sequence[str]) -> float:
    """1 when the combined result text holds an old-only keyword AND a new-only keyword (seed 001 §6.3:
    found_old and found_new), else 0."""
    combined = "\n".join(texts)
    return 1.0 if _has_any(combined, old_keywords) and _has_any(combined, new_keywords) else 0.0


@metric("null_false_positive_rate", higher_is_better=False, unit="rate")
def null_false_positive(texts: Sequence[str], forbidden: Sequence[str] = ()) -> float:
    """For a query about something never stored: 1 (false positive) when any result comes back — or, when
    `forbidden` strings are given, when any of them occurs in the results — else 0."""
    texts = [t for t in texts if t and t.strip()]
    if forbidden:
        return 1.0 if _has_any("\n".join(texts), forbidden) else 0.0
    return 1.0 if texts else 0.0


ACCURACY_WEIGHTS = {"mrr": 0.30, "recall_at_5": 0.25, "precision_at_5": 0.20, "adversarial_hit_rate": 0.15,
                    "old_memory_recall_at_5": 0.10}


@metric("accuracy", higher_is_better=True, unit="rate")
def composite_accuracy(components: dict[str, float | None]) -> float | None:
    """Seed 001 headline: 0.30·MRR + 0.25·Recall@5 + 0.20·P@5 + 0.15·Adversarial hit rate + 0.10·Old-memory
    Recall@5, each aggregated over its own query set; a missing component counts 0 and is flagged by the
    caller; None when every component is missing."""
    if all(components.get(k) is None for k in ACCURACY_WEIGHTS):
        return None
    return sum(w * float(components.get(k) or 0.0) for k, w in ACCURACY_WEIGHTS.items())
