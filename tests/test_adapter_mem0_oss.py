"""`mem0-oss`: Mem0's own library behind the adapter. Its results equal `mem0.Memory.search` called directly on
the same data; evidence ids ride in Mem0 metadata; infer=True goes through Mem0's extraction with a model at
MEMRIG_LLM_*; `memrig conformance` passes."""

from __future__ import annotations

import importlib.util
import json
from datetime import UTC, datetime, timedelta

import pytest
from aiohttp import web

if importlib.util.find_spec("mem0") is None:  # not importorskip: importing mem0 early would miss MEM0_TELEMETRY
    pytest.skip("[requires:mem0] mem0ai not installed (make setup installs mem0ai==2.2.1 --no-deps)", allow_module_level=True)

from services.adapters.mem0_oss.backend import EVIDENCE_KEY, SESSION_KEY, Mem0OssBackend
from services.adapters.mem0_oss.library import embedder_config, import_mem0
from services.common.embeddings import get_embedder
from services.common.types import Document, IngestBatch, Message, RetrieveQuery, Session
from tests.fixtures_conformance import conformance_in_process
from tests.fixtures_proxy import serve_app

T0 = datetime(2024, 3, 1, 9, 0, tzinfo=UTC)
TEXTS = [
    ("s1", "m1", "user", "The staging database password rotates every 17 days."),
    ("s1", "m2", "assistant", "Noted, the vault-rotator cron job handles the staging rotation."),
    ("s1", "m3", "user", "Lunch orders go through the shared spreadsheet."),
    ("s2", "m4", "user", "The billing service deploys to Kubernetes in eu-west-1."),
    ("s2", "m5", "assistant", "Priya owns the billing on-call rotation."),
]
QUERIES = ["How often does the staging password rotate?", "Where does billing deploy?", "who owns on-call",
           "lunch orders spreadsheet"]


def batch() -> IngestBatch:
    sessions = []
    for i, sid in enumerate(("s1", "s2")):
        msgs = tuple(Message(mid, role, text, T0 + timedelta(days=i, minutes=j))
                     for j, (s, mid, role, text) in enumerate(t for t in TEXTS if t[0] == sid))
        sessions.append(Session(sid, T0 + timedelta(days=i), msgs))
    return IngestBatch(tuple(sessions), (Document("d1", "The payments gateway times out after 30 seconds.",
                                                  evidence_ids=("D1:3",)),))


def direct_memory(tmp_path):
    """Mem0's Memory built by hand, the way its docs show (MemoryConfig of qdrant + embedder + llm)."""
    mem0 = import_mem0(tmp_path / "home")
    from mem0.configs.base import MemoryConfig

    emb = get_embedder("hash")
    return mem0.Memory(MemoryConfig(
        vector_store={"provider": "qdrant", "config": {"collection_name": "direct", "embedding_model_dims": emb.dim,
                                                       "path": str(tmp_path / "direct-qdrant"), "on_disk": True}},
        embedder=embedder_config(emb),
        llm={"provider": "openai", "config": {"api_key": "unused", "model": "unused"}},
        history_db_path=str(tmp_path / "direct-history.db"),
    ))


@pytest.mark.slow  # takes seconds (plots, a real library's model, or 1,000 rounds)
async def test_results_equal_mem0_memory_search_called_directly(tmp_path):
    b = Mem0OssBackend()
    await b.start()
    mem = direct_memory(tmp_path)
    try:
        await b.ingest("conv-1", batch())
        assert not b.infer and (await b.namespace_stats("conv-1")).items == 6
        # the same data, straight into Mem0: one add(infer=False) per message, evidence in metadata
        for s in batch().sessions:
            for m in s.messages:
                mem.add([{"role": m.role, "content": m.content}], user_id="conv-1", infer=False,
                        metadata={EVIDENCE_KEY: [m.id], SESSION_KEY: s.session_id, "created_at": m.ts.isoformat()})
        mem.add([{"role": "user", "content": "The payments gateway times out after 30 seconds."}], user_id="conv-1",
                infer=False, metadata={EVIDENCE_KEY: ["D1:3"], SESSION_KEY: "doc:d1"})
        checked = 0
        for q in QUERIES:
            got = await b.retrieve("conv-1", RetrieveQuery(q, 4))
            want = mem.search(q, top_k=4, filters={"user_id": "conv-1"}, threshold=0.1)["results"]
            assert want, q
            assert [(m.text, m.score, m.evidence_ids) for m in got.memories] == \
                   [(r["memory"], r["score"], r["metadata"][EVIDENCE_KEY]) for r in want], q
            checked += len(want)
        assert checked >= 6
        top = (await b.retrieve("conv-1", RetrieveQuery(QUERIES[0], 1))).memories[0]
        assert top.evidence_ids == ["m1"] and top.created_at == T0 and top.source == "mem0:s1"
        # namespaces are Mem0 users: another one sees nothing; reset deletes only this user's memories
        assert (await b.retrieve("conv-2", RetrieveQuery(QUERIES[0], 4))).memories == []
        await b.ingest("conv-2", IngestBatch((Session("x", T0, (Message("x1", "user", TEXTS[0][3]),)),)))
        assert await b.reset("conv-1") == 6
        assert (await b.retrieve("conv-1", RetrieveQuery(QUERIES[0], 4))).memories == []
        assert [m.evidence_ids for m in (await b.retrieve("conv-2", RetrieveQuery(QUERIES[0], 4))).memories] == [["x1"]]
    finally:
        mem.close()
        mem.vector_store.client.close()
        await b.close()


async def test_describe_lists_version_config_and_disabled_channels():
    b = Mem0OssBackend()
    try:
        d = b.describe_config()
        assert b.version == "mem0ai 2.2.1" and d["mem0ai_version"] == "2.2.1"
        assert d["mem0_config"]["vector_store"]["provider"] == "qdrant"
        assert d["mem0_config"]["vector_store"]["config"]["embedding_model_dims"] == 384
        assert d["mem0_config"]["embedder"]["provider"] == "memrig"
        assert d["infer_effective"] is False and "llm-mock" in d["infer_reason"]
        assert set(d["disabled_channels"]) == {"bm25", "entity_boost", "bm25_lemmatization"}
        assert d["search_threshold"] == 0.1
    finally:
        await b.close()


async def test_failed_add_leaves_nothing_behind(tmp_path, monkeypatch):
    b = Mem0OssBackend()
    await b.start()
    try:
        real = b.memory.add
        calls = {"n": 0}

        def flaky(*a, **kw):
            calls["n"] += 1
            if calls["n"] == 4:
                raise RuntimeError("vector store down")
            return real(*a, **kw)

        monkeypatch.setattr(b.memory, "add", flaky)
        with pytest.raises(RuntimeError, match="vector store down"):
            await b.ingest("ns", batch())
        assert b.memory.get_all(filters={"user_id": "ns"})["results"] == []
        assert (await b.namespace_stats("ns")).items == 0
    finally:
        await b.close()


async def test_infer_true_goes_through_mem0_extraction_with_the_configured_model(monkeypatch):
    """A model at MEMRIG_LLM_* (here a fake OpenAI-compatible endpoint): Mem0 sends its extraction prompt and
    stores the facts it returns, with the session's message ids as evidence."""
    prompts: list[list[dict]] = []

    async def chat(request):
        body = await request.json()
        prompts.append(body["messages"])
        facts = {"memory": [{"text": "Staging DB password rotates every 17 days"},
                            {"text": "Vault-rotator cron job handles staging rotation"}]}
        return web.json_response({
            "id": "c1", "object": "chat.completion", "created": 0, "model": body["model"],
            "choices": [{"index": 0, "finish_reason": "stop",
                         "message": {"role": "assistant", "content": json.dumps(facts)}}],
            "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}})

    app = web.Application()
    app.router.add_post("/v1/chat/completions", chat)
    runner, port = await serve_app(app)
    monkeypatch.setenv("MEMRIG_LLM_BASE_URL", f"http://127.0.0.1:{port}/v1")
    monkeypatch.setenv("MEMRIG_LLM_MODEL", "fake-extractor")
    b = Mem0OssBackend()
    try:
        assert b.infer
        await b.ingest("ns", IngestBatch((batch().sessions[0],)))
        assert len(prompts) == 1 and prompts[0][1]["role"] == "user"
        assert "The staging database password rotates every 17 days." in prompts[0][1]["content"]
        assert (await b.namespace_stats("ns")).items == 2  # two Mem0 memories from three messages
        r = await b.retrieve("ns", RetrieveQuery("staging password rotation", 5))
        assert {m.text for m in r.memories} <= {"Staging DB password rotates every 17 days",
                                                "Vault-rotator cron job handles staging rotation"}
        assert r.memories and all(m.evidence_ids == ["m1", "m2", "m3"] for m in r.memories)
    finally:
        await b.close()
        await runner.cleanup()


async def test_conformance_passes():
    from services.conformance import render

    b = Mem0OssBackend()
    results = await conformance_in_process(b)
    assert not [r for r in results if r.status == "FAIL"], render(results, "mem0-oss")
    assert sum(r.status == "PASS" for r in results) >= 12
