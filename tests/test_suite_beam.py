"""BEAM on a hand-made three-conversation file (tests/fixtures_beam.py): what load() makes of it (sessions, dates,
probes, evidence, sampling), its malformed variants (an error naming the conversation and the field), and every
ability's scoring, pinned by values computed by hand from the scripted retrievals through the real grader
(ProbeContext's budget account: a message is shown when half its word 3-grams are in the cut text)."""

from __future__ import annotations

import asyncio
import copy
import json
from datetime import UTC, datetime

import pytest

from services.adapters.client import InProcessBackendClient
from services.common.errors import InputError
from services.common.tokens import count_tokens
from services.coordinator.metrics import budget
from services.coordinator.suites import beam as B
from services.coordinator.suites.base import OptionError, SuiteUnavailable
from services.coordinator.suites.beam import BeamDataError, BeamSuite
from tests.fixtures_beam import C1, C2, C3, ScriptedBackend, beam_file
from tests.fixtures_suites import run_inprocess

H = "budget_recall@1000"  # evidence recall at the headline budget


def _suite(root, **opts) -> BeamSuite:
    return BeamSuite({"data_dir": str(root), "conversations": 0, "answer": False, **opts}, seed=0)


def _load(tmp_path, convs=None, **opts):
    root = beam_file(tmp_path, convs)
    s = _suite(root, **opts)
    return s, s.load()


def day(m: int, d: int) -> datetime:
    return datetime(2024, m, d, tzinfo=UTC)


# -- the suite and its options ----------------------------------------------------------------------------------
def test_registered_with_its_documented_defaults():
    from services.coordinator.suites.registry import get_suite

    assert get_suite("beam") is BeamSuite
    assert BeamSuite.defaults == {"data_dir": None, "file": "beam/beam_dev.json.gz", "sizes": "100K,500K,1M",
                                  "conversations": 4, "top_k": 50, "mode": "fast", "answer": True}
    assert BeamSuite.namespace_scoped is True
    # the verdict reads the rig's headline rule (evidence recall under the message rule); the suite reports recall
    assert BeamSuite.retrieval_headline == budget.HEADLINE_METRIC and BeamSuite.answer_headline is None
    assert B.RECALL == H
    assert (B.AT, B.NUGGET_CARRIED, B.ON_TOPIC) == (1000, 0.5, 0.5)


def test_sizes_option_parses_and_names_a_bad_bucket():
    assert B.parse_sizes("1m, 100k") == ["100K", "1M"]
    assert B.parse_sizes(["500K"]) == ["500K"]
    with pytest.raises(OptionError, match=r"options\.sizes: '2M' is not a size bucket; expected some of 100K, "
                                          r"500K, 1M"):
        B.parse_sizes("100K,2M")
    with pytest.raises(OptionError, match=r"options\.sizes: ' , ' names no size bucket"):
        B.parse_sizes(" , ")


def test_conditions_answer_or_retrieval_only():
    on = BeamSuite({}, seed=0).conditions(["a"], {})
    off = BeamSuite({"answer": False}, seed=0).conditions(["a", "b"], {})
    assert [(c.name, c.answer) for c in on] == [("a", True)]
    assert [(c.name, c.answer) for c in off] == [("a", False), ("b", False)]


# -- loading -----------------------------------------------------------------------------------------------------
def test_sessions_messages_and_their_dates(tmp_path):
    _s, data = _load(tmp_path)
    assert list(data.corpora) == ["beam-100K-1", "beam-500K-1", "beam-1M-1"]
    c1, c2, c3 = data.corpora.values()
    # batches are sessions; ids kept as text; content unchanged (the index marker too)
    assert [s.session_id for s in c1.sessions] == ["B1", "B2"]
    assert [m.id for m in c1.sessions[0].messages] == ["0", "1", "2", "3"]
    assert c1.sessions[0].messages[0].content.endswith("->-> 1,1")
    assert [m.role for m in c1.sessions[0].messages] == ["user", "assistant", "user", "assistant"]
    # a turn's own anchor dates it and every later message until the next anchor
    assert [m.ts for m in c1.sessions[0].messages] == [day(3, 15)] * 4
    assert [m.ts for m in c1.sessions[1].messages] == [day(4, 2)] * 8  # the turn's April 2, not its batch's April 1
    assert [s.started_at for s in c1.sessions] == [day(3, 15), day(4, 2)]
    # a batch's own anchor dates its first message; a turn's own anchor wins from there on; a later batch without
    # anchors keeps the last one until a turn's own
    ts2 = [m.ts for s in c2.sessions for m in s.messages]
    assert ts2 == [day(5, 20)] * 4 + [day(5, 22)] * 4 + [day(5, 22)] * 4 + [day(5, 25)] * 6
    assert [s.started_at for s in c2.sessions] == [day(5, 20), day(5, 22)]
    # messages before the conversation's first anchor get that first anchor (not the last)
    assert [m.ts for s in c3.sessions for m in s.messages] == [day(6, 3)] * 4 + [day(6, 10)] * 2
    assert c3.sessions[0].started_at == day(6, 3)
    assert [b.message_count for b in data.corpora.values()] == [12, 18, 6]


def test_probes_evidence_and_reference_times(tmp_path):
    _s, data = _load(tmp_path)
    ids = [p.id for p in data.probes]
    assert ids == ["beam-100K-1:abstention:0", "beam-100K-1:information_extraction:0",
                   "beam-100K-1:instruction_following:0", "beam-100K-1:knowledge_update:0",
                   "beam-100K-1:knowledge_update:1",
                   "beam-500K-1:contradiction_resolution:0", "beam-500K-1:contradiction_resolution:1",
                   "beam-500K-1:event_ordering:0", "beam-500K-1:event_ordering:1",
                   "beam-500K-1:preference_following:0", "beam-500K-1:summarization:0",
                   "beam-1M-1:abstention:0", "beam-1M-1:knowledge_update:0", "beam-1M-1:multi_session_reasoning:0",
                   "beam-1M-1:temporal_reasoning:0"]
    p = {x.id: x for x in data.probes}
    ku = p["beam-100K-1:knowledge_update:1"]
    assert ku.evidence_ids == ["8", "10", "11"] and ku.category == "knowledge_update"
    assert ku.meta["groups"] == {"original_info": ["8"], "updated_info": ["10", "11"]}
    assert (ku.namespace, ku.ground_truth, ku.meta["size"]) == ("beam-100K-1", "fifteen hundred dollars", "100K")
    eo = p["beam-500K-1:event_ordering:0"]
    assert eo.evidence_ids == ["30", "32", "34", "36"] and eo.meta["events"] == [["30"], ["32", "34"], ["36"]]
    assert p["beam-500K-1:event_ordering:1"].evidence_ids == ["30", "36"]  # [[30], 36, 30]: once each
    assert p["beam-100K-1:abstention:0"].evidence_ids == [] and p["beam-500K-1:summarization:0"].evidence_ids == []
    # the reference answer's field by ability; instruction and preference following have none
    assert p["beam-100K-1:abstention:0"].ground_truth == "There is no information."
    assert p["beam-500K-1:contradiction_resolution:0"].ground_truth == "You said both."
    assert p["beam-500K-1:summarization:0"].ground_truth == "Sockets, then backoff."
    assert p["beam-100K-1:instruction_following:0"].ground_truth == ""
    # asked after the whole conversation: the last anchor + 1 day
    assert {x.namespace: x.reference_time for x in data.probes} == {
        "beam-100K-1": day(4, 3), "beam-500K-1": day(5, 26), "beam-1M-1": day(6, 11)}
    assert data.info["no_evidence"] == {"abstention": 2, "summarization": 1}
    assert data.info["by_size"] == {"100K": 1, "500K": 1, "1M": 1}
    assert (data.info["conversations_in_file"], data.info["messages"], data.info["questions"]) == (3, 36, 15)
    assert data.info["commit"] == "b2a3ee8ba12d68f83143dda191097dc3e028ddd3"


def test_sizes_keep_those_buckets(tmp_path):
    _s, data = _load(tmp_path, sizes="1M,100K")
    assert list(data.corpora) == ["beam-100K-1", "beam-1M-1"] and data.info["conversations_in_file"] == 2


def _many():
    """Four 100K conversations, two 500K, one 1M (copies with their own ids)."""
    out = []
    for base, n in ((C1, 4), (C2, 2), (C3, 1)):
        for i in range(n):
            c = copy.deepcopy(base)
            c["id"] = f"beam-{base['size']}-{i + 1}"
            out.append(c)
    return out


def test_conversations_are_drawn_by_the_seed_stratified_by_size(tmp_path):
    root = beam_file(tmp_path, _many())
    picks = {}
    for seed in range(6):
        d = BeamSuite({"data_dir": str(root), "conversations": 3}, seed=seed).load()
        # 3 of 7: 100K 3*4/7 = 1.71, 500K 0.86, 1M 0.43 -> at least one each: 1, 1, 1
        assert d.info["by_size"] == {"100K": 1, "500K": 1, "1M": 1}
        picks[seed] = tuple(d.info["conversations"])
    assert len(set(picks.values())) > 1  # the seed decides which ones
    again = BeamSuite({"data_dir": str(root), "conversations": 3}, seed=4).load()
    assert tuple(again.info["conversations"]) == picks[4]
    d = BeamSuite({"data_dir": str(root), "conversations": 5}, seed=0).load()
    assert d.info["by_size"] == {"100K": 3, "500K": 1, "1M": 1}  # 2.86, 1.43, 0.71: floors 2, 1, 0 -> 3, 1, 1
    assert BeamSuite({"data_dir": str(root), "conversations": 0}, seed=0).load().info["by_size"] == {
        "100K": 4, "500K": 2, "1M": 1}
    assert BeamSuite({"data_dir": str(root), "conversations": 9}, seed=0).load().info["questions"] == 4 * 5 + 2 * 6 + 4


def test_a_plain_json_file_loads_like_the_gzip_one_and_a_missing_one_is_unavailable(tmp_path):
    _s, gz = _load(tmp_path)
    beam_file(tmp_path, name="beam_dev.json")
    plain = _suite(tmp_path, file="beam/beam_dev.json").load()
    assert plain.corpora == gz.corpora and [p.id for p in plain.probes] == [p.id for p in gz.probes]
    with pytest.raises(SuiteUnavailable, match=r"beam/nope\.json\.gz not found"):
        _suite(tmp_path, file="beam/nope.json.gz").load()


def test_a_message_over_the_ingest_limit_is_fitted_and_listed(tmp_path):
    from services.common.types import MAX_CONTENT_CHARS

    assert MAX_CONTENT_CHARS == 200_000
    convs = copy.deepcopy([C1, C2, C3])
    turns = convs[2]["chat_batches"][1]["turns"]
    padded = "Reviews catch  gaps" + " " * 210_000 + "\n \n  |   |\tend"  # collapses to 26 characters
    turns[0][1]["content"] = padded
    turns[1][1]["content"] = "x" * 200_001  # no whitespace to collapse: cut at the limit
    turns[1][0]["content"] = "y " * 100_000  # 200,000 exactly: unchanged
    _s, data = _load(tmp_path, convs)
    got = {m.id: m.content for s in data.corpora["beam-1M-1"].sessions for m in s.messages}
    assert got["43"] == "Reviews catch gaps\n| |\tend"  # a run with a line break: one; of 2+ blanks: a space
    assert got["45"] == "x" * 200_000 and got["44"] == "y " * 100_000
    assert data.info["fitted"] == [
        {"conversation": "beam-1M-1", "id": "43", "chars": len(padded), "fitted_chars": 26},
        {"conversation": "beam-1M-1", "id": "45", "chars": 200_001, "fitted_chars": 200_000}]
    assert B.fit("a  b", limit=3) == "a b" and B.fit("a  b", limit=4) == "a  b" and B.fit("ab  cd", limit=2) == "ab"
    md = _s.render({"conditions": {}, "data": data.info})
    assert ("Messages over the ingest limit (200,000 characters), whitespace collapsed (then cut at the limit if still "
            f"over): beam-1M-1 #43 {len(padded):,} → 26, beam-1M-1 #45 200,001 → 200,000.") in md
    _s, clean = _load(tmp_path)
    assert clean.info["fitted"] == [] and "ingest limit" not in _s.render({"conditions": {}, "data": clean.info})


# -- malformed input: an error naming the conversation and the field ---------------------------------------------
def _broken(change):
    convs = copy.deepcopy([C1, C2, C3])
    change(convs)
    return convs


def _set_turn(conv, j, k, i, key, value):
    conv["chat_batches"][j]["turns"][k][i][key] = value


MALFORMED = [
    (lambda c: _set_turn(c[0], 0, 1, 0, "role", "system"),
     "beam-100K-1.chat_batches[0].turns[1][0].role", r"'system': expected 'user' or 'assistant'"),
    (lambda c: _set_turn(c[1], 1, 2, 0, "time_anchor", "May-32-2024"),
     "beam-500K-1.chat_batches[1].turns[2][0].time_anchor", r"'May-32-2024' is not a date like March-15-2024"),
    (lambda c: c[1]["chat_batches"][0].update(time_anchor=20240520),
     "beam-500K-1.chat_batches[0].time_anchor", r"20240520 is not a date like March-15-2024"),
    (lambda c: _set_turn(c[0], 1, 0, 1, "id", 2),
     "beam-100K-1.chat_batches[1].turns[0][1].id", r"2 repeats an earlier message's id"),
    (lambda c: _set_turn(c[0], 0, 0, 1, "id", None),
     "beam-100K-1.chat_batches[0].turns[0][1].id", r"None is not a message id"),
    (lambda c: _set_turn(c[2], 1, 1, 0, "content", None),
     "beam-1M-1.chat_batches[1].turns[1][0].content", r"expected text, got NoneType"),
    (lambda c: [t[0].pop("time_anchor") for t in c[2]["chat_batches"][1]["turns"]],
     "beam-1M-1.time_anchor", r"no batch or turn has a time_anchor: the conversation cannot be dated"),
    (lambda c: c[2].update(chat_batches=[]),
     "beam-1M-1.chat_batches", r"expected a non-empty list of batches"),
    (lambda c: c[2]["chat_batches"][1].update(batch_number=1),
     "beam-1M-1.chat_batches[1].batch_number", r"1 repeats an earlier batch's"),
    (lambda c: c[2]["chat_batches"][0]["turns"].append({"id": 99}),
     "beam-1M-1.chat_batches[0].turns[1]", r"expected a list of messages"),
    (lambda c: c[2]["probing_questions"]["multi_session_reasoning"][0].update(source_chat_ids=[40, 99]),
     "beam-1M-1.probing_questions.multi_session_reasoning[0].source_chat_ids",
     r"message id 99 is not a message of the conversation"),
    (lambda c: c[1]["probing_questions"]["event_ordering"][0].update(source_chat_ids=[30, ["32", 34]]),
     "beam-500K-1.probing_questions.event_ordering[0].source_chat_ids[1][0]", r"'32' is not a message id"),
    (lambda c: c[0]["probing_questions"]["knowledge_update"][0].update(source_chat_ids={"original_info": [2]}),
     "beam-100K-1.probing_questions.knowledge_update[0].source_chat_ids",
     r"expected an object with the groups original_info, updated_info; updated_info missing"),
    (lambda c: c[2]["probing_questions"]["temporal_reasoning"][0].update(source_chat_ids=[40, 42]),
     "beam-1M-1.probing_questions.temporal_reasoning[0].source_chat_ids",
     r"expected an object with the groups first_event, second_event; first_event, second_event missing"),
    (lambda c: c[0]["probing_questions"]["knowledge_update"][1].update(
        source_chat_ids={"original_info": [8], "updated_info": 10}),
     "beam-100K-1.probing_questions.knowledge_update[1].source_chat_ids.updated_info",
     r"expected a list of message ids, got int"),
    (lambda c: c[0]["probing_questions"]["abstention"][0].pop("question"),
     "beam-100K-1.probing_questions.abstention[0].question", r"expected the question's text"),
    (lambda c: c[0]["probing_questions"]["information_extraction"][0].update(rubric="Flask"),
     "beam-100K-1.probing_questions.information_extraction[0].rubric", r"expected a list of nugget texts"),
    (lambda c: c[2]["probing_questions"].update(memory_palace=[]),
     "beam-1M-1.probing_questions.memory_palace", r"not a BEAM ability; expected abstention, "),
    (lambda c: c[2].update(probing_questions=[]),
     "beam-1M-1.probing_questions", r"expected an object of abilities"),
    (lambda c: c[2].update(size="10M"), "beam-1M-1.size", r"'10M': expected one of 100K, 500K, 1M"),
    (lambda c: c[1].pop("id"), "conversations[1].id", r"expected the conversation's id"),
    (lambda c: c[2].update(id="beam-100K-1"), "beam-100K-1.id", r"two conversations have this id"),
]


@pytest.mark.parametrize("change,field,message", MALFORMED, ids=[m[1] for m in MALFORMED])
def test_malformed_input_names_the_conversation_and_the_field(tmp_path, change, field, message):
    with pytest.raises(BeamDataError) as e:
        _load(tmp_path, _broken(change))
    assert isinstance(e.value, InputError) and isinstance(e.value, ValueError)
    assert e.value.field == field
    assert str(e.value).startswith(f"{field}: ")
    import re

    assert re.search(message, e.value.message), e.value.message
    assert "(in beam_dev.json.gz)" in e.value.message


def test_a_file_that_is_not_an_object_of_conversations_is_an_error(tmp_path):
    (tmp_path / "beam").mkdir()
    (tmp_path / "beam" / "x.json").write_text(json.dumps([C1]))
    with pytest.raises(BeamDataError, match=r"^x\.json: expected a JSON object with a list under 'conversations'"):
        _suite(tmp_path, file="beam/x.json").load()


# -- scoring: the pure rules -------------------------------------------------------------------------------------
def acc(shown_1000, tokens=100, shown_250=()):
    """A budget account as the rig's grader writes it (only what the suite reads)."""
    return {"grader": 2, "tokens": tokens, "shown": {"250": sorted(shown_250), "1000": sorted(shown_1000)}}


def test_nugget_terms_drop_the_prefix_and_forbidding_nuggets():
    assert B.nugget_terms("LLM response should state: Flask") == ["flask"]
    assert B.nugget_terms("Response should mention: SQLite storage engine") == ["sqlite", "storag", "engin"]
    assert B.nugget_terms("LLM response should contain: two tables") == ["2", "tabl"]
    assert B.nugget_terms("socket connection handler") == ["socket", "connect", "handler"]  # no prefix: all of it
    assert B.nugget_terms("LLM response should avoid: big frameworks") is None
    assert B.nugget_terms("Response should not mention: databases") is None


def test_a_nugget_is_carried_from_half_its_terms():
    assert B.nugget_share(["alpha beta"], "alpha") == 1.0  # 1 of 2 terms: exactly half, carried
    assert B.nugget_share(["alpha beta gamma"], "alpha") == 0.0  # 1 of 3: not
    assert B.nugget_share(["alpha beta gamma", "delta", "LLM response should state: epsilon"], "delta alpha beta") \
        == pytest.approx(2 / 3)
    assert B.nugget_share(["Response should not mention: alpha", "LLM response should avoid: beta"], "x") is None
    assert B.nugget_share(["the of"], "the") is None  # no terms
    assert B.nugget_share(["alpha"], None) is None
    assert B.nugget_share(["alpha"], "") == 0.0


def test_stale_first_counts_an_original_shown_at_a_smaller_rung_than_the_update():
    ku = {"groups": {"original_info": ["1"], "updated_info": ["2", "3"]}}

    def first(shown_1000, shown_250=()):
        return B.ability_values("knowledge_update", ku, [], acc(shown_1000, shown_250=shown_250), None, "q")

    # both shown at 1,000, the original alone at 250: not stale, but the original came first
    assert first({"1", "2"}, {"1"})["stale"] == 0.0 and first({"1", "2"}, {"1"})["stale_first"] == 1.0
    # both at 250 already, or neither: the ladder cannot tell them apart, not counted
    assert first({"1", "2"}, {"1", "2"})["stale_first"] == 0.0 and first({"1", "2"})["stale_first"] == 0.0
    # the update first: not counted; the original alone at 1,000: stale, so counted too
    assert first({"1", "3"}, {"3"})["stale_first"] == 0.0 and first({"1"})["stale_first"] == 1.0
    assert first(set())["stale_first"] == 0.0
    # a rung above the headline budget does not count
    late = {"grader": 2, "tokens": 3000, "shown": {"1000": ["2"], "2000": ["1", "2"], "4000": ["1"]}}
    assert B.stale_first(late, ["1"], ["2"]) == 0.0
    assert B.stale_first(None, ["1"], ["2"]) is None and B.stale_first(late, [], ["2"]) is None


def test_ability_values_read_the_set_shown_at_1000_tokens():
    ku = {"groups": {"original_info": ["1"], "updated_info": ["2", "3"]}}
    # updated shown at 1,000 (not at 250): read at the headline budget
    assert B.ability_values("knowledge_update", ku, [], acc({"3"}, shown_250=()), None, "q") == {
        "update_shown": 1.0, "stale": 0.0, "stale_first": 0.0, "nuggets@1000": None}
    assert B.ability_values("knowledge_update", ku, [], acc(set(), shown_250={"3"}), None, "q")["update_shown"] \
        == 0.0
    assert B.ability_values("knowledge_update", ku, [], acc({"1"}), None, "q")["stale"] == 1.0
    assert B.ability_values("knowledge_update", ku, [], acc({"1", "2"}), None, "q")["stale"] == 0.0
    assert B.ability_values("knowledge_update", ku, [], acc(set()), None, "q")["stale"] == 0.0
    # no update message: neither figure; an original that is also an update message cannot be stale
    none_upd = {"groups": {"original_info": ["1"], "updated_info": []}}
    assert B.ability_values("knowledge_update", none_upd, [], acc({"1"}), None, "q")["update_shown"] is None
    assert B.ability_values("knowledge_update", none_upd, [], acc({"1"}), None, "q")["stale"] is None
    same = {"groups": {"original_info": ["2"], "updated_info": ["2"]}}
    assert B.ability_values("knowledge_update", same, [], acc(set()), None, "q") == {
        "update_shown": 0.0, "stale": None, "stale_first": None, "nuggets@1000": None}
    cr = {"groups": {"first_statement": ["1", "2"], "second_statement": ["3"]}}
    assert B.ability_values("contradiction_resolution", cr, [], acc({"2", "3"}), None, "q")[
        "both_statements_shown"] == 1.0
    assert B.ability_values("contradiction_resolution", cr, [], acc({"1", "2"}), None, "q")[
        "both_statements_shown"] == 0.0
    assert B.ability_values("contradiction_resolution", cr, [], acc({"3"}), None, "q")["both_statements_shown"] == 0.0
    one_sided = {"groups": {"first_statement": ["1"], "second_statement": []}}
    assert B.ability_values("contradiction_resolution", one_sided, [], acc({"1"}), None, "q")[
        "both_statements_shown"] is None
    assert B.ability_values("event_ordering", {}, ["1", "2"], acc({"1", "2", "9"}), None, "q")["order_all_shown"] == 1.0
    assert B.ability_values("event_ordering", {}, ["1", "2"], acc({"2"}), None, "q")["order_all_shown"] == 0.0
    assert B.ability_values("event_ordering", {}, [], acc({"2"}), None, "q")["order_all_shown"] is None
    for ability in ("instruction_following", "preference_following"):
        assert B.ability_values(ability, {}, ["4", "5"], acc({"5"}), None, "q") == {"instruction_shown": 1.0}
        assert B.ability_values(ability, {}, ["4"], acc({"5"}), None, "q") == {"instruction_shown": 0.0}
        assert B.ability_values(ability, {}, [], acc({"5"}), None, "q") == {"instruction_shown": None}
    # abstention: tokens up to the budget; on topic from half the question's terms
    q = "Which journal mode has my tracker?"  # terms: journal, mode, tracker
    assert B.ability_values("abstention", {}, [], acc(set(), tokens=2500), "a mode", q) == {
        "abstention_tokens": 1000.0, "abstention_topic": pytest.approx(1 / 3), "abstention_on_topic": 0.0}
    assert B.ability_values("abstention", {}, [], acc(set(), tokens=40), "modes for journals", q) == {
        "abstention_tokens": 40.0, "abstention_topic": pytest.approx(2 / 3), "abstention_on_topic": 1.0}
    assert B.ability_values("abstention", {}, [], acc(set(), tokens=0), "", q)["abstention_topic"] == 0.0
    assert B.topic_share("Which journal mode?", "the journal") == 0.5
    assert B.ability_values("abstention", {}, [], acc(set(), tokens=9), "the journal", "Which journal mode?")[
        "abstention_on_topic"] == 1.0
    # nuggets for content abilities, not for the behavioural ones
    meta = {"rubric": ["LLM response should state: alpha beta"]}
    assert B.ability_values("information_extraction", meta, ["1"], acc({"1"}), "beta", "q") == {"nuggets@1000": 1.0}
    assert "nuggets@1000" not in B.ability_values("instruction_following", meta, ["1"], acc({"1"}), "beta", "q")


def test_without_the_graders_account_nothing_is_scored():
    ku = {"groups": {"original_info": ["1"], "updated_info": ["2"]}, "rubric": ["alpha"]}
    old = {"shown": {"1000": ["2"]}, "tokens": 5}  # an account from before the rig's grader: the backend's claim
    for a in (None, old):
        assert B.ability_values("knowledge_update", ku, ["1", "2"], a, "alpha", "q") == {
            "update_shown": None, "stale": None, "stale_first": None, "nuggets@1000": None}
    assert B.ability_values("abstention", {}, [], None, None, "q") == {
        "abstention_tokens": None, "abstention_topic": None, "abstention_on_topic": None}


def line(md: str, prefix: str) -> str:
    """The one line of `md` that starts with `prefix`."""
    found = [x for x in md.splitlines() if x.startswith(prefix)]
    assert len(found) == 1, (prefix, found)
    return found[0]


# -- scoring end to end: scripted retrievals through the real grader ----------------------------------------------
@pytest.fixture(scope="module")
def scored(tmp_path_factory):
    root = beam_file(tmp_path_factory.mktemp("beam"))
    suite = _suite(root)
    clients = {"scripted": InProcessBackendClient(ScriptedBackend()), "none": InProcessBackendClient.from_spec("none")}
    samples = asyncio.run(run_inprocess(suite, clients, run_dir=tmp_path_factory.mktemp("run")))
    return suite, json.loads(json.dumps(samples))


P = "beam-100K-1:", "beam-500K-1:", "beam-1M-1:"
KU0, KU1, IF, ABS1, IE = (P[0] + x for x in ("knowledge_update:0", "knowledge_update:1", "instruction_following:0",
                                             "abstention:0", "information_extraction:0"))
CR0, CR1, EO0, EO1, PF, SUM = (P[1] + x for x in ("contradiction_resolution:0", "contradiction_resolution:1",
                                                  "event_ordering:0", "event_ordering:1", "preference_following:0",
                                                  "summarization:0"))
TR, MSR, KU2, ABS3 = (P[2] + x for x in ("temporal_reasoning:0", "multi_session_reasoning:0", "knowledge_update:0",
                                         "abstention:0"))


def test_every_ability_scored_by_hand(scored):
    suite, samples = scored
    v = suite.per_probe(samples).values["scripted"]
    # evidence recall at 1,000 tokens: |gold shown| / |gold|, questions with evidence only
    assert v[H] == {KU0: 0.5, KU1: pytest.approx(2 / 3), IF: 1.0, ABS1: None, IE: 0.5, CR0: 1.0,
                    CR1: pytest.approx(1 / 3), EO0: 0.75, EO1: 1.0, PF: 0.0, SUM: None, TR: 0.5, MSR: 1.0,
                    KU2: 0.0, ABS3: None}
    # the instruction comes after 600 tokens of filler: shown at 1,000, not at 250
    assert v["budget_recall@250"][IF] == 0.0
    # knowledge update: KU0 shows the original only (stale); KU1 one of its two update messages and the original;
    # KU2 has no update message
    assert v["update_shown"] == {KU0: 0.0, KU1: 1.0, KU2: None}
    assert v["stale"] == {KU0: 1.0, KU1: 0.0, KU2: None}
    assert v["stale_first"] == {KU0: 1.0, KU1: 0.0, KU2: None}  # KU1's update message comes before the original
    # contradiction: both statements / the first only
    assert v["both_statements_shown"] == {CR0: 1.0, CR1: 0.0}
    # event ordering: 30, 32, 36 of 30, [32, 34], 36 / both of [30], 36
    assert v["order_all_shown"] == {EO0: 0.0, EO1: 1.0}
    assert v["instruction_shown"] == {IF: 1.0, PF: 0.0}
    # abstention: C1 shows message 0 (journal, mode, sqlite, tracker: sqlite and tracker shown); C3 shows nothing
    t0 = float(count_tokens(C1["chat_batches"][0]["turns"][0][0]["content"]))
    assert v["abstention_tokens"] == {ABS1: t0, ABS3: 0.0}
    assert v["abstention_topic"] == {ABS1: 0.5, ABS3: 0.0}
    assert v["abstention_on_topic"] == {ABS1: 1.0, ABS3: 0.0}
    # nuggets: KU0 "two hundred fifty milliseconds" against "... four hundred milliseconds": 2 of 4 terms, carried;
    # IE "Flask" carried, "SQLite storage engine" 1 of 3 not; CR0 "contradictory information" 0 of 2; the summary's
    # forbidding nugget left out, "reconnect backoff with jitter" carried, "message history pagination" not;
    # TR "2 days" not ("today" is not "day"), "landing page wireframe" carried; KU2 shown nothing
    assert v["nuggets@1000"] == {KU0: 1.0, KU1: 1.0, IE: 0.5, CR0: 0.0, CR1: 1.0, EO0: 1.0, EO1: 1.0, SUM: 0.5,
                                 TR: 0.5, MSR: 1.0, KU2: 0.0}
    # answer terms only where the reference answer is a fact the conversation states
    assert v["answer_terms@1000"][ABS1] is None and v["answer_terms@1000"][IF] is None
    assert v["answer_terms@1000"][KU0] == 0.0 and v["answer_terms@1000"][KU1] == 1.0
    pv = suite.per_probe(samples)
    assert pv.clusters[EO0] == "beam-500K-1" and pv.spec("stale") == (False, "rate")
    assert pv.spec("abstention_tokens") == (False, "tokens") and pv.spec("order_all_shown") == (True, "rate")


def test_a_backend_that_shows_nothing(scored):
    suite, samples = scored
    v = suite.per_probe(samples).values["none"]
    assert {p: x for p, x in v[H].items() if x is not None} == {p: 0.0 for p in (
        KU0, KU1, IF, IE, CR0, CR1, EO0, EO1, PF, TR, MSR, KU2)}
    assert v["update_shown"] == {KU0: 0.0, KU1: 0.0, KU2: None} and v["stale"] == {KU0: 0.0, KU1: 0.0, KU2: None}
    assert v["stale_first"] == {KU0: 0.0, KU1: 0.0, KU2: None}
    assert v["abstention_tokens"] == {ABS1: 0.0, ABS3: 0.0} and set(v["nuggets@1000"].values()) == {0.0}


def test_score_headline_per_ability_and_size_with_conversation_intervals(scored):
    suite, samples = scored
    m = suite.score(samples)
    o = m["conditions"]["scripted"]
    # overall: 12 questions with evidence, (0.5 + 2/3 + 1 + 0.5) + (1 + 1/3 + 0.75 + 1 + 0) + (0.5 + 1 + 0) = 7.25
    assert o["overall"][H]["mean"] == pytest.approx(7.25 / 12)
    assert (o["overall"][H]["n"], o["overall"][H]["units"]) == (12, 3)
    assert "over conversations" in o["overall"][H]["method"]
    assert o["n"] == 15
    ab = o["by_ability"]
    assert ab["knowledge_update"][H]["mean"] == pytest.approx((0.5 + 2 / 3 + 0.0) / 3)
    assert ab["knowledge_update"][H]["units"] == 2
    assert ab["contradiction_resolution"][H]["mean"] == pytest.approx(2 / 3)
    assert ab["event_ordering"][H]["mean"] == pytest.approx(0.875)
    assert ab["knowledge_update"]["update_shown"]["mean"] == 0.5 and ab["knowledge_update"]["stale"]["mean"] == 0.5
    assert ab["instruction_following"]["instruction_shown"]["mean"] == 1.0
    assert ab["preference_following"]["instruction_shown"]["mean"] == 0.0
    assert ab["abstention"]["abstention_on_topic"]["mean"] == 0.5
    assert (ab["abstention"][H]["n"], ab["abstention"][H]["mean"]) == (0, None)  # no evidence: no recall
    assert o["overall"]["nuggets@1000"]["mean"] == pytest.approx(7.5 / 11)
    assert o["overall"]["instruction_shown"]["mean"] == 0.5
    sz = o["by_size"]
    assert list(sz) == ["100K", "500K", "1M"]
    assert sz["100K"][H]["mean"] == pytest.approx((0.5 + 2 / 3 + 1 + 0.5) / 4)
    assert sz["500K"][H]["mean"] == pytest.approx((1 + 1 / 3 + 0.75 + 1 + 0) / 5)
    assert sz["1M"][H]["mean"] == pytest.approx(0.5)
    assert sz["1M"]["nuggets@1000"]["mean"] == pytest.approx((0.5 + 1 + 0) / 3)
    assert m["statistics"]["conversations"] == 3 and m["statistics"]["unit"] == "conversation"
    assert set(m["held_out"]["scripted"]) == {H, "nuggets@1000"}
    assert m["held_out"]["scripted"][H]["of"] == 3
    comps = {c["metric"]: c for c in next(iter(m["comparisons"].values()))["comparisons"]}
    assert comps["stale"]["higher_is_better"] is False and comps[H]["higher_is_better"] is True
    assert comps[H]["units"] == 3
    assert suite.score(samples) == m  # a function of the samples alone


def test_answers_are_scored_against_the_nuggets(scored):
    suite, samples = scored
    rows = [dict(s, answer="It is two hundred fifty ms") for s in samples if s["probe_id"] in (KU0, KU1, IF)]
    v = suite.per_probe(rows).values["scripted"]
    # KU0 "two hundred fifty milliseconds": 3 of 4 terms, carried; KU1 "fifteen hundred dollars": 1 of 3, not;
    # IF's nugget describes the reply: not scored
    assert v["answer_nuggets"] == {KU0: 1.0, KU1: 0.0}
    assert "answer_nuggets" not in suite.per_probe(samples).values["scripted"]


def test_render_prints_the_scored_numbers(scored):
    suite, samples = scored
    md = suite.render(suite.score(samples))
    assert md.startswith("## BEAM\n\nData: `beam/beam_dev.json.gz` (BEAM dev split, upstream commit b2a3ee8): 3 "
                         "conversation(s) (1 of 100K, 1 of 500K, 1 of 1M; a seeded sample stratified by size of the 3 "
                         "in the file's chosen sizes), 36 messages, 15 questions.")
    assert "| recall @1000 tok | nuggets @1000 | updated shown | stale (↓) | both statements " \
           "| every event | instruction shown | abstention tokens | ctx tokens | injected tokens | p50 ms |" in line(
               md, "| backend | questions |")
    # after the questions: the rig's headline (verdict) when it is not evidence recall, then recall, nuggets, ...
    extra = int(budget.HEADLINE_METRIC != H)
    cells = line(md, "| scripted | 15 |").strip("| ").split(" | ")
    assert cells[2 + extra].startswith(f"{7.25 / 12:.3f} [") and cells[3 + extra].startswith(f"{7.5 / 11:.3f} [")
    # updated, stale, both statements, every event, instruction shown; abstention tokens
    t0 = count_tokens(C1["chat_batches"][0]["turns"][0][0]["content"])  # ABS1's one message; ABS3 shows nothing
    assert cells[4 + extra:9 + extra] == ["0.500"] * 5 and cells[9 + extra] == f"{t0 / 2:.0f}"
    assert line(md, "| none | 15 |").strip("| ").split(" | ")[4 + extra:12 + extra] == ["0.000"] * 5 + ["0", "0", "0"]
    # the by-ability tables: a column per backend, none before scripted
    # (event ordering's questions are all in one conversation: a zero-width interval, stats.cluster_t_interval)
    assert "| event_ordering | 0.000 [0.000, 0.793] | 0.875 [0.875, 0.875] |" in md  # evidence recall
    assert "| event_ordering | 0.000 [0.000, 0.793] | 1.000 [0.207, 1.000] |" in md  # nuggets
    assert "| 0.500 [" in line(md, "| knowledge_update | stale (original without update) (↓) | 0.000 [")
    assert "| 0.500 [" in line(md, "| abstention | on topic (↓) | 0.000 [")
    assert "### By size bucket" in md and f"| scripted | 0.667 / {2.5 / 3:.3f} / " in md
    assert "Questions without evidence ids (no recall figure): abstention 2, summarization 1." in md
    assert "Leave-one-conversation-out check" in md


def test_injected_tokens_count_what_came_before_the_cut(scored):
    suite, samples = scored
    rows = copy.deepcopy(samples)
    spend = {s["probe_id"]: s["context_tokens"] for s in rows if s["condition"] == "scripted"}
    # the scripted texts are all under the budget: injected = shown, 783 tokens over the 15 questions
    assert sum(spend.values()) == 783 and spend[IF] == 611
    for s in rows:  # IF's backend injected 40,368 tokens, of which the agent was shown its first 611 (as cut)
        if s["condition"] == "scripted" and s["probe_id"] == IF:
            s["retrievals"]["scripted"]["budget"]["tokens"] = 40368
    v = suite.per_probe(rows).values["scripted"]
    assert v["injected_tokens"][IF] == 40368.0 and v["token_spend"][IF] == 611.0
    assert v["injected_tokens"][ABS1] == v["token_spend"][ABS1] and v["injected_tokens"][ABS3] == 0.0
    assert suite.per_probe(rows).spec("injected_tokens") == (False, "tokens")
    cells = line(suite.render(suite.score(rows)), "| scripted | 15 |").strip("| ").split(" | ")
    # ctx tokens 783 / 15 = 52.2; injected (783 - 611 + 40,368) / 15 = 2,702.7
    assert cells[-3:-1] == ["52", "2703"]


def test_run_probe_retrieves_top_50_and_answers_from_the_shown_text():
    class Ctx:
        async def retrieve(self, backend, probe, top_k=None):
            self.top_k = top_k
            return {"memories": [{"id": "m", "score": 1.0, "evidence_ids": ["1"], "text": "y" * 300}],
                    "latency_ms": 2.0, "server_ms": 1.0, "formatted_context": "alpha beta", "budget": None}

        async def answer(self, question, blocks):
            self.blocks = blocks
            return {"answer": "alpha"}

    from types import SimpleNamespace

    suite = BeamSuite({"answer": True}, seed=0)
    probe = SimpleNamespace(question="q?")
    ctx = Ctx()
    body = asyncio.run(suite.run_probe(ctx, probe, suite.conditions(["b"], {})[0]))
    assert ctx.top_k is None and suite.retrieve_top_k("b") == 50  # the context asks the suite's top_k (50)
    assert ctx.blocks == ["alpha beta"] and body["answer"] == "alpha"
    rec = body["retrievals"]["b"]
    assert rec["shown_text"] == "alpha beta" and len(rec["memories"][0]["text"]) == 200
    assert body["context_tokens"] == count_tokens("alpha beta")
    body = asyncio.run(BeamSuite({"answer": False}).run_probe(Ctx(), probe, BeamSuite({"answer": False}).conditions(
        ["b"], {})[0]))
    assert "answer" not in body


def test_more_units_names_the_option_for_every_conversation():
    assert BeamSuite({}).more_units({"conversations_in_file": 51}) == ("conversations=0", 51)
    assert BeamSuite({}).more_units({}) is None


def test_cost_groups_are_the_size_buckets_recorded_or_read_from_the_dev_ids(tmp_path):
    s, data = _load(tmp_path, [{**C1, "id": "c-small"}, C2, C3])
    assert data.info["size_of"] == {"c-small": "100K", "beam-500K-1": "500K", "beam-1M-1": "1M"}  # from "size"
    assert s.cost_groups(data.info)[1] == data.info["size_of"]
    suite = BeamSuite()
    label, size_of, order = suite.cost_groups({"size_of": {"c-one": "500K", "c-two": "huge"},
                                               "conversations": ["c-one", "beam-1M-3", "beam-100K-2", "odd"]})
    assert label == "size bucket" and order == ("100K", "500K", "1M")
    # recorded first; an older run.json's dev ids give theirs; an unknown bucket or an id without one gives none
    assert size_of == {"c-one": "500K", "beam-1M-3": "1M", "beam-100K-2": "100K"}
    assert suite.cost_groups({"conversations": ["odd"]}) is None
