"""The suites' shared scoring helpers (services/coordinator/suites/common.py), by hand: proportional stratified
sampling (largest remainder, one per stratum, the overshoot taken back), metric units, the comparison wiring
(seeds per metric, skipped metrics, conditions in order), the binary and pairwise judges' passes and majority
votes on scripted replies, the number formats and the scorecard table, character for character."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from pathlib import Path

import pytest

from services.common import prompts
from services.coordinator.judges import (
    SAMPLED_PASS_TEMPERATURE,
    binary_judge,
    judge_pass_settings,
    pairwise_judge,
    parse_pairwise,
    prompt_id,
    rubric_judge,
)
from services.coordinator.suites import common
from services.coordinator.suites.common import (
    compare_all,
    fmt,
    fmt_ci,
    judge_label,
    metric_spec,
    render_comparisons,
    stable_seed,
    stratified_sample,
    summary,
    unit_of,
)


class Reverse:
    """A shuffle that reverses: which items a stratum gives up is then known by hand."""

    def shuffle(self, xs):
        xs.reverse()


# i:     0   1   2   3   4   5   6   7   8   9
ITEMS = ["A", "B", "A", "A", "C", "B", "A", "A", "B", "A"]  # A: 0 2 3 6 7 9, B: 1 5 8, C: 4


def pick(items, n):
    return stratified_sample(list(enumerate(items)), lambda x: x[1], n, Reverse())


def test_stratified_sample_allocates_by_largest_remainder():
    # n 5 of 10: quotas A 3.0, B 1.5, C 0.5 → 3, 1, 0; one per stratum → C 1; total 5. Reversed strata keep
    # A 9 7 6, B 8, C 4; the result is in input order
    assert [i for i, _ in pick(ITEMS, 5)] == [4, 6, 7, 8, 9]
    # n 2 < 3 strata: no minimum; quotas 1.2, 0.6, 0.2 → A 1, then the largest remainder (B 0.6) gets the last
    assert [i for i, _ in pick(ITEMS, 2)] == [8, 9]
    # n 7: quotas 4.2, 2.1, 0.7 → 4, 2, 0 → C 1 → 7
    assert [i for i, _ in pick(ITEMS, 7)] == [3, 4, 5, 6, 7, 8, 9]
    # n 8: 4.8, 2.4, 0.8 → 4, 2, 1 (min) = 7; remainders A 0.8, C 0.8 (full), B 0.4: A first (name order) → 8
    assert [i for i, _ in pick(ITEMS, 8)] == [2, 3, 4, 5, 6, 7, 8, 9]


def test_stratified_sample_takes_the_overshoot_back_from_the_largest():
    # A×8, B, C; n 3: quotas 2.4, 0.3, 0.3 → 2, 0, 0 → minimum one each → 4 > 3 → A gives one back
    items = ["A"] * 8 + ["B", "C"]
    assert [i for i, _ in pick(items, 3)] == [7, 8, 9]
    # A×4, B×4, C, D; n 5: 2, 2, 0, 0 → 2, 2, 1, 1 = 6 → the largest, ties to the later name: B gives one back
    items = ["A", "A", "A", "A", "B", "B", "B", "B", "C", "D"]
    assert [i for i, _ in pick(items, 5)] == [2, 3, 7, 8, 9]


def test_stratified_sample_everything_when_n_is_out_of_range():
    for n in (0, -1, 10, 11):
        assert [i for i, _ in pick(ITEMS, n)] == list(range(10))


def test_stratified_sample_with_a_seeded_shuffle_is_reproducible():
    import random

    a = stratified_sample(list(range(100)), lambda x: str(x % 3), 10, random.Random(4))
    assert a == stratified_sample(list(range(100)), lambda x: str(x % 3), 10, random.Random(4))
    assert len(a) == 10 and sorted(a) == a and [sum(1 for x in a if x % 3 == k) for k in range(3)] == [4, 3, 3]


@pytest.mark.parametrize("name, unit", [("token_spend", "tokens"), ("latency_ms", "ms"), ("recall_at_5", "rate"),
                                        ("judge_mean", "score"), ("latency_p95_ms", "ms"), ("efficiency_ratio", "ratio"),
                                        ("session_recall@5", "rate")])
def test_unit_of(name, unit):
    assert unit_of(name) == unit


def test_metric_spec():
    assert metric_spec("abstained_rate") == ("abstained_rate", False, "rate")
    assert metric_spec("token_spend") == ("token_spend", False, "tokens")
    assert metric_spec("session_recall@5") == ("session_recall@5", True, "rate")  # the session_recall@K family
    assert metric_spec(("x", False, "ms")) == ("x", False, "ms")  # a name only the suite computes, declared
    # an unknown bare name is an error naming it, not a guessed higher-is-better rate; so is a contradicting tuple
    with pytest.raises(KeyError, match="metric 'made_up' is not in the metric registry"):
        metric_spec("made_up")
    with pytest.raises(KeyError, match="metric 'made_up' is not in the metric registry"):
        unit_of("made_up")
    with pytest.raises(ValueError, match="metric 'mrr': the suite says higher_is_better=False"):
        metric_spec(("mrr", False, "rate"))


def test_summary_of_a_plain_list_keeps_its_order_and_unit():
    s = summary([1.0, 0.0, None, 1.0])
    assert (s["n"], s["mean"]) == (3, pytest.approx(2 / 3))
    assert summary({"q1": 1.0, "q2": 1.0}, unit="rate")["method"].startswith("Wilson")
    assert summary({"q1": 1.0, "q2": 1.0})["method"] == "percentile bootstrap over questions"


def test_compare_all_wiring(monkeypatch):
    calls = []

    @dataclass
    class C:
        winner: str

        def to_json(self):
            return {"winner": self.winner}

    def fake_compare(name, a, b, va, vb, hib, unit, seed, clusters, cluster_unit):
        calls.append((name, a, b, dict(va), dict(vb), hib, unit, seed, clusters, cluster_unit))
        return C("b")

    monkeypatch.setattr(common.stats, "compare", fake_compare)
    monkeypatch.setattr(common.stats, "scorecard", lambda comps: {"n": len(comps)})
    per = {"native": {"mrr": {"q1": 0.5}, "token_spend": {"q1": 10.0}},
           "cortex": {"mrr": {"q1": 1.0}, "latency_ms": {"q1": 3.0}},
           "bm25": {"mrr": {"q1": 0.0}}}
    out = compare_all(per, "native", ["mrr", "abstained_rate", ("latency_ms", False, "ms"), "token_spend"], seed=3,
                      clusters={"q1": "c1"}, cluster_unit="session")
    assert list(out) == ["bm25", "cortex"]  # every condition but the baseline, in name order
    assert out["cortex"] == {"baseline": "native", "comparisons": [{"winner": "b"}] * 3, "scorecard": {"n": 3}}
    # metric i gets seed + 7919·i; a metric absent on both sides (abstained_rate, i = 1) is skipped
    assert [(c[0], c[2], c[5], c[6], c[7]) for c in calls] == [
        ("mrr", "bm25", True, "rate", 3), ("token_spend", "bm25", False, "tokens", 3 + 7919 * 3),
        ("mrr", "cortex", True, "rate", 3), ("latency_ms", "cortex", False, "ms", 3 + 7919 * 2),
        ("token_spend", "cortex", False, "tokens", 3 + 7919 * 3)]
    assert calls[3][3:5] == ({}, {"q1": 3.0}) and calls[0][8:] == ({"q1": "c1"}, "session")
    assert compare_all(per, "missing", ["mrr"]) == {}


# ------------------------------------------------------------------------------------------------- judges
@dataclass
class Reply:
    text: str


class ScriptedLLM:
    def __init__(self, replies):
        self.replies = list(replies)
        self.calls = []
        self.seeds = []

    async def chat(self, messages, temperature, seed=None):
        self.calls.append((messages, temperature))
        self.seeds.append(seed)
        return Reply(self.replies.pop(0))


class Ctx:
    def __init__(self, replies, passes=None, temperature=None):
        self.judge_llm = ScriptedLLM(replies)
        if passes is not None:
            self.judge_passes = passes
        if temperature is not None:
            self.judge_temperature = temperature


def test_judge_passes_are_distinct_seeded_draws():
    # one pass: greedy (the stated temperature, default 0), no seed; N passes: seeds 0..N-1 at the stated
    # temperature, or at SAMPLED_PASS_TEMPERATURE when it is 0 (N identical greedy calls would decide nothing)
    assert judge_pass_settings(Ctx([])) == [{"temperature": 0.0, "seed": None}]
    assert judge_pass_settings(Ctx([], passes=1, temperature=0.3)) == [{"temperature": 0.3, "seed": None}]
    assert judge_pass_settings(Ctx([], passes=3)) == [{"temperature": SAMPLED_PASS_TEMPERATURE, "seed": i}
                                                      for i in range(3)]
    assert judge_pass_settings(Ctx([], passes=2, temperature=0.2)) == [{"temperature": 0.2, "seed": 0},
                                                                       {"temperature": 0.2, "seed": 1}]
    assert judge_pass_settings(Ctx([], passes=0)) == [{"temperature": 0.0, "seed": None}]
    ctx = Ctx(['{"score": 3}', '{"score": 0}', '{"score": 3}'], passes=3)
    res = asyncio.run(rubric_judge(ctx, "q", "g", "a"))
    assert (res["score"], res["passes"], res["temperature"], res["seeds"]) == (3, [3, 0, 3], 0.7, [0, 1, 2])
    assert ctx.judge_llm.seeds == [0, 1, 2] and [c[1] for c in ctx.judge_llm.calls] == [0.7] * 3
    assert ctx.judge_llm.calls[0][0][0]["content"] == prompts.JUDGE_SYSTEM
    one = asyncio.run(rubric_judge(Ctx(['{"score": 2}']), "q", "g", "a"))
    assert one == {"score": 2, "passes": [2], "reasons": ['{"score": 2}']}  # one pass records no seeds
    with pytest.raises(ValueError, match="no 0-3 score"):
        asyncio.run(rubric_judge(Ctx(["none"]), "q", "g", "a"))


def test_binary_judge_majority_and_records():
    ctx = Ctx(["CORRECT", " WRONG ", "CORRECT"], passes=3, temperature=0.2)
    res = asyncio.run(binary_judge(ctx, "q?", "gold", "ans"))
    assert res == {"correct": True, "passes": [1, 0, 1], "raw": ["CORRECT", "WRONG", "CORRECT"],
                   "prompt": "BINARY_JUDGE_SYSTEM", "prompt_id": prompt_id(prompts.BINARY_JUDGE_SYSTEM),
                   "temperature": 0.2, "seeds": [0, 1, 2]}
    assert ctx.judge_llm.seeds == [0, 1, 2]
    messages, temperature = ctx.judge_llm.calls[0]
    assert temperature == 0.2 and messages == [
        {"role": "system", "content": prompts.BINARY_JUDGE_SYSTEM},
        {"role": "user", "content": prompts.judge_user("q?", "gold", "ans")}]
    # one pass by default at temperature 0; a 2-pass tie is WRONG (the sceptical choice)
    ctx = Ctx(["CORRECT"])
    assert asyncio.run(binary_judge(ctx, "q", "g", "a"))["correct"] is True
    assert ctx.judge_llm.calls[0][1] == 0.0 and ctx.judge_llm.seeds == [None]
    assert asyncio.run(binary_judge(Ctx(["CORRECT", "WRONG"], passes=2), "q", "g", "a"))["correct"] is False
    assert asyncio.run(binary_judge(Ctx(["WRONG"], passes=0), "q", "g", "a"))["passes"] == [0]  # at least one
    long = "CORRECT " + "x" * 300
    assert asyncio.run(binary_judge(Ctx([long]), "q", "g", "a"))["raw"] == [long[:200]]
    with pytest.raises(ValueError, match="no CORRECT/WRONG label"):
        asyncio.run(binary_judge(Ctx(["maybe"]), "q", "g", "a"))


@pytest.mark.parametrize("text, out", [
    ('{"winner": "X"}', "X"), ('{"Winner" : "tie"}', "TIE"), ("Response Y is better", "Y"), ("x", "X"),
    ("EXTRA words only", None), ("", None), (None, None), ('{"winner": "Z"} but Y', "Y"),
])
def test_parse_pairwise(text, out):
    assert parse_pairwise(text) == out


def test_pairwise_judge_maps_the_shown_order_back():
    # random.Random(1).random() = 0.134 < 0.5: a is shown first (as X); Random(0) gives 0.844: b is shown first
    ctx = Ctx(["X", "Y", "X"], passes=3)
    res = asyncio.run(pairwise_judge(ctx, "q", "g", "answer a", "answer b", seed=1))
    assert (res["order_shown"], res["verdicts"], res["winner"]) == (["a", "b"], ["a", "b", "a"], "a")
    assert ctx.judge_llm.calls[0][0][1]["content"] == prompts.pairwise_judge_user("q", "g", "answer a", "answer b")
    # three passes at the default temperature 0: sampled at SAMPLED_PASS_TEMPERATURE with seeds 0, 1, 2
    assert ctx.judge_llm.calls[0][1] == SAMPLED_PASS_TEMPERATURE and ctx.judge_llm.seeds == [0, 1, 2]
    assert res["prompt_id"] == prompt_id(prompts.PAIRWISE_JUDGE_SYSTEM) and res["seeds"] == [0, 1, 2]
    ctx = Ctx(["X", "TIE"], passes=2, temperature=0.5)
    res = asyncio.run(pairwise_judge(ctx, "q", "g", "answer a", "answer b", seed=0))
    assert (res["order_shown"], res["verdicts"], res["winner"]) == (["b", "a"], ["b", "tie"], "tie")  # 1-1: tie
    assert ctx.judge_llm.calls[0][0][1]["content"] == prompts.pairwise_judge_user("q", "g", "answer b", "answer a")
    assert ctx.judge_llm.calls[1][1] == 0.5 and res["raw"] == ["X", "TIE"] and res["prompt"] == "PAIRWISE_JUDGE_SYSTEM"
    res = asyncio.run(pairwise_judge(Ctx(["Y", "Y", "TIE"], passes=3), "q", "g", "a", "b", seed=0))
    assert res["winner"] == "a"  # shown second, chosen twice
    assert asyncio.run(pairwise_judge(Ctx(["TIE"], passes=0), "q", "g", "a", "b", seed=0))["winner"] == "tie"
    with pytest.raises(ValueError, match="no X/Y/TIE verdict"):
        asyncio.run(pairwise_judge(Ctx(["neither"]), "q", "g", "a", "b", seed=0))


# ---------------------------------------------------------------------------------------------- rendering
@pytest.mark.parametrize("args, out", [
    ((None,), "—"), ((True,), "True"), ((0.12345,), "0.123"), ((2,), "2.000"), ((0.12345, 1), "0.1"),
    ((0.12345, 3, True), "12.3%"), (("n/a",), "n/a"), ((1.0, 0), "1"),
])
def test_fmt(args, out):
    assert fmt(*args) == out


def test_fmt_ci():
    assert fmt_ci(None) == "—" and fmt_ci({}) == "—" and fmt_ci({"mean": None, "ci": [0, 1]}) == "—"
    assert fmt_ci({"mean": 0.5}) == "0.500"
    assert fmt_ci({"mean": 0.5, "ci": [None, None]}) == "0.500"
    assert fmt_ci({"mean": 0.5, "ci": [0.25, 0.75]}) == "0.500 [0.250, 0.750]"
    assert fmt_ci({"mean": 0.5, "ci": [0.25, 0.75]}, 1, True) == "50.0% [25.0%, 75.0%]"
    assert fmt_ci({"mean": 12.0, "ci": [10.0, 14.5, 99]}, 1) == "12.0 [10.0, 14.5]"


def test_judge_label():
    assert judge_label({}) == "judge: not recorded"
    assert judge_label({"judge": "gpt-x"}) == "judge: gpt-x"
    assert judge_label({"judge": {"offline_mock": True, "passes": 3}}) == \
        "judge: offline rubric judge (llm-mock), not a model, 3 pass(es), majority vote"
    assert judge_label({"judge": {"model": "m1"}}) == "judge: LLM judge m1"
    assert judge_label({"judge": {"label": "L", "model": "m1", "passes": 1}}) == "judge: L, 1 pass(es), majority vote"


def _cmp(metric, hib, threshold, winner, p, stars, method="percentile bootstrap over questions", units=40):
    return {"metric": metric, "higher_is_better": hib, "n": 40, "threshold": threshold, "mean_a": 0.5,
            "ci_a": [0.4, 0.6], "mean_b": 0.625, "ci_b": [0.5, 0.75], "delta": 0.125, "ci_delta": [0.0, 0.25],
            "p": p, "stars": stars, "winner": winner, "method": method, "units": units}


def test_render_comparisons_exact_table():
    comp = {"cortex": {"baseline": "native", "scorecard": {"wins": 1, "losses": 0, "ties": 1, "metrics": 2},
                       "comparisons": [_cmp("recall_at_5", True, 0.005, "b", 0.01234, "*"),
                                       _cmp("token_spend", False, 1.0, "tie", None, "")]}}
    text = render_comparisons(comp, title="Retrieval")
    assert text.split("\n") == [
        "", "#### Retrieval: cortex vs native", "",
        "cortex wins 1, loses 0, ties 1 of 2 metrics (tie thresholds: 0.005 for rates/scores, 1.0 for tokens and "
        "ms; p from a two-sided paired permutation test, 10,000 sign flips of whole questions; 95% CIs by "
        "percentile bootstrap over questions, 1,000 resamples, over 40 questions; a rate at 0 or 1 gets a Wilson "
        "interval).", "",
        "| metric | n | native | cortex | Δ | p | winner |", "|---|---|---|---|---|---|---|",
        "| recall_at_5 | 40 | 0.500 [0.400, 0.600] | 0.625 [0.500, 0.750] | 0.125 [0.000, 0.250] | 0.0123* | cortex |",
        "| token_spend (↓) | 40 | 0.5 [0.4, 0.6] | 0.6 [0.5, 0.8] | 0.1 [0.0, 0.2] | — | tie |"]


def test_render_comparisons_by_cluster_and_without_comparisons():
    comp = {"b": {"baseline": "a", "scorecard": {"wins": 0, "losses": 1, "ties": 0, "metrics": 1},
                  "comparisons": [_cmp("mrr", True, 0.005, "a", 0.5, "", "cluster-robust t interval over conversations",
                                       10)]}}
    lines = render_comparisons(comp).split("\n")
    assert lines[1] == "#### Scorecard: b vs a"
    assert lines[3] == ("b wins 0, loses 1, ties 0 of 1 metrics (tie thresholds: 0.005 for rates/scores, 1.0 for "
                        "tokens and ms; p from a two-sided paired permutation test, 10,000 sign flips of whole "
                        "conversations; 95% CIs by cluster-robust t interval over conversations, over 10 "
                        "conversations; a rate at 0 or 1 gets a Wilson interval).")
    assert lines[-1].endswith("| 0.5000 | a |")
    empty = {"b": {"baseline": "a", "scorecard": {"wins": 0, "losses": 0, "ties": 0, "metrics": 0}, "comparisons": []}}
    assert "over ? questions" in render_comparisons(empty)
    assert render_comparisons({}) == ""


def test_seeds_and_prompt_ids_are_stable_across_processes():
    # sha256 of "a\x001" → first 4 bytes big-endian; sha256("hello")[:12]
    assert stable_seed("a", 1) == 95012201 and stable_seed("a", "1") == stable_seed("a", 1)
    assert stable_seed("locomo", "conv-1") == 2972627394
    assert prompt_id("hello") == "2cf24dba5fb0"


def test_default_data_dir(monkeypatch, tmp_path):
    monkeypatch.setenv("MEMRIG_DATA_DIR", str(tmp_path))
    assert common.default_data_dir() == tmp_path
    monkeypatch.delenv("MEMRIG_DATA_DIR")
    repo = Path(common.__file__).resolve().parents[3]
    assert common.default_data_dir() == repo.parent / "shared" / "data"


# ------------------------------------------------------------------------------------- paths not yet pinned
def test_stratified_sample_edges_and_the_random_stream():
    import random

    assert len(stratified_sample(list(range(10)), lambda x: "s", 1, random.Random(0))) == 1
    for n in (0, 10, 11):  # everything, and the caller's random stream is left untouched
        rng = random.Random(5)
        assert stratified_sample(list(range(10)), lambda x: str(x % 2), n, rng) == list(range(10))
        assert rng.random() == random.Random(5).random()


def test_retrieval_conditions_answer_nothing():
    from services.coordinator.suites.base import Condition

    assert common.retrieval_conditions(["a", "b"]) == [Condition("a", ("backend:a",), answer=False),
                                                      Condition("b", ("backend:b",), answer=False)]


def test_load_info_cached_loaded_or_none():
    class Suite:
        def __init__(self, info, fail=False):
            if info is not None:
                self._info = info
            self.fail, self.loads = fail, 0

        def load(self):
            self.loads += 1
            if self.fail:
                raise FileNotFoundError("moved")
            return type("D", (), {"info": {"loaded": True}})()

    cached = Suite({"cached": 1})
    assert common.load_info(cached) == {"cached": 1} and cached.loads == 0
    fresh = Suite(None)
    assert common.load_info(fresh) == {"loaded": True} and fresh.loads == 1
    assert common.load_info(Suite(None, fail=True)) is None


def test_names_compared_by_value_not_identity():
    """Names read back from JSON are equal but not the same objects as the literals."""
    import json

    tok, base = json.loads('["token_spend", "base"]')
    assert unit_of(tok) == "tokens" and unit_of(json.loads('"latency_ms"')) == "ms"
    per = {"base": {"mrr": {"p1": 0.0, "p2": 1.0}}, "sys": {"mrr": {"p1": 1.0, "p2": 1.0}}}
    assert sorted(compare_all(per, base, ["mrr"])) == ["sys"]


def test_default_seeds_are_zero():
    vals = {f"p{i}": (i * 7919 % 13) / 13 for i in range(30)}
    other = {k: min(1.0, v + 0.1 * (int(k[1:]) % 3)) for k, v in vals.items()}
    assert summary(vals) == summary(vals, seed=0) != summary(vals, seed=1)
    per = {"a": {"mrr": vals}, "b": {"mrr": other}}
    assert compare_all(per, "a", ["mrr"]) == compare_all(per, "a", ["mrr"], seed=0)
    assert compare_all(per, "a", ["mrr"]) != compare_all(per, "a", ["mrr"], seed=1)


def test_judges_one_pass_by_default_and_cut_at_200():
    ctx = Ctx(["X"])  # no judge_passes attribute: one pass
    assert asyncio.run(pairwise_judge(ctx, "q", "g", "a", "b", seed=1))["verdicts"] == ["a"]
    assert asyncio.run(pairwise_judge(Ctx(["TIE", "X"], passes=0), "q", "g", "a", "b", seed=1))["verdicts"] == ["tie"]
    long = "Y " + "z" * 300
    assert asyncio.run(pairwise_judge(Ctx([long]), "q", "g", "a", "b", seed=1))["raw"] == [long[:200]]
    bad = "w" * 300
    for judge in (binary_judge(Ctx([bad]), "q", "g", "a"), pairwise_judge(Ctx([bad]), "q", "g", "a", "b", seed=1)):
        with pytest.raises(ValueError) as e:
            asyncio.run(judge)
        assert str(e.value).endswith(": " + repr(bad[:200]))


def test_render_comparisons_units_from_the_first_metric_and_method_words():
    comp = {"b": {"baseline": "a", "scorecard": {"wins": 0, "losses": 0, "ties": 2, "metrics": 2},
                  "comparisons": [_cmp("mrr", True, 0.005, "tie", None, "", units=12),
                                  _cmp("r5", True, 0.005, "tie", None, "", "cluster bootstrap over sessions", 9)]}}
    head = render_comparisons(comp).split("\n")[3]
    assert "sign flips of whole questions;" in head and "over 12 questions;" in head
    comp["b"]["comparisons"].reverse()
    head = render_comparisons(comp).split("\n")[3]
    assert "sign flips of whole sessions;" in head and "over 9 sessions;" in head


def test_stratified_sample_of_more_than_256():
    import random

    got = stratified_sample(list(range(900)), lambda x: str(x % 3), 300, random.Random(0))
    assert len(got) == 300 and [sum(1 for x in got if x % 3 == r) for r in range(3)] == [100, 100, 100]
    got = stratified_sample(list(range(601)), lambda x: str(x % 2), 300, random.Random(0))
    assert len(got) == 300 and sum(1 for x in got if x % 2 == 0) == 150  # quotas 150.25, 149.75: the last place goes to the odd (larger remainder)


def test_qa_judge_verdicts_from_either_judge():
    from services.coordinator.judges import judged_correct, qa_judge_used
    from services.coordinator.suites.common import judge_agreement_line

    assert judged_correct({"judge": {"score": 2}}) is True and judged_correct({"judge": {"score": 1}}) is False
    assert judged_correct({"binary_judge": {"correct": True}}) is True
    assert judged_correct({"judge": {"score": 0}, "binary_judge": {"correct": True}}) is False  # the 0-3 score wins
    assert judged_correct({"judge": None}) is None and judged_correct({}) is None
    assert qa_judge_used([{"binary_judge": {"correct": False}}, {}]) == "model binary"
    assert qa_judge_used([{"judge": {"score": 3}}, {"binary_judge": {"correct": True}}]) == "model 0-3"
    assert qa_judge_used([{}, {"answer": "x"}]) is None
    # the report line: only for a model judge and a judged run
    assert judge_agreement_line({"judge": {"model": "m", "offline_mock": True}, "qa_judge": "model 0-3"}) == []
    assert judge_agreement_line({"judge": {"model": "m"}}) == []
    line = judge_agreement_line({"judge": {"model": "some-model"}, "qa_judge": "model binary"})
    assert line[0] == "" and line[1].startswith("judge: some-model BINARY_JUDGE_SYSTEM")
    assert judge_agreement_line({"judge": {"model": "some-model"}}, "model 0-3")[1].startswith(
        "judge: some-model JUDGE_SYSTEM")


def test_qa_judge_uses_the_chosen_judge(monkeypatch):
    from services.coordinator import judges as JA
    from services.coordinator.judges import qa_judge

    monkeypatch.setattr(JA, "QA_JUDGE", "model 0-3")
    out = asyncio.run(qa_judge(Ctx(['{"score": 3, "reason": "ok"}']), "q", "g", "a"))
    assert out == {"judge": {"score": 3, "passes": [3], "reasons": ['{"score": 3, "reason": "ok"}'],
                             "prompt": "JUDGE_SYSTEM", "prompt_id": prompt_id(prompts.JUDGE_SYSTEM)}}
    monkeypatch.setattr(JA, "QA_JUDGE", "model binary")
    out = asyncio.run(qa_judge(Ctx(['{"label": "WRONG"}']), "q", "g", "a"))
    assert list(out) == ["binary_judge"] and out["binary_judge"]["correct"] is False
