"""LongMemEval end to end on a crafted oracle file (no real data needed): what load() turns the file into (user
turns, gold turns and sessions, skipped questions), what run_probe records, and the numbers score() and render()
print, hand-computed. tests/test_golden_suites.py pins the retrieval maths on scored samples; this file pins the
wiring around it."""

from __future__ import annotations

import asyncio
import json
import math
from datetime import UTC, datetime
from types import SimpleNamespace

import pytest

from services.common import prompts
from services.coordinator.suites import longmemeval as L
from services.coordinator.suites.longmemeval import KS, LongMemEvalSuite
from tests.fixtures_golden import LME_SAMPLES, lme_sample

# four of memrig's 400 dev question ids (suites/data/longmemeval_dev_ids.txt), in sorted order: only dev ids load
Q1, Q2, Q3, Q4 = "001be529", "031748ae_abs", "0862e8bf", "09ba9854"


def _turn(role: str | None, content: str, has_answer: bool = False) -> dict:
    t = {"content": content, "has_answer": has_answer}
    if role is not None:
        t["role"] = role
    return t


ORACLE = [
    {  # duplicate session s1 in the middle, an empty turn inside s1, gold on a user turn of an answer session
        "question_id": Q1, "question_type": "multi-session", "question": "Where do I live?", "answer": "Lisbon",
        "question_date": "2023/05/30 (Tue) 09:15",
        "haystack_session_ids": ["s1", "s2", "s1", "s5"],
        "haystack_dates": ["2023/05/01 (Mon) 10:00", "2023/05/02 (Tue) 11:00", "2023/05/03 (Wed) 12:00",
                           "2023/05/04 (Thu) 13:00"],
        "haystack_sessions": [
            [_turn("user", "I moved to Lisbon", True), _turn("assistant", "Nice"), _turn("user", "  "),
             _turn("user", "It is sunny")],
            [_turn("user", "I like tea"), _turn("assistant", "Green or black?", True)],  # gold on the assistant side
            [_turn("user", "duplicate, ignored", True)],
            [_turn("user", "Unrelated chat")],
        ],
        "answer_session_ids": ["s1", "s2"],
    },
    {  # abstention: its gold is not scored
        "question_id": Q2, "question_type": "temporal-reasoning", "question": "When did I buy a boat?",
        "answer": "never", "question_date": "2023/06/01 (Thu) 08:00",
        "haystack_session_ids": ["s3"], "haystack_dates": ["2023/05/20 (Sat) 18:30"],
        "haystack_sessions": [[_turn("user", "I bought a car", True)]], "answer_session_ids": ["s3"],
    },
    {  # an answer-bearing user turn outside the answer sessions: no user-side gold
        "question_id": Q3, "question_type": "knowledge-update", "question": "What is my job?", "answer": "chef",
        "question_date": "2023/07/01 (Sat) 08:00",
        "haystack_session_ids": ["s4", "s6"], "haystack_dates": ["2023/06/10 (Sat) 10:00", "2023/06/11 (Sun) 10:00"],
        "haystack_sessions": [[_turn("user", "I cook for a living", True)],
                              [_turn("user", "I like my job")]],
        "answer_session_ids": ["s6"],
    },
    {  # a type left out by the types option below
        "question_id": Q4, "question_type": "single-session-user", "question": "Pet?", "answer": "cat",
        "question_date": "2023/07/02 (Sun) 08:00", "haystack_session_ids": ["s7"],
        "haystack_dates": ["2023/06/12 (Mon) 10:00"], "haystack_sessions": [[_turn("user", "My cat", True)]],
        "answer_session_ids": ["s7"],
    },
]

TYPES = "multi-session,temporal-reasoning,knowledge-update"


def _load(tmp_path, oracle=ORACLE, **opts):
    (tmp_path / "lme.json").write_text(json.dumps(oracle))
    suite = LongMemEvalSuite({"data_dir": str(tmp_path), "file": "lme.json", "full": True, "types": TYPES, **opts},
                             seed=0)
    return suite, suite.load()


def test_defaults_are_the_documented_run():
    assert LongMemEvalSuite.defaults == {
        "data_dir": None, "variant": "auto", "file": "", "questions": 30, "full": False,
        "types": ",".join(L.TYPES), "top_k": 10, "mode": "fast", "answer": True}
    assert KS == (1, 3, 5, 10, 30, 50)


def test_load_turns_the_oracle_file_into_probes_and_corpora(tmp_path):
    _suite, data = _load(tmp_path)
    assert [p.id for p in data.probes] == [Q1, Q2, Q3]  # q4's type is not selected; sorted by id
    q1, q2, q3 = data.probes
    # s1's empty turn is dropped but keeps its number; the repeated s1 is ignored; s5 after it still counts
    b1 = data.corpora[Q1]
    assert [s.session_id for s in b1.sessions] == ["s1", "s2", "s5"]
    assert [(m.id, m.role) for m in b1.sessions[0].messages] == [("s1_1", "user"), ("s1_2", "assistant"),
                                                                 ("s1_4", "user")]
    assert b1.sessions[0].started_at == datetime(2023, 5, 1, 10, 0, tzinfo=UTC)
    assert q1.meta["user_turns"] == ["s1_1", "s1_4", "s2_1", "s5_1"]
    assert q1.evidence_ids == ["s1_1"]  # s2's answer is on the assistant side: not user-side gold
    assert q1.meta["gold_sessions"] == ["s1"]
    assert q1.meta["sessions"] == ["s1", "s2", "s5"] and q1.meta["abstention"] is False
    assert q1.reference_time == datetime(2023, 5, 30, 9, 15, tzinfo=UTC)
    assert (q1.namespace, q1.category, q1.ground_truth) == (Q1, "multi-session", "Lisbon")
    assert q2.meta["abstention"] is True and q2.evidence_ids == ["s3_1"]
    assert q3.evidence_ids == [] and q3.meta["gold_sessions"] == []  # s4 is not an answer session
    assert data.info["retrieval_skipped"] == {"abstention": 1, "no_user_gold": 1}
    assert data.info["questions"] == 3
    _suite, only_gold = _load(tmp_path, types="multi-session")
    assert only_gold.info["retrieval_skipped"] == {"abstention": 0, "no_user_gold": 0}


def test_the_suite_is_registered():
    from services.coordinator.suites.registry import get_suite

    assert get_suite("longmemeval") is LongMemEvalSuite


def test_a_turn_without_a_known_role_is_an_error_naming_it(tmp_path):
    bad = json.loads(json.dumps(ORACLE[:1]))
    bad[0]["haystack_sessions"][0][1]["role"] = "system"
    with pytest.raises(ValueError, match=rf"{Q1}: haystack_sessions\[0\]\[1\]\.role 'system'"):
        _load(tmp_path, bad)
    del bad[0]["haystack_sessions"][0][1]["role"]
    with pytest.raises(ValueError, match=r"haystack_sessions\[0\]\[1\]\.role None"):
        _load(tmp_path, bad)


def test_haystack_lists_of_different_lengths_are_an_error(tmp_path):
    bad = json.loads(json.dumps(ORACLE[:1]))
    bad[0]["haystack_dates"].pop()
    with pytest.raises(ValueError, match=rf"{Q1}: haystack_session_ids, haystack_dates and haystack_sessions differ "
                                         r"in length \(4, 3, 4\)"):
        _load(tmp_path, bad)


def test_sampling_takes_the_asked_number_and_full_takes_all(tmp_path):
    _s, data = _load(tmp_path, full=False, questions=2, types=",".join(L.TYPES))
    assert len(data.probes) == 2
    _s, data = _load(tmp_path, full=True, types=",".join(L.TYPES))
    assert len(data.probes) == 4


def test_conditions_answer_or_retrieval_only():
    on = LongMemEvalSuite({"answer": True}, seed=0).conditions(["a", "b"], {})
    off = LongMemEvalSuite({"answer": False}, seed=0).conditions(["a"], {})
    assert [(c.name, c.answer) for c in on] == [("a", True), ("b", True)]
    assert [(c.name, c.answer) for c in off] == [("a", False)]


class _Ctx:
    """What run_probe calls: retrieval (records its top_k), context, answer and a judge that says CORRECT."""

    judge_passes = 1

    def __init__(self):
        self.top_k = None
        self.judge_llm = SimpleNamespace(chat=self._judge)

    async def retrieve(self, backend, probe, top_k):
        self.top_k = top_k
        return {"memories": [{"id": "m1", "score": 0.5, "evidence_ids": ["s1_1"], "text": "x" * 300}],
                "latency_ms": 3.0, "server_ms": 2.0, "formatted_context": "one two three"}

    async def answer(self, question, blocks):
        self.blocks = blocks
        return {"answer": "Lisbon"}

    async def _judge(self, messages, temperature=0.0):
        if messages[0]["content"].startswith(prompts.JUDGE_MARKER):
            return SimpleNamespace(text='{"score": 3, "reason": "ok"}')
        return SimpleNamespace(text='{"label": "CORRECT"}')


def test_run_probe_retrieves_at_the_deepest_k_and_answers_only_when_asked():
    from services.common.tokens import count_tokens

    suite = LongMemEvalSuite({}, seed=0)
    probe = SimpleNamespace(question="Where?", ground_truth="Lisbon")
    ctx = _Ctx()
    body = asyncio.run(suite.run_probe(ctx, probe, L.C.retrieval_conditions(["b"])[0]))
    assert ctx.top_k == 50
    mem = body["retrievals"]["b"]["memories"][0]
    assert len(mem["text"]) == 200  # texts kept to 200 characters
    assert body["context_tokens"] == count_tokens("one two three") and "answer" not in body
    ctx = _Ctx()
    body = asyncio.run(suite.run_probe(ctx, probe, L.C.answer_conditions(["b"])[0]))
    assert body["retrievals"]["b"]["memories"][0]["evidence_ids"] == ["s1_1"]
    # the answer reads the same retrieval cut at the headline budget (all of it here: 3 tokens < 1,000)
    assert ctx.blocks == ["one two three"] and body["context_tokens"] == count_tokens("one two three")
    assert body["answer"] == "Lisbon" and L.judges.judged_correct(body) is True


def _two_conditions():
    """LME_SAMPLES as `openclaw` and a second backend `other` that retrieves nothing; categories built at run
    time (as json.loads would give them), not literals."""
    out = []
    for s in LME_SAMPLES:
        a = json.loads(json.dumps(s))
        b = json.loads(json.dumps(s))
        b["condition"], b["retrievals"] = "other", {"other": {"memories": [], "latency_ms": None, "server_ms": None}}
        b["binary_judge"] = {"correct": False}
        del b["context_tokens"]
        out += [a, b]
    return out


def test_score_wiring_token_spend_latency_types_and_comparisons():
    m = LongMemEvalSuite({}, seed=0)
    m._info = {"questions": 4, "retrieval_skipped": {"abstention": 1, "no_user_gold": 1}}
    res = m.score(_two_conditions())
    o, x = res["conditions"]["openclaw"], res["conditions"]["other"]
    assert sorted(int(k.split("@")[1]) for k in o["overall"] if k.startswith("turn_recall_any@")) == list(KS)
    assert o["overall"]["token_spend"]["mean"] == pytest.approx(4.0)
    assert x["overall"]["token_spend"]["mean"] == pytest.approx(0.0)  # no context_tokens recorded: 0 tokens
    assert o["latency"]["p50_ms"] == pytest.approx(5.0) and x["latency"]["n"] == 0  # None latencies left out
    # memory-rank recall: q1's gold sB_1 is cited by the 3rd memory, q2's pair by the 1st and 3rd
    for level in ("turn", "session"):
        assert o["overall"][f"{level}_memory_recall_all@1"]["mean"] == pytest.approx(0.0)
        assert o["overall"][f"{level}_memory_recall_all@3"]["mean"] == pytest.approx(1.0)
        assert o["overall"][f"{level}_memory_recall_all@3"]["n"] == 2
    # the official turn->session figure: q1's user turns sA_1, sB_1, sC_1 rank sessions sA, sB, sC; gold sB
    assert o["overall"]["t2s_recall_any@1"]["mean"] == pytest.approx(0.5)  # q2's first turn sE_3 is gold
    assert o["overall"]["t2s_recall_all@5"]["mean"] == pytest.approx(1.0)
    assert o["overall"]["t2s_recall_any@5"]["n"] == 2
    # by type: the filter keeps each question in its own type
    assert o["by_type"]["multi-session"]["qa_accuracy"]["n"] == 2
    assert o["by_type"]["temporal-reasoning"]["qa_accuracy"]["mean"] == pytest.approx(0.0)
    assert x["by_type"]["knowledge-update"]["qa_accuracy"]["mean"] == pytest.approx(0.0)
    assert res["baseline"] == "openclaw"
    comps = {c["metric"]: c for c in res["comparisons"]["other"]["comparisons"]}
    assert {k: c["higher_is_better"] for k, c in comps.items()} == {
        "qa_accuracy": True, "session_recall_all@5": True, "session_ndcg_any@5": True, "turn_recall_all@10": True,
        "token_spend": False, "latency_ms": False}
    assert comps["qa_accuracy"]["winner"] == "a"  # openclaw 3/4 vs 0/4


def test_score_without_a_baseline_has_no_comparisons():
    res = LongMemEvalSuite({}, seed=0)
    res._info = {}
    one = [lme_sample("q1", "multi-session", ["sA"], ["sA_1"], ["sA_1"], [["sA_1"]], True)]
    assert res.score(one)["comparisons"] == {}  # a single condition is its own baseline: nothing to compare


def test_render_prints_the_scored_numbers():
    s = LongMemEvalSuite({}, seed=0)
    s._info = {"questions": 4, "retrieval_skipped": {"abstention": 1, "no_user_gold": 1}}
    md = s.render(s.score(_two_conditions()))
    ndcg3 = (1.0 + (1.0 + 1.0 / math.log2(3)) / 2.0) / 2.0  # 0.91 (tests/test_golden_suites.py)
    n3 = f"{ndcg3:.2f}"
    # session level at k = 1, 3, 5, 10, 30, 50: any/all/ndcg
    assert f"| openclaw | 0.50/0.00/0.50 | 1.00/1.00/{n3} | 1.00/1.00/{n3} | 1.00/1.00/{n3} | 1.00/1.00/{n3} | " \
           f"1.00/1.00/{n3} |" in md
    assert "| backend (any/all/ndcg) | @1 | @3 | @5 | @10 | @30 | @50 |" in md
    assert "| other | 0.00/0.00/0.00 | 0.00/0.00/0.00 |" in md
    # evidence recall_all / memory-rank recall_all at turn and session level, K = 1, 5, 10
    assert "| backend (evidence / memory rank) | turn @1 | turn @5 | turn @10 | session @1 | session @5 | " \
           "session @10 |" in md
    assert "| openclaw | 0.00 / 0.00 | 1.00 / 1.00 | 1.00 / 1.00 | 0.00 / 0.00 | 1.00 / 1.00 | 1.00 / 1.00 |" in md
    # memrig's session figure beside the official t2s one, @5 and @10
    o = s.score(_two_conditions())["conditions"]["openclaw"]["overall"]
    t2s5 = "/".join(f"{o[f't2s_{n}@5']['mean']:.2f}" for n in ("recall_any", "recall_all", "ndcg_any"))
    t2s10 = "/".join(f"{o[f't2s_{n}@10']['mean']:.2f}" for n in ("recall_any", "recall_all", "ndcg_any"))
    assert f"| openclaw | 1.00/1.00/{n3} | {t2s5} | 1.00/1.00/{n3} | {t2s10} |" in md
    # headline: 4 questions, token spend 4 (0 digits), p50 5.0 ms
    # no budget account in these samples (an older run's): recall at the budget is "—", not 0
    assert "| openclaw | 4 | — | 0.750 [" in md and "| 4 | 5.0 |" in md
    assert "| other | 4 | — | 0.000 [" in md and "| 0 | — |" in md
    assert "| backend | knowledge-update | multi-session | temporal-reasoning |" in md
    assert "Intervals: percentile bootstrap over questions" in md
    assert "Data: 4 questions; retrieval averages skip 1 abstention and 1 no-user-gold questions." in md
    assert "Scorecard" in md


def test_render_leaves_out_what_it_was_not_given():
    s = LongMemEvalSuite({}, seed=0)
    s._info = {}
    metrics = s.score(_two_conditions())
    metrics["data"], metrics["statistics"], metrics["comparisons"] = {}, {}, {}
    md = s.render(metrics)
    assert "Data:" not in md and "Intervals:" not in md and "Scorecard" not in md
    metrics["data"] = {"questions": 2}
    assert "skip 0 abstention and 0 no-user-gold questions." in s.render(metrics)


# -- variants, gzip and the dev split ---------------------------------------------------------------------------
def _s_style(oracle=ORACLE):
    """The crafted file as an S-style haystack: every question gets a session outside its answer sessions."""
    out = json.loads(json.dumps(oracle))
    for q in out:
        q["haystack_session_ids"].append(f"noise_{q['question_id']}")
        q["haystack_dates"].append("2023/04/01 (Sat) 09:00")
        q["haystack_sessions"].append([_turn("user", "small talk"), _turn("assistant", "indeed")])
    return out


def test_questions_outside_the_dev_split_are_left_out_and_counted_even_with_full(tmp_path):
    held = json.loads(json.dumps(ORACLE[0]))
    held["question_id"] = "ffffffff"  # not one of the 400 dev ids
    held_abs = json.loads(json.dumps(ORACLE[1]))
    held_abs["question_id"] = "ffffffff_abs"
    assert "ffffffff" not in L.dev_question_ids() and len(L.dev_question_ids()) == 400
    _s, data = _load(tmp_path, [*ORACLE, held, held_abs], full=True, types=",".join(L.TYPES))
    assert [p.id for p in data.probes] == [Q1, Q2, Q3, Q4]
    assert "ffffffff" not in data.corpora and data.info["held_out_left_out"] == 2
    # sampling never reaches them either: a sample of 4 from 6 questions is the 4 dev ones
    _s, data = _load(tmp_path, [held, *ORACLE, held_abs], full=False, questions=4, types=",".join(L.TYPES))
    assert sorted(p.id for p in data.probes) == [Q1, Q2, Q3, Q4] and data.info["held_out_left_out"] == 2


def test_the_variant_is_read_off_the_file_and_a_contradicting_one_is_refused(tmp_path):
    from services.coordinator.suites.base import OptionError

    oracle = [dict(q, haystack_session_ids=q["haystack_session_ids"]) for q in json.loads(json.dumps(ORACLE))]
    for q in oracle:  # a true oracle file: the haystack is the answer sessions
        q["answer_session_ids"] = sorted(set(q["haystack_session_ids"]))
    _s, data = _load(tmp_path, oracle)
    assert (data.info["variant"], data.info["file"]) == ("oracle", "lme.json")
    _s, data = _load(tmp_path, _s_style())
    assert data.info["variant"] == "s" and data.info["held_out_left_out"] == 0
    _s, data = _load(tmp_path, _s_style(), variant="s")
    assert data.info["variant"] == "s"
    with pytest.raises(OptionError, match=r"options\.variant: oracle asked, but .*lme\.json is LongMemEval S"):
        _load(tmp_path, _s_style(), variant="oracle")
    with pytest.raises(OptionError, match=r"options\.variant: s asked, but .* is LongMemEval oracle"):
        _load(tmp_path, oracle, variant="S")
    with pytest.raises(OptionError, match=r"options\.variant: expected one of auto, oracle, s; got 'm'"):
        _load(tmp_path, oracle, variant="m")


def test_variant_picks_the_default_file_and_a_missing_s_file_names_the_make_target(tmp_path):
    from services.coordinator.suites.base import SuiteUnavailable

    (tmp_path / "longmemeval").mkdir()
    (tmp_path / "longmemeval" / "longmemeval_oracle_dev.json").write_text(json.dumps(ORACLE))
    data = LongMemEvalSuite({"data_dir": str(tmp_path), "full": True}, seed=0).load()
    assert data.info["file"] == "longmemeval/longmemeval_oracle_dev.json" and len(data.probes) == 4
    with pytest.raises(SuiteUnavailable, match=r"longmemeval_s_cleaned\.json not found.*make data-longmemeval-s"):
        LongMemEvalSuite({"data_dir": str(tmp_path), "variant": "s"}, seed=0).load()
    (tmp_path / "longmemeval" / "longmemeval_s_cleaned.json").write_text(json.dumps(_s_style()))
    data = LongMemEvalSuite({"data_dir": str(tmp_path), "variant": "s", "full": True}, seed=0).load()
    assert (data.info["variant"], data.info["file"]) == ("s", "longmemeval/longmemeval_s_cleaned.json")


def test_a_gzip_file_loads_like_the_plain_one(tmp_path):
    import gzip

    with gzip.open(tmp_path / "lme.json.gz", "wt", encoding="utf-8") as f:
        json.dump(_s_style(), f)
    gz = LongMemEvalSuite({"data_dir": str(tmp_path), "file": "lme.json.gz", "full": True, "types": TYPES}).load()
    _s, plain = _load(tmp_path, _s_style())
    assert [p.id for p in gz.probes] == [p.id for p in plain.probes] == [Q1, Q2, Q3]
    assert gz.corpora[Q1] == plain.corpora[Q1] and gz.info["file"] == "lme.json.gz"
    (tmp_path / "bad.json").write_text(json.dumps({"question_id": "x"}))
    with pytest.raises(ValueError, match=r"bad\.json: expected a JSON list of questions, got a dict"):
        LongMemEvalSuite({"data_dir": str(tmp_path), "file": "bad.json"}).load()


def test_render_names_the_variant_the_file_and_the_held_out_count():
    s = LongMemEvalSuite({}, seed=0)
    s._info = {"questions": 4, "variant": "s", "file": "longmemeval/x.json.gz", "held_out_left_out": 3,
               "retrieval_skipped": {"abstention": 1, "no_user_gold": 1}}
    md = s.render(s.score(_two_conditions()))
    assert md.startswith("## LongMemEval (S)\n\nData: `longmemeval/x.json.gz` (LongMemEval S); memrig's dev questions "
                         "only, 3 held-out question(s) of the file left out, never scored.")
    s._info = {}
    assert s.render(s.score(_two_conditions())).startswith("## LongMemEval (oracle)\n\nQA accuracy")


def test_render_says_which_bm25_each_figure_is():
    samples = _two_conditions()
    for smp in samples:
        new = {"openclaw": "bm25", "other": "bm25-official"}[smp["condition"]]
        smp["retrievals"] = {new: smp["retrievals"][smp["condition"]]}
        smp["condition"] = new
    s = LongMemEvalSuite({}, seed=0)
    s._info = {}
    md = s.render(s.score(samples))
    assert "Which BM25: `bm25` is the rig's BM25 (regex tokens \\w\\w+ lower-cased, English stopwords out" in md
    assert "; `bm25-official` is BM25 as LongMemEval's own code runs it (text.split(\" \") with case kept" in md
    assert "Which BM25" not in s.render(s.score(_two_conditions()))
