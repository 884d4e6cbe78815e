"""Judge agreement: Cohen's kappa (plain and quadratic-weighted) and confusion tables computed by hand, four
crafted answers rated by a model judge, the offline rubric judge, EM and F1, and the report section; finalize()
adds it only when the judge was a model."""

from __future__ import annotations

import json

import pytest

from services.coordinator import judge_agreement as J
from services.coordinator.results import RunDir
from services.coordinator.runner import finalize


def test_kappa_by_hand():
    # p_o = 3/4; rates 1/2 and 1/4 -> p_e = 1/2 * 1/4 + 1/2 * 3/4 = 1/2; kappa = (3/4 - 1/2) / (1 - 1/2) = 1/2
    assert J.cohen_kappa([1, 1, 0, 0], [1, 0, 0, 0], (0, 1)) == pytest.approx(0.5)
    # 0-3: p_o = 3/4; p_e = 1/4*1/4 + 1/4*1/4 + 1/4*1/2 = 1/4; kappa = (3/4 - 1/4) / (3/4) = 2/3
    a, b = [0, 1, 2, 3], [0, 1, 2, 2]
    assert J.cohen_kappa(a, b, (0, 1, 2, 3)) == pytest.approx(2 / 3)
    # quadratic weights (i-j)^2/9: observed 1/4 * 1/9 = 1/36; expected 1/4 * (1/4*14 + 1/4*6 + 1/2*6) / 9 = 2/9;
    # kappa_w = 1 - (1/36) / (2/9) = 7/8
    assert J.cohen_kappa(a, b, (0, 1, 2, 3), weighted=True) == pytest.approx(0.875)
    # complete reversal on the extremes: kappa_w = 1 - 1 / (1/2) = -1
    assert J.cohen_kappa([0, 3], [3, 0], (0, 1, 2, 3), weighted=True) == pytest.approx(-1.0)
    assert J.cohen_kappa([1, 1], [1, 1], (0, 1)) is None  # both constant: undefined
    assert J.cohen_kappa([], [], (0, 1)) is None
    with pytest.raises(ValueError, match="ratings: 2 and 1 items"):
        J.cohen_kappa([0, 1], [0], (0, 1))
    assert J.confusion([1, 1, 0, 0], [1, 0, 0, 1], (1, 0)) == [[1, 1], [1, 1]]


def test_bootstrap_resamples_whole_questions():
    # Three questions, each rated identically by both raters in both conditions: every resample agrees perfectly,
    # or is constant (no q2, or only q2: 8/27 + 1/27 of resamples; undefined, counted).
    a = [1, 1, 0, 0, 1, 1]
    ci, undefined = J.bootstrap_kappa(a, a, ["q1", "q1", "q2", "q2", "q3", "q3"], (0, 1), seed=3, n_resamples=270)
    assert ci == [1.0, 1.0] and 60 < undefined < 120
    assert J.bootstrap_kappa(a, a, ["q"] * 4, (0, 1)) == (None, 0)  # one cluster: no interval


SAMPLES = [
    # gold, answer, model judge 0-3; rubric / EM / F1 worked out in the test below
    {"probe_id": "p1", "condition": "c", "question": "Which port?", "ground_truth": "port 3001",
     "answer": "port 3001", "judge": {"score": 3}},
    {"probe_id": "p2", "condition": "c", "question": "Which port?", "ground_truth": "port 3001",
     "answer": "I don't have that information.", "judge": {"score": 1}},
    {"probe_id": "p3", "condition": "c", "question": "Which port?", "ground_truth": "port 3001",
     "answer": "port 8080", "judge": {"score": 2}},
    {"probe_id": "p4", "condition": "c", "question": "Which ORM?", "ground_truth": "Drizzle",
     "answer": "We use Drizzle ORM.", "judge": {"score": 3}},
    {"probe_id": "p5", "condition": "c", "question": "unanswered", "ground_truth": "x"},  # no answer: not rated
]


def test_four_raters_on_crafted_answers():
    rows = J.rate(SAMPLES, "cortex-v1")
    # rubric: p1 carries 3001 -> 3; p2 abstains -> 1; p3 states its own number 8080 and misses 3001 -> 0;
    # p4 names Drizzle -> 3. EM: only p1. F1: p3 = 2*(1/2*1/2)/(1) = 0.5; p4 = 2*(1/4*1)/(5/4) = 0.4.
    assert [r["rubric_0_3"] for r in rows] == [3, 1, 0, 3]
    assert [r["em"] for r in rows] == [True, False, False, False]
    assert [round(r["f1"], 3) for r in rows] == [1.0, 0.0, 0.5, 0.4]
    ag = J.compute(SAMPLES, "cortex-v1", seed=0)
    assert (ag["scale"], ag["n"], ag["questions"], ag["conditions"]) == ("0-3", 4, 4, 1)
    # correct: model [1,0,1,1], rubric [1,0,0,1], EM [1,0,0,0], F1 [1,0,1,0]
    assert ag["positive_rate"] == {"model judge": 0.75, "rubric judge": 0.5, "EM": 0.25, "F1 ≥ 0.5": 0.5}
    kappas = {(p["a"], p["b"]): p["kappa"] for p in ag["pairs"]}
    assert kappas[("model judge", "rubric judge")] == pytest.approx(0.5)
    assert kappas[("model judge", "EM")] == pytest.approx(0.2)  # p_o 1/2, p_e 3/8
    assert kappas[("model judge", "F1 ≥ 0.5")] == pytest.approx(0.5)
    assert kappas[("rubric judge", "EM")] == pytest.approx(0.5)
    assert kappas[("rubric judge", "F1 ≥ 0.5")] == pytest.approx(0.0)
    assert kappas[("EM", "F1 ≥ 0.5")] == pytest.approx(0.5)
    em = next(p for p in ag["pairs"] if p["b"] == "EM" and p["a"] == "model judge")
    assert em["confusion"] == [[1, 2], [0, 1]] and em["agreement"] == 0.5
    s = ag["scores"]
    # 0-3: p_o 3/4; p_e = 1/4*1/4 (level 1) + 1/2*1/2 (level 3) = 5/16; kappa = (3/4 - 5/16) / (11/16) = 7/11
    assert s["kappa"] == pytest.approx(7 / 11)
    assert s["confusion"] == [[0, 0, 0, 0], [0, 1, 0, 0], [1, 0, 0, 0], [0, 0, 0, 2]]
    assert (s["model_mean"], s["rubric_mean"]) == (2.25, 1.75)
    for p in ag["pairs"]:
        assert p["ci"] is None or p["ci"][0] <= p["ci"][1]
    assert ag["by_condition"] == {"c": {"n": 4, "correct": {"model judge": 0.75, "rubric judge": 0.5, "EM": 0.25,
                                                            "F1 ≥ 0.5": 0.5}, "model_mean": 2.25, "rubric_mean": 1.75}}
    md = J.render(ag, "qwen (Q4_K_M, sha256 cc324af070c2)")
    assert "| c | 4 | 75.0% | 50.0% | 25.0% | 50.0% | 2.25 | 1.75 |" in md
    assert "| **all** | 4 | 75.0% | 50.0% | 25.0% | 50.0% | 2.25 | 1.75 |" in md
    assert "## Judge agreement" in md and "- **model judge**: qwen (Q4_K_M, sha256 cc324af070c2) (0-3 rubric prompt)" in md
    assert "| model judge vs EM | 4 | 50.0% | 0.200" in md
    assert "| EM | 1 | 2 | 0 | 1 |" in md


def test_binary_judge_runs_and_nothing_without_a_model_judgement():
    bin_samples = [{**s, "judge": None, "binary_judge": {"correct": s["judge"]["score"] >= 2}}
                   for s in SAMPLES[:4]]
    ag = J.compute(bin_samples, "longmemeval")
    assert ag["scale"] == "binary" and "scores" not in ag
    assert "| **all** | 4 | 75.0% | 75.0% | 25.0% | 50.0% |" in J.render(ag, "qwen")
    # rubric binary label (llm-mock): p1 F1 1 -> CORRECT; p2 abstains -> WRONG; p3 F1 1/2 -> CORRECT; p4 F1 0.4 but
    # the gold's stems are all in the answer -> CORRECT
    assert ag["positive_rate"]["rubric judge"] == 0.75
    assert J.compute([{k: v for k, v in s.items() if k != "judge"} for s in SAMPLES], "cortex-v1") is None


def _run_dir(tmp_path, judge: dict) -> RunDir:
    rd = RunDir(tmp_path / "run")
    rd.write_run({"run_id": "r", "suite": "cortex-v1", "options": {}, "seed": 0, "judge": judge,
                  "llm": {"model": "qwen", "offline_mock": False}})
    with open(rd.samples_path, "w") as f:
        for s in SAMPLES[:4]:
            f.write(json.dumps({**s, "status": "ok", "key": f"c|{s['probe_id']}", "category": "A", "meta": {},
                                "context_tokens": 0}) + "\n")
    return rd


def test_finalize_adds_the_section_only_for_a_model_judge(tmp_path):
    rd = _run_dir(tmp_path / "model", {"model": "qwen", "offline_mock": False, "sha256": "cc324af070c2" + "0" * 52,
                                       "quantization": "Q4_K_M", "label": "LLM judge qwen", "passes": 1})
    metrics, _ = finalize(rd)
    assert metrics["judge_agreement"]["n"] == 4
    assert "## Judge agreement" in (rd.path / "report.md").read_text()
    rd = _run_dir(tmp_path / "mock", {"model": "memrig-llm-mock", "offline_mock": True, "passes": 1})
    metrics, _ = finalize(rd)
    assert "judge_agreement" not in metrics and "Judge agreement" not in (rd.path / "report.md").read_text()


def test_a_sample_without_a_binary_label_is_missing_not_wrong():
    # p1-p3 carry a binary label (CORRECT, WRONG, CORRECT), p4 only a 0-3 score: a mixed run is compared on the
    # binary label over p1-p3, with p4 counted as missing (it used to count as a WRONG label).
    mixed = [{**SAMPLES[0], "judge": None, "binary_judge": {"correct": True}},
             {**SAMPLES[1], "judge": None, "binary_judge": {"correct": False}},
             {**SAMPLES[2], "judge": None, "binary_judge": {"correct": True}}, SAMPLES[3]]
    ag = J.compute(mixed, "cortex-v1")
    assert ag["scale"] == "binary" and ag["n"] == 3 and ag["missing"] == 1
    assert ag["positive_rate"]["model judge"] == pytest.approx(2 / 3)
    assert "1 answers judged without a binary label are left out" in J.render(ag, "qwen")
    assert J.compute(SAMPLES, "cortex-v1")["missing"] == 0
