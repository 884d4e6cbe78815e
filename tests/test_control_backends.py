"""The control conditions: none, full-context (token budget, oldest dropped first), compacted (LLM summary)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from services.adapters.client import InProcessBackendClient
from services.adapters.compacted.backend import CompactedBackend
from services.adapters.full_context.backend import FullContextBackend
from services.adapters.none.backend import NoMemoryBackend
from services.common import prompts
from services.common.tokens import count_tokens
from services.common.types import IngestBatch, Message, RetrieveQuery, Session, ValidationError
from tests.inprocess_llm import CannedLLM

T0 = datetime(2026, 3, 1, 9, 0, tzinfo=UTC)


def sessions(n=3):
    return tuple(Session(f"s{i}", T0 + timedelta(days=i),
                         (Message(f"s{i}:0", "user", f"Session {i} says the port is {3000 + i}."),
                          Message(f"s{i}:1", "assistant", "Noted."))) for i in range(n))


async def test_none_counts_but_never_recalls():
    c = InProcessBackendClient(NoMemoryBackend())
    await c.ingest("ns", IngestBatch(sessions=sessions()))
    res, _ = await c.retrieve("ns", RetrieveQuery("what port?"))
    assert res.memories == [] and res.formatted_context == ""
    st = await c.stats("ns")
    assert st["namespaces"][0].messages == 6


async def test_full_context_returns_everything_newest_first():
    c = InProcessBackendClient(FullContextBackend())
    await c.ingest("ns", IngestBatch(sessions=sessions()))
    res, _ = await c.retrieve("ns", RetrieveQuery("anything", top_k=2))
    assert [m.id for m in res.memories] == ["s2", "s1"]  # top_k cuts the memories list
    assert res.memories[0].evidence_ids == ["s2:0", "s2:1"]
    # ...but the static context holds all sessions, oldest first
    ctx = res.formatted_context
    assert ctx.index("port is 3000") < ctx.index("port is 3001") < ctx.index("port is 3002")


async def test_full_context_budget_drops_oldest():
    one = FullContextBackend()
    await one.ingest("ns", IngestBatch(sessions=sessions(1)))
    res1 = await one.retrieve("ns", RetrieveQuery("q"))
    per_session = count_tokens(res1.formatted_context) - count_tokens(one.config["header"])
    # Room for exactly two sessions: the oldest of three is dropped.
    b = FullContextBackend({"token_budget": count_tokens(one.config["header"]) + 2 * (per_session + 1)})
    await b.ingest("ns", IngestBatch(sessions=sessions(3)))
    res = await b.retrieve("ns", RetrieveQuery("q", top_k=10))
    assert [m.id for m in res.memories] == ["s2", "s1"]
    assert "port is 3000" not in res.formatted_context
    assert res.memories[0].attributes["blocks_dropped"] == "1"


def test_unknown_config_key_rejected():
    with pytest.raises(ValueError, match="unknown config key"):
        FullContextBackend({"budget": 5})
    with pytest.raises(ValueError, match="expects int"):
        FullContextBackend({"token_budget": "lots"})


async def test_compacted_summarises_once_per_content():
    b = CompactedBackend()
    llm = CannedLLM("Worked on an API. Chose a port.")
    b.context._llm = llm
    c = InProcessBackendClient(b)
    await c.ingest("ns", IngestBatch(sessions=sessions(2)))
    await c.settle("ns", 10)
    r1, _ = await c.retrieve("ns", RetrieveQuery("port?"))
    r2, _ = await c.retrieve("ns", RetrieveQuery("other?"))
    assert len(llm.calls) == 1  # cached by transcript hash
    assert llm.calls[0][0]["content"] == prompts.COMPACTION_SYSTEM
    assert "port is 3001" in llm.calls[0][1]["content"]
    assert r1.memories[0].text == r2.formatted_context == "Worked on an API. Chose a port."
    assert r1.memories[0].evidence_ids == []  # a summary is not evidence for any one message
    await c.ingest("ns", IngestBatch(sessions=(sessions(3)[2],)))
    await c.retrieve("ns", RetrieveQuery("port?"))
    assert len(llm.calls) == 2  # new content → new summary


async def test_host_rejects_bad_batch_atomically():
    c = InProcessBackendClient(FullContextBackend())
    good, bad = sessions(2)
    bad = Session("bad", T0, (Message("b0", "user", "fine"), Message("b1", "user", "  ")))
    with pytest.raises(ValidationError, match=r"sessions\[1\]\.messages\[1\]\.content"):
        await c.ingest("ns", IngestBatch(sessions=(good, bad)))
    st = await c.stats("ns")
    assert st["namespaces"][0].items == 0
