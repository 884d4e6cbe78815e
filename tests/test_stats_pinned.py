"""Statistics pinned where a one-line change would move a quoted figure: defaults (resamples, permutations,
seeds, confidence), exact p-value arithmetic, the float tolerance of "as extreme", interval clipping by unit,
star and tie boundaries, the seeds compare() feeds each figure, and the leave-one-out check's edges."""

import pytest
import scipy.stats  # noqa: F401 - stats imports it lazily; importing it here lets the mutation fork server preload it

from services.coordinator import stats

Z95 = 1.959964


def test_constants_and_tie_thresholds():
    assert (stats.N_BOOTSTRAP, stats.N_PERMUTATIONS) == (1000, 10_000)
    assert [stats.tie_threshold(u) for u in ("tokens", "ms", "rate", "score")] == [1.0, 1.0, 0.005, 0.005]


def test_winner_refuses_a_negative_threshold_and_ties_at_zero():
    assert stats.winner(0.5, 0.5, True, 0.0) == "tie" and stats.winner(0.5, 0.5, False, 0.0) == "tie"
    assert stats.winner(0.5, 0.6, True, 0.0) == "b" and stats.winner(0.5, 0.6, False, 0.0) == "a"
    for thr in (-0.5, -1e-9):
        with pytest.raises(ValueError, match="threshold"):
            stats.winner(0.5, 0.5, True, thr)


def test_defaults_are_seed_0_and_1000_resamples():
    x = [float(i) for i in range(20)]
    assert stats.bootstrap_ci(x) == stats.bootstrap_ci(x, n_resamples=1000, seed=0)
    assert stats.bootstrap_ci(x) != stats.bootstrap_ci(x, seed=1)
    assert stats.bootstrap_ci(x, seed=3) != stats.bootstrap_ci(x, n_resamples=1001, seed=3)
    vals = {f"q{i}": v for i, v in enumerate(x)}
    assert stats.cluster_bootstrap_ci(vals) == stats.cluster_bootstrap_ci(vals, None, 1000, 0.95, 0)
    assert stats.cluster_bootstrap_ci(vals) != stats.cluster_bootstrap_ci(vals, seed=1)
    assert stats.interval(vals) == stats.interval(vals, None, 0, "rate", "conversation", 1000, 0.95)
    assert stats.interval(vals)["ci"] != stats.interval(vals, seed=1)["ci"]
    a, b = x[:10], [v + (i % 3) for i, v in enumerate(x[:10])]
    assert stats.paired_permutation_test(a, b) == stats.paired_permutation_test(a, b, 10_000, 0)
    assert stats.paired_permutation_test(a, b) != stats.paired_permutation_test(a, b, seed=1)
    va, vb = dict(enumerate(a)), dict(enumerate(b))
    assert stats.compare("m", "A", "B", va, vb) == stats.compare("m", "A", "B", va, vb, seed=0)
    assert stats.compare("m", "A", "B", va, vb).p != stats.compare("m", "A", "B", va, vb, seed=1).p
    cats = {k: "c" for k in range(10)}
    assert stats.per_category(va, cats) == stats.per_category(va, cats, 0, 1000)
    assert stats.per_category(va, cats) != stats.per_category(va, cats, seed=1)


def test_bootstrap_of_two_values_and_empty_inputs():
    # [0, 1]: resample means 0, 0.5, 1 with p 1/4, 1/2, 1/4: the 2.5% / 97.5% quantiles are 0 and 1
    assert stats.bootstrap_ci([0.0, 1.0], seed=4) == (0.5, 0.0, 1.0)
    assert stats.bootstrap_ci([None, None]) == (None, None, None)
    assert stats.cluster_bootstrap_ci({}) == (None, None, None)
    assert stats.cluster_bootstrap_ci({"a": None}) == (None, None, None)
    # one cluster: a zero-width interval at the question mean
    assert stats.cluster_bootstrap_ci({"A:1": 0.0, "A:2": 1.0}, {"A:1": "A", "A:2": "A"}) == (0.5, 0.5, 0.5)
    assert stats.cluster_t_interval({"A:1": 0.0, "A:2": 1.0}, {"A:1": "A", "A:2": "A"}) == (0.5, 0.5, 0.5)
    assert stats.cluster_t_interval({"A:1": None}, {"A:1": "A"}) == (None, None, None)


def test_wilson_edges():
    with pytest.raises(ValueError, match="n must be"):
        stats.wilson_interval(0, 0)
    # n = 1, p = 0: [0, z²/(1 + z²)] = [0, 3.841459 / 4.841459]
    assert stats.wilson_interval(0, 1) == pytest.approx((0.0, 0.793451), abs=1e-6)
    # 90%: z = 1.644854, p = 0, n = 5: z²/(n + z²) = 2.705543 / 7.705543
    assert stats.wilson_interval(0, 5, 0.90) == pytest.approx((0.0, 0.351116), abs=1e-6)
    # the bounds are clamped: in floats centre - half is -1.4e-17 at 0 of 21, centre + half 1 + 2.2e-16 at 9 of 9
    assert stats.wilson_interval(0, 21)[0] == 0.0 and stats.wilson_interval(9, 9)[1] == 1.0


def test_p_value_arithmetic_is_exact():
    # a single pair: every flip is as extreme -> count = n, p = (n + 1) / (n + 1) = 1 exactly
    assert stats.paired_permutation_test([1.0], [0.0]) == 1.0
    assert stats.paired_permutation_test([1.0, 1.0], [0.0, 0.0], groups=["g", "g"]) == 1.0
    # 20 equal differences: an all-same flip has chance 2^-19 per draw, none of 10 draws is as extreme
    assert stats.paired_permutation_test([1.0] * 20, [0.0] * 20, n_permutations=10) == 1 / 11
    assert stats.paired_permutation_test([1.0] * 20, [0.0] * 20) == 1 / 10_001
    groups = [f"g{i}" for i in range(20)]
    assert stats.paired_permutation_test([1.0] * 20, [0.0] * 20, n_permutations=10, groups=groups) == 1 / 11
    assert stats.paired_permutation_test([], []) == 1.0


def test_as_extreme_tolerates_float_reordering():
    # d = [0.1, 0.2, -0.3, 0.4], observed |mean| 0.1. As extreme in exact arithmetic: 10 of 16 sign patterns
    # (both all-same, and every flip of a zero-sum subset such as {0.1, 0.2, -0.3}); two of them land 2.8e-17
    # below the observed value in floats, so without the tolerance p would be ~8/16
    p = stats.paired_permutation_test([0.1, 0.2, -0.3, 0.4], [0.0] * 4, n_permutations=20000, seed=1)
    assert p == pytest.approx(10 / 16, abs=0.02)
    # the same with one pair per cluster (the cluster path sums the flipped totals)
    p = stats.paired_permutation_test([0.1, 0.2, -0.3, 0.4], [0.0] * 4, n_permutations=20000, seed=1,
                                      groups=["g0", "g1", "g2", "g3"])
    assert p == pytest.approx(10 / 16, abs=0.02)


def test_cluster_flips_scale_by_the_number_of_pairs():
    # groups x (1 pair) and y (3 pairs), all differences 1: totals 1 and 3; flips give |±1 ± 3| / 4 =
    # 1, 0.5, 0.5, 1 -> 2 of 4 as extreme as the observed mean 1
    p = stats.paired_permutation_test([1.0] * 4, [0.0] * 4, 20000, seed=2, groups=["x", "y", "y", "y"])
    assert p == pytest.approx(0.5, abs=0.02)


def test_stars_boundaries():
    assert [stats.stars(p) for p in (0.0009, 0.001, 0.0099, 0.01, 0.0499, 0.05, None)] == \
        ["***", "**", "**", "*", "*", "", ""]


_ABC = {"A:1": 1.0, "A:2": 0.0, "B:1": 1.0, "B:2": 1.0, "C:1": 0.0, "C:2": 0.0}
_ABC_CL = {p: p[0] for p in _ABC}
HALF95 = 1.242069  # t(0.975, 2) · 0.288675, see test_stats_clusters.py


def test_interval_clips_by_unit():
    # scores are not clipped; ms and tokens only below at 0; rates to [0, 1]
    s = stats.interval(_ABC, _ABC_CL, unit="score")
    assert s["ci"] == pytest.approx([0.5 - HALF95, 0.5 + HALF95], abs=2e-6)
    assert (s["n"], s["units"], s["mean"]) == (6, 3, 0.5)
    ten = {p: 10 * v for p, v in _ABC.items()}
    for unit in ("ms", "tokens"):
        out = stats.interval(ten, _ABC_CL, unit=unit)
        assert out["ci"] == pytest.approx([0.0, 5 + 10 * HALF95], abs=2e-5)
        assert out["method"] == "cluster-robust t interval over conversations"
    # 90%: t(0.95, 2) = 2.919986 -> half 0.842927
    s90 = stats.interval(_ABC, _ABC_CL, unit="score", confidence=0.90, cluster_unit="session")
    assert s90["ci"] == pytest.approx([0.5 - 0.842927, 0.5 + 0.842927], abs=2e-6)
    assert s90["method"] == "cluster-robust t interval over sessions"


def test_interval_without_clusters_and_constants():
    vals = {"a": 0.2, "b": 0.9, "c": None, "d": 0.4}
    out = stats.interval(vals, seed=5, n_resamples=50, confidence=0.8)
    m, lo, hi = stats.cluster_bootstrap_ci({"a": 0.2, "b": 0.9, "d": 0.4}, None, 50, 0.8, 5)
    assert out == {"n": 3, "units": 3, "mean": m, "ci": [lo, hi], "method": stats.BOOTSTRAP_PROBE}
    assert stats.interval({"a": None}) == {"n": 0, "units": 0, "mean": None, "ci": [None, None], "method": ""}
    # every question 1, no clusters: Wilson over 3 questions
    ones = stats.interval({"a": 1.0, "b": 1.0, "c": 1.0})
    assert ones["ci"] == pytest.approx([3 / (3 + Z95 ** 2), 1.0], abs=1e-6)
    assert ones["method"] == "Wilson score interval over 3 questions (every value 1)"
    # every value 0 over 4 clusters
    zeros = {f"c{c}:q{q}": 0.0 for c in range(4) for q in range(2)}
    z = stats.interval(zeros, {p: p.split(":")[0] for p in zeros})
    assert z["ci"] == pytest.approx([0.0, Z95 ** 2 / (4 + Z95 ** 2)], abs=1e-6) and z["mean"] == 0.0
    assert z["method"] == "Wilson score interval over 4 conversations (every value 0)"
    # a constant 0.5 rate is no Wilson case
    half = stats.interval({"a": 0.5, "b": 0.5})
    assert half["ci"] == [0.5, 0.5] and half["method"] == stats.BOOTSTRAP_PROBE


def test_compare_feeds_each_figure_its_own_seed():
    va = {f"q{i}": (i * 7 % 10) / 10 for i in range(12)}
    vb = {f"q{i}": (i * 3 % 10) / 10 for i in range(12)}
    vb["extra"] = 1.0
    c = stats.compare("m", "A", "B", va, vb, seed=10, n_bootstrap=200, n_permutations=500, unit="ms",
                      higher_is_better=False)
    ids = sorted(va)
    assert c.n == 12 and c.units == 12 and c.threshold == 1.0
    assert list(c.ci_a) == stats.interval(va, None, 10, "ms", n_resamples=200)["ci"]
    assert list(c.ci_b) == stats.interval({k: vb[k] for k in ids}, None, 11, "ms", n_resamples=200)["ci"]
    diffs = {k: vb[k] - va[k] for k in ids}
    assert (c.delta, *c.ci_delta) == stats.cluster_bootstrap_ci(diffs, None, 200, seed=12)
    assert c.p == stats.paired_permutation_test([vb[k] for k in ids], [va[k] for k in ids], 500, seed=13)
    assert c.delta == pytest.approx(c.mean_b - c.mean_a)
    power = stats.min_detectable_difference(diffs)
    assert c.extra == {"method_a": stats.BOOTSTRAP_PROBE, "method_b": stats.BOOTSTRAP_PROBE, "power": power}
    assert c.mdd == power["mdd"] and power["units"] == 12
    # nothing in common: no p, no winner
    none = stats.compare("m", "A", "B", {"x": 1.0}, {"y": 1.0})
    assert (none.n, none.p, none.stars, none.winner, none.mean_a) == (0, None, "", "n/a", None)


def test_compare_with_clusters_uses_the_t_interval_of_the_differences():
    va = {p: 0.0 for p in _ABC}
    c = stats.compare("m", "A", "B", va, _ABC, clusters=_ABC_CL, unit="score", cluster_unit="session")
    assert (c.delta, *c.ci_delta) == pytest.approx((0.5, 0.5 - HALF95, 0.5 + HALF95), abs=2e-6)
    assert c.method == "cluster-robust t interval over sessions"
    assert c.extra["method_b"] == "cluster-robust t interval over sessions"


def test_bare_comparison_json():
    c = stats.Comparison("m", "a", "b", 1, 0.1, 0.2, (0, 1), (0, 1), 0.1, (0, 1), 0.5, "", True, 0.005, "b")
    j = c.to_json()
    assert (j["method"], j["units"], j["extra"]) == (stats.BOOTSTRAP_PROBE, 0, {})


def test_scorecard_verdicts():
    mk = lambda w: stats.Comparison("m", "a", "b", 1, 0, 0, (0, 0), (0, 0), 0, (0, 0), 1, "", True, 0.005, w)  # noqa: E731
    assert stats.scorecard([mk("a"), mk("a"), mk("b")])["verdict"] == "a"
    assert stats.scorecard([mk("a"), mk("b"), mk("tie")])["verdict"] == "tie"
    assert stats.scorecard([]) == {"wins": 0, "losses": 0, "ties": 0, "n/a": 0, "metrics": 0, "verdict": "tie"}
    # each label counted only as itself (a string order would count "tie" > "n/a" as n/a)
    assert stats.scorecard([mk("tie"), mk("tie"), mk("n/a")]) == {"wins": 0, "losses": 0, "ties": 2, "n/a": 1,
                                                                  "metrics": 3, "verdict": "tie"}
    # equal counts are a tie however large (past CPython's cached small ints, identity is not equality)
    assert stats.scorecard([mk("a")] * 300 + [mk("b")] * 300)["verdict"] == "tie"
    # labels and units are compared by value: strings built at run time (not interned literals) count the same
    built = [mk("".join(w)) for w in (["b"], ["a"], ["ti", "e"], ["n/", "a"])]
    assert stats.scorecard(built) == {"wins": 1, "losses": 1, "ties": 1, "n/a": 1, "metrics": 4, "verdict": "tie"}
    rate = "".join(["ra", "te"])
    ones = stats.interval({"a": 1.0, "b": 1.0, "c": 1.0}, unit=rate)
    assert ones["method"] == "Wilson score interval over 3 questions (every value 1)"
    assert stats.interval(_ABC, _ABC_CL, unit=rate)["ci"] == [0.0, 1.0]


def test_per_category_passes_seed_and_resamples():
    vals = {f"q{i}": float(i) for i in range(8)}
    cats = {f"q{i}": "even" if i % 2 == 0 else "odd" for i in range(7)}  # q7 has no category
    out = stats.per_category(vals, cats, seed=4, n_bootstrap=30)
    assert sorted(out) == ["", "even", "odd"]
    m, lo, hi = stats.bootstrap_ci([0.0, 2.0, 4.0, 6.0], 30, seed=4)
    assert out["even"] == {"n": 4, "mean": m, "ci": [lo, hi]}
    assert out[""] == {"n": 1, "mean": 7.0, "ci": [7.0, 7.0]}


def test_prediction_interval_small_k_and_confidence():
    # k = 2: t(0.975, 1) = 12.706205, s = 0.141421, sqrt(1.5) -> half 2.200779
    assert stats.prediction_interval([0.4, 0.6]) == pytest.approx((-1.700779, 2.700779), abs=1e-6)
    # 90%, k = 3: t(0.95, 2) = 2.919986 · 0.1 · 1.154701 = 0.337171
    assert stats.prediction_interval([0.4, 0.6, 0.5], 0.90) == pytest.approx((0.162829, 0.837171), abs=1e-6)


def test_held_out_check_inside_rows_and_bounds():
    values = {"a:q0": 0.0, "b:q0": 0.5, "c:q0": 0.55, "d:q0": 0.6}
    clusters = {p: p[0] for p in values}
    out = stats.held_out_check({"bm25": {"m": values}}, clusters, ["m", "absent"], bounds=None)["bm25"]
    assert set(out) == {"m"}
    m = out["m"]
    assert (m["inside"], m["inside_pi"], m["of"]) == (3, 3, 4)
    rows = {r["cluster"]: r for r in m["rows"]}
    # holding out b: a, c, d = 0, 0.55, 0.6, r = 0.383333, Σe² = 0.221667, se = sqrt(1.5·Σe²/9) = 0.192209,
    # half = 4.302653 · se = 0.827010 (unclipped without bounds)
    assert rows["b"]["ci"] == pytest.approx([-0.443677, 1.210343], abs=2e-6)
    assert rows["b"]["mean"] == 0.5 and rows["b"]["inside"] is True and rows["b"]["inside_pi"] is True
    # s = sqrt(0.221667 / 2) = 0.332916; half = 4.302653 · s · 1.154701 = 1.654020
    assert rows["b"]["pi"] == pytest.approx([-1.270687, 2.037354], abs=2e-6)
    clipped = stats.held_out_check({"bm25": {"m": values}}, clusters, ["m"])["bm25"]["m"]
    rb = {r["cluster"]: r for r in clipped["rows"]}["b"]
    assert rb["ci"] == [0.0, 1.0] and rb["pi"] == [0.0, 1.0]
    # exactly three clusters is enough
    three = {"a:q0": 0.0, "b:q0": 0.5, "c:q0": 1.0}
    assert stats.held_out_check({"x": {"m": three}}, {p: p[0] for p in three}, ["m"])["x"]["m"]["of"] == 3


def test_held_out_check_counts_a_mean_on_the_bound_as_inside():
    # every cluster has mean 0.5: the others' CI and PI are [0.5, 0.5] and each held-out mean sits on them
    values = {f"{c}:q{q}": float(q) for c in "abc" for q in (0, 1)}
    m = stats.held_out_check({"x": {"m": values}}, {p: p[0] for p in values}, ["m"])["x"]["m"]
    assert (m["inside"], m["inside_pi"], m["of"]) == (3, 3, 3)
    assert all(r["ci"] == [0.5, 0.5] and r["pi"] == [0.5, 0.5] for r in m["rows"])


def test_bootstrap_draws_every_value_with_equal_chance():
    # 19 zeros and a one: a resample holds Binomial(20, 1/20) ones; P(>= 4) = 1.6% < 2.5% < P(>= 3) = 7.5% and
    # P(0) = 36%, so the 95% percentile interval of the mean is [0, 3/20] (a draw favouring any value moves it)
    x = [0.0] * 19 + [1.0]
    for seed in (0, 1):
        assert stats.bootstrap_ci(x, seed=seed) == (0.05, 0.0, 0.15)
    values = {f"q{i:02d}": v for i, v in enumerate(x)}
    assert stats.cluster_bootstrap_ci(values, seed=1) == (0.05, 0.0, 0.15)
    first = {f"q{i:02d}": v for i, v in enumerate(reversed(x))}
    assert stats.cluster_bootstrap_ci(first, seed=1) == (0.05, 0.0, 0.15)


def test_the_interval_is_the_95_percent_percentile_interval():
    # 15 zeros and 5 ones: a resample holds X ~ Binomial(20, 1/4) ones. P(X <= 1) = 2.4% < 2.5% <= P(X <= 2) =
    # 9.1%, so the 2.5% point is 2/20; P(X >= 10) = 1.4% < 2.5% <= P(X >= 9) = 4.1%, so the 97.5% point is 9/20.
    # A 90% interval would end at 8/20 (P(X >= 8) = 10.2% > 5%), a 96.7% one start at 1/20.
    x = [0.0, 0.0, 0.0, 1.0] * 5
    values = {f"q{i:02d}": v for i, v in enumerate(x)}
    for seed in (0, 1):
        assert stats.bootstrap_ci(x, seed=seed) == (0.25, 0.1, 0.45)
        assert stats.cluster_bootstrap_ci(values, seed=seed) == (0.25, 0.1, 0.45)
        assert stats.interval(values, seed=seed)["ci"] == [0.1, 0.45]


def test_cluster_t_with_two_clusters_and_one_value():
    # A = [1], B = [0]: r = 0.5, residuals ±0.5, var = 2/1 · 0.5 / 4 = 0.25, se 0.5; t(0.975, 1) = 12.706205
    m, lo, hi = stats.cluster_t_interval({"A:1": 1.0, "B:1": 0.0}, {"A:1": "A", "B:1": "B"})
    assert (m, lo, hi) == pytest.approx((0.5, 0.5 - 6.353102, 0.5 + 6.353102), abs=1e-6)
    # one question answered right: Wilson over 1 question, [1/(1 + z²), 1]
    one = stats.interval({"a": 1.0})
    assert one["ci"] == pytest.approx([1 / (1 + Z95 ** 2), 1.0], abs=1e-6) and (one["n"], one["units"]) == (1, 1)
    assert stats.interval({"a": 0.3}) == {"n": 1, "units": 1, "mean": 0.3, "ci": [0.3, 0.3],
                                         "method": stats.BOOTSTRAP_PROBE}


@pytest.mark.parametrize("outlier", [0.9, 0.1])
def test_held_out_check_a_cluster_off_the_others_is_outside_above_and_below(outlier):
    """Clusters a, b, c at 0.5 and d at `outlier`. Held out, d meets the others' degenerate interval [0.5, 0.5]
    and lies outside it (above for 0.9, below for 0.1), for the CI and the prediction interval alike. Held out,
    a meets b, c, d: cluster means (0.5, 0.5, 0.9) for o = 0.9, by hand: m = 0.63333, s = 0.23094 (ddof 1),
    t(0.975, 2) = 4.30265: CI m ± t·s/sqrt(3) = [0.05965, 1.20702], PI m ± t·s·sqrt(4/3) = [-0.51404, 1.78071];
    both hold 0.5."""
    values = {f"{c}:{i}": (outlier if c == "d" else 0.5) for c in "abcd" for i in (1, 2)}
    out = stats.held_out_check({"x": {"m": values}}, {p: p[0] for p in values}, ["m"], bounds=None)["x"]["m"]
    rows = {r["cluster"]: r for r in out["rows"]}
    assert (out["inside"], out["inside_pi"], out["of"]) == (3, 3, 4)
    assert rows["d"]["ci"] == [0.5, 0.5] and rows["d"]["pi"] == [0.5, 0.5]
    assert rows["d"]["inside"] is False and rows["d"]["inside_pi"] is False
    assert rows["a"]["inside"] is True and rows["a"]["inside_pi"] is True
    if outlier == 0.9:
        assert rows["a"]["ci"] == pytest.approx([0.0596463027, 1.2070203640])
        assert rows["a"]["pi"] == pytest.approx([-0.5140407279, 1.7807073946])
    clipped = stats.held_out_check({"x": {"m": values}}, {p: p[0] for p in values}, ["m"])["x"]["m"]
    assert (clipped["inside"], clipped["inside_pi"]) == (3, 3)  # [0, 1] bounds change no verdict here


def test_stars_above_the_last_threshold_are_none():
    assert [stats.stars(p) for p in (0.0009, 0.009, 0.049, 0.05, 0.2, 1.0, None)] == ["***", "**", "*", "", "", "", ""]


def test_lower_is_better_winner_for_a_small_drop():
    assert stats.winner(0.5, 0.3, False, 0.01) == "b"  # b's latency 0.2 lower: b wins
    assert stats.winner(0.3, 0.5, False, 0.01) == "a"


def test_a_constant_rate_gets_wilson_even_as_distinct_float_objects_and_other_units_do_not():
    ones = {"p1": float("1"), "p2": float("1"), "p3": float("1")}  # equal values, not one shared object
    out = stats.interval(ones, unit="rate")
    assert out["method"].startswith("Wilson") and out["ci"][0] < 1.0 and out["ci"][1] == pytest.approx(1.0)
    zeros = {"p1": 0.0, "p2": 0.0}
    assert not stats.interval(zeros, unit="ms")["method"].startswith("Wilson")  # 0 ms is not a rate of 0
    assert stats.interval(zeros, unit="rate")["method"].startswith("Wilson")


def test_wilson_refuses_a_negative_count():
    with pytest.raises(ValueError, match="n must be >= 1"):
        stats.wilson_interval(0, -3)


def test_permutation_test_refuses_unequal_lengths_either_way():
    for a, b in (([1.0, 2.0, 3.0], [1.0, 2.0, 3.0, 4.0]), ([1.0, 2.0, 3.0, 4.0], [1.0, 2.0, 3.0])):
        with pytest.raises(ValueError, match="equal lengths"):
            stats.paired_permutation_test(a, b)


def test_per_category_goes_on_after_a_missing_value():
    out = stats.per_category({"a": None, "b": 1.0, "c": 0.0}, {"b": "x", "c": "x"})
    assert out["x"]["n"] == 2 and out["x"]["mean"] == 0.5


def test_held_out_check_goes_on_after_a_skipped_metric():
    values = {f"{c}:{i}": (0.9 if c == "d" else 0.5) for c in "abcd" for i in (1, 2)}
    two = {"a:1": 1.0, "b:1": 0.0}  # two clusters: skipped
    out = stats.held_out_check({"x": {"m": values, "few": two}}, {p: p[0] for p in values}, ["absent", "few", "m"])
    assert list(out["x"]) == ["m"] and out["x"]["m"]["of"] == 4


def test_held_out_check_with_equal_cluster_labels_that_are_distinct_objects():
    """Cluster labels read from data are equal strings, not one shared object: the result is the same."""
    values = {f"{c}:{i}": (0.9 if c == "d" else 0.5) for c in "abcd" for i in (1, 2)}
    shared = {p: "conv-" + p[0] for p in values}
    distinct = {p: "".join(["conv-", p[0]]) for p in values}
    assert distinct["a:1"] == distinct["a:2"] and distinct["a:1"] is not distinct["a:2"]
    a = stats.held_out_check({"x": {"m": values}}, shared, ["m"], bounds=None)
    b = stats.held_out_check({"x": {"m": values}}, distinct, ["m"], bounds=None)
    assert a == b and a["x"]["m"]["inside"] == 3
