"""Judges against human labels (`memrig judge-agreement --labels`): a six-item labelled set over a made-up
LoCoMo-format file, a scripted judge model, kappas and intervals worked out by hand, the labels file's checks, the
agreement record and the line suite reports print beside model-made QA figures."""

from __future__ import annotations

import asyncio
import json
import re

import pytest

from services.common import prompts
from services.coordinator import judge_agreement as J
from services.coordinator.judges import prompt_id

# A made-up conversation in LoCoMo's format (not LoCoMo data): six answerable questions and one of category 5.
QA = [
    {"question": "Where did Ann move?", "answer": "Alaska", "category": 4},
    {"question": "When did Ann move?", "answer": "7 May 2023", "category": 2},
    {"question": "What does Ann make?", "answer": "pottery", "category": 4},
    {"question": "Where does Bo live?", "answer": "Paris", "category": 4},
    {"question": "Which colours does Bo like?", "answer": "blue and green", "category": 4},
    {"question": "How many cats does Bo have?", "answer": "three cats", "category": 4},
    {"question": "What did Cy adopt?", "adversarial_answer": "a dog", "category": 5},
]
# id, qa index, candidate, human label, human 0-3, the scripted model's 0-3 score and binary label
ROWS = [
    ("A", 0, "Alaska", "correct", 3, 3, "CORRECT"),
    ("B", 1, "May 7, 2023", "correct", 3, 3, "CORRECT"),
    ("C", 2, "She makes ceramics", "correct", 2, 2, "WRONG"),
    ("D", 3, "London", "wrong", 0, 0, "WRONG"),
    ("E", 4, "not mentioned", "wrong", 1, 1, "WRONG"),
    ("F", 5, "two cats", "wrong", 0, 0, "CORRECT"),
]


@pytest.fixture
def files(tmp_path):
    data = tmp_path / "locomo.json"
    data.write_text(json.dumps([{"sample_id": "conv-x", "qa": QA, "conversation": {}}]))
    labels = tmp_path / "labels.jsonl"
    labels.write_text("".join(json.dumps({"id": i, "sample_id": "conv-x", "qa": q, "candidate": c, "label": h,
                                          "rubric": r, "reason": "test"}) + "\n"
                              for i, q, c, h, r, _, _ in ROWS))
    return labels, data


class ScriptedJudge:
    """The judge model: replies by prompt (0-3 or binary) and candidate, from ROWS; counts calls."""

    def __init__(self, cut_first: int = 0):
        self.by_answer = {c: (s, b) for _, _, c, _, _, s, b in ROWS}
        self.calls = 0
        self.max_tokens = []
        self.cut_first = cut_first  # replies to capped calls that come back with no score at all

    async def chat(self, messages, temperature=0.0, seed=None, max_tokens=None):
        self.calls += 1
        self.max_tokens.append(max_tokens)
        if max_tokens and self.cut_first:
            self.cut_first -= 1
            return type("R", (), {"text": "```"})()
        answer = re.search(r"^Answer: (.*)$", messages[1]["content"], re.M).group(1)
        score, label = self.by_answer[answer]
        if messages[0]["content"] == prompts.JUDGE_SYSTEM:
            return type("R", (), {"text": json.dumps({"score": score, "reason": "scripted"})})()
        assert messages[0]["content"] == prompts.BINARY_JUDGE_SYSTEM
        return type("R", (), {"text": json.dumps({"label": label})})()


def test_load_labels_joins_the_data(files):
    labels, data = files
    items = J.load_labels(labels, data)
    assert [i["id"] for i in items] == list("ABCDEF")
    assert items[1] == {"id": "B", "question_key": "conv-x:q1", "question": "When did Ann move?", "gold": "7 May 2023",
                        "category": 2, "candidate": "May 7, 2023", "human": True, "rubric": 3}


@pytest.mark.parametrize("patch, message", [
    ({"label": "maybe"}, "field 'label': 'maybe'"),
    ({"qa": 9}, "field 'qa': 9 is not an index"),
    ({"qa": 6}, "field 'qa': conv-x question 6 has no gold answer (category 5)"),
    ({"sample_id": "conv-y"}, "field 'sample_id': 'conv-y'"),
    ({"rubric": 4}, "field 'rubric': 4"),
    ({"category": 2}, "field 'category': 2, but the data says 4"),
    ({"candidate": " "}, "field 'candidate'"),
])
def test_bad_labels_name_the_line_and_field(files, patch, message):
    labels, data = files
    rec = {"id": "Z", "sample_id": "conv-x", "qa": 0, "candidate": "x", "label": "correct", **patch}
    labels.write_text(labels.read_text() + json.dumps(rec) + "\n")
    with pytest.raises(ValueError, match=re.escape(f"{labels}:7: {message}")):
        J.load_labels(labels, data)


def test_missing_field_and_duplicate_id(files):
    labels, data = files
    good = labels.read_text()
    labels.write_text(good + json.dumps({"id": "Z", "sample_id": "conv-x", "qa": 0, "label": "wrong"}) + "\n")
    with pytest.raises(ValueError, match="labels.jsonl:7: field 'candidate' is missing"):
        J.load_labels(labels, data)
    labels.write_text(good + good.splitlines()[0] + "\n")
    with pytest.raises(ValueError, match="labels.jsonl:7: field 'id': 'A' appears twice"):
        J.load_labels(labels, data)


def test_every_judge_against_the_labels_by_hand(files):
    labels, data = files
    items = J.load_labels(labels, data)
    llm = ScriptedJudge()
    res, raw = asyncio.run(J.measure(items, llm, n_resamples=200))
    assert llm.calls == 12 and raw["model 0-3"] == [3, 3, 2, 0, 1, 0]
    assert llm.max_tokens == [J.SCORE_TOKENS, None] * 6  # 0-3 calls capped (the score comes first), binary not
    j = res["judges"]
    assert list(j) == list(J.LABEL_JUDGES) and res["n"] == 6 and res["human_correct"] == 3
    # human [1,1,1,0,0,0]. Model 0-3 (>= 2): [1,1,1,0,0,0], perfect: kappa 1.
    assert j["model 0-3"]["kappa"] == pytest.approx(1.0) and j["model 0-3"]["false_rejections"] == []
    # Model binary [1,1,0,0,0,1]: p_o = 4/6, p_e = 1/2*1/2 + 1/2*1/2 = 1/2, kappa = (2/3 - 1/2) / (1/2) = 1/3;
    # it rejects C (correct) and accepts F (wrong).
    mb = j["model binary"]
    assert mb["kappa"] == pytest.approx(1 / 3) and mb["accuracy"] == pytest.approx(4 / 6)
    assert (mb["false_rejections"], mb["false_acceptances"]) == (["C"], ["F"])
    # EM (LoCoMo's: token sets after normalisation, so "may 7 2023" = "7 may 2023"): A and B, [1,1,0,0,0,0];
    # p_o = 5/6, p_e = 1/2*2/6 + 1/2*4/6 = 1/2, kappa = (5/6 - 1/2) / (1/2) = 2/3; rejects C.
    assert j["EM"]["kappa"] == pytest.approx(2 / 3) and j["EM"]["false_rejections"] == ["C"]
    # F1 >= 0.5: A 1, B {may,7,2023} both ways -> 1, C 0, D 0, E 0, F "two cat" vs "three cat" -> 1/2:
    # [1,1,0,0,0,1], the same table as the binary model: kappa 1/3.
    assert j["F1 ≥ 0.5"]["kappa"] == pytest.approx(1 / 3) and j["F1 ≥ 0.5"]["false_acceptances"] == ["F"]
    assert res["best"] == "model 0-3"
    lo, hi = mb["ci"]
    assert lo <= 1 / 3 <= hi and j["model 0-3"]["ci"] == [1.0, 1.0]
    # 0-3 against the human 0-3 scores: identical, kappa 1
    assert res["rubric_scores"]["n"] == 6 and res["rubric_scores"]["kappa"] == pytest.approx(1.0)
    md = J.render_labels(res, "scripted", "labels.jsonl", "ab" * 32, items)
    assert "| model 0-3 **(best)** | 1.000 [1.000, 1.000] | 100.0% | 50.0% | 0 | 0 |" in md
    assert "| model binary | 0.333 [" in md and "- model binary: FR C ('She makes ceramics'); FA F ('two cats')" in md


def test_one_model_judge_and_an_uncapped_retry(files):
    labels, data = files
    items = J.load_labels(labels, data)
    llm = ScriptedJudge(cut_first=1)  # the first capped reply has no score: asked again uncapped
    res, raw = asyncio.run(J.measure(items, llm, n_resamples=50, judges=("0-3",)))
    assert list(res["judges"]) == ["model 0-3", *J.LABEL_JUDGES[2:]] and "model binary" not in raw
    assert llm.max_tokens == [J.SCORE_TOKENS, None] + [J.SCORE_TOKENS] * 5 and raw["model 0-3"][0] == 3
    res, raw = asyncio.run(J.measure(items, ScriptedJudge(), n_resamples=50, judges=("binary",)))
    assert "model 0-3" not in res["judges"] and "rubric_scores" not in res
    with pytest.raises(ValueError, match="judges: 'x' is not a model judge"):
        asyncio.run(J.measure(items, ScriptedJudge(), judges=("x",)))


def test_against_labels_checks_lengths_and_ranks_by_kappa():
    items = [{"id": str(i), "human": h, "category": 4} for i, h in enumerate([1, 1, 0, 0])]
    with pytest.raises(ValueError, match=r"verdicts\['x'\]: 3 verdicts for 4 items"):
        J.against_labels(items, {"x": [1, 0, 0]})
    # "a" agrees 3/4 (kappa 1/2, as in test_judge_agreement's hand example), "b" perfectly: b is best
    res = J.against_labels(items, {"a": [1, 0, 0, 0], "b": [1, 1, 0, 0]}, n_resamples=50)
    assert res["judges"]["a"]["kappa"] == pytest.approx(0.5) and res["best"] == "b"
    # a judge that accepts everything: p_o = 1/2 = p_e, kappa 0
    assert J.against_labels(items, {"c": [1, 1, 1, 1]}, n_resamples=50)["judges"]["c"]["kappa"] == 0.0
    # both constant and equal: kappa undefined, no best
    same = [{"id": str(i), "human": 1, "category": 4} for i in range(3)]
    assert J.against_labels(same, {"c": [1, 1, 1]}, n_resamples=50)["best"] is None


def test_record_and_the_report_line(files, tmp_path):
    labels, data = files
    items = J.load_labels(labels, data)
    res, _ = asyncio.run(J.measure(items, ScriptedJudge(), n_resamples=200))
    ident = {"model": "qwen-local", "sha256": "cc" * 32, "quantization": "Q4_K_M"}
    digest = J.labels_digest(labels)
    rec = J.make_record(res, "labels.jsonl", digest, ident, "abc123", "memrig judge-agreement --labels labels.jsonl")
    assert rec["prompt_ids"] == {"model 0-3": prompt_id(prompts.JUDGE_SYSTEM),
                                 "model binary": prompt_id(prompts.BINARY_JUDGE_SYSTEM)}
    assert rec["n"] == 6 and rec["best"] == "model 0-3" and rec["judge_model"]["model"] == "qwen-local"
    path = J.record_path(labels)
    assert path.name == "labels.agreement.json"
    assert "not measured" in J.qa_judge_line(ident, "model 0-3", labels)  # no record yet
    path.write_text(json.dumps(rec))
    line = J.qa_judge_line(ident, "model 0-3", labels)
    assert line.startswith("judge: qwen-local JUDGE_SYSTEM, agrees with the human labels at kappa 1.000 [1.000, "
                           "1.000] (n=6, labels sha256 " + digest[:12])
    assert "memrig judge-agreement --labels" in line
    b = J.qa_judge_line(ident, "model binary", labels)
    assert "BINARY_JUDGE_SYSTEM, agrees with the human labels at kappa 0.333 [" in b
    # another model, another file digest, changed labels, a changed prompt id, llm-mock: never the figure
    assert "measured for qwen-local" in J.qa_judge_line({"model": "gpt-x"}, "model 0-3", labels)
    assert "measured for" in J.qa_judge_line({**ident, "sha256": "dd" * 32}, "model 0-3", labels)
    path.write_text(json.dumps({**rec, "prompt_ids": {"model 0-3": "000000000000"}}))
    assert "the prompt changed since" in J.qa_judge_line(ident, "model 0-3", labels)
    path.write_text(json.dumps(rec))
    labels.write_text(labels.read_text() + "\n")
    assert "the labels changed since" in J.qa_judge_line(ident, "model 0-3", labels)
    assert "no human-label agreement applies" in J.qa_judge_line({"model": "m", "offline_mock": True}, "model 0-3",
                                                                 labels)


def test_the_repo_labels_file_loads_when_the_data_is_here():
    from services.coordinator.suites.common import default_data_dir

    data = default_data_dir() / "locomo" / "locomo10_dev.json"
    if not data.exists():
        pytest.skip(f"{data} not here (the LoCoMo file is not shipped)")
    items = J.load_labels(J.DEFAULT_LABELS, data)
    assert len(items) >= 48
    for cat in (1, 2, 3, 4):
        assert sum(1 for i in items if i["category"] == cat) >= 12
    fresh = J.load_labels(J.DEFAULT_LABELS.with_name("judge_labels_locomo_fresh.jsonl"), data)
    assert len(fresh) >= 24 and not {i["question_key"] for i in fresh} & {i["question_key"] for i in items}
