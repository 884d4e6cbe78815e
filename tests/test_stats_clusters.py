"""Cluster bootstrap, Wilson intervals, cluster permutation test, prediction intervals and the leave-one-out
check, on cases computed by hand."""

import random

import pytest

from services.coordinator import stats
from services.coordinator.suites import common as C


def test_wilson_pinned():
    # z = 1.959964; p = 0: upper = z²/(n + z²) = 3.841459 / 8.841459 = 0.434482
    assert stats.wilson_interval(0, 5) == pytest.approx((0.0, 0.434482), abs=1e-6)
    # p = 1, n = 10: lower = n/(n + z²) = 10 / 13.841459
    assert stats.wilson_interval(10, 10) == pytest.approx((0.722467, 1.0), abs=1e-6)
    # p = 0.5, n = 4: centre 0.5, half = z·sqrt(1/16 + z²/64)/(1 + z²/4) = 0.349961
    lo, hi = stats.wilson_interval(2, 4)
    assert (lo, hi) == pytest.approx((0.150039, 0.849961), abs=2e-6)


def test_cluster_bootstrap_pinned():
    # clusters A = [1, 0], B = [1, 1]: resampled means are 0.5 (AA, p 1/4), 0.75 (AB/BA, 1/2), 1.0 (BB, 1/4),
    # so the 2.5% and 97.5% quantiles are 0.5 and 1.0; the point estimate is the question mean 3/4.
    values = {"A:q0": 1.0, "A:q1": 0.0, "B:q0": 1.0, "B:q1": 1.0}
    clusters = {p: p.split(":")[0] for p in values}
    assert stats.cluster_bootstrap_ci(values, clusters, seed=5) == (0.75, 0.5, 1.0)
    # question-weighted: cluster A with 3 questions weighs 3x
    v2 = {"A:1": 0.0, "A:2": 0.0, "A:3": 0.0, "B:1": 1.0}
    m, lo, hi = stats.cluster_bootstrap_ci(v2, {p: p[0] for p in v2}, seed=1)
    assert m == 0.25 and lo == 0.0 and hi == 1.0


def test_cluster_t_interval_hand_computed():
    # A = [1, 0], B = [1, 1], C = [0, 0]: r = 3/6 = 0.5; residuals y_c - r·n_c = 0, 1, -1 -> Σe² = 2;
    # var = G/(G-1) · Σe² / (Σn)² = 1.5 · 2 / 36; se = 0.288675; t(0.975, 2) = 4.302653 -> half 1.242069
    values = {"A:1": 1.0, "A:2": 0.0, "B:1": 1.0, "B:2": 1.0, "C:1": 0.0, "C:2": 0.0}
    clusters = {p: p[0] for p in values}
    m, lo, hi = stats.cluster_t_interval(values, clusters)
    assert m == 0.5 and (lo, hi) == pytest.approx((0.5 - 1.242069, 0.5 + 1.242069), abs=2e-6)
    out = stats.interval(values, clusters, unit="rate")
    assert out["ci"] == [0.0, 1.0] and out["method"] == "cluster-robust t interval over conversations"
    # four clusters with identical means: no between-conversation spread, a zero-width interval
    same = {f"{c}:{q}": float(q) for c in "ABCD" for q in (0, 1)}
    assert stats.cluster_t_interval(same, {p: p[0] for p in same}) == (0.5, 0.5, 0.5)


def test_interval_ignores_sample_order():
    rng = random.Random(0)
    values = {f"c{c}:q{q}": rng.random() for c in range(4) for q in range(5)}
    clusters = {p: p.split(":")[0] for p in values}
    items = list(values.items())
    rng.shuffle(items)
    shuffled = dict(items)
    assert list(shuffled) != list(values)
    assert stats.interval(shuffled, clusters, seed=3) == stats.interval(values, clusters, seed=3)
    # the plain-question bootstrap too (the old one resampled in file order)
    assert C.summary(shuffled, 3) == C.summary(values, 3)


def test_rate_at_one_gets_wilson_over_clusters():
    values = {f"c{c}:q{q}": 1.0 for c in range(4) for q in range(3)}
    out = stats.interval(values, {p: p.split(":")[0] for p in values}, unit="rate")
    assert out["mean"] == 1.0 and out["units"] == 4 and out["n"] == 12
    assert out["ci"] == pytest.approx([4 / (4 + 1.959964 ** 2), 1.0], abs=1e-6)
    assert out["method"].startswith("Wilson score interval over 4 conversations")
    # tokens at 0 are not a rate: the bootstrap's width-0 interval stands
    zero = stats.interval({"a": 0.0, "b": 0.0}, unit="tokens")
    assert zero["ci"] == [0.0, 0.0] and zero["method"] == stats.BOOTSTRAP_PROBE


def test_cluster_permutation_flips_whole_clusters():
    # two clusters, all differences +1: only the all-plus and all-minus flips (2 of 4) are as extreme -> p ~ 0.5,
    # whereas flipping 6 questions one by one would give p ~ 2/64
    a = [1.0] * 6
    b = [0.0] * 6
    groups = ["x", "x", "x", "y", "y", "y"]
    assert stats.paired_permutation_test(a, b, 20000, seed=2, groups=groups) == pytest.approx(0.5, abs=0.02)
    assert stats.paired_permutation_test(a, b, 20000, seed=2) == pytest.approx(2 / 64, abs=0.01)


def test_compare_with_clusters_reports_method():
    va = {"c1:q0": 0.0, "c1:q1": 0.0, "c2:q0": 0.0, "c3:q0": 0.0}
    vb = {"c1:q0": 1.0, "c1:q1": 1.0, "c2:q0": 1.0, "c3:q0": 1.0}
    cl = {p: p.split(":")[0] for p in va}
    c = stats.compare("turn_recall@5", "A", "B", va, vb, clusters=cl)
    assert c.method == "cluster-robust t interval over conversations" and c.units == 3
    assert c.ci_a == pytest.approx((0.0, 1.959964 ** 2 / (3 + 1.959964 ** 2)), abs=1e-6)  # Wilson, n = 3
    assert c.p == pytest.approx(0.25, abs=0.02)  # 2 of 8 cluster sign patterns are as extreme
    assert c.winner == "b"


def test_prediction_interval_hand_computed():
    # mean 0.5, s 0.1, k 3: t(0.975, 2) = 4.302653, sqrt(1 + 1/3) = 1.154701 -> half 0.496828
    lo, hi = stats.prediction_interval([0.4, 0.6, 0.5])
    assert (lo, hi) == pytest.approx((0.003172, 0.996828), abs=1e-6)
    with pytest.raises(ValueError):
        stats.prediction_interval([0.5])


def test_held_out_check():
    values = {"a:q0": 0.0, "b:q0": 0.5, "c:q0": 0.55, "d:q0": 0.6}
    clusters = {p: p[0] for p in values}
    out = stats.held_out_check({"bm25": {"m": values}}, clusters, ["m"], seed=0)["bm25"]["m"]
    rows = {r["cluster"]: r for r in out["rows"]}
    assert out["of"] == 4
    # holding out a (0.0): the others' cluster-t CI is 0.55 ± 4.302653 · sqrt(1.5 · 0.005 / 9) = 0.55 ± 0.124207
    assert rows["a"]["inside"] is False
    assert rows["a"]["ci"] == pytest.approx([0.425793, 0.674207], abs=2e-6)
    # ...and outside the prediction interval 0.55 ± 4.302653·0.05·1.154701 = [0.301586, 0.798414]
    assert rows["a"]["pi"] == pytest.approx([0.301586, 0.798414], abs=2e-6) and rows["a"]["inside_pi"] is False
    assert stats.held_out_check({"x": {"m": {"a:1": 1.0, "b:1": 0.0}}}, {"a:1": "a", "b:1": "b"}, ["m"]) == {}


def test_interval_study_probe_values_and_methods():
    from services.studies.interval_study import intervals, probe_values

    sample = {"retrievals": {"bm25": {"memories": [{"evidence_ids": ["D1:1"]}, {"evidence_ids": ["D2:4", "D1:1"]},
                                                   {"evidence_ids": ["D3:2"]}]}},
              "evidence_ids": ["D2:4", "D5:1"]}
    v = probe_values(sample)
    # turns ranked D1:1, D2:4, D3:2: one of two gold turns in the top 5; sessions S1, S2, S3: one of S2, S5
    assert v == {"turn_recall_any@10": 1.0, "turn_recall@5": 0.5, "turn_recall@10": 0.5, "session_recall@5": 0.5}
    values = {"A:q0": 1.0, "A:q1": 0.0, "B:q0": 1.0, "B:q1": 1.0, "C:q0": 0.0, "C:q1": 0.0}
    ivs = intervals(values, seed=0)
    assert set(ivs) == {"question bootstrap", "cluster bootstrap", "cluster t", "prediction interval"}
    assert ivs["cluster t"] == pytest.approx((0.5 - 1.242069, 0.5 + 1.242069), abs=2e-6)
    # conversation means 0.5, 1.0, 0.0: 0.5 ± t(0.975, 2) · 0.5 · sqrt(4/3)
    assert ivs["prediction interval"] == pytest.approx((0.5 - 2.484138, 0.5 + 2.484138), abs=2e-6)
