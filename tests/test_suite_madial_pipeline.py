"""MADial-Bench end to end on a crafted archive and dialogue file (no real data needed): the archive load() ingests,
the queries and gold it builds, what run_probe records, and the numbers score() and render() print, hand-computed.
tests/test_golden_suites.py pins the recall/MRR maths on scored samples; this file pins the wiring around it."""

from __future__ import annotations

import asyncio
import json
from datetime import UTC, datetime

import pytest

from services.coordinator.suites.madial import (
    KS,
    MadialSuite,
    dialogue_query,
    memory_text,
    read_jsonl_or_json,
)
from tests.fixtures_golden import MADIAL_SAMPLES

MEMORY = {
    "2": {"time": "2022-03-04", "scene": "park", "emotion": "joy", "event": " Flew a kite "},
    "10": {"time": "not a date", "scene": "home", "emotion": "calm", "event": "Read a book"},
    "1": {"time": "2021-12-25", "scene": "home", "emotion": "warm", "event": "Christmas dinner"},
}

DIALOGUES = [
    {"user-id": 7, "relevant-id": [2, 99, 1], "test-turn": [3, 5],  # the first test turn counts
     "dialogue": ["<BOD>", '<User>: "I saw a kite today"', "<Assistant>: Nice!", "<User>: It was red",
                  "<Assistant>: Remember the park?", "<EOD>"]},
    {"user-id": 8, "relevant-id": [42], "test-turn": [1], "dialogue": ["<User>: hello", "<Assistant>: hi"]},
    {"user-id": 9, "relevant-id": [10], "test-turn": [], "dialogue": ["<User>: x"]},  # no test turn: skipped
    {"user-id": 9, "relevant-id": [1], "test-turn": [1], "dialogue": ["<BOD>", "<User>: hi"]},  # empty query
    {"user-id": 5, "relevant-id": [10], "test-turn": [1], "dialogue": ["<User>: books?", "<Assistant>: yes"]},
]


def _write(tmp_path, memory_as_jsonl: bool = False):
    d = tmp_path / "madial-bench"
    d.mkdir(exist_ok=True)
    mem = d / "MADial-Bench-en-memory.json"
    if memory_as_jsonl:  # one object per line, split across lines
        mem.write_text("\n".join(json.dumps({k: v}) for k, v in MEMORY.items()) + "\n\n")
    else:
        mem.write_text(json.dumps(MEMORY))
    (d / "MADial-Bench-en-dialogue.json").write_text(json.dumps(DIALOGUES))


def test_defaults_are_the_documented_run():
    assert MadialSuite.defaults == {"data_dir": None, "dialogues": 40, "full": False, "top_k": 50, "mode": "fast",
                                    "max_query_chars": 1200}
    assert KS == (1, 3, 5, 10)


def test_memory_text_and_json_or_jsonl(tmp_path):
    assert memory_text(MEMORY["2"]) == "2022-03-04 — Flew a kite (scene: park; emotion: joy)"
    assert memory_text({}) == " —  (scene: ; emotion: )"
    p = tmp_path / "x.json"
    p.write_text('{"a": 1}')
    assert read_jsonl_or_json(p) == [{"a": 1}]
    p.write_text('[{"a": 1}, {"b": 2}]')
    assert read_jsonl_or_json(p) == [{"a": 1}, {"b": 2}]
    p.write_text('{"a": 1}\n\n{"b": 2}\n')
    assert read_jsonl_or_json(p) == [{"a": 1}, {"b": 2}]


def test_dialogue_query_speaker_lines_before_the_test_turn_newest_kept():
    lines = ["<BOD>", '<User>: "one"', "<Assistant>: two", "<User>: three", "<Assistant>: four"]
    assert dialogue_query(lines, 4) == "User: one\nAssistant: two\nUser: three"
    assert dialogue_query(lines, 2) == "User: one"
    # "User: three" (11) + "Assistant: two" (14 + 1) = 26 fits 26; "User: one" would not
    assert dialogue_query(lines, 4, max_chars=26) == "Assistant: two\nUser: three"
    assert dialogue_query(lines, 4, max_chars=25) == "User: three"
    assert dialogue_query(["<User>: " + "x" * 30], 1, max_chars=10) == "User: xxxx"  # one line cut to the limit
    assert dialogue_query(["<BOD>", "<EOD>"], 2) == ""


@pytest.mark.parametrize("jsonl", [False, True])
def test_load_builds_the_archive_and_the_probes(tmp_path, jsonl):
    _write(tmp_path, memory_as_jsonl=jsonl)
    suite = MadialSuite({"data_dir": str(tmp_path), "full": True}, seed=0)
    data = suite.load()
    batch = data.corpora["archive"]
    assert batch.batch_id == "madial-archive"
    assert [s.session_id for s in batch.sessions] == ["mem-1", "mem-2", "mem-10"]  # numeric order, not text
    assert batch.sessions[1].started_at == datetime(2022, 3, 4, tzinfo=UTC)
    assert batch.sessions[2].started_at == datetime(2023, 1, 1, tzinfo=UTC)  # an unparsable date falls back
    m = batch.sessions[1].messages[0]
    assert (m.id, m.role, m.content) == ("mem-2", "user", memory_text(MEMORY["2"]))
    # d0: gold keeps the ids in the archive, in order (99 is missing); d1's only id is missing; d2 has no test
    # turn; d3's query is empty
    assert [p.id for p in data.probes] == ["d0", "d4"]  # the skipped ones do not stop the loop
    assert data.probes[1].question == "User: books?" and data.probes[1].evidence_ids == ["mem-10"]
    p = data.probes[0]
    assert p.evidence_ids == ["mem-2", "mem-1"] and p.meta == {"primary": "mem-2", "test_turn": 3}
    assert p.question == "User: I saw a kite today\nAssistant: Nice!"
    assert (p.category, p.namespace) == ("user-7", "archive")
    assert data.info["memories"] == 3 and data.info["dialogues"] == 2
    assert data.info["gold_ids_missing_from_archive"] == 2  # 99 in d0, 42 in d1


def test_sampling_picks_the_asked_number_of_dialogues(tmp_path):
    _write(tmp_path)
    load = lambda n, seed=0: MadialSuite({"data_dir": str(tmp_path), "dialogues": n}, seed=seed).load()  # noqa: E731
    assert load(1).info["sampling"] == {"seed": 0, "full": False, "dialogues": 1}
    # one dialogue drawn out of five: d0 or d4 (a probe each) or one that yields none
    assert {len(load(1, s).probes) for s in range(12)} == {0, 1}
    for n in (5, 10, 0, -1):  # all five (or more, or 0 / a negative = no sampling): both probes
        assert [p.id for p in load(n).probes] == ["d0", "d4"], n


def test_max_query_chars_option_reaches_the_query(tmp_path):
    _write(tmp_path)
    p = MadialSuite({"data_dir": str(tmp_path), "full": True, "max_query_chars": 30}, seed=0).load().probes[0]
    assert p.question == "Assistant: Nice!"


def test_dialogue_query_default_window_is_1200_characters():
    assert len(dialogue_query(["<User>: " + "x" * 1300], 1)) == 1200  # "User: " + 1194 x
    two = ["<User>: " + "a" * 594, "<Assistant>: " + "b" * 588]  # 600 and 599 characters: 1200 with the newline
    assert dialogue_query(two, 2) == "\n".join(["User: " + "a" * 594, "Assistant: " + "b" * 588])
    three = ["<User>: " + "a" * 595, "<Assistant>: " + "b" * 588]  # 601 + 1 + 599 = 1201: the oldest line goes
    assert dialogue_query(three, 2) == "Assistant: " + "b" * 588


def test_the_suite_is_registered():
    from services.coordinator.suites.registry import get_suite

    assert get_suite("madial") is MadialSuite


class _Ctx:
    async def retrieve(self, backend, probe):
        return {"memories": [{"id": "mem-2", "score": 0.5, "evidence_ids": ["mem-2"], "text": "y" * 250}],
                "latency_ms": 3.0, "server_ms": 2.0, "formatted_context": "alpha beta"}


def test_run_probe_records_the_compact_retrieval():
    from services.common.tokens import count_tokens

    suite = MadialSuite({}, seed=0)
    assert [(c.name, c.answer) for c in suite.conditions(["a", "b"], {})] == [("a", False), ("b", False)]
    body = asyncio.run(suite.run_probe(_Ctx(), None, suite.conditions(["b"], {})[0]))
    assert len(body["retrievals"]["b"]["memories"][0]["text"]) == 200
    assert body["context_tokens"] == count_tokens("alpha beta") == body["retrievals"]["b"]["context_tokens"]


def _two_conditions():
    out = []
    for s in MADIAL_SAMPLES:
        a = json.loads(json.dumps(s))
        b = json.loads(json.dumps(s))
        b["condition"], b["retrievals"] = "bm25", {"bm25": {"memories": [], "latency_ms": None, "server_ms": None}}
        del b["context_tokens"]
        out += [a, b]
    return out


def test_score_and_render_print_the_numbers():
    s = MadialSuite({}, seed=0)
    s._info = {}
    res = s.score(_two_conditions())
    o, x = res["conditions"]["openclaw"], res["conditions"]["bm25"]
    assert o["overall"]["token_spend"]["mean"] == pytest.approx(7.0)
    assert x["overall"]["token_spend"]["mean"] == pytest.approx(0.0)
    assert o["latency"]["p50_ms"] == pytest.approx(2.0) and x["latency"]["n"] == 0
    assert x["overall"]["mrr"]["mean"] == pytest.approx(0.0) and x["overall"]["recall@10"]["n"] == 3
    assert sorted(int(k.split("@")[1]) for k in o["overall"] if k.startswith("recall@")) == list(KS)
    assert res["baseline"] == "openclaw"
    comps = {c["metric"]: c for c in res["comparisons"]["bm25"]["comparisons"]}
    assert {k: c["higher_is_better"] for k, c in comps.items()} == {
        "mrr": True, "recall@5": True, "primary_hit@5": True, "token_spend": False, "latency_ms": False}
    md = s.render(res)
    # recall@1,3,5,10: 0.5, 2/3, 2/3, 2/3; primary@1,3,5,10: 1/3, 2/3, 2/3, 2/3; 7 tokens; p50 2.0 ms
    assert "| openclaw | 3 | 0.667 [" in md
    assert "| 0.500 | 0.667 | 0.667 | 0.667 | 0.333 | 0.667 | 0.667 | 0.667 | 7 | 2.0 |" in md
    assert "| bm25 | 3 | 0.000 [" in md and "| 0.000 | 0.000 | 0.000 | 0.000 | 0.000 | 0.000 | 0.000 | 0.000 | 0 | — |" in md
    assert "| backend | n | MRR [CI] | R@1 | R@3 | R@5 | R@10 | primary@1 | primary@3 | primary@5 | primary@10 | " \
           "ctx tokens | p50 ms |" in md
    assert "Scorecard" in md
    res["comparisons"] = {}
    assert "Scorecard" not in s.render(res)


def test_only_archive_ids_rank_and_a_probe_without_gold_is_left_out():
    s = MadialSuite({}, seed=0)
    s._info = {}
    rows = [{"condition": "c", "probe_id": "d9", "evidence_ids": [], "meta": {},
             "retrievals": {"c": {"memories": [{"id": "mem-1", "evidence_ids": ["chunk-1", "mem-1"]}],
                                  "latency_ms": 1.0}}},
            {"condition": "c", "probe_id": "d8", "evidence_ids": ["mem-1"], "meta": {"primary": "mem-1"},
             "retrievals": {"c": {"memories": [{"id": "chunk-1", "evidence_ids": ["chunk-1", "mem-1"]}],
                                  "latency_ms": 1.0}}}]
    o = s.score(rows)["conditions"]["c"]["overall"]
    # d8: chunk-1 is not an archive id, so mem-1 ranks first; d9 has no gold: left out (None), not a zero
    assert (o["recall@1"]["mean"], o["recall@1"]["n"]) == (pytest.approx(1.0), 1)
    assert (o["primary_mrr"]["mean"], o["primary_mrr"]["n"]) == (pytest.approx(1.0), 1)
    from services.coordinator.baseline import choose

    assert choose(["c"])[0] == "c"
