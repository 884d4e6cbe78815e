"""LoCoMo end to end on a crafted locomo10-format file and a locomo-audit directory (no real data needed): the
corpora and probes load() builds (speakers, photos, duplicate turns, evidence repairs, audit corrections,
categories, sampling), what run_probe sends and records, and the rendered report, hand-computed.
tests/test_golden_suites.py pins the F1/recall maths on scored samples; this file pins the wiring around it."""

from __future__ import annotations

import asyncio
import json
from datetime import UTC, datetime, timedelta
from types import SimpleNamespace

import pytest

from services.common import prompts
from services.coordinator.suites import common as C
from services.coordinator.suites import locomo as L
from services.coordinator.suites.locomo import LocomoSuite
from tests.fixtures_golden import locomo_samples

CONV_A = {  # upstream index 0 ("conv-26"), so audit file errors_conv_0.json corrects it
    "sample_id": "conv-26",
    "conversation": {
        "speaker_a": "Ann", "speaker_b": "Bob",
        "session_1_date_time": "1:56 pm on 8 May, 2023",
        "session_1": [{"speaker": "Ann", "dia_id": "D1:1", "text": "I adopted a cat."},
                      {"speaker": "Bob", "dia_id": "D1:2", "text": "", "blip_caption": "a grey cat"},
                      {"speaker": "Bob", "dia_id": "D1:3", "text": "   "},
                      {"speaker": "Ann", "dia_id": "D1:1", "text": "duplicate id, dropped"},
                      {"speaker": "Ann", "dia_id": "D1:4", "text": "Her name is Mia."}],
        "session_2_date_time": "10:04 am on 12 June, 2023",
        "session_2": [{"speaker": "Ann", "dia_id": "D2:1", "text": "We went hiking.", "blip_caption": "a trail"}],
        "session_3_date_time": "9:00 am on 1 July, 2023",
        "session_3": [],  # empty: no session
    },
    "qa": [
        {"question": "What pet did Ann adopt?", "answer": "a cat", "evidence": ["D1:1"], "category": 4},
        {"question": "When did they hike?", "answer": "June 2023", "evidence": ["D:2:01; D1:2", "D9:9", "X"],
         "category": 2},
        {"question": "What is Bob's job?", "evidence": [], "category": 5, "adversarial_answer": "pilot"},
        {"question": "Which pets?", "answer": "cat", "evidence": ["D1:1"], "category": 1},
    ],
}
CONV_B = {
    "sample_id": "conv-99",  # not in the upstream order: never audited
    "conversation": {"speaker_a": "Cy", "speaker_b": "Di", "session_1_date_time": "8:00 pm on 3 March, 2023",
                     "session_1": [{"speaker": "Di", "dia_id": "D1:1", "text": "I play chess."}]},
    "qa": [{"question": "What game?", "answer": "chess", "evidence": ["D1:1"], "category": 4}],
}
AUDIT = [
    {"question_id": "locomo_0_qa0", "question": "What pet did Ann adopt?", "correct_evidence": ["D1:2"],
     "correct_answer": "a grey cat", "error_type": "evidence"},
    {"question_id": "locomo_10_qa0", "question": "x"},  # beyond the upstream order: ignored
    {"question_id": "locomo_11_qa0", "question": "x"},
    {"question_id": "bad id"},
    {"question_id": "locomo_0_qa3", "question": "Zebras? (a different question)", "correct_evidence": ["D2:1"]},
]


def _write(tmp_path, convs=(CONV_A, CONV_B), audit=AUDIT):
    d = tmp_path / "locomo"
    (d / "audit").mkdir(parents=True, exist_ok=True)
    (d / "locomo10_dev.json").write_text(json.dumps(list(convs)))
    if audit is not None:
        (d / "audit" / "errors_conv_0.json").write_text(json.dumps(audit))
    return d


def _load(tmp_path, **opts):
    _write(tmp_path)
    suite = LocomoSuite({"data_dir": str(tmp_path), "full": True, **opts}, seed=0)
    return suite, suite.load()


def test_defaults_are_the_documented_run():
    assert LocomoSuite.defaults == {
        "data_dir": None, "file": "locomo/locomo10_dev.json", "conversations": 4, "questions": 30, "full": False,
        "categories": "12345", "audit_evidence": True, "audit_answers": False, "top_k": 50, "mode": "fast",
        "judge": False, "answer": True}
    assert L.KS == (1, 3, 5, 10)
    assert L.HELD_OUT_METRICS == ("shown@1000", "turn_recall@5", "f1_cats_1_4")


def test_conversation_batch_speakers_photos_duplicates_and_dates():
    batch, ids, last = L.conversation_batch(CONV_A)
    assert batch.batch_id == "conv-26"
    assert [s.session_id for s in batch.sessions] == ["S1", "S2"]  # session 3 is empty
    s1 = batch.sessions[0]
    assert [(m.id, m.role, m.content) for m in s1.messages] == [
        ("D1:1", "user", "Ann: I adopted a cat."),
        ("D1:2", "assistant", "Bob: [shares a photo: a grey cat]"),
        ("D1:4", "user", "Ann: Her name is Mia.")]
    assert batch.sessions[1].messages[0].content == "Ann: We went hiking. [shares a photo: a trail]"
    assert ids == {"D1:1", "D1:2", "D1:4", "D2:1"}
    assert s1.started_at == datetime(2023, 5, 8, 13, 56, tzinfo=UTC)
    assert last == datetime(2023, 6, 12, 10, 4, tzinfo=UTC)  # the latest non-empty session


def test_load_probes_evidence_repairs_and_audit(tmp_path):
    _suite, data = _load(tmp_path)
    assert sorted(data.corpora) == ["conv-26", "conv-99"]
    by_id = {p.id: p for p in data.probes}
    assert list(by_id) == ["conv-26:q0", "conv-26:q1", "conv-26:q2", "conv-26:q3", "conv-99:q0"]
    q0, q1, q2, q3 = (by_id[f"conv-26:q{i}"] for i in range(4))
    assert q0.evidence_ids == ["D1:2"]  # the audit's correct_evidence replaces the original
    assert q0.ground_truth == "a cat"  # answers are not replaced unless audit_answers
    assert q0.meta == {"qa_index": 0, "audit": "evidence", "adversarial_answer": None}
    # "D:2:01; D1:2" splits in two, "D:2:01" is repaired to D2:1; D9:9 is unknown, "X" unparsable: both dropped
    assert q1.evidence_ids == ["D2:1", "D1:2"]
    assert q2.ground_truth == "Not mentioned in the conversation" and q2.meta["adversarial_answer"] == "pilot"
    assert q3.evidence_ids == ["D1:1"] and q3.meta["audit"] is None  # the audit entry's question differs
    assert (q0.namespace, q0.category, q0.question) == ("conv-26", "4", "What pet did Ann adopt?")
    assert q0.reference_time == datetime(2023, 6, 12, 10, 4, tzinfo=UTC) + timedelta(days=1)
    assert data.info["evidence_repairs"] == {"split": 1, "repaired": 1, "dropped": 2}
    assert data.info["audit"] == {"evidence_replaced": 1, "answers_replaced": 0, "mismatched": 1}
    assert data.info["conversations"] == ["conv-26", "conv-99"] and data.info["questions"] == 5


def test_audit_answers_and_evidence_switches(tmp_path):
    _s, data = _load(tmp_path, audit_answers=True, audit_evidence=False)
    q0 = next(p for p in data.probes if p.id == "conv-26:q0")
    assert (q0.ground_truth, q0.evidence_ids) == ("a grey cat", ["D1:1"])
    assert data.info["audit"] == {"evidence_replaced": 0, "answers_replaced": 1, "mismatched": 1}


def test_no_audit_directory_means_no_corrections(tmp_path):
    _write(tmp_path, audit=None)
    (tmp_path / "locomo" / "audit").rmdir()
    assert L.load_audit(tmp_path / "locomo" / "audit") == {}
    _write(tmp_path)
    got = L.load_audit(tmp_path / "locomo" / "audit")
    assert sorted(got) == [("conv-26", 0), ("conv-26", 3)]


def test_categories_option_selects_questions(tmp_path):
    _s, data = _load(tmp_path, categories="1234")
    assert [p.id for p in data.probes] == ["conv-26:q0", "conv-26:q1", "conv-26:q3", "conv-99:q0"]
    _s, data = _load(tmp_path, categories="5")
    assert [p.id for p in data.probes] == ["conv-26:q2"]


def test_sampling_conversations_and_questions(tmp_path):
    _s, data = _load(tmp_path, full=False, conversations=1, questions=1)
    assert len(data.corpora) == 1 and len(data.probes) == 1
    assert data.info["sampling"] == {"seed": 0, "full": False, "conversations": 1, "questions": 1}
    assert data.info["conversations_in_file"] == 2  # what the verdict's "run them all" option names
    _s, data = _load(tmp_path, full=False, conversations=2, questions=10)
    assert len(data.corpora) == 2 and len(data.probes) == 5
    _s, data = _load(tmp_path, full=False, conversations=0, questions=2)  # 0 conversations = all of them
    assert sorted(data.corpora) == ["conv-26", "conv-99"] and len(data.probes) == 3  # 2 + the 1 conv-99 has


def test_dates_ids_and_units():
    assert L.parse_locomo_date("1:56  pm on 8 May, 2023") == datetime(2023, 5, 8, 13, 56, tzinfo=UTC)
    assert L.parse_locomo_date("9:05 am on 3 Sep, 2022") == datetime(2022, 9, 3, 9, 5, tzinfo=UTC)
    assert L.parse_locomo_date("7:00 pm on March 5, 2023") == datetime(2023, 3, 5, 19, 0, tzinfo=UTC)
    with pytest.raises(ValueError, match="unrecognised LoCoMo date 'yesterday'"):
        L.parse_locomo_date("yesterday")
    assert L.conversation_of("conv-26:q31") == "conv-26" and L.conversation_of("c:q1:q2") == "c:q1"
    assert L.session_of("D12:3") == "S12" and L.session_of("S1") is None


class _Ctx:
    judge_passes = 1

    def __init__(self):
        self.asked = None
        self.judge_llm = SimpleNamespace(chat=self._judge)

    async def retrieve(self, backend, probe):
        return {"memories": [{"id": "m", "score": 1.0, "evidence_ids": ["D1:1"], "text": "z" * 500}],
                "latency_ms": 4.0, "server_ms": 3.0, "formatted_context": "the cat"}

    async def answer(self, question, blocks):
        self.asked = (question, blocks)
        return {"answer": "a cat"}

    async def _judge(self, messages, temperature=0.0):
        if messages[0]["content"].startswith(prompts.JUDGE_MARKER):
            return SimpleNamespace(text='{"score": 3, "reason": "ok"}')
        return SimpleNamespace(text='{"label": "CORRECT"}')


def _probe(cat):
    return L.Probe(id="conv-26:q0", question="Q?", category=cat, ground_truth="a cat")


def test_run_probe_prompts_per_category_and_judges_only_when_asked():
    from services.common.tokens import count_tokens

    s = LocomoSuite({}, seed=0)
    ctx = _Ctx()
    body = asyncio.run(s.run_probe(ctx, _probe("4"), L.C.retrieval_conditions(["b"])[0]))
    assert len(body["retrievals"]["b"]["memories"][0]["text"]) == 400  # texts kept to 400 characters
    assert body["context_tokens"] == count_tokens("the cat") and "answer" not in body and ctx.asked is None
    cond = L.C.answer_conditions(["b"])[0]
    for cat, q in (("4", "Q?" + L.SHORT), ("2", "Q?" + L.SHORT + L.TEMPORAL), ("5", "Q?" + L.SHORT + L.ADVERSARIAL)):
        ctx = _Ctx()
        body = asyncio.run(s.run_probe(ctx, _probe(cat), cond))
        assert ctx.asked == (q, ["the cat"]) and body["answer_question"] == q
        assert L.judges.judged_correct(body) is None  # judge off by default
    judged = LocomoSuite({"judge": True}, seed=0)
    assert L.judges.judged_correct(asyncio.run(judged.run_probe(_Ctx(), _probe("4"), cond))) is True
    assert L.judges.judged_correct(asyncio.run(judged.run_probe(_Ctx(), _probe("5"), cond))) is None
    assert [c.answer for c in LocomoSuite({"answer": False}, seed=0).conditions(["b"], {})] == [False]
    assert [c.answer for c in s.conditions(["b"], {})] == [True]


def _scored(**info):
    s = LocomoSuite({}, seed=0)
    s._info = info
    rows = locomo_samples("openclaw") + locomo_samples("bm25")
    for r in rows:
        r["probe_id"] = f"conv-{int(r['probe_id'][1:]) % 3}:{r['probe_id']}"  # three conversations
        if r["condition"] == "bm25":
            r["retrievals"] = {"bm25": {"memories": [], "latency_ms": None}}
            r["answer"] = "nothing"
            del r["context_tokens"]
    return s, s.score(rows)


def test_score_wiring_and_render(tmp_path):
    s, res = _scored(conversations=["conv-0", "conv-1", "conv-2"], questions=6,
                     evidence_repairs={"split": 1, "repaired": 2, "dropped": 3},
                     audit={"evidence_replaced": 4, "answers_replaced": 5, "mismatched": 6})
    o, x = res["conditions"]["openclaw"], res["conditions"]["bm25"]
    assert o["overall"]["token_spend"]["mean"] == pytest.approx(35.0)  # 10..60
    assert x["overall"]["token_spend"]["mean"] == pytest.approx(0.0) and x["latency"]["n"] == 0
    assert o["latency"]["p50_ms"] == pytest.approx(3.5)
    assert res["statistics"]["unit"] == "conversation" and res["statistics"]["conversations"] == 3
    assert res["baseline"] == "openclaw"
    comps = {c["metric"]: c for c in res["comparisons"]["bm25"]["comparisons"]}
    assert {k: c["higher_is_better"] for k, c in comps.items()} == {
        "f1_cats_1_4": True, "f1": True, "turn_recall@5": True, "session_recall@5": True,
        "token_spend": False, "latency_ms": False}  # binary_j absent on both sides: left out
    # these samples carry no budget account (an older run's): recall at a budget is absent, not 0
    assert set(res["held_out"]["openclaw"]) == set(L.HELD_OUT_METRICS) - {"shown@1000"}
    assert "shown@1000" not in o["overall"]
    md = s.render(res)
    # evidence recall: turn@1,3,5,10 then session@1,3,5,10 (tests/test_golden_suites.py computes them)
    t = [o["overall"][f"turn_recall@{k}"]["mean"] for k in L.KS]
    se = [o["overall"][f"session_recall@{k}"]["mean"] for k in L.KS]
    assert "| openclaw | " + " | ".join(f"{v:.3f}" for v in t + se) + " |" in md
    mr = [o["overall"][f"memory_recall@{k}"]["mean"] for k in L.KS]
    assert "| openclaw | " + " | ".join(f"{a:.3f} / {b:.3f}" for a, b in zip(t, mr, strict=True)) + " |" in md
    assert "| backend | questions | shown @1,000 tok | F1 (cats 1-4) | EM (cats 1-4) | turn R@5 (rank) | session R@5 | " \
           "J | ctx tokens | p50 ms |" in md
    assert "| 35 | 3.5 |" in md and "| 0 | — |" in md
    assert "| backend | 1 multi-hop | 2 temporal | 3 open-domain | 4 single-hop | 5 adversarial |" in md
    assert "Turn recall_any@10 (one turn = one document, as IR papers report it): bm25 0.000" in md
    assert "Intervals: cluster-robust t interval over conversations" in md and "3 conversation(s)" in md
    assert "### Leave-one-conversation-out check" in md
    assert ("Data: conv-0, conv-1, conv-2; 6 questions (seeded stratified sample unless full). Evidence ids: "
            "1 split, 2 repaired, 3 dropped. locomo-audit: 4 evidence lists and 5 answers replaced (6 corrections "
            "not matching their question).") in md
    assert "Scorecard" in md


def test_render_without_data_statistics_or_comparisons():
    s, res = _scored()
    res["data"], res["comparisons"], res["held_out"] = {}, {}, {}
    md = s.render(res)
    assert "Data:" not in md and "Scorecard" not in md
    assert "Leave-one-conversation-out check: needs at least 3 conversations" in md
    res["statistics"] = {}
    md = s.render(res)
    assert "Intervals:" not in md and "Leave-one-conversation-out" not in md


def test_roles_follow_speaker_a_whatever_the_names_sort_to():
    conv = json.loads(json.dumps({"sample_id": "c", "conversation": {
        "speaker_a": "Zoe", "speaker_b": "Adam", "session_1_date_time": "1:00 pm on 1 May, 2023",
        "session_1": [{"speaker": "Adam", "dia_id": "D1:1", "text": "hi"},
                      {"speaker": "Zoe", "dia_id": "D1:2", "text": "hello"}]}}))
    batch, _ids, _last = L.conversation_batch(conv)
    assert [m.role for m in batch.sessions[0].messages] == ["assistant", "user"]
    _b, ids, last = L.conversation_batch({"sample_id": "e", "conversation": {"speaker_a": "A"}})
    assert ids == set() and last == datetime(2000, 1, 1, tzinfo=UTC)  # no session: the sentinel date


def test_repair_evidence_keeps_going_past_what_it_drops():
    counts = {"split": 0, "repaired": 0, "dropped": 0}
    known = {"D1:1", "D2:3"}
    assert L.repair_evidence(["X;D1:1", "D9:9 D2:03", "", ";;"], known, counts) == ["D1:1", "D2:3"]
    assert counts == {"split": 2, "repaired": 1, "dropped": 2}  # "" and ";;" hold no part: not splits


def test_parse_categories_forms():
    assert L.parse_categories([1, 2]) == {"1", "2"} == L.parse_categories("1, 2") == L.parse_categories(12)
    with pytest.raises(ValueError, match="names category '7'"):
        L.parse_categories("17")
    with pytest.raises(ValueError, match="names no category"):
        L.parse_categories(" , ")


def test_missing_answers_default_by_category(tmp_path):
    conv = json.loads(json.dumps(CONV_B))
    conv["qa"] = [{"question": "q?", "evidence": ["D1:1"], "category": 4},
                  {"question": "r?", "evidence": [], "category": 5}]
    _write(tmp_path, convs=(conv,), audit=[])
    data = LocomoSuite({"data_dir": str(tmp_path), "full": True}, seed=0).load()
    assert [p.ground_truth for p in data.probes] == ["", "Not mentioned in the conversation"]


def test_sampling_bounds(tmp_path):
    for n in (2, 5, 0, -1):  # all conversations (or more, or 0 / negative = no sampling)
        _s, data = _load(tmp_path, full=False, conversations=n, questions=10)
        assert sorted(data.corpora) == ["conv-26", "conv-99"], n


def test_registered_and_baseline_fallback():
    from services.coordinator.suites.registry import get_suite

    assert get_suite("locomo") is LocomoSuite
    from services.coordinator.baseline import choose

    assert choose(["zeta", "alpha"])[0] == "alpha" and choose([])[0] is None
    assert choose(["cortex", "openclaw", "openclaw-real"])[0] == "openclaw-real"


def test_compact_record_counts_the_formatted_context():
    from services.common.tokens import count_tokens

    rec = {"memories": [], "latency_ms": 1.0, "server_ms": 1.0, "formatted_context": "the grey cat"}
    assert C.compact_record(rec)["context_tokens"] == count_tokens("the grey cat") > 0
    assert C.compact_record({**rec, "formatted_context": None})["context_tokens"] == 0


def test_temporal_hint_only_for_category_2():
    s = LocomoSuite({}, seed=0)
    cond = L.C.answer_conditions(["b"])[0]
    ctx = _Ctx()
    asyncio.run(s.run_probe(ctx, _probe("1"), cond))
    assert ctx.asked[0] == "Q?" + L.SHORT


def test_binary_j_and_its_comparison():
    s = LocomoSuite({}, seed=0)
    s._info = {}
    rows = locomo_samples("openclaw") + locomo_samples("bm25")
    for i, r in enumerate(rows):
        r["probe_id"] = f"conv-{i % 3}:{r['probe_id']}"
        r["binary_judge"] = {"correct": r["condition"] == "openclaw" and i % 3 != 0}
    res = s.score(rows)
    # openclaw: rows 1, 2, 4, 5 of 0..5 judged correct -> 4/6; bm25 none -> 0
    assert res["conditions"]["openclaw"]["overall"]["binary_j"]["mean"] == pytest.approx(4 / 6)
    assert res["conditions"]["bm25"]["overall"]["binary_j"]["mean"] == pytest.approx(0.0)
    comp = {c["metric"]: c for c in res["comparisons"]["bm25"]["comparisons"]}["binary_j"]
    assert comp["higher_is_better"] is True and comp["winner"] == "a"


def test_render_data_line_defaults_and_the_held_out_rows():
    s, res = _scored()
    res["data"] = {"conversations": ["c1"], "questions": 1}
    md = s.render(res)
    assert ("Evidence ids: 0 split, 0 repaired, 0 dropped. locomo-audit: 0 evidence lists and 0 answers replaced "
            "(0 corrections not matching their question).") in md
    res["held_out"] = {"openclaw": {"turn_recall@5": {"inside": 1, "inside_pi": 2, "of": 3, "rows": [
        {"cluster": "conv-0", "mean": 0.5, "ci": [0.4, 0.6], "pi": [0.1, 0.9]},  # 0 from the CI's centre
        {"cluster": "conv-1", "mean": 0.9, "ci": [0.2, 0.4], "pi": [0.0, 0.8]},  # 0.6 from the centre: farthest
        {"cluster": "conv-2", "mean": 0.1, "ci": [0.3, 0.5], "pi": [0.05, 0.95]},  # 0.3 from the centre
    ]}}}
    md = s.render(res)
    assert ("| openclaw | turn_recall@5 | 1 of 3 | 2 of 3 | conv-1 0.900 vs CI [0.200, 0.400], PI [0.000, 0.800] |"
            in md)
