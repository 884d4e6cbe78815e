"""The `openclaw-2026-09` preset (OpenClaw 2026.9.6's memory search), rule by rule, with hand-computed
expectations: per-entry chunking of MEMORY.md, the per-keyword fallback leg, the lexical boost, keyword
preservation below minScore, decay of dated paths at any depth, filename search, 200 candidates per leg,
importance; plus the two performance changes (MMR tokens at index time, query vectors not persisted) leave
results unchanged."""

from __future__ import annotations

import math
from datetime import UTC, datetime

import numpy as np
import pytest

from services.adapters.base import BackendContext
from services.adapters.openclaw import hybrid
from services.adapters.openclaw.backend import OpenClawBackend
from services.adapters.openclaw.chunker import chunk_markdown_v5
from services.adapters.openclaw.fts import extract_keywords, extract_keywords_2609
from services.adapters.openclaw.keyword_search import (
    KeywordSearch,
    exact_path_matcher,
    lexical_boost_score,
    search_tokens,
)
from services.adapters.openclaw.mmr_matrix import TokenVocab, mmr_rerank_matrix
from services.adapters.openclaw.presets import candidate_count, resolve_preset
from services.adapters.openclaw.ranking_2609 import Decay, importance_multiplier
from services.common.types import Document, IngestBatch, RetrieveQuery

DAY = 86_400_000


@pytest.fixture(autouse=True)
def _cache_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("MEMRIG_CACHE_DIR", str(tmp_path / "cache"))


class AxisEmbedder:
    """Hand-set vectors: a text containing "zebra" → axis 0, "lion" → axis 1, any other text → axis 2; the query
    text given at construction → axis 3, orthogonal to every note."""

    name = "axis-4"
    dim = 4

    def __init__(self, query: str = ""):
        self.query = query

    def encode(self, texts, persist=True):
        out = np.zeros((len(texts), 4), dtype=np.float32)
        for i, t in enumerate(texts):
            axis = 3 if t == self.query else 0 if "zebra" in t.lower() else 1 if "lion" in t.lower() else 2
            out[i, axis] = 1.0
        return out

    async def aencode(self, texts, persist=True):
        return self.encode(texts)

    async def aencode_query(self, text):  # a search query's vector (the rig's never cached)
        return self.encode([text])[0]


def make(config=None, embedder=None):
    b = OpenClawBackend({"preset": "openclaw-2026-09", "bootstrap": False, **(config or {})},
                        BackendContext(embedder_name="hash"))
    if embedder is not None:
        b._embedder = embedder
    return b


def docs(files: dict[str, str]) -> IngestBatch:
    # apply_document appends the text's lines and the file ends with "\n" (workspace.WFile.content)
    return IngestBatch(documents=tuple(Document(f"d{i}", text, path=path) for i, (path, text) in enumerate(files.items())))


# ---------------------------------------------------------------------------------------------------
# chunking (chunking version 5)


def test_memory_md_is_chunked_one_bullet_or_heading_per_chunk():
    content = "# Memory\n- Dev server runs on port 3001.\n- We use pnpm.\n"
    chunks = [(c.start_line, c.end_line, c.text) for c in chunk_markdown_v5(content, per_entry=True)]
    # line 1 opens a section; each "- " line flushes the chunk before it; the trailing empty line stays with the
    # last bullet
    assert chunks == [(1, 1, "# Memory"), (2, 2, "- Dev server runs on port 3001."), (3, 4, "- We use pnpm.\n")]
    # a daily log is not per-entry: one chunk for the whole small file
    assert [(c.start_line, c.end_line) for c in chunk_markdown_v5(content)] == [(1, 4)]
    # blank chunks are dropped (prepareMemoryIndexChunks): the two leading empty lines form one and vanish
    assert [(c.start_line, c.end_line, c.text) for c in chunk_markdown_v5("\n\n# H\n", per_entry=True)] == [
        (3, 4, "# H\n")]


def test_v5_overlap_window_carries_the_tail_of_a_line():
    # tokens=8 → maxChars 32; overlap=2 → 8 chars. Lines of 10 chars cost 11. Lines 1+2 = 22; line 3 would make
    # 33 > 32 → flush [1-2]; window = min(8, 32 - 11) = 8; line 2 (11) does not fit, so its last 7 chars are
    # carried (7 + 1 = 8); then lines 3 and 4 fit (8 + 11 + 11 = 30).
    content = "0123456789\nabcdefghij\nABCDEFGHIJ\nklmnopqrst"
    got = [(c.start_line, c.end_line, c.text) for c in chunk_markdown_v5(content, tokens=8, overlap=2)]
    assert got == [(1, 2, "0123456789\nabcdefghij"), (2, 4, "defghij\nABCDEFGHIJ\nklmnopqrst")]


async def test_only_memory_files_are_indexed():
    """2026.9.6 indexes MEMORY.md, USER.md and memory/**/*.md; a document written elsewhere is not memory."""
    b = make({"embedder": "none"})
    await b.ingest("ns", docs({"MEMORY.md": "- a", "USER.md": "- b", "memory/x/y.md": "- c", "notes/z.md": "- d",
                               "memory/.openclaw-repair/r.md": "- e", "memory/n.txt": "- f"}))
    assert b.index.counts("ns")["files"] == 3
    assert sorted(b.index.file_mtimes("ns")) == ["MEMORY.md", "USER.md", "memory/x/y.md"]
    late = OpenClawBackend({"preset": "openclaw-late", "embedder": "none"}, BackendContext(embedder_name="hash"))
    await late.ingest("ns", docs({"MEMORY.md": "- a", "notes/z.md": "- d"}))
    assert late.index.counts("ns")["files"] == 2  # the earlier presets index every workspace file


# ---------------------------------------------------------------------------------------------------
# keyword leg


def test_extract_keywords_drops_stop_words_of_every_language():
    # "son" (ES stop word), "para" (ES/PT) are dropped in 2026.9.6; the early English-only list kept them
    assert extract_keywords_2609("What did her son bring para the party?") == ["her", "bring", "party"]
    assert extract_keywords("What did her son bring para the party?") == ["her", "son", "bring", "para", "party"]
    assert extract_keywords_2609("What port does the dev server use?") == ["port", "dev", "server", "use"]


def test_lexical_boost_by_hand():
    text = "- Dev server runs on port 3001."
    q = search_tokens("What port does the dev server use?")
    assert q == ["what", "port", "does", "the", "dev", "server", "use"]
    # text tokens: dev server runs on port 3001 (6 distinct); overlap 3 (port, dev, server) of 7 query tokens
    # coverage 3/7 * 0.45, density 3/6 * 0.2; no query token inside "memory/notes.md"; length 31/160 → cap 0.18
    expected = 0.2 + 3 / 7 * 0.45 + 3 / 6 * 0.2 + 0.0 + 0.18
    assert lexical_boost_score(0.2, q, "memory/notes.md", text) == pytest.approx(expected)
    # path boost: 0.18 per query token that is a substring of the path ("dev" in ".../dev-log.md", and
    # "the" is not); short text: 10/160
    assert lexical_boost_score(0.0, ["dev", "the"], "memory/dev-log.md", "dev thing.") == pytest.approx(
        0.5 * 0.45 + 1 / 2 * 0.2 + 0.18 + 10 / 160)
    assert lexical_boost_score(0.9, q, "MEMORY.md", text) == 1.0  # capped at 1
    assert lexical_boost_score(0.4, [], "MEMORY.md", text) == 0.4  # no query tokens → FTS score unchanged


async def test_memory_md_bullet_found_by_keyword_only_query():
    """FTS-only: the AND query ("What" AND "port" AND ...) matches nothing; the fallback legs search port / dev /
    server / use one at a time and the bullet comes back alone, with the boosted score of its own text."""
    b = make({"embedder": "none"})
    await b.ingest("ns", docs({"MEMORY.md": "# Memory\n- Dev server runs on port 3001.\n- We use pnpm.",
                               "memory/2026-01-05.md": "# 2026-01-05\n\n- Lunch was good."}))
    res = await b.retrieve("ns", RetrieveQuery("What port does the dev server use?", top_k=6,
                                               reference_time=datetime(2026, 1, 6, tzinfo=UTC)))
    top = res.memories[0]
    assert (top.attributes["path"], top.attributes["start_line"], top.attributes["end_line"]) == ("MEMORY.md", "2", "2")
    assert top.text == "- Dev server runs on port 3001."
    t = top.channel_scores["text"]
    assert 0 < t < 1
    q = search_tokens("What port does the dev server use?")
    assert top.channel_scores["hybrid"] == pytest.approx(lexical_boost_score(t, q, "MEMORY.md", top.text))
    assert "fallback terms=['port', 'dev', 'server', 'use']" in res.channels[0].note
    # "- We use pnpm." matches the term "use": a keyword hit too, ranked below
    assert [m.attributes["start_line"] for m in res.memories] == ["2", "3"]


async def test_fallback_runs_when_the_and_query_finds_nothing_even_if_it_equals_the_keyword_query():
    b = make({"embedder": "none"})
    await b.ingest("ns", docs({"memory/ideas.md": "- Redis upgrade to 7.2 scheduled."}))
    ks = KeywordSearch(b.index, "ns", lambda r: 1.0, 700)
    # "redis banana": AND finds nothing; keywords [redis, banana] give the same FTS query, but with an empty
    # result the fallback still runs (upstream only skips it when the full query found rows)
    rows, terms = ks.search_with_fallback("redis banana", 200)
    assert terms == ["redis", "banana"] and [r.path for r in rows] == ["memory/ideas.md"]
    # "redis upgrade": the AND query finds the row and equals the keyword query → no fallback legs
    rows, terms = ks.search_with_fallback("redis upgrade", 200)
    assert terms == [] and len(rows) == 1


# ---------------------------------------------------------------------------------------------------
# hybrid merge and selection


async def test_keyword_backed_rows_kept_when_nothing_reaches_min_score():
    """Every vector score is 0 (orthogonal axes), so no row reaches minScore 0.35. 2026.9.6 keeps the
    keyword-backed rows (score >= 0); the vector-only rows (content 0 → score 0) are not keyword-backed and go.
    The keyword row's score is 0.3 × boosted keyword score × decay (60 days → 0.25)."""
    b = make(embedder=AxisEmbedder("dev server port"))
    await b.ingest("ns", docs({"memory/2026-01-05.md": "- The dev server runs on port 3001.",
                               "memory/other.md": "- Lunch was good."}))
    ref = datetime(2026, 3, 6, tzinfo=UTC)  # 60 days after 2026-01-05
    res = await b.retrieve("ns", RetrieveQuery("dev server port", top_k=6, reference_time=ref))
    assert [m.attributes["path"] for m in res.memories] == ["memory/2026-01-05.md"]
    m = res.memories[0]
    assert m.channel_scores["vector"] == 0.0 and m.attributes["selected_by"] == "keyword-fallback"
    k = lexical_boost_score(m.channel_scores["text"], ["dev", "server", "port"], m.attributes["path"], m.text)
    assert m.channel_scores["hybrid"] == pytest.approx(0.3 * k * 0.25)
    assert float(m.attributes["decay"]) == pytest.approx(0.25)
    # the late preset has the same preservation rule but no fallback legs and its own chunking; the early one
    # drops everything below minScore
    early = OpenClawBackend({"preset": "openclaw-2026-02"}, BackendContext(embedder_name="hash"))
    early._embedder = AxisEmbedder("dev server port")
    await early.ingest("ns", docs({"memory/2026-01-05.md": "- The dev server runs on port 3001."}))
    assert (await early.retrieve("ns", RetrieveQuery("dev server port", top_k=6, reference_time=ref))).memories == []


async def test_strict_rows_first_then_keyword_only_rows_in_spare_slots():
    """zebra note: vector 1.0 → strict. otter note: vector 0; the AND query ("the" AND "zebra" AND "port")
    finds nothing, the fallback leg "port" finds it → keyword-only → spare slot. lion note: vector 0 and no
    keyword → absent."""
    b = make(embedder=AxisEmbedder())
    await b.ingest("ns", docs({"memory/a.md": "- zebra port notes", "memory/b.md": "- otter port",
                               "memory/c.md": "- lion"}))
    out, _ = b.search("ns", "the zebra port", 6, np.array([1, 0, 0, 0], np.float32), 0)
    assert [(r.path, r.vector_score) for r in out] == [("memory/a.md", 1.0), ("memory/b.md", 0.0)]
    assert out[0].score >= 0.35 > out[1].score


def test_candidates_200_per_leg():
    assert candidate_count(6, 4, 200, universe=200) == 200
    assert candidate_count(1000, 4, 200, universe=200) == 200
    assert candidate_count(6, 4, 200) == 24  # the earlier presets: min(200, floor(6 * 4))


async def test_vector_leg_returns_200_candidates():
    b = make()
    await b.ingest("ns", docs({f"memory/n{i:03d}.md": f"- note number {i}" for i in range(230)}))
    _, diags = b.search("ns", "note", 6, b.embedder.encode(["note"])[0], 0)
    assert {d.channel: d.candidates for d in diags}["vector"] == 200


def test_importance_multiplier():
    assert importance_multiplier(None) == 1.0  # missing importance is neutral
    assert importance_multiplier(10) == pytest.approx(1.25)
    assert importance_multiplier(1) == pytest.approx(0.8)
    assert importance_multiplier(0.5) == pytest.approx(0.8)  # floor 0 → clamped to 1
    assert importance_multiplier(7.9) == pytest.approx(1.1)  # floor 7
    assert importance_multiplier(99) == pytest.approx(1.25)


# ---------------------------------------------------------------------------------------------------
# decay


def test_decay_of_slugged_dated_paths_at_any_depth():
    p = resolve_preset("openclaw-2026-09")
    now = int(datetime(2026, 2, 4, tzinfo=UTC).timestamp() * 1000)  # 30 days after 2026-01-05
    d = Decay(True, now, 30.0, p["dated_path_regex"], p["evergreen_paths"], {"notes/x.md": now - 60 * DAY})
    assert d("memory/notes/2026-01-05-standup.md", "memory") == pytest.approx(0.5)
    assert d("memory/a/b/2026-01-05.md", "memory") == pytest.approx(0.5)
    assert d("memory/2026-01-05.md", "memory") == pytest.approx(0.5)
    for evergreen in ("MEMORY.md", "USER.md", "memory/ideas.md", "memory/notes/standup.md"):
        assert d(evergreen, "memory") == 1.0
    assert d("notes/x.md", "memory") == pytest.approx(0.25)  # outside memory/: its mtime, 60 days old
    # the earlier presets' regex only knew memory/YYYY-MM-DD.md directly under memory/
    late = resolve_preset("openclaw-late")["dated_path_regex"]
    assert hybrid.date_from_path("memory/notes/2026-01-05-standup.md", late) is None
    assert hybrid.date_from_path("memory/notes/2026-01-05-standup.md", p["dated_path_regex"]) == now - 30 * DAY


async def test_note_dated_30_days_before_reference_scores_half_of_an_undated_one():
    b = make({"embedder": "none"})
    text = "- The dev server runs on port 3001."
    await b.ingest("ns", docs({"memory/2026-01-05.md": text, "memory/undated.md": text}))
    res = await b.retrieve("ns", RetrieveQuery("dev server port", top_k=6,
                                               reference_time=datetime(2026, 2, 4, tzinfo=UTC)))
    scores = {m.attributes["path"]: m.channel_scores["hybrid"] for m in res.memories}
    assert scores["memory/2026-01-05.md"] == pytest.approx(scores["memory/undated.md"] / 2)
    assert [m.attributes["path"] for m in res.memories] == ["memory/undated.md", "memory/2026-01-05.md"]


# ---------------------------------------------------------------------------------------------------
# filename search


def test_exact_path_matcher():
    m = exact_path_matcher("ideas")
    assert (m("memory/ideas.md"), m("memory/ideas-old.md"), m("notes/ideas"), m("ideas")) == (1, 0, 2, 3)
    assert exact_path_matcher("ideas.md")("memory/ideas.md") == 2
    assert exact_path_matcher("./Memory/Ideas.md")("memory/ideas.md") == 3  # normalised, case-insensitive
    assert exact_path_matcher("notes/ideas.md")("memory/ideas.md") == 0  # a "/" asks for the full path


async def test_filename_search_ranks_exact_paths_first():
    """Query "ideas": memory/ideas.md is the stem → its first chunk comes first with score 1, ahead of a body
    hit of "ideas" elsewhere; query "notes" matches a folder name only: a path-only row scored by path BM25."""
    b = make(embedder=AxisEmbedder())
    await b.ingest("ns", docs({"memory/ideas.md": "# Ideas\n\n- Try sqlite-vec.",
                               "MEMORY.md": "# Memory\n- Good ideas come at night.",
                               "memory/notes/2026-01-20-standup.md": "- Deploy moved to Thursday."}))
    out, _ = b.search("ns", "ideas", 6, np.array([0, 0, 0, 1], np.float32), 0)
    assert (out[0].path, out[0].start_line, out[0].score, out[0].extra["exact"]) == ("memory/ideas.md", 1, 1.0, 1)
    assert ("MEMORY.md", 2) in [(r.path, r.start_line) for r in out[1:]]
    fts_only = make({"embedder": "none"})
    await fts_only.ingest("ns", docs({"memory/ideas.md": "- Try sqlite-vec.",
                                      "memory/notes/2026-01-20-standup.md": "- Deploy moved to Thursday."}))
    rows, _ = fts_only.search("ns", "notes", 6, None, 0)
    assert [(r.path, r.text_score) for r in rows] == [("memory/notes/2026-01-20-standup.md", 0.0)]
    assert 0 < rows[0].score < 1  # the path score bm25RankToScore(rank) of the path index, decayed by the date
    rows, _ = fts_only.search("ns", "memory/ideas.md", 6, None, 0)
    assert (rows[0].path, rows[0].score, rows[0].extra["exact"]) == ("memory/ideas.md", 1.0, 3)


# ---------------------------------------------------------------------------------------------------
# performance changes leave results unchanged


async def test_index_time_mmr_tokens_equal_per_query_tokens():
    b = make()
    await b.ingest("ns", docs({f"memory/n{i}.md": f"- note {i} about cats and dogs {i % 3}" for i in range(20)}))
    ids = b.index.mmr_token_ids("ns")
    rows = b.index.chunk_rows("ns")
    assert ids and all(np.array_equal(ids[cid], b.index.vocab.ids(hybrid.mmr_tokens(r.text[:700], "ascii+cjk")))
                       for cid, r in rows.items())
    q = b.embedder.encode(["cats and dogs"])[0]
    with_ids, _ = b.search("ns", "cats and dogs", 6, q, 0)
    b.index._matrices["ns"].mmr_tokens = {}  # every row tokenised at query time instead
    without, _ = b.search("ns", "cats and dogs", 6, q, 0)
    assert [(r.id, r.score) for r in with_ids] == [(r.id, r.score) for r in without]


@pytest.mark.parametrize("seed", range(8))
@pytest.mark.parametrize("empty_by_text", [False, True])
def test_vectorised_mmr_selects_exactly_as_the_reference_loop(seed, empty_by_text):
    """Random candidates with duplicate scores, shared and empty token sets: same order as hybrid.mmr_rerank."""
    rng = np.random.default_rng(seed)
    words = ["alpha", "beta", "gamma", "delta", "port", "zebra", "x1", "y_2"]
    items = []
    for i in range(int(rng.integers(2, 60))):
        k = int(rng.integers(0, 5))
        snippet = " ".join(rng.choice(words, size=k)) if k else rng.choice(["", "!!", "??"])
        score = float(rng.choice([0.1, 0.25, 0.5, 0.5, 0.9, float(rng.random())]))
        items.append(hybrid.Scored(f"id{i}", "p.md", i, i, snippet, score))
    vocab = TokenVocab()
    ref = hybrid.mmr_rerank(items, 0.7, "ascii+cjk", empty_by_text=empty_by_text)
    fast = mmr_rerank_matrix(items, 0.7, {}, vocab, "ascii+cjk", empty_by_text=empty_by_text)
    assert [r.id for r in fast] == [r.id for r in ref]


def test_query_vectors_are_not_persisted(tmp_path):
    from services.common.embeddings import EmbeddingCache, HashEmbedder

    cache = EmbeddingCache(tmp_path / "c.sqlite")
    e = HashEmbedder(cache)
    v1 = e.encode(["what port?"], persist=False)
    assert cache.get_many(e.name, [EmbeddingCache.key("what port?")]) == {}
    v2 = e.encode(["what port?"])
    assert np.array_equal(v1, v2)
    assert set(cache.get_many(e.name, [EmbeddingCache.key("what port?")])) == {EmbeddingCache.key("what port?")}
    cache.close()


def test_decay_multiplier_half_life():
    assert math.isclose(hybrid.decay_multiplier(30, 30), 0.5)
