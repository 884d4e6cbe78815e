"""FTS query building, both BM25 rank mappings on real FTS5 ranks, keyword extraction (OpenClaw's buildFtsQuery and
bm25RankToScore: openclaw/openclaw src/memory/hybrid.ts, later extensions/memory-core/src/memory/hybrid.ts)."""

import math
import sqlite3

import pytest

from services.adapters.openclaw.fts import (
    bm25_rank_to_score,
    build_fts_query,
    extract_keywords,
    extract_keywords_2609,
)
from services.adapters.openclaw.presets import EARLY, LATE, candidate_count


def test_fts_query_quotes_tokens_and_joins_with_and():
    assert build_fts_query("Hello, world! don't", LATE["fts_token_regex"]) == '"Hello" AND "world" AND "don" AND "t"'
    assert build_fts_query('say "hi"-there', EARLY["fts_token_regex"]) == '"say" AND "hi" AND "there"'


def test_fts_query_without_tokens_is_none():
    assert build_fts_query("?! -- ...", LATE["fts_token_regex"]) is None
    assert build_fts_query("東京", EARLY["fts_token_regex"]) is None  # early regex is ASCII only


def test_fts_query_non_ascii_letters_by_era():
    q = "café naïve 東京 x_1"
    assert build_fts_query(q, EARLY["fts_token_regex"]) == '"caf" AND "na" AND "ve" AND "x_1"'
    assert build_fts_query(q, LATE["fts_token_regex"]) == '"café" AND "naïve" AND "東京" AND "x_1"'


@pytest.fixture()
def fts():
    c = sqlite3.connect(":memory:")
    c.execute("CREATE VIRTUAL TABLE t USING fts5(text, tokenize='unicode61')")
    c.executemany("INSERT INTO t(text) VALUES (?)", [("alpha beta",), ("beta gamma",), ("gamma delta",)])
    yield c
    c.close()


def _rank(c, q):
    return c.execute("SELECT bm25(t) FROM t WHERE t MATCH ? ORDER BY bm25(t)", (q,)).fetchall()[0][0]


def test_rank_mappings_on_real_fts5_ranks(fts):
    # "alpha": N=3, n=1 → IDF = ln(2.5/1.5); doc length 2 = avgdl, f=1 → tf part 2.2/2.2 = 1 → rank = -IDF.
    rank = _rank(fts, '"alpha"')
    idf = math.log(2.5 / 1.5)
    assert rank == pytest.approx(-idf, rel=1e-9)
    assert bm25_rank_to_score(rank, "early") == 1.0  # clamped to 0 → 1/(1+0): the Feb-2026 bug
    assert bm25_rank_to_score(rank, "late") == pytest.approx(idf / (1 + idf))  # 0.510826 / 1.510826
    assert bm25_rank_to_score(rank, "late") == pytest.approx(0.338110, abs=1e-6)


def test_term_in_more_than_half_the_rows_scores_about_1e6(fts):
    # "beta" is in 2 of 3 rows → IDF ln(1.5/2.5) < 0 is clamped to 1e-6 by FTS5.
    rank = _rank(fts, '"beta"')
    assert bm25_rank_to_score(rank, "late") == pytest.approx(1e-6, rel=1e-3)
    assert bm25_rank_to_score(rank, "early") == 1.0


def test_rank_mapping_edge_values():
    assert bm25_rank_to_score(float("nan"), "late") == pytest.approx(1 / 1000)
    assert bm25_rank_to_score(float("inf"), "early") == pytest.approx(1 / 1000)
    assert bm25_rank_to_score(3.0, "late") == 0.25
    assert bm25_rank_to_score(3.0, "early") == 0.25


def test_candidates():
    assert candidate_count(6) == 24
    assert candidate_count(100) == 200
    assert candidate_count(1) == 4


def test_extract_keywords():
    assert extract_keywords("what was the solution for the bug") == ["solution", "bug"]
    assert extract_keywords("that thing we discussed about the API") == ["discussed", "api"]
    # pure numbers and 2-letter ASCII words are dropped; duplicates removed; symbols stay inside a segment
    assert extract_keywords("Port 4000? port db c++") == ["port", "c++"]
    assert extract_keywords("之前方案") == ["之", "前", "方", "案", "之前", "前方", "方案"]


def test_fts_query_with_a_custom_token_regex_uses_that_regex():
    # Neither era's pattern: the given regex is compiled and used as is (digits only here).
    assert build_fts_query("a1 b22 c", r"[0-9]+") == '"1" AND "22"'
    assert build_fts_query("abc", r"[0-9]+") is None
    # a pattern sorting after the late one ("[\p{..." < "[a-z...") too
    assert build_fts_query("x1 Yz", r"[a-z]+") == '"x" AND "z"'


def test_late_rank_mapping_at_zero_and_positive():
    # rank 0 is not negative: 1/(1+0) = 1 (a negative rank r gives |r|/(1+|r|), 0 at r = -0.0 only)
    assert bm25_rank_to_score(0.0, "late") == 1.0
    assert bm25_rank_to_score(-1.0, "late") == 0.5
    assert bm25_rank_to_score(-3.0, "late") == 0.75
    assert bm25_rank_to_score(1.0, "late") == 0.5
    assert bm25_rank_to_score(-1.0, "early") == 1.0
    assert bm25_rank_to_score(1.0, "early") == 0.5
    assert bm25_rank_to_score(float("-inf"), "late") == pytest.approx(1 / 1000)
    for bad in ("nope", "", "Late"):  # unknown names, including ones sorting before "early" and "late"
        with pytest.raises(ValueError, match="bm25 mapping"):
            bm25_rank_to_score(1.0, bad)


def test_rank_mapping_names_built_at_run_time():
    # Mapping names come from configuration (JSON, CLI): equal strings that are not the interned literals.
    early, late = "".join(["ear", "ly"]), "".join(["la", "te"])
    assert bm25_rank_to_score(-1.0, early) == 1.0
    assert bm25_rank_to_score(-1.0, late) == 0.5


# Expectations worked out by hand from dist/query-expansion-XZx6aBHC.mjs `tokenize`/`extractKeywords` of
# openclaw@2026.9.6, and checked by running that file's extractKeywords under node 20 on the same queries.
KEYWORDS_2609 = [
    # Korean: the segment is kept unless it (or its stem) is a stop word; its stem (longest trailing particle
    # "에서" stripped) is added when it is not a stop word and useful (>= 2 Hangul syllables, or ASCII)
    ("서버에서 포트", ["서버에서", "서버", "포트"]),
    ("서버", ["서버"]),  # no particle: no stem
    ("나는 집에", ["집에"]),
    ("데이터를 확인", ["데이터를", "데이터", "확인"]),  # a three-syllable stem is useful too  # "나는" is a stop word; stem "집" is one syllable: not useful
    ("api를 ㅋㅋ이", ["api를", "api", "ㅋㅋ이"]),  # ASCII stem useful; a jamo-only stem is not
    ("그것은", []),  # the stem "그것" is a stop word: the segment goes too
    ("이", []),
    # a particle is stripped only where the word ends with it; the stem here repeats the first word (deduped)
    ("데이터베이스 데이터베이스에서", ["데이터베이스", "데이터베이스에서"]),  # a segment no longer than the particle is not stripped (and is a stop word)
    # Japanese: parts of ASCII / katakana / Han / 2+ hiragana; Han parts add their bigrams
    ("機械学習を使う", ["機械学習", "機械", "械学", "学習", "使"]),
    ("サーバーのポート", ["サーバー", "ポート"]),
    # Chinese: Han characters, then bigrams of adjacent ones; "之前" (ZH) and "前" (JA) are stop words in 2026.9.6
    ("之前方案", ["之", "方", "案", "前方", "方案"]),
    # ASCII: "_" is punctuation (\p{P}); 2-letter words, pure numbers and pure symbols dropped
    ("Port 4000? port db c++ _x __ 12ab ...", ["port", "c++", "12ab"]),
    ("the bug, THE Bug; bugs", ["bug", "bugs"]),
]


@pytest.mark.parametrize(("query", "expected"), KEYWORDS_2609)
def test_extract_keywords_2609_table(query, expected):
    assert extract_keywords_2609(query) == expected


def test_extract_keywords_early_japanese_and_symbols():
    assert extract_keywords("機械学習を使う") == ["機械学習", "機械", "械学", "学習", "使"]
    assert extract_keywords("abc ab a1 99 ++ 12ab") == ["abc", "a1", "12ab"]
    assert extract_keywords("") == []
