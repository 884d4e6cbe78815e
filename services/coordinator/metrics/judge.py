"""Judge-score metrics over the 0-3 rubric (3 grounded, 2 generic, 1 abstained, 0 hallucinated)."""

from __future__ import annotations

from collections.abc import Sequence

from services.coordinator.metrics.registry import metric

LABELS = {3: "grounded", 2: "generic", 1: "abstained", 0: "hallucinated"}


@metric("judge_mean", higher_is_better=True, unit="score")
def judge_mean(scores: Sequence[int]) -> float | None:
    """mean(score) over judged answers, score in {0,1,2,3}; None when nothing was judged."""
    return sum(scores) / len(scores) if scores else None


def _rate(scores: Sequence[int], value: int) -> float | None:
    return sum(1 for s in scores if s == value) / len(scores) if scores else None


@metric("grounded_rate", higher_is_better=True, unit="rate")
def grounded_rate(scores: Sequence[int]) -> float | None:
    """count(score == 3) / count(scores)."""
    return _rate(scores, 3)


@metric("generic_rate", higher_is_better=True, unit="rate")
def generic_rate(scores: Sequence[int]) -> float | None:
    """count(score == 2) / count(scores)."""
    return _rate(scores, 2)


@metric("abstained_rate", higher_is_better=False, unit="rate")
def abstained_rate(scores: Sequence[int]) -> float | None:
    """count(score == 1) / count(scores)."""
    return _rate(scores, 1)


@metric("hallucination_rate", higher_is_better=False, unit="rate")
def hallucination_rate(scores: Sequence[int]) -> float | None:
    """count(score == 0) / count(scores)."""
    return _rate(scores, 0)


def judge_distribution(scores: Sequence[int]) -> dict[str, float | None]:
    return {
        "n": len(scores),
        "mean": judge_mean(scores),
        "grounded": grounded_rate(scores),
        "generic": generic_rate(scores),
        "abstained": abstained_rate(scores),
        "hallucinated": hallucination_rate(scores),
    }


@metric("judge_score", higher_is_better=True, unit="score")
def judge_score(score: int) -> float:
    """The 0-3 rubric score of one judged answer (the majority of its passes); the mean over probes is the suite's
    judge score (Cortex V1)."""
    return float(score)
