"""Judge-score metrics (services/coordinator/metrics/judge.py) by hand: the 0-3 rubric's rates and mean, the
majority vote across judge passes (judges.py; ties to the lower, sceptical score) and each metric's registered direction."""

from __future__ import annotations

import numpy as np
import pytest

from services.coordinator.judges import majority_vote
from services.coordinator.metrics.judge import LABELS, judge_distribution
from services.coordinator.metrics.registry import get_metric


def test_distribution_by_hand():
    # scores 3, 3, 2, 1, 0, 3: mean 12/6 = 2; grounded 3/6, generic 1/6, abstained 1/6, hallucinated 1/6
    d = judge_distribution([3, 3, 2, 1, 0, 3])
    assert d == pytest.approx({"n": 6, "mean": 2.0, "grounded": 0.5, "generic": 1 / 6, "abstained": 1 / 6,
                               "hallucinated": 1 / 6})
    assert judge_distribution([]) == {"n": 0, "mean": None, "grounded": None, "generic": None, "abstained": None,
                                      "hallucinated": None}


def test_rates_compare_by_value_not_identity():
    # scores read back from JSON or numpy arrays are floats / numpy ints: 3.0 and int64(3) are grounded too
    d = judge_distribution([3.0, np.int64(3), 2.0, np.int64(0)])
    assert (d["grounded"], d["generic"], d["hallucinated"]) == pytest.approx((0.5, 0.25, 0.25))


def test_majority_vote_and_sceptical_ties():
    assert majority_vote([2, 3, 3]) == 3
    assert majority_vote([1, 1, 0]) == 1
    assert majority_vote([3, 2]) == 2  # tie: the lower score
    assert majority_vote([0, 3, 3, 0, 2]) == 0  # 0 and 3 tie at two votes each
    assert majority_vote([3]) == 3
    assert majority_vote([1, 0]) == 0  # binary judge passes: CORRECT=1 vs WRONG=0 tie -> WRONG
    with pytest.raises(ValueError, match="at least one score"):
        majority_vote([])


def test_labels_and_directions():
    assert LABELS == {3: "grounded", 2: "generic", 1: "abstained", 0: "hallucinated"}
    expected = {"judge_mean": (True, "score"), "grounded_rate": (True, "rate"), "generic_rate": (True, "rate"),
                "abstained_rate": (False, "rate"), "hallucination_rate": (False, "rate")}
    for name, (hib, unit) in expected.items():
        m = get_metric(name)
        assert (m.higher_is_better, m.unit) == (hib, unit), name
