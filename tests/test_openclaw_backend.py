"""The OpenClaw backend end to end, in process: workspace building, evidence, presets, FTS-only mode and the
contract checks (isolation, exact recall with evidence, top_k, ordering, unknown namespace, atomic batches,
concurrency). The LLM is a small deterministic fake; embeddings use the `hash` embedder or a fake with
hand-set vectors."""

from __future__ import annotations

import asyncio
import os
import re
import subprocess
import sys
from datetime import UTC, datetime

import numpy as np
import pytest

from services.adapters.base import BackendContext
from services.adapters.client import InProcessBackendClient
from services.adapters.openclaw.backend import OpenClawBackend
from services.adapters.openclaw.workspace import FlushSkipper, attribute_line, parse_flush_reply
from services.common import prompts
from services.common.types import Document, IngestBatch, Message, RetrieveQuery, Session, ValidationError

REF = datetime(2026, 2, 2, tzinfo=UTC)


@pytest.fixture(autouse=True)
def _cache_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("MEMRIG_CACHE_DIR", str(tmp_path / "cache"))


class FakeLLM:
    """Extracts every sentence with a digit or a decision word, verbatim, as a Markdown bullet."""

    def __init__(self, fail: bool = False):
        self.calls: list[list[dict]] = []
        self.fail = fail

    async def chat(self, messages, temperature=0.0, **kw):
        self.calls.append(messages)
        if self.fail:
            raise RuntimeError("LLM down")
        lines = []
        for m in messages[1:-1]:
            for sent in re.split(r"(?<=[.!?])\s+", m["content"]):
                if re.search(r"\d|always|never|chose", sent, re.I):
                    lines.append("- " + sent.strip())

        class R:
            text = "\n".join(lines) or "NO_REPLY"

        return R()


class FakeEmbedder:
    """Hand-set vectors: the query text itself → e0; text containing 'zebra' → e1; anything else → e0."""

    name = "fake-3"
    dim = 3

    def __init__(self, query: str):
        self.query = query

    def encode(self, texts):
        out = np.zeros((len(texts), 3), dtype=np.float32)
        for i, t in enumerate(texts):
            out[i, 0 if (t == self.query or "zebra" not in t) else 1] = 1.0
        return out

    async def aencode(self, texts, persist=True):
        return self.encode(texts)

    async def aencode_query(self, text):  # a search query's vector (the rig's never cached)
        return self.encode([text])[0]


def session(sid, day, *msgs):
    return Session(sid, datetime(2026, 1, day, tzinfo=UTC),
                   tuple(Message(f"{sid}-m{i}", role, text) for i, (role, text) in enumerate(msgs)))


S1 = session("s1", 5, ("user", "Let's set the API port to 4000. It is free."), ("assistant", "Done. We always use named exports."))
S2 = session("s2", 20, ("user", "Cache TTL is 300 seconds for now."), ("assistant", "Noted, cache TTL 300."))
S3 = session("s3", 31, ("user", "We chose iron-session over JWT."), ("assistant", "OK, the cookie lasts 30 days."))


def make(config=None, llm=None, embedder="hash"):
    ctx = BackendContext(embedder_name=embedder)
    ctx._llm = llm or FakeLLM()
    b = OpenClawBackend({"bootstrap": False, **(config or {})}, ctx)  # an empty workspace: the hand-computed searches
    return b, InProcessBackendClient(b)


async def test_workspace_daily_logs_memory_md_and_flush_prompt():
    llm = FakeLLM()
    b, c = make(llm=llm)
    await c.ingest("ns", IngestBatch(sessions=(S2, S1, S3)))
    ws = b.workspace("ns")
    assert sorted(ws) == ["MEMORY.md", "memory/2026-01-05.md", "memory/2026-01-20.md", "memory/2026-01-31.md"]
    assert ws["memory/2026-01-05.md"] == "# 2026-01-05\n\n- Let's set the API port to 4000.\n- We always use named exports.\n"
    assert ws["MEMORY.md"] == "# Memory\n- We always use named exports.\n- We chose iron-session over JWT.\n"
    # The flush turn: FLUSH_SYSTEM, the transcript as the preceding messages, then flush_user(<session date>).
    first = llm.calls[0]
    assert first[0] == {"role": "system", "content": prompts.FLUSH_SYSTEM}
    assert first[-1] == {"role": "user", "content": prompts.flush_user("2026-01-05")}
    assert [m["content"] for m in first[1:-1]] == [m.content for m in S1.messages]


async def test_exact_fact_found_with_its_message_id_and_diagnostics():
    b, c = make()
    await c.ingest("ns", IngestBatch(sessions=(S1, S2, S3)))
    await c.settle("ns")
    res, _ = await c.retrieve("ns", RetrieveQuery("API port 4000", top_k=6, reference_time=REF))
    top = res.memories[0]
    assert top.attributes["path"] == "memory/2026-01-05.md"
    assert (top.attributes["start_line"], top.attributes["end_line"]) == ("1", "5")
    assert top.attributes["citation"] == "memory/2026-01-05.md#L1-L5"
    assert "s1-m0" in top.evidence_ids
    assert set(top.channel_scores) == {"hybrid", "vector", "text"}
    assert top.channel_scores["text"] > 0 and top.channel_scores["vector"] > 0
    # formatted context: recent notes of the two newest sessions, then the tool-formatted results
    ctx = res.formatted_context
    assert ctx.startswith("## Recent memory notes (last 2 sessions)")
    assert "### memory/2026-01-20.md (session s2)" in ctx and "(session s1)" not in ctx.split("## memory_search")[0]
    assert "[1] memory/2026-01-05.md#L1-L5 (score " in ctx
    assert [ch.channel for ch in res.channels] == ["fts", "vector", "merge"]


async def test_early_bug_end_to_end_and_late_spare_slot():
    """Keyword-only hit: vector score exactly 0 (orthogonal), FTS hit on 'zebra'. Early: 0.3*1.0 = 0.30 < 0.35 →
    gone. Late: below minScore too, but it takes a spare slot next to the strict vector hit."""
    q = "alpha zebra"
    docs = (Document("d1", "alpha port 4000", path="memory/a.md"), Document("d2", "alpha zebra codename", path="memory/b.md"))
    found = {}
    for preset in ("openclaw-2026-02", "openclaw-late", "openclaw"):
        b, c = make({"preset": preset})
        b._embedder = FakeEmbedder(q)
        await c.ingest("ns", IngestBatch(documents=docs))
        res, _ = await c.retrieve("ns", RetrieveQuery(q, top_k=6, reference_time=REF))
        found[preset] = [(m.attributes["path"], m.evidence_ids) for m in res.memories]
        if preset == "openclaw-2026-02":
            assert b.search("ns", q, 6, np.array([1, 0, 0], np.float32), 0)[0][0].score == pytest.approx(0.7)
            merged_k = [m for m in res.memories if m.attributes["path"] == "memory/b.md"]
            assert merged_k == []
    assert found["openclaw-2026-02"] == [("memory/a.md", ["d1"])]
    assert found["openclaw-late"] == [("memory/a.md", ["d1"]), ("memory/b.md", ["d2"])]
    assert found["openclaw"] == [("memory/a.md", ["d1"]), ("memory/b.md", ["d2"])]  # 2026.9.6: same spare slot


async def test_early_keyword_only_row_scores_030():
    b, _ = make({"preset": "openclaw-2026-02"})
    b._embedder = FakeEmbedder("alpha zebra")
    await b.ingest("ns", IngestBatch(documents=(Document("d1", "alpha port 4000", path="memory/a.md"),
                                               Document("d2", "alpha zebra codename", path="memory/b.md"))))
    from services.adapters.openclaw import fts, hybrid

    kw = b.index.search_keyword("ns", fts.build_fts_query("alpha zebra", b.params["fts_token_regex"]), 24, b.model,
                                lambda r: fts.bm25_rank_to_score(r, "early"))
    vec = b.index.search_vector("ns", np.array([1, 0, 0], np.float32), 24)
    merged = {r.path: r for r in hybrid.merge_hybrid(vec, kw, 0.7, 0.3, "weighted-sum")}
    assert merged["memory/b.md"].score == pytest.approx(0.30)
    assert (merged["memory/b.md"].vector_score, merged["memory/b.md"].text_score) == (0.0, 1.0)


async def test_fts_only_mode_with_keyword_extraction():
    b, c = make({"embedder": "none", "preset": "openclaw-late"})
    assert b.embedder_info() == ("", 0)
    await c.ingest("ns", IngestBatch(sessions=(S1, S2, S3)))
    res, _ = await c.retrieve("ns", RetrieveQuery("what was the cookie duration?", top_k=6, reference_time=REF))
    # keywords: cookie, duration → "cookie" hits the 2026-01-31 log; late selection: strict, else every hit
    assert res.memories, res.channels
    assert res.memories[0].attributes["path"] == "memory/2026-01-31.md"
    assert "s3-m1" in res.memories[0].evidence_ids
    assert res.memories[0].channel_scores["vector"] == 0.0
    assert res.channels[0].note.startswith("fts-only keywords=['cookie', 'duration']")
    assert b.describe_config()["mode"] == "fts-only"


async def test_reset_isolates_namespaces_and_unknown_namespace_is_empty():
    b, c = make()
    await c.ingest("a", IngestBatch(sessions=(S1,)))
    await c.ingest("b", IngestBatch(sessions=(S2,)))
    ra, _ = await c.retrieve("a", RetrieveQuery("cache TTL 300", reference_time=REF))
    assert all(m.attributes["path"] != "memory/2026-01-20.md" for m in ra.memories)
    assert await c.reset("a") == 2
    ra, _ = await c.retrieve("a", RetrieveQuery("API port 4000", reference_time=REF))
    assert ra.memories == [] and ra.formatted_context == ""
    rb, _ = await c.retrieve("b", RetrieveQuery("cache TTL 300", reference_time=REF))
    assert rb.memories and "s2-m0" in rb.memories[0].evidence_ids
    none, _ = await c.retrieve("never-seen", RetrieveQuery("anything"))
    assert none.memories == [] and none.formatted_context == ""
    assert b.namespaces() == ["b"]


async def test_top_k_and_non_increasing_scores():
    b, c = make()
    docs = tuple(Document(f"d{i}", f"port {i} note about the deploy server {i}", path=f"memory/topic{i}.md")
                 for i in range(12))
    await c.ingest("ns", IngestBatch(documents=docs))
    for k in (1, 3, 10):
        res, _ = await c.retrieve("ns", RetrieveQuery("deploy server port", top_k=k, reference_time=REF))
        assert 1 <= len(res.memories) <= k
        scores = [m.score for m in res.memories]
        assert scores == sorted(scores, reverse=True)


async def test_rejected_batch_leaves_nothing():
    b, c = make()
    bad = IngestBatch(sessions=(S1, Session("x", REF, ())))
    with pytest.raises(ValidationError):
        await c.ingest("ns", bad)
    assert b.namespaces() == [] and b.workspace("ns") == {}
    # A failure inside the backend (LLM down) rolls back too.
    b2, c2 = make(llm=FakeLLM(fail=True))
    with pytest.raises(RuntimeError):
        await c2.ingest("ns", IngestBatch(sessions=(S1,)))
    assert b2.namespaces() == [] and b2.index.counts("ns") == {"files": 0, "chunks": 0}
    res, _ = await c2.retrieve("ns", RetrieveQuery("port"))
    assert res.memories == []


async def test_concurrent_ingest_and_retrieve_are_consistent():
    b, c = make()
    await c.ingest("ns", IngestBatch(sessions=(S1,)))
    q = RetrieveQuery("cache TTL 300", top_k=6, reference_time=REF)

    async def reader():
        res, _ = await c.retrieve("ns", q)
        return [m.attributes["path"] for m in res.memories]

    before = await reader()
    results = await asyncio.gather(reader(), c.ingest("ns", IngestBatch(sessions=(S2, S3))), reader(), reader())
    after = await reader()
    assert before != after and after[0] == "memory/2026-01-20.md"
    for paths in (results[0], results[2], results[3]):
        # exactly the state before the batch or exactly the state after it — never half a batch
        assert paths in (before, after), paths


async def test_delta_reindex_and_reingest_appends_only_new_messages():
    llm = FakeLLM()
    b, c = make(llm=llm)
    await c.ingest("ns", IngestBatch(sessions=(S1, S2)))
    n_chunks = b.index.counts("ns")["chunks"]
    more = Session("s2", S2.started_at, (Message("s2-m9", "user", "Raise the TTL to 600 seconds."),))
    await c.ingest("ns", IngestBatch(sessions=(more,)))
    assert [m["content"] for m in llm.calls[-1][1:-1]] == ["Raise the TTL to 600 seconds."]
    assert "- Raise the TTL to 600 seconds." in b.workspace("ns")["memory/2026-01-20.md"]
    assert b.index.counts("ns")["chunks"] == n_chunks  # the file changed, re-chunked to the same count
    assert b.counters()["chunks_indexed"] == n_chunks + 1  # only the changed file was re-indexed


def test_flush_skip_patterns():
    alt = FlushSkipper(0.5, "alternate")
    assert [alt.skip(i, f"s{i}") for i in range(6)] == [False, True, False, True, False, True]
    assert [FlushSkipper(0.0).skip(i, "s") for i in range(3)] == [False] * 3
    rnd = FlushSkipper(0.5, "random", seed=7)
    assert [rnd.skip(0, f"s{i}") for i in range(20)] == [rnd.skip(99, f"s{i}") for i in range(20)]


async def test_flush_skip_preset_writes_nothing_for_skipped_sessions():
    b, c = make({"flush_skip_rate": 0.5})
    await c.ingest("ns", IngestBatch(sessions=(S1, S2, S3)))
    assert sorted(b.workspace("ns")) == ["MEMORY.md", "memory/2026-01-05.md", "memory/2026-01-31.md"]
    assert b.counters()["flushes_skipped"] == 1


def test_attribution_and_reply_parsing():
    msgs = (Message("a", "user", "Port is 4000 for the API."), Message("b", "assistant", "Use Zod for validation."))
    assert attribute_line("- Port is 4000 for the API.", msgs) == ("a",)
    assert attribute_line("- The API port: 4000", msgs) == ("a",)  # 3 of 4 words covered
    assert attribute_line("# Heading", msgs) == ()
    assert parse_flush_reply("NO_REPLY") == []
    assert parse_flush_reply("```md\n- a\n\n- b\n```") == ["- a", "- b"]


def test_presets_and_describe():
    b, _ = make({"preset": "openclaw-2026-02", "vector_weight": 0.6, "text_weight": 0.4})
    d = b.describe_config()
    assert (d["vector_weight"], d["text_weight"], d["bm25_mapping"], d["mmr_enabled"], d["decay_enabled"]) == (
        0.6, 0.4, "early", False, False)
    assert d["max_chars"] == 1600 and d["overlap_chars"] == 320 and d["min_score"] == 0.35
    late, _ = make({"preset": "openclaw-late"})
    d = late.describe_config()
    assert (d["bm25_mapping"], d["mmr_enabled"], d["decay_enabled"], d["selection"]) == ("late", True, True, "spare-slots")
    assert d["release"].startswith("openclaw main of mid 2026")
    assert b.describe_config()["release"] == "openclaw 2026.2 (src/memory/*, February 2026)"
    current, _ = make({"preset": "openclaw"})
    d = current.describe_config()
    assert (d["release"], d["chunker"], d["candidates"]) == (
        "openclaw 2026.9.6", "v5", "200 per leg (min(200, floor(max(200, top_k) * 4)))")
    for preset in ("openclaw", "openclaw-late"):
        with pytest.raises(ValueError):
            make({"preset": preset, "mmr_enabled": False})
    with pytest.raises(ValueError):
        make({"preset": "nope"})


def test_registry_has_both_presets():
    from services.adapters.registry import all_specs

    specs = all_specs()
    assert specs["openclaw"].config == {"preset": "openclaw", "profile": "default"}  # a real install's memory
    assert specs["openclaw-2026-02"].config == {"preset": "openclaw-2026-02"}
    assert specs["openclaw-2026-09"].config == {"preset": "openclaw-2026-09"} and not specs["openclaw-2026-09"].default
    assert specs["openclaw-late"].config == {"preset": "openclaw-late"} and not specs["openclaw-late"].default


@pytest.mark.timeout(120)
async def test_served_over_grpc(tmp_path):
    from services.adapters.client import GrpcBackendClient

    env = {**os.environ, "MEMRIG_CACHE_DIR": str(tmp_path / "cache")}
    proc = subprocess.Popen([sys.executable, "-m", "services.adapters.openclaw", "--port", "0", "--embedder", "hash",
                             "--metrics-port", "-1", "--config", '{"preset": "openclaw-2026-02"}'],
                            stdout=subprocess.PIPE, text=True, env=env, cwd=os.path.dirname(os.path.dirname(__file__)))
    try:
        line = await asyncio.to_thread(proc.stdout.readline)
        m = re.match(r"READY grpc=(\d+) metrics=\d+ pid=(\d+)", line)
        assert m, line
        client = GrpcBackendClient(f"127.0.0.1:{m.group(1)}")
        d = await client.describe()
        assert d["name"] == "openclaw" and d["config"]["bm25_mapping"] == "early"
        await client.ingest("ns", IngestBatch(documents=(Document("d1", "deploys happen on tuesday", path="MEMORY.md"),)))
        res, _ = await client.retrieve("ns", RetrieveQuery("deploys tuesday"))
        assert res.memories[0].evidence_ids == ["d1"]
        assert res.memories[0].attributes["citation"] == "MEMORY.md#L1-L2"
        await client.close()
    finally:
        proc.terminate()
        proc.wait(timeout=20)


async def test_with_the_real_llm_mock_flush():
    """The llm-mock served in process: its flush extracts salient sentences as bullets; evidence maps back."""
    from prometheus_client import CollectorRegistry

    from services.common.llm_client import LLMClient, LLMConfig
    from services.llm_mock.app import start_server
    from services.llm_mock.config import MockConfig

    runner, port = await start_server(MockConfig(port=0), CollectorRegistry())
    llm = LLMClient(LLMConfig(base_url=f"http://127.0.0.1:{port}/v1"))
    try:
        b, c = make(llm=llm)
        arc = session("a1", 12, ("user", "What cache key format should we use?"),
                      ("assistant", "Use the key format `arclight:{entity}:{id}` for every Redis key."),
                      ("user", "Great, and the dev server runs on port 4000."))
        await c.ingest("ns", IngestBatch(sessions=(arc, S1)))
        log = b.workspace("ns")["memory/2026-01-12.md"]
        assert "arclight:{entity}:{id}" in log and "What cache key" not in log
        res, _ = await c.retrieve("ns", RetrieveQuery("arclight entity id key format", top_k=6, reference_time=REF))
        assert res.memories[0].attributes["path"] in ("memory/2026-01-12.md", "MEMORY.md")
        assert "a1-m1" in res.memories[0].evidence_ids
    finally:
        await llm.close()
        await runner.cleanup()


async def test_file_storage_under_the_data_dir(tmp_path):
    ctx = BackendContext(embedder_name="hash", data_dir=tmp_path)
    ctx._llm = FakeLLM()
    b = OpenClawBackend({"storage": "file"}, ctx)
    c = InProcessBackendClient(b)
    await c.ingest("ns", IngestBatch(sessions=(S1,)))
    assert b.disk_bytes() > 0
    assert list((tmp_path / "openclaw").glob("index-*.sqlite"))
    await b.close()


# ---------------------------------------------------------------------------------------------------
# configuration, formatting and the search paths not covered above


@pytest.mark.parametrize(("config", "field"), [
    ({"preset": "openclaw-2026-02", "vector_weight": -0.1}, "vector_weight"),
    ({"preset": "openclaw-2026-02", "text_weight": True}, "text_weight"),
    ({"preset": "openclaw-2026-02", "text_weight": "0.3"}, "text_weight"),
    ({"preset": "openclaw-2026-02", "mmr_enabled": 1}, "mmr_enabled"),
    ({"preset": "openclaw-2026-02", "decay_enabled": "yes"}, "decay_enabled"),
    ({"preset": "openclaw-late", "vector_weight": 0.6}, "vector_weight"),  # fixed in the late presets
    ({"preset": "openclaw", "decay_enabled": False}, "decay_enabled"),
    ({"min_score": 1.5}, "min_score"),
    ({"min_score": -0.01}, "min_score"),
    ({"min_score": True}, "min_score"),
    ({"min_score": "0.3"}, "min_score"),
    ({"storage": "disk"}, "storage"),
    ({"embedder": "bert"}, "embedder"),
    ({"recent_sessions": -1}, "recent_sessions"),
    ({"recent_sessions": 1.5}, "recent_sessions"),
])
def test_bad_config_is_rejected_naming_the_field(config, field):
    with pytest.raises(ValueError, match=field):
        make(config)


def test_accepted_config_values_and_overrides_in_force():
    # a late preset accepts a knob equal to its own value; 0 and 1 bound min_score; 0 recent sessions is valid
    b, _ = make({"preset": "openclaw-late", "mmr_enabled": True, "vector_weight": 0.7, "min_score": 0.0,
                 "recent_sessions": 0})
    assert b.params["mmr_enabled"] is True and b.params["min_score"] == 0.0
    b, _ = make({"preset": "openclaw-2026-02", "vector_weight": 1, "text_weight": 0.0, "mmr_enabled": True,
                 "decay_enabled": True, "min_score": 1.0})
    assert (b.params["vector_weight"], b.params["text_weight"], b.params["mmr_enabled"], b.params["decay_enabled"],
            b.params["min_score"]) == (1, 0.0, True, True, 1.0)
    assert b.describe_config()["min_score"] == 1.0
    b, _ = make({"preset": "openclaw-2026-02", "min_score": 0})
    assert b.params["min_score"] == 0.0 and isinstance(b.params["min_score"], float)
    # None keeps the preset's value
    b, _ = make({"preset": "openclaw-2026-02", "vector_weight": None, "min_score": None})
    assert (b.params["vector_weight"], b.params["min_score"]) == (0.7, 0.35)


def test_describe_config_derived_values():
    early, _ = make({"preset": "openclaw-2026-02"})
    d = early.describe_config()
    assert d["candidates"] == "min(200, floor(top_k * 4))"
    assert d["mode"] == "hybrid" and d["embedding_model"] == early.model
    assert d["evergreen_paths"] == ["MEMORY.md", "memory.md"]  # tuples are listed
    assert d["preset"] == "openclaw-2026-02" and d["prompts_hash"] == prompts.prompts_hash()
    # maxChars = max(32, tokens*4); overlapChars = min(overlap*4, maxChars // 2)
    early.params.update(chunk_tokens=8, chunk_overlap_tokens=5)
    d = early.describe_config()
    assert (d["max_chars"], d["overlap_chars"]) == (32, 16)
    early.params.update(chunk_tokens=5, chunk_overlap_tokens=3)
    d = early.describe_config()
    assert (d["max_chars"], d["overlap_chars"]) == (32, 12)


def test_result_and_notes_formatting():
    from services.adapters.openclaw.hybrid import Scored
    from services.adapters.openclaw.results import citation, format_recent_notes, format_search_results

    assert format_search_results([]) == "## memory_search results\n(no results)"
    rows = [Scored("1", "memory/a.md", 3, 7, "alpha", 0.81249), Scored("2", "MEMORY.md", 1, 1, "beta", 0.5)]
    assert format_search_results(rows) == ("## memory_search results\n\n"
                                           "[1] memory/a.md#L3-L7 (score 0.812)\nalpha\n\n"
                                           "[2] MEMORY.md#L1-L1 (score 0.500)\nbeta")
    assert citation("x.md", 2, 9) == "x.md#L2-L9"
    assert format_recent_notes(None, 2) == ""


async def test_recent_notes_count_follows_the_config():
    b, c = make({"recent_sessions": 1})
    await c.ingest("ns", IngestBatch(sessions=(S1, S2, S3)))
    res, _ = await c.retrieve("ns", RetrieveQuery("cookie 30 days", top_k=6, reference_time=REF))
    head = res.formatted_context.split("## memory_search")[0]
    assert head.startswith("## Recent memory notes (last 1 sessions)\n### memory/2026-01-31.md (session s3)\n")
    assert "(session s2)" not in head
    b0, c0 = make({"recent_sessions": 0})
    await c0.ingest("ns", IngestBatch(sessions=(S1,)))
    res0, _ = await c0.retrieve("ns", RetrieveQuery("port 4000", top_k=6, reference_time=REF))
    assert res0.formatted_context.startswith("## memory_search results")


async def test_blank_query_returns_nothing_and_searches_are_counted():
    b, c = make()
    await c.ingest("ns", IngestBatch(sessions=(S1,)))
    assert b.search("ns", "   ", 6, None, 0) == ([], [])
    res, _ = await c.retrieve("ns", RetrieveQuery("port 4000", top_k=6, reference_time=REF))
    assert res.memories and b.counters()["searches"] == 1
    assert b.counters()["flushes"] == 1 and b.counters()["llm_calls"] == 1 and b.counters()["flushes_skipped"] == 0


class MarkerEmbedder:
    """3-d vectors by a marker word in the text ("one", "two", "three"); anything else (the query) is e0."""

    name = "marker-3"
    dim = 3
    VECS = {"one": (1.0, 0.0, 0.0), "two": (0.8, 0.6, 0.0), "three": (0.3, float(np.sqrt(0.91)), 0.0)}

    def encode(self, texts):
        out = np.zeros((len(texts), 3), dtype=np.float32)
        for i, t in enumerate(texts):
            out[i] = next((v for w, v in self.VECS.items() if w in t.split()), (1.0, 0.0, 0.0))
        return out

    async def aencode(self, texts, persist=True):
        return self.encode(texts)

    async def aencode_query(self, text):  # a search query's vector (the rig's never cached)
        return self.encode([text])[0]


DOCS_123 = (Document("a", "alpha one", path="memory/a.md"), Document("b", "alpha two", path="memory/b.md"),
            Document("c", "alpha three", path="memory/c.md"))


async def test_vector_only_when_hybrid_is_off():
    """hybrid.enabled = false: the vector hits alone, score = cosine, cut at minScore 0.35, no keyword leg."""
    b, c = make({"preset": "openclaw-2026-02"})
    b._embedder = MarkerEmbedder()
    await c.ingest("ns", IngestBatch(documents=DOCS_123))
    # hybrid on (early): 0.7·cos + 0.3·1.0 (every FTS hit scores 1) → a 1.0, b 0.86, c 0.51
    res, _ = await c.retrieve("ns", RetrieveQuery("alpha", top_k=6, reference_time=REF))
    assert [(m.source, round(m.score, 6)) for m in res.memories] == [
        ("memory/a.md", 1.0), ("memory/b.md", 0.86), ("memory/c.md", 0.51)]
    b.params["hybrid_enabled"] = False
    res, _ = await c.retrieve("ns", RetrieveQuery("alpha", top_k=6, reference_time=REF))
    assert [(m.source, round(m.score, 6)) for m in res.memories] == [("memory/a.md", 1.0), ("memory/b.md", 0.8)]
    assert [m.channel_scores["text"] for m in res.memories] == [0.0, 0.0]
    assert [(ch.channel, ch.candidates) for ch in res.channels] == [("fts", 0), ("vector", 3)]
    res, _ = await c.retrieve("ns", RetrieveQuery("alpha", top_k=1, reference_time=REF))
    assert [m.source for m in res.memories] == ["memory/a.md"]


async def test_early_fts_only_mode():
    """FTS-only (no embedder), early preset: one keyword search per extracted keyword, each chunk keeps its best
    score (the early mapping scores every hit 1.0), strict cut; no keyword → the cleaned query itself."""
    b, c = make({"preset": "openclaw-2026-02", "embedder": "none"})
    docs = (Document("a", "alpha beta", path="memory/a.md"), Document("b", "gamma delta", path="memory/b.md"),
            Document("c", "what is this thing", path="memory/c.md"))
    await c.ingest("ns", IngestBatch(documents=docs))
    res, _ = await c.retrieve("ns", RetrieveQuery("alpha gamma?", top_k=6, reference_time=REF))
    assert [(m.source, m.score, m.channel_scores["text"], m.channel_scores["vector"]) for m in res.memories] == [
        ("memory/a.md", 1.0, 1.0, 0.0), ("memory/b.md", 1.0, 1.0, 0.0)]
    assert (res.channels[0].channel, res.channels[0].candidates) == ("fts", 2)
    assert res.channels[0].note == "fts-only keywords=['alpha', 'gamma']"
    assert res.memories[0].attributes["mode"] == "fts-only"
    res, _ = await c.retrieve("ns", RetrieveQuery("alpha gamma?", top_k=1, reference_time=REF))
    assert [m.source for m in res.memories] == ["memory/a.md"]
    res, _ = await c.retrieve("ns", RetrieveQuery("What is this?", top_k=6, reference_time=REF))  # stop words only
    assert [m.source for m in res.memories] == ["memory/c.md"]
    assert res.channels[0].note == "fts-only keywords=['What is this?']"


async def test_late_fts_only_orders_by_best_keyword_score():
    """Late preset, FTS-only: a chunk hit by two keywords keeps the higher score; rows sorted by it (minScore 0
    so that the strict cut keeps every hit)."""
    from services.adapters.openclaw.fts import bm25_rank_to_score

    b, c = make({"preset": "openclaw-late", "embedder": "none", "min_score": 0.0})
    # a is hit by both keywords: "zebra" (1 of 3 chunks) scores far above "quokka" (2 of 3: IDF clamped to 1e-6)
    docs = (Document("a", "zebra quokka", path="memory/a.md"),
            Document("b", "quokka quokka words padding the chunk out", path="memory/b.md"),
            Document("c", "more words", path="memory/c.md"))
    await c.ingest("ns", IngestBatch(documents=docs))
    res, _ = await c.retrieve("ns", RetrieveQuery("quokka zebra", top_k=6, reference_time=REF))
    kw = {}
    for term in ("quokka", "zebra"):
        for hit in b.index.search_keyword("ns", f'"{term}"', 24, None, lambda r: bm25_rank_to_score(r, "late")):
            kw[hit.path] = max(kw.get(hit.path, 0.0), hit.text_score)
    expected = sorted(kw.items(), key=lambda x: -x[1])
    assert [p for p, _ in expected] == ["memory/a.md", "memory/b.md"] and expected[0][1] > 1000 * expected[1][1]
    assert [(m.source, m.channel_scores["text"]) for m in res.memories] == [
        (p, pytest.approx(s)) for p, s in expected]


async def test_memory_attributes_dates_and_selection_reason():
    q = "alpha zebra"
    dated = Document("d1", "alpha port 4000", path="memory/2026-01-03.md")
    undated = Document("d2", "alpha zebra codename", path="memory/b.md", created_at=datetime(2026, 1, 10, 6,
                                                                                               tzinfo=UTC))
    b, c = make({"preset": "openclaw-late"})
    b._embedder = FakeEmbedder(q)
    await c.ingest("ns", IngestBatch(documents=(dated, undated)))
    res, _ = await c.retrieve("ns", RetrieveQuery(q, top_k=6, reference_time=REF))
    by_path = {m.source: m for m in res.memories}
    a, k = by_path["memory/2026-01-03.md"], by_path["memory/b.md"]
    assert a.created_at == datetime(2026, 1, 3, tzinfo=UTC)  # the date in the path
    assert k.created_at == datetime(2026, 1, 10, 6, tzinfo=UTC)  # the file's mtime
    assert a.attributes["selected_by"] == "strict" and k.attributes["selected_by"] == "keyword-fallback"
    assert a.attributes["decay"] == f"{0.5 ** (30 / 30):.6f}"  # 2026-01-03 → 2026-02-02: 30 days
    assert (a.attributes["preset"], a.attributes["mode"], a.kind) == ("openclaw-late", "hybrid", "chunk")
    assert a.evidence_ids == ["d1"] and a.text.startswith("alpha port 4000")


async def test_embedder_choice_lifecycle_settle_and_reset():
    b, c = make()  # embedder "" → the process (context) embedder
    fake = FakeEmbedder("q")
    b.context._embedder = fake
    assert b.embedder is fake and b.model == "fake-3" and b.embedder_info() == ("fake-3", 3)
    own, _ = make({"embedder": "hash"})  # an embedder named in the config is the backend's own
    own.context._embedder = fake
    await own.start()
    assert own._embedder is not None and own.embedder is not fake and own.model == own.embedder.name
    none, _ = make({"embedder": "none"})
    await none.start()
    assert none.embedder is None and none.model == "fts-only" and none._embedder is None
    await c.ingest("ns", IngestBatch(sessions=(S1, S2)))
    st = await c.settle("ns")
    assert st.settled and st.counts["sessions"] == 2 and st.counts["files"] == 3
    assert st.counts["chunks"] == b.index.counts("ns")["chunks"] > 0
    assert st.items_indexed == (await b.namespace_stats("ns")).items
    assert b.disk_bytes() == 0  # in-memory storage
    assert await c.reset("ns") == 4 and b.index.counts("ns")  # 4 messages dropped == {"files": 0, "chunks": 0}
    await b.close()
    assert b._index is None and b.disk_bytes() == 0


class RecordingLLM(FakeLLM):
    def __init__(self):
        super().__init__()
        self.temperatures: list[float] = []

    async def chat(self, messages, temperature=0.0, **kw):
        self.temperatures.append(temperature)
        return await super().chat(messages, temperature=temperature, **kw)


async def test_flush_temperature_seed_and_unchanged_sessions():
    llm = RecordingLLM()
    b, c = make(llm=llm)
    await c.ingest("ns", IngestBatch(sessions=(S1,)))
    await c.ingest("ns", IngestBatch(sessions=(S1,)))  # nothing new: no second flush, no attempt counted
    assert llm.temperatures == [0.0] and b.counters()["flushes"] == 1
    warm = RecordingLLM()
    _, c2 = make({"llm_temperature": 0.4}, llm=warm)
    await c2.ingest("ns", IngestBatch(sessions=(S1,)))
    assert warm.temperatures == [0.4]
    # random skipping is seeded per session id with flush_seed (default 0)
    sessions = [session(f"r{i}", 1 + i, ("user", f"Port {i} is 40{i}.")) for i in range(12)]
    expected = [not FlushSkipper(0.5, "random", 0).skip(0, s.session_id) for s in sessions]
    assert 0 < sum(expected) < 12
    b3, c3 = make({"flush_skip_rate": 0.5, "flush_skip_mode": "random"})
    await c3.ingest("ns", IngestBatch(sessions=tuple(sessions)))
    written = {p for p in b3.workspace("ns") if p.startswith("memory/")}
    assert [f"memory/2026-01-{1 + i:02d}.md" in written for i in range(12)] == expected
    assert b3.counters()["flushes"] == sum(expected) and b3.counters()["flushes_skipped"] == 12 - sum(expected)


async def test_channel_durations_are_elapsed_nanoseconds():
    import time

    for preset in ("openclaw-late", "openclaw"):
        b, c = make({"preset": preset})
        await c.ingest("ns", IngestBatch(sessions=(S1, S2)))
        qv = np.array([1.0] + [0.0] * (b.embedder.dim - 1), np.float32)
        t0 = time.perf_counter_ns()
        _, diags = b.search("ns", "cache TTL 300", 6, qv, 0)
        wall = time.perf_counter_ns() - t0
        assert [d.channel for d in diags] == ["fts", "vector", "merge"]
        assert all(0 <= d.duration_ns <= wall for d in diags)
        assert sum(d.duration_ns for d in diags) <= wall


async def test_a_score_equal_to_min_score_is_strict():
    # minScore 1.0; "alpha one" has cosine exactly 1 and an FTS hit (early: 1.0): 0.7 + 0.3 = 1.0 exactly
    b, c = make({"preset": "openclaw-2026-02", "min_score": 1.0})
    b._embedder = MarkerEmbedder()
    await c.ingest("ns", IngestBatch(documents=DOCS_123))
    res, _ = await c.retrieve("ns", RetrieveQuery("alpha", top_k=6, reference_time=REF))
    assert [(m.source, m.score, m.attributes["selected_by"]) for m in res.memories] == [("memory/a.md", 1.0, "strict")]
    b.params["hybrid_enabled"] = False  # vector only: cosine 1.0 >= 1.0
    res, _ = await c.retrieve("ns", RetrieveQuery("alpha", top_k=6, reference_time=REF))
    assert [(m.source, m.score) for m in res.memories] == [("memory/a.md", 1.0)]


async def test_fts_only_mode_of_2026_9_finishes_the_keyword_rows_alone():
    b, c = make({"embedder": "none"})  # the default preset, openclaw 2026.9.6
    await c.ingest("ns", IngestBatch(sessions=(S1, S2, S3)))
    res, _ = await c.retrieve("ns", RetrieveQuery("what was the cookie duration?", top_k=6, reference_time=REF))
    assert [ch.channel for ch in res.channels] == ["fts"]  # no vector leg, no hybrid merge
    assert res.channels[0].note.startswith("boosted body+path, fallback terms=")
    assert res.memories and res.memories[0].attributes["path"] == "memory/2026-01-31.md"
    assert all(m.channel_scores["vector"] == 0.0 and m.attributes["mode"] == "fts-only" for m in res.memories)
    assert res.memories[0].attributes["preset"] == "openclaw"


async def test_a_second_backend_adopts_a_workspace_and_search_params_come_back():
    """What the studies pair two OpenClaw backends with: `adopt_workspace` indexes another backend's workspace as its
    own (same files, same results, the batch in the session store), `search_params` sets minScore / decay for a block
    and restores them."""
    a, ca = make()
    await ca.ingest("ns", IngestBatch(sessions=(S1, S2, S3)))
    b, cb = make()
    assert b.workspace_state("ns") is None
    chunks = await b.adopt_workspace("ns", a.workspace_state("ns"), IngestBatch(sessions=(S1, S2, S3)))
    assert chunks == len(a.indexed_chunks("ns")) > 0 and b.indexed_chunks("ns") == a.indexed_chunks("ns")
    assert b.workspace("ns") == a.workspace("ns") and (await b.namespace_stats("ns")).sessions == 3
    assert b.n["llm_calls"] == 0  # nothing was staged from the sessions
    q = RetrieveQuery("API port 4000", top_k=6, reference_time=REF)
    ra, rb = (await ca.retrieve("ns", q))[0], (await cb.retrieve("ns", q))[0]
    assert [(m.id, m.score) for m in rb.memories] == [(m.id, m.score) for m in ra.memories]
    before = dict(b.params)
    assert ra.memories[0].attributes["selected_by"] == "keyword-fallback"  # hash vectors: below minScore 0.35
    with b.search_params(min_score=0.0, decay=False):
        assert (b.params["min_score"], b.params["decay_enabled"]) == (0.0, False)
        lax = (await cb.retrieve("ns", q))[0].memories
    assert b.params == before
    assert lax and all(m.attributes["selected_by"] == "strict" for m in lax)
    with b.search_params():
        assert b.params == before
