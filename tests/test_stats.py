"""Statistics on cases with known answers."""

import numpy as np
import pytest

from services.coordinator import stats


def test_identical_systems_p_is_one():
    a = [0.1, 0.5, 0.9, 0.3]
    assert stats.paired_permutation_test(a, a) == 1.0
    c = stats.compare("mrr", "A", "B", dict(enumerate(a)), dict(enumerate(a)))
    assert c.p == 1.0 and c.winner == "tie" and c.delta == 0.0


def test_constant_shift_ci_excludes_zero_and_p_small():
    rng = np.random.default_rng(1)
    a = rng.random(30)
    b = a + 0.5
    c = stats.compare("judge_mean", "A", "B", dict(enumerate(a)), dict(enumerate(b)), unit="score")
    assert c.ci_delta[0] == pytest.approx(0.5) and c.ci_delta[1] == pytest.approx(0.5)
    assert c.ci_delta[0] > 0
    # only the all-plus/all-minus flips reach |0.5|: p = (~0 + 1) / 10001
    assert c.p < 0.001 and c.stars == "***"
    assert c.winner == "b"


def test_sign_flip_p_value_exact_small_case():
    # d = [1, 1]: flips give means {1, 0, 0, -1}; |.| >= 1 with prob 1/2 -> p ~ 0.5
    p = stats.paired_permutation_test([1, 1], [0, 0], n_permutations=20000, seed=3)
    assert p == pytest.approx(0.5, abs=0.02)


def test_bootstrap_ci_basics_and_seeded():
    m, lo, hi = stats.bootstrap_ci([0, 1] * 50, seed=7)
    assert m == 0.5 and 0.35 < lo < 0.5 < hi < 0.65
    assert stats.bootstrap_ci([0, 1] * 50, seed=7) == (m, lo, hi)
    assert stats.bootstrap_ci([]) == (None, None, None)
    assert stats.bootstrap_ci([None, 2.0]) == (2.0, 2.0, 2.0)
    m, lo, hi = stats.bootstrap_ci([3.0] * 10)
    assert lo == hi == 3.0


def test_lower_is_better_and_thresholds():
    assert stats.winner(100.0, 100.9, higher_is_better=False, threshold=stats.tie_threshold("tokens")) == "tie"
    assert stats.winner(100.0, 98.0, higher_is_better=False, threshold=1.0) == "b"
    assert stats.winner(0.500, 0.504, True, stats.tie_threshold("rate")) == "tie"
    assert stats.winner(0.500, 0.506, True, 0.005) == "b"
    assert stats.winner(None, 1.0, True, 0.005) == "n/a"


def test_scorecard_counts():
    mk = lambda w: stats.Comparison("m", "a", "b", 1, 0, 0, (0, 0), (0, 0), 0, (0, 0), 1, "", True, 0.005, w)  # noqa: E731
    sc = stats.scorecard([mk("b"), mk("b"), mk("a"), mk("tie"), mk("n/a")])
    assert sc == {"wins": 2, "losses": 1, "ties": 1, "n/a": 1, "metrics": 5, "verdict": "b"}


def test_paired_only_common_probes():
    ids, xa, xb = stats.paired({"p1": 1.0, "p2": None, "p3": 0.0}, {"p1": 0.0, "p2": 1.0, "p4": 1.0})
    assert ids == ["p1"] and xa == [1.0] and xb == [0.0]
    with pytest.raises(ValueError):
        stats.paired_permutation_test([1, 2], [1])


def test_per_category():
    out = stats.per_category({"a": 1.0, "b": 0.0, "c": 1.0, "d": None}, {"a": "F", "b": "F", "c": "R", "d": "R"})
    assert out["F"]["n"] == 2 and out["F"]["mean"] == 0.5
    assert out["R"] == {"n": 1, "mean": 1.0, "ci": [1.0, 1.0]}


def test_per_category_is_order_free():
    import random

    rng = random.Random(5)
    vals = {f"q{i:02d}": float(rng.random() < 0.5) for i in range(40)}
    cats = {p: "AB"[i % 2] for i, p in enumerate(vals)}
    items = list(vals.items())
    rng.shuffle(items)
    assert stats.per_category(dict(items), cats, seed=3) == stats.per_category(vals, cats, seed=3)
    assert stats.per_category(dict(reversed(items)), cats, seed=3) == stats.per_category(vals, cats, seed=3)


def test_bootstrap_default_is_a_95_percent_interval():
    from services.coordinator.stats import bootstrap_ci

    x = [float(i) for i in range(20)]
    default = bootstrap_ci(x, seed=3)
    assert default == bootstrap_ci(x, confidence=0.95, seed=3)
    m, lo90, hi90 = bootstrap_ci(x, confidence=0.90, seed=3)
    assert m == default[0] == 9.5
    assert default[1] < lo90 and hi90 < default[2]  # 95% is strictly wider than 90% on the same resamples


def test_tie_rule_includes_the_threshold_on_both_sides():
    from services.coordinator.stats import winner

    # |difference| == threshold is a tie (seed 001 §8: "within" the threshold); just past it is not.
    assert winner(0.0, 0.5, True, 0.5) == "tie" and winner(0.5, 0.0, True, 0.5) == "tie"
    assert winner(0.0, 0.5000001, True, 0.5) == "b" and winner(0.5000001, 0.0, True, 0.5) == "a"
    assert winner(10.0, 11.0, False, 1.0) == "tie" and winner(10.0, 12.0, False, 1.0) == "a"
    assert winner(None, 1.0, True, 0.5) == "n/a"
