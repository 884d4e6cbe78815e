"""memory-hook: the llm-mock's extraction and rerank behaviours, parsing, rerank vs no-rerank, evidence, conformance."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import numpy as np
import pytest

from services.adapters.base import BackendContext
from services.adapters.client import InProcessBackendClient
from services.adapters.memory_hook.backend import (
    MemoryHookBackend,
    parse_memories,
    parse_rerank,
    top_by_cosine,
)
from services.adapters.registry import get_spec
from services.common import prompts
from services.common.types import IngestBatch, Message, RetrieveQuery, Session
from services.conformance import render
from services.llm_mock import memory_hook as mock_mh
from services.llm_mock.tasks import detect_task, respond
from tests.fixtures_conformance import conformance_in_process
from tests.inprocess_llm import InProcessMockLLM

T0 = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)
TEXTS = ["Hi, quick question about the project.",
         "The API listens on port 3001 behind nginx.",
         "We always use Zod for request validation because of TypeScript inference.",
         "We decided to cache sessions in Redis with a TTL of 300 seconds."]


def backend(**cfg) -> tuple[MemoryHookBackend, InProcessMockLLM]:
    b = MemoryHookBackend(cfg, BackendContext(embedder_name="hash"))
    llm = InProcessMockLLM()
    b.context._llm = llm
    return b, llm


def _session(sid: str, texts: list[str], day: int = 0) -> Session:
    return Session(sid, T0 + timedelta(days=day),
                   tuple(Message(f"{sid}-m{i}", "user" if i % 2 == 0 else "assistant", t) for i, t in enumerate(texts)))


# ---------------------------------------------------------------------------------------------- llm-mock
def test_mock_routes_and_extracts_trigger_rule_section():
    msgs = [{"role": "system", "content": prompts.MEMORY_HOOK_EXTRACTION_SYSTEM},
            {"role": "user", "content": "\n".join(f"user: {t}" for t in TEXTS)}]
    assert detect_task(msgs) == "memory_hook_extraction"
    rows = [json.loads(line) for line in respond("memory_hook_extraction", msgs).splitlines()]
    assert rows == [
        {"trigger": "api listens port 3001 behind nginx", "rule": "The API listens on port 3001 behind nginx.",
         "section": "facts"},
        {"trigger": "always zod request validation typescript inference",
         "rule": "We always use Zod for request validation because of TypeScript inference.",
         "section": "conventions"},
        {"trigger": "decided cache sessions redis ttl 300 seconds",
         "rule": "We decided to cache sessions in Redis with a TTL of 300 seconds.", "section": "decisions"},
    ]
    assert respond("memory_hook_extraction", msgs[:1] + [{"role": "user", "content": "ok thanks"}]) == ""


def test_mock_rerank_keeps_rules_sharing_content_words():
    user = prompts.memory_hook_rerank_user("Which port does the API use?", [
        ("sessions cache", "We cache sessions in Redis."), ("api port", "The API listens on port 3001."),
        ("validation", "Use Zod for validation; the api schema lives in src/schema.ts.")])
    msgs = [{"role": "system", "content": prompts.MEMORY_HOOK_RERANK_SYSTEM}, {"role": "user", "content": user}]
    assert detect_task(msgs) == "memory_hook_rerank"
    assert json.loads(respond("memory_hook_rerank", msgs)) == {"relevant": [2, 3]}
    assert mock_mh.parse_rerank_request(user)[0] == "Which port does the API use?"


# ---------------------------------------------------------------------------------------------- parsing
def test_parse_memories_is_lenient_but_strict_on_rules():
    reply = "\n".join([
        '{"trigger": "api port", "rule": "The API listens on port 3001.", "section": "facts"}',
        'not json', '{"trigger": "x"}', '- {"rule": "Always run ruff.", "section": "style"}',
        '{"trigger": "dup", "rule": "the api listens on port 3001.", "section": "facts"}'])
    assert parse_memories(reply) == [("api port", "The API listens on port 3001.", "facts"),
                                     ("Always run ruff.", "Always run ruff.", "facts")]


def test_parse_rerank():
    assert parse_rerank('{"relevant": [3, 1, 9]}', 3) == [0, 2]  # candidate order, out of range ignored
    assert parse_rerank('Sure! {"relevant": []}', 3) == []
    assert parse_rerank("no idea", 3) is None and parse_rerank('{"relevant": "1"}', 3) is None


def test_top_by_cosine():
    assert top_by_cosine(np.array([0.2, 0.9, 0.5, 0.9]), 3) == [1, 3, 2]
    assert top_by_cosine(np.array([0.2, 0.9, 0.5]), 5, floor=0.3) == [1, 2]


# ---------------------------------------------------------------------------------------------- backend
async def test_ingest_keeps_source_ids_and_rerank_filters():
    b, llm = backend()
    c = InProcessBackendClient(b)
    await c.ingest("p", IngestBatch(sessions=(_session("s1", TEXTS),)))
    assert llm.tasks() == ["memory_hook_extraction"]
    mems = {m.rule: m for m in b._ns["p"].memories}
    assert mems["The API listens on port 3001 behind nginx."].source == ("s1-m1",)
    assert mems["We decided to cache sessions in Redis with a TTL of 300 seconds."].section == "decisions"
    r, _ = await c.retrieve("p", RetrieveQuery("Which port does the API listen on?", top_k=3))
    assert llm.tasks()[-1] == "memory_hook_rerank"
    assert [m.text for m in r.memories] == ["The API listens on port 3001 behind nginx."]
    assert r.memories[0].evidence_ids == ["s1-m1"] and r.memories[0].attributes["section"] == "facts"
    assert r.formatted_context == "## Memories (memory-hook)\n- [facts] The API listens on port 3001 behind nginx."
    assert [ch.channel for ch in r.channels] == ["vector", "rerank"]


async def test_no_rerank_injects_top_k_by_cosine():
    b, llm = backend(rerank=False)
    c = InProcessBackendClient(b)
    await c.ingest("p", IngestBatch(sessions=(_session("s1", TEXTS),)))
    r, _ = await c.retrieve("p", RetrieveQuery("Which port does the API listen on?", top_k=3))
    assert llm.tasks() == ["memory_hook_extraction"]  # no rerank call
    assert len(r.memories) == 3 and r.memories[0].text.startswith("The API listens on port 3001")
    scores = [m.score for m in r.memories]
    assert scores == sorted(scores, reverse=True)


async def test_unparsable_rerank_fails_open_and_is_marked_degraded():
    b, llm = backend()
    llm.override["memory_hook_rerank"] = "I think the second one."
    c = InProcessBackendClient(b)
    await c.ingest("p", IngestBatch(sessions=(_session("s1", TEXTS),)))
    r, _ = await c.retrieve("p", RetrieveQuery("Which port does the API listen on?", top_k=2))
    assert r.degraded and "rerank" in r.degraded_reason and len(r.memories) == 2
    assert b.counters()["rerank_parse_failures"] == 1


def test_registry_and_describe():
    assert get_spec("memory-hook").config == {"rerank": True} and get_spec("memory-hook").default is False
    assert get_spec("memory-hook-no-rerank").config == {"rerank": False}
    d = backend()[0].describe_config()
    assert d["rerank"] is True and d["rerank_candidates_multiplier"] == 2 and "trigger" in d["schema"]


@pytest.mark.parametrize("rerank", [True, False])
async def test_conformance_passes_in_process(rerank):
    b, _ = backend(rerank=rerank)
    results = await conformance_in_process(b)
    assert not [r for r in results if r.status == "FAIL"], render(results, f"memory-hook rerank={rerank}")
    assert not [r for r in results if r.status == "N/A"], render(results, "memory-hook")
