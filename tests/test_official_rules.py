"""The official LoCoMo / LongMemEval rules at their edges, each on a case computed by hand."""

import math
import re

import pytest

from services.coordinator.metrics import qa
from services.coordinator.metrics.retrieval import (
    evidence_recall_at_k,
    lme_turn2session_at_k,
    memory_recall_at_k,
    ndcg_any_at_k,
    ranked_unique,
)
from services.coordinator.suites.locomo import LocomoSuite, conversation_of, parse_categories
from services.coordinator.suites.longmemeval import LongMemEvalSuite, question_batch, session_of_turn
from tests.fixtures_golden import rec
from tests.fixtures_suites import mini_locomo


def test_locomo_normaliser_uses_regex_word_boundaries():
    # "the" + COMBINING ACUTE: `regex` counts the mark as part of the word, so "the" is not an article here;
    # Python's `re` would cut it off and leave the bare mark.
    assert qa.normalize_answer("the\u0301 cat") == "the\u0301 cat"
    assert re.sub(r"\b(a|an|the|and)\b", " ", "the\u0301 cat").split() == ["\u0301", "cat"]
    # SUPERSCRIPT TWO is not a word character for `regex` (category No), so the "a" before it is an article
    assert qa.normalize_answer("a\u00b2 b") == "\u00b2 b"
    assert re.sub(r"\b(a|an|the|and)\b", " ", "a\u00b2 b").split() == ["a\u00b2", "b"]


def test_locomo_exact_match_compares_token_sets():
    assert qa.exact_match("dog, cat", "The cat and dog") == 1.0
    assert qa.exact_match("cat cat dog", "dog cat") == 1.0
    assert qa.exact_match("cat", "cat dog") == 0.0


def test_lme_ndcg_ideal_from_corpus_and_never_above_one():
    # a repeated gold id counts once: without that the DCG would be 1 + 1 = 2 against an ideal of 1
    assert ndcg_any_at_k(["a", "a", "b"], ["a"], 3) == 1.0
    # the ideal holds gold ids found in the corpus: gold z is not in it, so one relevant id is perfect
    assert ndcg_any_at_k(["a", "b"], ["a", "z"], 2, corpus=["a", "b"]) == 1.0
    assert ndcg_any_at_k(["a", "b"], ["a", "z"], 2) == 0.5  # ideal 1 + 1/log2(2) = 2
    # LongMemEval's DCG weighs ranks 1 and 2 alike: rank 3 gets 1/log2(3)
    assert ndcg_any_at_k(["b", "a"], ["a"], 5) == 1.0
    assert ndcg_any_at_k(["b", "c", "a"], ["a"], 5) == pytest.approx(0.630930, abs=1e-6)


def test_lme_official_turn2session_grows_k():
    corpus = ["s1_1", "s1_3", "s2_1", "s2_3", "s3_1"]
    ranking = ["s1_1", "s1_3", "s2_3", "s3_1"]
    # k = 2 sessions: s1, s1 span one session, so the cut-off grows to 3 turns (s1, s1, s2)
    any_, all_, ndcg = lme_turn2session_at_k(ranking, ["s2_1", "s2_3"], corpus, 2, session_of_turn)
    assert (any_, all_) == (1.0, 1.0)
    # DCG over [0, 0, 1] = 1/log2(3); ideal: the 2 gold turns in the corpus -> 1 + 1/log2(2) = 2
    assert ndcg == pytest.approx(0.630930 / 2, abs=1e-6)
    # memrig's de-duplicated session figure on the same ranking: [s1, s2] at k = 2, s2 at rank 2 -> 1.0
    sessions = ranked_unique(session_of_turn(t) for t in ranking)
    assert ndcg_any_at_k(sessions, ["s2"], 2, corpus=["s1", "s2", "s3"]) == 1.0
    # turns outside the corpus (assistant turns) are dropped; no gold -> None
    assert lme_turn2session_at_k(["s9_2", "s2_1"], ["s2_1"], corpus, 1, session_of_turn)[0] == 1.0
    assert lme_turn2session_at_k(ranking, [], corpus, 2, session_of_turn) is None


def _turn(role: str, content: str, has_answer: bool = False) -> dict:
    return {"role": role, "content": content, "has_answer": has_answer}


# A made-up haystack in LongMemEval's format: answer session answer_a has one has_answer user turn (its 3rd) between
# two user turns without it; s_b and s_c are other sessions.
TINY_LME = {
    "question_id": "tiny", "question_type": "single-session-user", "question": "What is my dog called?",
    "answer": "Rex", "question_date": "2023/06/01 (Thu) 08:00",
    "haystack_session_ids": ["answer_a", "s_b", "s_c"],
    "haystack_dates": ["2023/05/01 (Mon) 10:00", "2023/05/02 (Tue) 10:00", "2023/05/03 (Wed) 10:00"],
    "haystack_sessions": [
        [_turn("user", "I adopted a dog"), _turn("assistant", "Lovely", True), _turn("user", "Her name is Rex", True),
         _turn("user", "She is brown")],
        [_turn("user", "I like tea"), _turn("assistant", "Green?"), _turn("user", "Black")],
        [_turn("user", "Rainy day")],
    ],
    "answer_session_ids": ["answer_a"],
}
# user turns ranked: answer_a_1 (no has_answer), s_b_1, answer_a_3 (gold), s_c_1, answer_a_4 (no), s_b_3; the
# assistant turn answer_a_2 (has_answer on the assistant side) is not in the official user-turn corpus
TINY_RANKING = ["answer_a_1", "answer_a_2", "s_b_1", "answer_a_3", "s_c_1", "answer_a_4", "s_b_3"]
# Official (noans renaming): sessions noans_a, s_b, answer_a, s_c, noans_a, s_b, relevance [0, 0, 1, 0, 0, 0], one
# gold turn in the corpus (ideal 1).
#   k = 1: top {noans_a}: 0 / 0 / 0.
#   k = 2: top {noans_a, s_b}: 0 / 0 / 0.
#   k = 3: three distinct sessions in 3 turns: 1 / 1, DCG 1/log2(3) over ideal 1 = 0.630930.
# The old rule (every user turn of answer_a maps to answer_a): k = 1 1/1/1; k = 2 1/1/0.5 (ideal 2 of 3 corpus turns
# of answer_a); k = 3 cut-off 4 turns, (1 + 1/log2 3) / (2 + 1/log2 3) = 0.619906.
TINY_T2S = {1: (0.0, 0.0, 0.0), 2: (0.0, 0.0, 0.0), 3: (1.0, 1.0, 1 / math.log2(3))}


def test_lme_turn2session_renames_turns_without_has_answer_as_upstream():
    _, users, gold_t, gold_s = question_batch(TINY_LME)
    assert users == ["answer_a_1", "answer_a_3", "answer_a_4", "s_b_1", "s_b_3", "s_c_1"]
    assert (gold_t, gold_s) == (["answer_a_3"], ["answer_a"])
    for k, want in TINY_T2S.items():
        assert lme_turn2session_at_k(TINY_RANKING, gold_t, users, k, session_of_turn) == pytest.approx(want), k
    # the suite's per-question values carry the same figures under t2s_* (its k are 1, 3, 5, ...)
    sample = {"condition": "bm25", "probe_id": "tiny", "category": "single-session-user", "evidence_ids": gold_t,
              "meta": {"gold_sessions": gold_s, "user_turns": users, "abstention": False,
                       "sessions": TINY_LME["haystack_session_ids"]},
              "retrievals": {"bm25": rec(*([t] for t in TINY_RANKING))}}
    vals = LongMemEvalSuite({}, seed=0).per_probe([sample]).values["bm25"]
    for k in (1, 3):
        want = TINY_T2S[k]
        got = tuple(vals[f"t2s_{n}@{k}"]["tiny"] for n in ("recall_any", "recall_all", "ndcg_any"))
        assert got == pytest.approx(want), k
    # memrig's own session figure is not renamed: answer_a (its first user turn) is at rank 1
    assert vals["session_recall_any@1"]["tiny"] == 1.0


def test_memory_rank_recall_counts_whole_chunks():
    chunk = [f"D1:{i}" for i in range(1, 16)]
    mems = [chunk, ["D2:1"]]
    gold = ["D1:15", "D2:1"]
    flat = ranked_unique(e for m in mems for e in m)
    assert evidence_recall_at_k(flat, gold, 5) == 0.0  # D1:15 is the 15th flattened turn
    assert memory_recall_at_k(mems, gold, 1) == 0.5
    assert memory_recall_at_k(mems, gold, 2) == 1.0
    assert memory_recall_at_k(mems, gold, 1, "any") == 1.0 and memory_recall_at_k(mems, gold, 1, "all") == 0.0
    assert memory_recall_at_k(mems, [], 1) is None


def test_locomo_categories_option(tmp_path):
    assert parse_categories(1234) == {"1", "2", "3", "4"}  # what the CLI makes of --option categories=1234
    assert parse_categories("1,4") == parse_categories([1, 4]) == {"1", "4"}
    with pytest.raises(ValueError, match="categories"):
        parse_categories("19")
    root = mini_locomo(tmp_path)
    d = LocomoSuite({"data_dir": str(root), "full": True, "categories": 1234}).load()
    assert sorted(p.category for p in d.probes) == ["3", "4"]
    assert conversation_of("conv-26:q3") == "conv-26"
