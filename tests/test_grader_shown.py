"""The grader decides what was shown from the injected text (metrics/shown.py), never from a backend's claims.

Hand-computed: word 3-grams of each message; a message is shown when at least half of them are in the cut text.
The adversarial backends are the ones issue 45 describes: a memory that claims every id while showing "Noted.",
one that shows the gold messages' exact text under wrong ids, one that pads with its own headers.
"""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from pathlib import Path

import pytest

from services.common.tokens import count_tokens
from services.common.types import IngestBatch, Memory, Message, RetrieveResult, Session
from services.coordinator.context import ProbeContext
from services.coordinator.metrics import budget as B
from services.coordinator.metrics import shown as S
from services.coordinator.suites.base import Probe
from services.coordinator.suites.locomo import LocomoSuite
from tests.fixtures_suites import FakeLLM, mini_locomo, run_inprocess

LONG = "Caroline: I went to the LGBTQ support group yesterday and it was so powerful for me."  # 16 words, 14 3-grams


def test_words_ignore_case_punctuation_markup_and_html_escapes():
    assert S.words("Tom &amp; JERRY's <b>cafe</b>, 2023!") == ["tom", "jerry", "s", "b", "cafe", "b", "2023"]
    assert S.words("") == []
    # an envelope's backslash escapes of line breaks separate words (cortex's strict escaping)
    assert S.words("- [0.91] end\\nStart &lt;b&gt;\\u2028x") == ["0", "91", "end", "start", "b", "x"]
    assert S.word_spans("end\\nStart") == (["end", "start"], [3, 10])


def test_a_message_is_shown_by_the_share_of_its_3grams_in_the_text():
    # the first 8 words "caroline i went to the lgbtq support group" hold 6 of the message's 14 3-grams
    assert S.message_coverage("caroline: i went to the LGBTQ support group", LONG) == pytest.approx(6 / 14)
    # the same words in another format, with the message's other half: all 14
    assert S.message_coverage("- [8 May 2023] " + LONG.upper(), LONG) == 1.0
    # its second half, 10 words in a row: 8 of 14 3-grams; 7 words: 5 of 14, under half
    assert S.message_coverage("support group yesterday and it was so powerful for me", LONG) == pytest.approx(8 / 14)
    assert S.message_coverage("and it was so powerful for me", LONG) == pytest.approx(5 / 14)
    # the words, shuffled: no 3-gram survives
    assert S.message_coverage("powerful so was it and yesterday group support LGBTQ the to went I Caroline", LONG) == 0
    # a two-word message needs both words in a row; an empty one is never shown
    assert S.message_coverage("she said: thanks Mel!", "Thanks, Mel") == 1.0
    assert S.message_coverage("Mel said thanks", "Thanks, Mel") == 0.0
    assert S.message_coverage("anything", "...") == 0.0


def test_text_shown_twice_counts_once():
    idx = S.CorpusIndex([("a", LONG)])
    once = idx.coverage(S.text_keys(S.words(LONG[:40])))
    twice = idx.coverage(S.text_keys(S.words(LONG[:40] + "\n" + LONG[:40])))
    assert once[0] == twice[0] == pytest.approx(5 / 14)  # "caroline i went to the lgbtq support": 5 3-grams


def test_answer_terms_stem_drop_function_words_and_keep_months_and_numbers():
    assert S.answer_terms("The week before 9 June 2023") == ["week", "befor", "9", "june", "2023"]
    assert S.answer_terms("7 May 2023") == ["7", "may", "2023"]
    assert S.answer_terms("two cats and a dog") == ["2", "cat", "dog"]
    assert S.answer_terms("the") == []
    shown = S.shown_terms(S.words("On 7 May, 2023 she adopted two cats."))
    assert S.answer_coverage(S.answer_terms("7 May 2023"), shown) == 1.0
    assert S.answer_coverage(S.answer_terms("two cats and a dog"), shown) == pytest.approx(2 / 3)
    assert S.answer_coverage([], shown) is None


def test_the_budget_cut_decides_which_words_are_in_front_of_the_agent():
    idx = S.CorpusIndex([("a", LONG), ("b", "Melanie: I ran a charity race for mental health last Saturday.")])
    text = "Header.\n- " + LONG + "\n- Melanie: I ran a charity race for mental health last Saturday."
    _, cuts = B.chars_within(text, (5, 1000))
    ids, ans = S.shown_at(text, cuts, idx, "charity race")
    assert ids == [[], ["a", "b"]]  # 5 tokens hold "Header.\n- Caroline": nothing shown
    assert ans == [0.0, 1.0]
    assert S.shown_at(text, cuts, None, None) == ([[], []], [None, None])


# ------------------------------------------------------------------------------------------------------
# Adversarial backends through the rig's real ProbeContext


SESSION = Session(session_id="S1", started_at=datetime(2023, 5, 8, tzinfo=UTC), messages=(
    Message(id="D1:1", role="user", content=LONG),
    Message(id="D1:2", role="assistant", content="Melanie: That's great, Caroline! What did you learn there?"),
    Message(id="D1:3", role="user", content="Caroline: The transgender stories were so inspiring; I felt accepted."),
))
CORPUS = {"conv": IngestBatch(sessions=(SESSION,))}
PROBE = Probe(id="conv:q0", question="When did Caroline go to the LGBTQ support group?", ground_truth="7 May 2023",
              evidence_ids=["D1:1", "D1:3"], namespace="conv")


class Adversary:
    """Stores nothing of use; answers every retrieve with what `make(ids, texts)` returns."""

    def __init__(self, make):
        self.make = make
        self.ids: list[str] = []
        self.texts: list[str] = []

    async def retrieve(self, ns, q) -> RetrieveResult:
        ids = [m.id for s in CORPUS["conv"].sessions for m in s.messages]
        texts = [m.content for s in CORPUS["conv"].sessions for m in s.messages]
        return self.make(ids, texts), 1000  # (result, client-observed ns), as services/adapters/client


def _values(make) -> dict[str, float | None]:
    ctx = ProbeContext({"x": Adversary(make)}, CORPUS, FakeLLM(), FakeLLM(), Path(__import__("tempfile").mkdtemp()),
                       "t")
    rec = asyncio.run(ctx.retrieve("x", PROBE))
    return B.probe_values(rec["budget"], PROBE.evidence_ids)


def test_claiming_every_id_on_a_memory_that_shows_nothing_gains_nothing():
    v = _values(lambda ids, texts: RetrieveResult(memories=[Memory("m", "Noted.", 1.0, evidence_ids=ids)]))
    assert v["claimed_recall@1000"] == 1.0  # what the old rule credited (issue 45: 1.000 for an empty memory)
    assert v["budget_recall@1000"] == 0.0 and v["budget_recall@250"] == 0.0
    assert v["answer_terms@1000"] == 0.0


def test_the_gold_text_under_wrong_ids_gets_full_credit():
    v = _values(lambda ids, texts: RetrieveResult(memories=[
        Memory(f"wrong-{i}", t, 1.0, evidence_ids=["nope"]) for i, t in enumerate(texts)]))
    assert v["budget_recall@1000"] == 1.0 and v["budget_recall@250"] == 1.0
    assert v["claimed_recall@1000"] == 0.0


def test_a_sentence_of_a_long_message_does_not_credit_the_whole_message():
    # cortex-style: a fragment extracted from D1:3 (10 words, 8 3-grams), claiming its source: 3 of 8 3-grams
    v = _values(lambda ids, texts: RetrieveResult(memories=[
        Memory("f", "transgender stories were so inspiring", 1.0, evidence_ids=["D1:3"])]))
    assert S.message_coverage("transgender stories were so inspiring", SESSION.messages[2].content) == \
        pytest.approx(3 / 8)
    assert v["claimed_recall@1000"] == 0.5 and v["budget_recall@1000"] == 0.0


def test_own_headers_cost_budget_not_credit():
    pad = "MEMORY SYSTEM v9 context block. " * 60  # 7 tokens a repeat: 421 tokens of header
    plain = _values(lambda ids, texts: RetrieveResult(formatted_context="\n".join(texts)))
    padded = _values(lambda ids, texts: RetrieveResult(formatted_context=pad + "\n" + "\n".join(texts)))
    assert count_tokens(pad) == 421
    assert plain["budget_recall@250"] == 1.0 and padded["budget_recall@250"] == 0.0  # the header fills 250
    assert padded["budget_recall@1000"] == 1.0  # nothing gained or lost past the header
    assert padded["budget_tokens"] > plain["budget_tokens"]


def test_a_suite_run_credits_the_claim_all_memory_with_nothing(tmp_path):
    """End to end through LocomoSuite's per-probe scoring: the claim-everything memory and an honest one."""
    root = mini_locomo(tmp_path)

    class Client:
        def __init__(self, honest: bool):
            self.honest, self.msgs = honest, []

        async def describe(self):
            return {"capabilities": []}

        async def reset(self, ns):
            self.msgs = []

        async def ingest(self, ns, batch):
            self.msgs += [m for s in batch.sessions for m in s.messages]

        async def settle(self, ns, timeout):
            return None

        async def retrieve(self, ns, q):
            if self.honest:
                mems = [Memory(m.id, m.content, 1.0, evidence_ids=[m.id]) for m in self.msgs]
            else:
                mems = [Memory("m", "Noted.", 1.0, evidence_ids=[m.id for m in self.msgs])]
            return RetrieveResult(memories=mems), 1000

    suite = LocomoSuite({"data_dir": str(root), "answer": False}, seed=0)
    samples = asyncio.run(run_inprocess(suite, {"liar": Client(False), "honest": Client(True)}))
    pv = suite.per_probe(samples)
    liar, honest = pv.values["liar"], pv.values["honest"]
    assert set(liar["budget_recall@1000"].values()) == {0.0}
    assert set(liar["claimed_recall@1000"].values()) == {1.0}
    assert set(honest["budget_recall@1000"].values()) == {1.0}
    # the adversarial question (category 5) has no answer terms to find
    assert [v for k, v in honest["answer_terms@1000"].items() if k.endswith("q2")] == [None]
    assert all(s["retrievals"][next(iter(s["retrievals"]))]["shown_text"] for s in samples)
