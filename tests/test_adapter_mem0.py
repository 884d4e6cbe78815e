"""The Mem0 OSS v3 backend: search ranking/threshold by hand, ADD-only extraction with evidence, raw mode,
scope by namespace, conformance."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import numpy as np
import pytest

from services.adapters.base import BackendContext
from services.adapters.client import InProcessBackendClient
from services.adapters.mem0.backend import Mem0Backend, search_ranked
from services.adapters.registry import get_spec
from services.common import prompts
from services.common.types import IngestBatch, Message, RetrieveQuery, Session
from services.conformance import render
from tests.fixtures_conformance import conformance_in_process
from tests.inprocess_llm import InProcessMockLLM

T0 = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)


def backend(**cfg) -> tuple[Mem0Backend, InProcessMockLLM]:
    b = Mem0Backend(cfg, BackendContext(embedder_name="hash"))
    llm = InProcessMockLLM()
    b.context._llm = llm
    return b, llm


def _session(sid: str, texts: list[str], day: int = 0) -> Session:
    return Session(sid, T0 + timedelta(days=day),
                   tuple(Message(f"{sid}-m{i}", "user" if i % 2 == 0 else "assistant", t) for i, t in enumerate(texts)))


def test_search_ranked_threshold_and_top_k():
    s = np.array([0.05, 0.5, 0.3, 0.5, 0.1])
    assert search_ranked(s, 3, 0.1) == [1, 3, 2]  # ties keep insertion order
    assert search_ranked(s, 10, 0.1) == [1, 3, 2, 4]  # 0.1 >= 0.1 is kept, 0.05 is not
    assert search_ranked(s, 2, 0.1) == [1, 3]
    assert search_ranked(s, 10, None) == [1, 3, 2, 4, 0]
    assert search_ranked(s, 0, 0.1) == [] and search_ranked(np.zeros(0), 5, 0.1) == []


async def test_add_infers_facts_add_only_with_evidence():
    b, llm = backend()
    c = InProcessBackendClient(b)
    await c.ingest("u1", IngestBatch(sessions=(_session("s1", ["Hello!", "The API listens on port 3001."]),)))
    await c.ingest("u1", IngestBatch(sessions=(_session("s2", ["Update: the API listens on port 4000 now."], 1),)))
    assert llm.tasks() == ["extraction", "extraction"]
    assert llm.calls[0][1][0]["content"] == prompts.FACT_EXTRACTION_SYSTEM
    recs = b._scopes["u1"].records
    # ADD-only: the newer port is a second memory; the older one is neither updated nor deleted
    assert [(r.memory, r.metadata["evidence_ids"]) for r in recs] == [
        ("The API listens on port 3001.", ["s1-m1"]), ("Update: the API listens on port 4000 now.", ["s2-m0"])]
    assert recs[0].user_id == "u1" and len(recs[0].hash) == 32
    r, _ = await c.retrieve("u1", RetrieveQuery("Which port does the API listen on?", top_k=5))
    assert {m.text for m in r.memories} == {r_.memory for r_ in recs}
    assert all(m.attributes["event"] == "ADD" for m in r.memories)
    assert [m.score for m in r.memories] == sorted((m.score for m in r.memories), reverse=True)
    assert r.memories[0].channel_scores["vector"] == r.memories[0].score
    assert r.formatted_context.startswith("## Mem0 memories\n- 2026-03-0")


async def test_threshold_drops_unrelated_and_scope_is_the_namespace():
    b, _ = backend()
    c = InProcessBackendClient(b)
    await c.ingest("u1", IngestBatch(sessions=(_session("s1", ["The API listens on port 3001."]),)))
    await c.ingest("u2", IngestBatch(sessions=(_session("t1", ["The API listens on port 9999."]),)))
    r, _ = await c.retrieve("u1", RetrieveQuery("zebra quokka marmalade", top_k=5))
    assert r.memories == []  # cosine below 0.1
    r, _ = await c.retrieve("u1", RetrieveQuery("Which port does the API listen on?", top_k=5))
    assert [m.evidence_ids for m in r.memories] == [["s1-m0"]]  # u2's memory never leaks into u1
    assert b.search(b.context.embedder.encode(["API port"])[0], 5, {"user_id": "nobody"}) == []


async def test_infer_false_stores_every_message_raw():
    b, llm = backend(infer=False)
    c = InProcessBackendClient(b)
    await c.ingest("u1", IngestBatch(sessions=(_session("s1", ["Hello!", "The API listens on port 3001."]),)))
    assert llm.calls == []
    recs = b._scopes["u1"].records
    assert [(r.memory, r.metadata["evidence_ids"], r.metadata["source"]) for r in recs] == [
        ("Hello!", ["s1-m0"], "raw"), ("The API listens on port 3001.", ["s1-m1"], "raw")]
    st = await b.namespace_stats("u1")
    assert (st.messages, st.items) == (2, 2)


def test_config_and_registry():
    with pytest.raises(ValueError, match="rerank"):
        Mem0Backend({"rerank": True})
    d = backend()[0].describe_config()
    assert d["threshold"] == 0.1 and d["top_k_default"] == 20 and d["rerank"] is False and d["infer"] is True
    assert get_spec("mem0").default is False and get_spec("mem0-raw").config == {"infer": False}
    assert ("recall", "exact") in Mem0Backend.capabilities


@pytest.mark.parametrize("infer", [True, False])
async def test_conformance_passes_in_process(infer):
    b, _ = backend(infer=infer)
    results = await conformance_in_process(b)
    assert not [r for r in results if r.status == "FAIL"], render(results, f"mem0 infer={infer}")
    assert not [r for r in results if r.status == "N/A"], render(results, "mem0")
