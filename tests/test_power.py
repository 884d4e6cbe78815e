"""The power statement (stats.min_detectable_difference, units_needed): hand-computed cases and a simulation that
the permutation test the verdict uses detects a difference of the stated size about 80% of the time."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.stats import t as student_t

from services.coordinator import stats


def test_unclustered_mdd_is_the_t_formula():
    diffs = {f"p{i}": v for i, v in enumerate([1.0, 0.0, 1.0, 0.0, 1.0, 0.0, 1.0, 0.0])}
    out = stats.min_detectable_difference(diffs)
    se = np.std([1, 0] * 4, ddof=1) / np.sqrt(8)  # 0.5345 / 2.828 = 0.18898
    factor = student_t.ppf(0.975, 7) + student_t.ppf(0.8, 7)  # 2.3646 + 0.8960
    assert out["units"] == 8 and out["se"] == pytest.approx(se)
    assert out["mdd"] == pytest.approx(factor * se) and out["mdd"] == pytest.approx(0.6162, abs=1e-3)


def test_clustered_mdd_uses_the_cluster_robust_se_and_the_permutation_floor():
    # three conversations: per-conversation difference sums 2, 0, 1 over 2 probes each; r = 3/6 = 0.5
    diffs = {"a:1": 1.0, "a:2": 1.0, "b:1": 0.0, "b:2": 0.0, "c:1": 1.0, "c:2": 0.0}
    clusters = {k: k[0] for k in diffs}
    out = stats.min_detectable_difference(diffs, clusters)
    assert out["mdd"] is None and out["units"] == 3 and "smallest p is 0.250" in out["why"]
    # seven conversations reach p < 0.05 (2/128 = 0.016): residuals y_c - r n_c with r = 0.5, n_c = 2
    sums = [2, 0, 1, 2, 0, 1, 1]
    diffs = {f"{c}:{j}": (1.0 if j < s else 0.0) for c, s in zip("abcdefg", sums, strict=True) for j in range(2)}
    out = stats.min_detectable_difference(diffs, {k: k[0] for k in diffs})
    resid = np.asarray(sums) - 0.5 * 2
    se = np.sqrt(7 / 6 * (resid ** 2).sum()) / 14
    assert out["se"] == pytest.approx(se)
    assert out["mdd"] == pytest.approx((student_t.ppf(0.975, 6) + student_t.ppf(0.8, 6)) * se)


def test_no_spread_or_too_few_units_is_said_not_guessed():
    assert stats.min_detectable_difference({"a": 0.0, "b": 0.0, "c": 0.0, "d": 0.0, "e": 0.0, "f": 0.0,
                                            "g": 0.0})["mdd"] is None
    assert "fewer than 2" in stats.min_detectable_difference({"a": 1.0})["why"]


def test_units_needed_inverts_the_mdd():
    se, n = 0.05, 30
    need = stats.units_needed(se, n, 0.05)
    sd = se * np.sqrt(n)

    def mdd(k):
        return (student_t.ppf(0.975, k - 1) + student_t.ppf(0.8, k - 1)) * sd / np.sqrt(k)

    assert mdd(need) <= 0.05 < mdd(need - 1)
    assert stats.units_needed(se, n, 10.0) == 6  # any big difference still needs the sign-flip floor: 2/2^6 < 0.05
    assert stats.units_needed(0.0, n, 0.05) is None


def test_compare_carries_the_mdd():
    a = {f"p{i}": 0.0 for i in range(8)}
    b = {f"p{i}": float(i % 2) for i in range(8)}
    c = stats.compare("m", "a", "b", a, b)
    assert c.mdd == pytest.approx(stats.min_detectable_difference({k: b[k] - a[k] for k in a})["mdd"])
    assert c.to_json()["extra"]["power"]["units"] == 8


@pytest.mark.slow
def test_the_permutation_test_detects_the_stated_difference_about_80_percent_of_the_time():
    rng = np.random.default_rng(7)
    n, sd = 40, 1.0
    x = rng.normal(0, sd, n)
    x = (x - x.mean()) / x.std(ddof=1) * sd  # a pilot whose spread is exactly the true one
    mdd = stats.min_detectable_difference({f"p{i}": float(v) for i, v in enumerate(x)})["mdd"]
    hits, reps = 0, 200
    for r in range(reps):
        d = rng.normal(mdd, sd, n)
        p = stats.paired_permutation_test(d, np.zeros(n), n_permutations=1000, seed=r)
        hits += p < 0.05
    # 200 draws: the binomial sd of a 0.8 rate is 0.028
    assert 0.72 <= hits / reps <= 0.88


def test_power_table_of_a_run_and_the_units_a_difference_needs(tmp_path, capsys):
    from services.coordinator import power
    from tests.run_fixtures import madial_run

    d = madial_run(tmp_path / "m", {"openclaw-real": {0, 1}, "bm25": {0, 1, 2, 3, 4}, "mine": set(range(10))})
    (t,) = power.run_power(d, delta=0.1)
    assert t["metric"] == "shown@1000" and t["cluster_unit"] == "question"
    rows = {(r["backend"], r["against"]): r for r in t["rows"]}
    mine = rows[("mine", "openclaw-real")]  # differences 1 on 8 probes, 0 on 2
    se = float(np.std([1] * 8 + [0] * 2, ddof=1) / np.sqrt(10))
    assert mine["observed"] == pytest.approx(0.8) and mine["se"] == pytest.approx(se)
    assert mine["units_for_delta"] == stats.units_needed(se, 10, 0.1)
    assert mine["units_for_observed"] == 6  # a large difference needs only the sign-flip floor
    assert ("mine", "bm25") in rows and ("openclaw-real", "bm25") in rows
    assert power.main([str(d), "--delta", "0.1"]) == 0
    out = capsys.readouterr().out
    assert "## madial: shown@1000" in out and "| mine | openclaw-real | 10 | +80.0 points |" in out
    assert power.main([str(d), "--delta", "-1"]) == 2
    assert "--delta: must be a positive number" in capsys.readouterr().err
    assert power.main([str(tmp_path / "nothing")]) == 2
