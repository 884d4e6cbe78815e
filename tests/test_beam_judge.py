"""BEAM's nugget judge (judges.nugget_judge, suites/beam.py `beam_judge`) and its agreement with a reader's labels
(services/coordinator/beam_judge_agreement.py): parsing hand-written replies, the median across passes, the
question's mean and the per-ability aggregation on the hand-made three-conversation file (tests/fixtures_beam.py)
with a scripted judge, the labels loader's errors, and the agreement figures, all against values computed by hand."""

from __future__ import annotations

import asyncio
import json
import re
from types import SimpleNamespace

import pytest

from services.adapters.client import InProcessBackendClient
from services.common import prompts
from services.common.llm_client import DEFAULT_MOCK_MODEL, ChatResult
from services.coordinator import beam_judge_agreement as BJ
from services.coordinator import judges
from services.coordinator.suites.beam import BeamSuite
from tests.fixtures_beam import ScriptedBackend, beam_file
from tests.fixtures_suites import FakeLLM, run_inprocess


# -- parsing -----------------------------------------------------------------------------------------------------
def test_question_replies_parse_to_one_score_per_nugget():
    assert judges.parse_nugget_scores('{"scores": [1, 0.5, 0]}', 3) == [1.0, 0.5, 0.0]
    assert judges.parse_nugget_scores('Here: {"scores": ["0.5", 1.0]} done', 2) == [0.5, 1.0]
    assert judges.parse_nugget_scores("[0, 1]", 2) == [0.0, 1.0]  # a bare list
    # an entry out of 0 / 0.5 / 1 is unjudged, the others stand
    assert judges.parse_nugget_scores('{"scores": [1, 2, 0.7, true, "yes"]}', 5) == [1.0, None, None, None, None]
    # wrong length or nothing readable: the whole reply is unjudged (None), never zeros
    assert judges.parse_nugget_scores('{"scores": [1, 0]}', 3) is None
    assert judges.parse_nugget_scores("The answer covers the first point.", 1) is None
    assert judges.parse_nugget_scores('{"score": 1}', 1) is None
    assert judges.parse_nugget_scores("", 1) is None


def test_one_nugget_replies_parse_or_are_refused():
    assert judges.parse_nugget_score('{"score": 0.5}') == 0.5
    assert judges.parse_nugget_score('{"score": 1, "why": "stated"}') == 1.0
    assert judges.parse_nugget_score(" 0 ") == 0.0
    assert judges.parse_nugget_score('{"score": 3}') is None
    assert judges.parse_nugget_score('{"score": -1}') is None
    assert judges.parse_nugget_score("0.5 because point 1 is partly there") is None
    assert judges.parse_nugget_score("yes") is None
    assert judges.parse_nugget_score("{not json}") is None


def test_median_across_passes_and_the_questions_mean():
    assert judges.nugget_median([1.0, 0.0, 0.5]) == 0.5  # a vote would tie three ways
    assert judges.nugget_median([1.0, 0.0]) == 0.0  # even: the lower middle (sceptical)
    assert judges.nugget_median([None, 1.0, 1.0]) == 1.0  # an unread pass is left out
    assert judges.nugget_median([None, None]) is None
    assert judges.nugget_mean([1.0, 0.5, 0.0]) == 0.5
    assert judges.nugget_mean([1.0, None]) is None  # one unjudged nugget: the question is unjudged
    assert judges.nugget_mean([]) is None


# -- the judge's calls -------------------------------------------------------------------------------------------
class ScriptedJudge(FakeLLM):
    """FakeLLM's answers; nugget judging from fixed replies: `by_question[question]` (question mode; a list = one
    reply per pass, by seed) or `by_point[point]` (one-nugget mode)."""

    def __init__(self, by_question=None, by_point=None, model="scripted-judge"):
        super().__init__(model)
        self.by_question, self.by_point = by_question or {}, by_point or {}
        self.judge_calls: list[dict] = []

    async def chat(self, messages, temperature: float = 0.0, **kw) -> ChatResult:
        system, user = messages[0]["content"], messages[-1]["content"]
        if not system.startswith(prompts.NUGGET_JUDGE_MARKER):
            return await super().chat(messages, temperature=temperature, **kw)
        self.judge_calls.append({"system": system, "user": user, "temperature": temperature, **kw})
        q = re.search(r"^Question: (.*)$", user, re.M).group(1)
        if system == prompts.NUGGET_JUDGE_ONE_SYSTEM:
            point = re.search(r"^1\. (.*)$", user, re.M).group(1)
            return ChatResult(self.by_point[point])
        reply = self.by_question[q]
        return ChatResult(reply[kw.get("seed") or 0] if isinstance(reply, list) else reply)


def test_one_call_per_question_lists_the_nuggets_and_records_the_replies():
    llm = ScriptedJudge({"q?": '{"scores": [1, 0.5, 0]}'})
    ctx = SimpleNamespace(judge_llm=llm, judge_passes=1, judge_temperature=0.0)
    r = asyncio.run(judges.nugget_judge(ctx, "q?", ["LLM response should state: a", "b", "c"], "ans",
                                        mode="question"))
    assert (r["score"], r["nuggets"], r["unjudged"], r["mode"]) == (0.5, [1.0, 0.5, 0.0], 0, "question")
    assert r["prompt"] == "NUGGET_JUDGE_SYSTEM" and r["prompt_id"] == judges.prompt_id(prompts.NUGGET_JUDGE_SYSTEM)
    (call,) = llm.judge_calls
    assert call["user"] == "Question: q?\nAnswer: ans\nPoints:\n1. LLM response should state: a\n2. b\n3. c"
    assert call["temperature"] == 0.0 and "seed" not in call


def test_one_call_per_nugget_and_an_unread_reply_is_unjudged_not_zero():
    llm = ScriptedJudge(by_point={"a": '{"score": 1}', "b": "I think so", "c": "0.5"})
    ctx = SimpleNamespace(judge_llm=llm, judge_passes=1, judge_temperature=0.0)
    r = asyncio.run(judges.nugget_judge(ctx, "q?", ["a", "b", "c"], "ans"))  # the default mode
    assert r["nuggets"] == [1.0, None, 0.5] and r["score"] is None and r["unjudged"] == 1
    assert len(llm.judge_calls) == 3 and r["prompt"] == "NUGGET_JUDGE_ONE_SYSTEM" and r["mode"] == "nugget"
    assert llm.judge_calls[1]["user"] == "Question: q?\nAnswer: ans\nPoints:\n1. b"
    with pytest.raises(ValueError, match="mode: 'both'"):
        asyncio.run(judges.nugget_judge(ctx, "q?", ["a"], "ans", mode="both"))


def test_three_passes_are_seeded_draws_and_each_nugget_takes_their_median():
    llm = ScriptedJudge({"q?": ['{"scores": [1, 1]}', '{"scores": [0, 1]}', "garbage"]})
    ctx = SimpleNamespace(judge_llm=llm, judge_passes=3, judge_temperature=0.0)
    r = asyncio.run(judges.nugget_judge(ctx, "q?", ["a", "b"], "ans", mode="question"))
    # nugget a: passes 1, 0 (the third unread) -> lower middle 0; nugget b: 1, 1 -> 1; mean 0.5
    assert r["passes"] == [[1.0, 1.0], [0.0, 1.0], [None, None]]
    assert r["nuggets"] == [0.0, 1.0] and r["score"] == 0.5
    assert [c["seed"] for c in llm.judge_calls] == [0, 1, 2]
    assert {c["temperature"] for c in llm.judge_calls} == {judges.SAMPLED_PASS_TEMPERATURE}
    assert r["seeds"] == [0, 1, 2]


# -- the suite: scripted judge replies on the three-conversation file ----------------------------------------------
P = "beam-100K-1:", "beam-500K-1:", "beam-1M-1:"
REPLIES = {  # probe -> the judge's reply; the fixture's nugget counts in brackets
    P[0] + "knowledge_update:0": '{"scores": [1]}',  # 1
    P[0] + "knowledge_update:1": '{"scores": [0.5]}',  # 0.5
    P[0] + "instruction_following:0": '{"scores": [0]}',  # 0
    P[0] + "abstention:0": '{"scores": [1]}',  # 1
    P[0] + "information_extraction:0": '{"scores": [1, 0.5]}',  # [2] 0.75
    P[1] + "contradiction_resolution:0": "The answer mentions both statements.",  # unreadable: unjudged
    P[1] + "contradiction_resolution:1": '{"scores": [2]}',  # out of range: unjudged
    P[1] + "event_ordering:0": '{"scores": [1, 0, 0.5]}',  # [3] 0.5
    P[1] + "event_ordering:1": '{"scores": [0]}',  # 0
    P[1] + "preference_following:0": '{"scores": [1]}',  # 1
    P[1] + "summarization:0": '{"scores": [1, 1, 1]}',  # [3] 1
    P[2] + "temporal_reasoning:0": '{"scores": [0.5, 0.5]}',  # [2] 0.5
    P[2] + "multi_session_reasoning:0": "[1]",  # 1
    P[2] + "knowledge_update:0": '{"scores": [0, 1]}',  # one nugget, two scores: unjudged
    P[2] + "abstention:0": '{"scores": [0.5]}',  # 0.5
}


@pytest.fixture(scope="module")
def judged(tmp_path_factory):
    """The suite with the judge in question mode (one scripted reply per question: the list parsing on real
    probes); the default one-nugget mode is the same nugget_judge with one call per nugget (tested above)."""
    root = beam_file(tmp_path_factory.mktemp("beam"))
    suite = BeamSuite({"data_dir": str(root), "conversations": 0, "answer": True}, seed=0)
    questions = {p.question: REPLIES[p.id] for p in suite.load().probes}
    llm = ScriptedJudge(questions)
    clients = {"scripted": InProcessBackendClient(ScriptedBackend())}
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(judges, "NUGGET_JUDGE_MODE", "question")
        samples = asyncio.run(run_inprocess(suite, clients, llm=llm, run_dir=tmp_path_factory.mktemp("run")))
    return suite, json.loads(json.dumps(samples)), llm


def test_the_default_is_one_call_per_nugget():
    # chosen on the reader's labels: the local model answered one-nugget lists with two scores
    assert judges.NUGGET_JUDGE_MODE == "nugget" and judges.NUGGET_JUDGE_PROMPT["nugget"] == "NUGGET_JUDGE_ONE_SYSTEM"


def test_every_answer_is_judged_and_its_question_scored_by_the_mean(judged):
    suite, samples, llm = judged
    assert len(llm.judge_calls) == 15  # one per question, every ability
    v = suite.per_probe(samples).values["scripted"]["beam_judge"]
    assert v == {P[0] + "knowledge_update:0": 1.0, P[0] + "knowledge_update:1": 0.5,
                 P[0] + "instruction_following:0": 0.0, P[0] + "abstention:0": 1.0,
                 P[0] + "information_extraction:0": 0.75,
                 P[1] + "contradiction_resolution:0": None, P[1] + "contradiction_resolution:1": None,
                 P[1] + "event_ordering:0": 0.5, P[1] + "event_ordering:1": 0.0,
                 P[1] + "preference_following:0": 1.0, P[1] + "summarization:0": 1.0,
                 P[2] + "temporal_reasoning:0": 0.5, P[2] + "multi_session_reasoning:0": 1.0,
                 P[2] + "knowledge_update:0": None, P[2] + "abstention:0": 0.5}
    s = next(x for x in samples if x["probe_id"] == P[1] + "contradiction_resolution:1")
    assert s["beam_judge"]["nuggets"] == [None] and s["beam_judge"]["raw"] == ['{"scores": [2]}']


def test_overall_and_per_ability_with_conversation_intervals(judged):
    suite, samples, _ = judged
    m = suite.score(samples)
    o = m["conditions"]["scripted"]
    bj = o["overall"]["beam_judge"]
    # 12 judged: (1 + 0.5 + 0 + 1 + 0.75) + (0.5 + 0 + 1 + 1) + (0.5 + 1 + 0.5) = 7.75
    assert bj["mean"] == pytest.approx(7.75 / 12) and (bj["n"], bj["units"]) == (12, 3)
    assert "over conversations" in bj["method"]
    ab = o["by_ability"]
    assert ab["knowledge_update"]["beam_judge"]["mean"] == pytest.approx(0.75)  # 1, 0.5 (KU2 unjudged)
    assert ab["knowledge_update"]["beam_judge"]["units"] == 1
    assert ab["abstention"]["beam_judge"]["mean"] == pytest.approx(0.75)  # 1 and 0.5: behaviour nuggets judged
    assert ab["abstention"]["beam_judge"]["units"] == 2
    assert ab["event_ordering"]["beam_judge"]["mean"] == pytest.approx(0.25)
    assert ab["instruction_following"]["beam_judge"]["mean"] == 0.0
    assert ab["contradiction_resolution"]["beam_judge"]["n"] == 0
    assert m["beam_judge_counts"] == {"scripted": {"judged": 12, "unjudged": 3, "unjudged_nuggets": 3}}
    pv = suite.per_probe(samples)
    assert pv.spec("beam_judge") == (True, "rate")
    assert BeamSuite.answer_metrics["beam_judge"] == "judge"
    assert suite.mocked_metrics(False, True) == {"beam_judge"}


def test_render_prints_the_judged_figures(judged):
    suite, samples, _ = judged
    md = suite.render(suite.score(samples))
    assert "### BEAM's nugget judging (each nugget 0 / 0.5 / 1 from the answer" in md
    assert f"| **overall** | {7.75 / 12:.3f} [" in md
    assert "| abstention | 0.750 [" in md
    assert "Judged / unjudged answers (unjudged nuggets): scripted 12 / 3 (3)." in md


def test_with_the_offline_mock_as_judge_nothing_is_judged(tmp_path):
    root = beam_file(tmp_path)
    suite = BeamSuite({"data_dir": str(root), "conversations": 0, "answer": True}, seed=0)
    llm = FakeLLM(model=DEFAULT_MOCK_MODEL)
    samples = asyncio.run(run_inprocess(suite, {"scripted": InProcessBackendClient(ScriptedBackend())}, llm=llm,
                                        run_dir=tmp_path / "run"))
    assert all("answer" in s and "beam_judge" not in s for s in samples)
    assert "beam_judge" not in suite.per_probe(samples).values["scripted"]
    assert "BEAM's nugget judging" not in suite.render(suite.score(samples))


# -- the labels and the agreement ----------------------------------------------------------------------------------
def _labels(tmp_path, lines):
    path = tmp_path / "labels.jsonl"
    path.write_text("\n".join(x if isinstance(x, str) else json.dumps(x) for x in lines) + "\n")
    return path


GOOD = {"id": "B01", "probe": "beam-100K-1:information_extraction:0", "candidate": "Flask and SQLite",
        "labels": [1, 0.5], "reason": "both named; the engine partly"}


def test_the_labels_load_joined_with_the_question_and_its_nuggets(tmp_path):
    root = beam_file(tmp_path)
    items = BJ.load_labels(_labels(tmp_path, [GOOD, {**GOOD, "id": "B02", "probe": "beam-1M-1:abstention:0",
                                                      "labels": [0]}]), root / "beam" / "beam_dev.json.gz")
    assert [i["id"] for i in items] == ["B01", "B02"]
    assert items[0]["ability"] == "information_extraction" and items[0]["conversation"] == "beam-100K-1"
    assert items[0]["nuggets"] == ["LLM response should state: Flask", "LLM response should mention: SQLite storage "
                                                                        "engine"]
    assert items[0]["labels"] == [1.0, 0.5] and items[1]["question"] == "Which font did the signup form use?"


@pytest.mark.parametrize("bad, message", [
    ("{not json", r"labels\.jsonl:2: not JSON"),
    ({k: v for k, v in GOOD.items() if k != "labels"}, r"labels\.jsonl:2: field 'labels' is missing"),
    ({**GOOD, "id": "B01"}, r"labels\.jsonl:2: field 'id': 'B01' .*appears twice"),
    ({**GOOD, "id": "B02", "probe": "beam-100K-1:information_extraction:7"},
     r"labels\.jsonl:2: field 'probe': 'beam-100K-1:information_extraction:7' is not a question"),
    ({**GOOD, "id": "B02", "labels": [1]}, r"labels\.jsonl:2: field 'labels': expected a list of 2 scores"),
    ({**GOOD, "id": "B02", "labels": [1, 0.7]}, r"labels\.jsonl:2: field 'labels\[1\]': 0\.7; expected 0, 0\.5 or 1"),
    ({**GOOD, "id": "B02", "labels": [1, True]}, r"labels\.jsonl:2: field 'labels\[1\]': True"),
    ({**GOOD, "id": "B02", "candidate": "  "}, r"labels\.jsonl:2: field 'candidate': expected a non-empty string"),
    ("[1, 2]", r"labels\.jsonl:2: expected an object"),
])
def test_a_malformed_label_line_names_its_line_and_field(tmp_path, bad, message):
    root = beam_file(tmp_path)
    with pytest.raises(ValueError, match=message):
        BJ.load_labels(_labels(tmp_path, [GOOD, bad]), root / "beam" / "beam_dev.json.gz")


def test_agreement_per_nugget_and_per_question_by_hand():
    items = [{"id": "A", "ability": "knowledge_update", "labels": [1.0, 0.0]},
             {"id": "B", "ability": "abstention", "labels": [0.5]},
             {"id": "C", "ability": "knowledge_update", "labels": [1.0, 1.0]}]
    scores = [[1.0, 0.5], [0.5], [None, 1.0]]
    r = BJ.agreement(items, scores, seed=0, n_resamples=200)
    # pairs (label, judge): (1,1) (0,0.5) (0.5,0.5) (1,1); C's first nugget unjudged
    assert (r["nuggets"], r["unrated_nuggets"]) == (4, 1)
    nu = r["nugget"]
    assert nu["agreement"] == 0.75
    # p_o 3/4; label marginals (1/4, 1/4, 1/2), judge (0, 1/2, 1/2): p_e = 1/8 + 1/4 = 3/8; (3/4 - 3/8) / (5/8)
    assert nu["kappa"] == pytest.approx(0.6)
    # quadratic weights (i-j)^2/4: observed 1/4 * 1/4; expected 1/32 + 1/8 + 1/32 + 1/16 = 1/4
    assert nu["weighted_kappa"] == pytest.approx(0.75)
    assert nu["confusion"] == [[0, 1, 0], [0, 1, 0], [0, 0, 2]]
    # questions with every nugget judged: A (0.5 vs 0.75), B (0.5 vs 0.5)
    q = r["question"]
    assert (q["n"], q["mean_abs_diff"], q["label_mean"], q["rater_mean"]) == (2, 0.125, 0.5, 0.625)
    assert q["pearson"] is None  # the labels' means are constant
    # knowledge update: A's two nuggets and C's judged one: labels 1, 0, 1; judge 1, 0.5, 1
    assert r["by_ability"]["knowledge_update"] == {"nuggets": 3, "agreement": pytest.approx(2 / 3),
                                                   "label_mean": pytest.approx(2 / 3),
                                                   "rater_mean": pytest.approx(2.5 / 3)}
    with pytest.raises(ValueError, match="scores: 2 rows for 3 items"):
        BJ.agreement(items, scores[:2])


def test_the_offline_rule_rates_content_nuggets_only():
    items = [{"ability": "knowledge_update", "candidate": "about two hundred fifty milliseconds now",
              "nuggets": ["LLM response should state: two hundred fifty milliseconds",
                          "LLM response should avoid: big frameworks", "LLM response should state: Redis cache"]},
             {"ability": "abstention", "candidate": "no idea", "nuggets": ["there is no information"]}]
    assert BJ.offline_scores(items) == [[1.0, None, 0.0], [None]]


def test_the_blind_sheet_drops_the_backend_and_keeps_one_answer_per_question():
    samples = [{"probe_id": f"c:ab:{i}", "condition": cond, "question": f"q{i}", "answer": f"{cond} says {i}",
                "meta": {"rubric": [f"n{i}"]}, "status": "ok"} for i in range(6) for cond in ("bm25", "openclaw")]
    sheet = BJ.blind_sheet(samples, seed=3)
    assert [r["id"] for r in sheet] == [f"B{i:02d}" for i in range(1, 7)]
    assert sorted(r["probe"] for r in sheet) == [f"c:ab:{i}" for i in range(6)]
    assert all(set(r) == {"id", "probe", "question", "nuggets", "answer"} for r in sheet)
    assert BJ.blind_sheet(samples, seed=3) == sheet  # the seed fixes the picks and the order
    assert [r["probe"] for r in sheet] != sorted(r["probe"] for r in sheet)  # shuffled
    every = BJ.blind_sheet(samples, seed=3, every=True)
    assert len(every) == 12 and sorted(r["answer"] for r in every) == sorted(s["answer"] for s in samples)


def test_model_scores_judge_each_labelled_answer_through_the_suites_judge():
    from services.coordinator.judge_agreement import JudgeSettings

    items = [{"question": "q1?", "nuggets": ["a", "b"], "candidate": "x"},
             {"question": "q2?", "nuggets": ["c"], "candidate": "y"}]
    llm = ScriptedJudge({"q1?": '{"scores": [0.5, 1]}', "q2?": "no idea"})
    scores, raw = asyncio.run(BJ.model_scores(items, JudgeSettings(llm), mode="question"))
    assert scores == [[0.5, 1.0], [None]] and raw == [['{"scores": [0.5, 1]}'], ["no idea"]]
    assert [c["user"].split("\n")[1] for c in llm.judge_calls] == ["Answer: x", "Answer: y"]
