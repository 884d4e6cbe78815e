"""octybot-real (services/adapters/octybot_real) and its stand-ins: llm-mock's answers to Octybot's pipeline calls in
OpenRouter's request shape, the replay into Claude Code hook runs, the evidence-id mapping, the reading of the prompt
hook's <memory> block, the port's safety-net plan, and (slow, Bun) Octybot's own hooks end to end."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import pytest
from aiohttp import ClientSession
from prometheus_client import CollectorRegistry

from services.adapters.base import BackendContext
from services.adapters.octybot.backend import OctybotBackend
from services.adapters.octybot_real import backend as B
from services.adapters.octybot_real.runtime import availability
from services.common.types import IngestBatch, Message, RetrieveQuery, Session
from services.llm_mock import octybot as M
from services.llm_mock.app import start_server as start_mock
from services.llm_mock.config import MockConfig
from services.llm_mock.tasks import detect_task

AVAIL = availability()
T0 = datetime(2024, 5, 1, 9, 0, tzinfo=UTC)


# ------------------------------------------------------------------ llm-mock: Octybot's calls (OpenRouter's shape)
def test_octybot_prompts_are_recognised_by_their_schema_fields_only():
    assert detect_task([{"role": "system", "content": 'x\n{"implied_facts": [], "implied_processes": []}'},
                        {"role": "user", "content": "hi"}]) == "octybot_classify"
    assert detect_task([{"role": "system", "content": '{"store_items": []}'}]) == "octybot_store_filter"
    assert detect_task([{"role": "system", "content": '{ "instructions": [ {"subtype": "rule"} ] }'}]) == \
        "octybot_instructions"
    assert detect_task([{"role": "system", "content": "output exactly: NO_RELEVANT_RECORDS"}]) == "octybot_curate"
    assert detect_task([{"role": "system", "content": '{ "results": [ {"verdict": "x"} ] }'}]) == "octybot_reconcile"
    assert detect_task([{"role": "system", "content": "You are a memory retrieval agent."}]) == "default"


def test_classify_a_fact_an_event_in_a_multi_sentence_message_a_question_and_an_instruction():
    fact = json.loads(M.classify("Caroline works at Brightwell as the lead designer."))
    assert [e["name"] for e in fact["entities"]] == ["Caroline", "Brightwell"]
    assert fact["implied_facts"] == ["Caroline works at Brightwell as the lead designer."]
    assert fact["events"] == fact["opinions"] == [] and fact["operations"] == {"retrieve": True, "store": True}
    # layer1.ts's layout for one sentence of several, with the assistant reply as pronoun context before it
    ev = json.loads(M.classify('[Conversation context for pronoun/reference resolution — do NOT extract facts from '
                               'this]\nNoted.\n\nFull message (for pronoun/reference resolution):\n"Caroline works '
                               'there. She moved to Lisbon last year."\n\nClassify THIS specific sentence:\n"She moved '
                               'to Lisbon last year."'))
    assert ev["events"] == ["She moved to Lisbon last year."] and ev["implied_facts"] == []
    assert [e["name"] for e in ev["entities"]] == ["Lisbon"]  # "She" is not a name
    q = json.loads(M.classify("Where does Caroline work?"))
    assert q["implied_facts"] == [] and q["intents"] == ["information"]
    assert q["operations"] == {"retrieve": True, "store": False}
    rule = json.loads(M.classify("Always use pnpm for installs."))
    assert rule["intents"] == ["instruction"] and rule["implied_facts"] == []
    # no capitalised name: the statement's longest content word stands as its entity (the Stop hook needs one)
    assert [e["name"] for e in rule["entities"]] == ["installs"]
    assert json.loads(M.classify("Thanks, sounds good!"))["operations"]["store"] is False  # 3 words: trivial


def test_instruction_extraction_store_filter_curation_and_reconciliation():
    got = json.loads(M.instructions('User message: "Deploys go out on Fridays. Never deploy without the test '
                                    'suite."\n\nExtract any instructions, rules, or procedures from this message.'))
    assert got == {"instructions": [{"content": "Never deploy without the test suite.", "subtype": "rule",
                                     "scope": 0.5, "reason": "instruction cue"}]}
    flt = json.loads(M.store_filter('User message: "x"\n\nExtracted by classifier:\nEntities: none\nItems:\n'
                                    '- Fact: Caroline works at Brightwell.\n- Event: She moved to Lisbon.\n'
                                    '- Instruction (user\'s exact words): "x"\nIntents: information\n'))
    assert [(i["type"], i["content"], i["subtype"]) for i in flt["store_items"]] == [
        ("fact", "Caroline works at Brightwell.", "definitional"), ("event", "She moved to Lisbon.", "action")]
    assert M.curate('Query: "q"\n\nFacts:\n- a fact\n- another') == "- a fact\n- another"
    assert M.curate('Query: "q"\n\nEvents:\n') == "NO_RELEVANT_RECORDS"
    rec = json.loads(M.reconcile('New instruction: "Actually Lisa handles billing instead of Sarah."\n\nExisting '
                                 'instructions:\n1. "Sarah handles billing." (id: ab-1)\n2. "Deploys are on Fridays." '
                                 '(id: ab-2)\n'))
    assert [(r["id"], r["verdict"]) for r in rec["results"]] == [("ab-1", "SUPERSEDES"), ("ab-2", "NO_CONFLICT")]
    assert rec["question"] is None


async def test_openrouter_request_shape_is_answered_by_llm_mock():
    """workers-ai.ts's callOpenRouter body: model, messages, temperature, provider.sort, tools; Bearer key,
    HTTP-Referer and X-Title headers; it reads choices[0].message.content (and tool_calls, absent here)."""
    runner, port = await start_mock(MockConfig(port=0, model_aliases=("openai/gpt-oss-120b",)), CollectorRegistry())
    try:
        body = {"model": "openai/gpt-oss-120b", "temperature": 0.1, "provider": {"sort": "throughput"},
                "messages": [{"role": "system", "content": 'Schema: {"implied_facts": [], "implied_processes": []}'},
                             {"role": "user", "content": "Maya lives in Lisbon with her partner."}],
                "tools": [{"type": "function", "function": {"name": "done", "parameters": {"type": "object"}}}]}
        headers = {"Authorization": "Bearer memrig-local", "HTTP-Referer": "https://octybot.dev", "X-Title": "x"}
        async with ClientSession() as s, s.post(f"http://127.0.0.1:{port}/v1/chat/completions", json=body,
                                                headers=headers) as r:
            out = await r.json()
        assert r.status == 200
        msg = out["choices"][0]["message"]
        assert "tool_calls" not in msg
        assert json.loads(msg["content"])["implied_facts"] == ["Maya lives in Lisbon with her partner."]
        assert out["usage"]["prompt_tokens"] > 0
    finally:
        await runner.cleanup()


# ------------------------------------------------------------------ the replay and the evidence mapping
def _session(*msgs: tuple[str, str, str]) -> Session:
    return Session("s1", T0, tuple(Message(i, role, text, T0) for i, role, text in msgs))


def test_exchanges_one_stop_hook_run_per_user_message_with_its_replies():
    s = _session(("a0", "assistant", "Welcome back."), ("u1", "user", "Caroline works at Brightwell."),
                 ("a1", "assistant", "Noted."), ("a2", "assistant", "Anything else?"),
                 ("u2", "user", "Yes."), ("x", "system", "ignored"), ("u3", "user", "She moved to Lisbon."))
    exs = B.exchanges("ns", s, "octybot")
    assert [(e.user.id, [r.id for r in e.replies]) for e in exs] == [("u1", ["a1", "a2"]), ("u2", []), ("u3", [])]
    # the assistant greeting before the first prompt joins the transcript with the first run; system text never
    assert [ln["uuid"] for ln in exs[0].lines] == [B.transcript_line(exs[0].session_id, m, T0, "octybot")["uuid"]
                                                  for m in s.messages[:4]]
    assert len(exs[1].lines) == 1 and len(exs[2].lines) == 1
    u, a = exs[0].lines[1], exs[0].lines[2]
    assert u["type"] == "user" and u["message"] == {"role": "user", "content": "Caroline works at Brightwell."}
    assert u["role"] == "user" and u["content"] == "Caroline works at Brightwell."  # what Octybot's parser reads
    assert a["message"]["content"] == [{"type": "text", "text": "Noted."}] and a["role"] == "assistant"
    assert u["timestamp"] == "2024-05-01T09:00:00Z" and u["sessionId"] == exs[0].session_id
    strict = B.exchanges("ns", s, "claude-code")[0].lines[1]
    assert "role" not in strict and "content" not in strict and strict["message"]["role"] == "user"
    assert B.exchanges("other-ns", s, "octybot")[0].session_id != exs[0].session_id


def test_new_nodes_of_a_run_are_evidence_of_its_user_message_only():
    ex = B.exchanges("ns", _session(("u1", "user", "A fact here."), ("a1", "assistant", "Ok.")), "octybot")[0]
    assert B.new_evidence({"n1", "n2"}, {"n1", "n2", "n4", "n3"}, ex) == {"n3": ["u1"], "n4": ["u1"]}
    assert B.new_evidence({"n1"}, {"n1"}, ex) == {}


def test_memory_block_lines_drop_headers_keep_relations_and_unwrap_promotions():
    ctx = ("<memory>\nPeople & things:\nCaroline\n  - about: Caroline works at Brightwell.\n\nFacts:\n"
           "- Caroline works at Brightwell.\n- Maya lives in Lisbon.\n\nEvents:\n"
           "- [Was scheduled for 2024-05-01 — now past] Launch the beta.\n</memory>\n<memory-action-needed>x"
           "</memory-action-needed>")
    assert B.memory_lines(ctx) == ["Caroline", "Caroline works at Brightwell.", "Maya lives in Lisbon.",
                                   "Launch the beta."]
    assert B.memory_lines("") == []


def test_assembly_score_reads_back_as_octybots_pattern_does():
    assert B.assembly_score(0.12345) == 0.123
    assert B.assembly_score(-0.2) == 0.5  # the pattern has no minus sign: the default 0.5
    assert B.assembly_score(-0.0001) == 0.5  # "-0.000"
    assert B.assembly_score(0.0004) == 0.0  # "0.000": never above the map's start, so left out


def _node(nid, type_, content, vec, scope=None):
    return B.NodeRow(nid, type_, content, scope, "2024-05-01 09:00:00", np.asarray(vec, dtype=np.float32))


def test_memories_rank_by_octybot_score_union_evidence_of_duplicates_and_keep_unmatched_lines():
    b = B.OctybotRealBackend({}, BackendContext(embedder_name="hash"))
    b._evidence["ns"] = {"n1": ["u1"], "n2": ["u7"], "n3": ["u3"], "g": ["u9"]}
    q = np.array([1.0, 0.0], dtype=np.float32)
    nodes = {"n1": _node("n1", "fact", "Maya lives in Lisbon.", [0.6, 0.8]),  # cos 0.6
             "n2": _node("n2", "fact", "Maya lives in Lisbon.", [0.8, 0.6]),  # same text, cos 0.8
             "n3": _node("n3", "event", "Maya moved.", [0.9, 0.1]),  # cos 0.994
             "g": _node("g", "instruction", "Always cite sources.", [0.2, 0.98], scope=1.0)}  # cos 0.2 -> 0.6
    ms = b.memories("ns", ["Always cite sources.", "Maya lives in Lisbon.", "A paraphrase.", "Maya moved."], nodes, q)
    assert [m.id for m in ms] == ["n3", "n2", "g", "line:2"]
    assert [m.score for m in ms] == [0.994, 0.8, 0.6, 0.0]
    assert ms[1].evidence_ids == ["u7", "u1"] and ms[1].attributes["node_ids"] == "n1,n2"
    assert ms[2].channel_scores["cosine"] == pytest.approx(0.2 / np.hypot(0.2, 0.98), abs=1e-6)
    assert ms[3].evidence_ids == [] and ms[3].kind == "unmatched"


# ------------------------------------------------------------------ the port's safety-net plan
def _port_with(rows) -> tuple[OctybotBackend, np.ndarray]:
    port = OctybotBackend({"plan": "safety-nets"}, BackendContext(embedder_name="hash"))
    port.adopt_nodes("ns", rows, {r[0]: [f"ev-{r[0]}"] for r in rows})
    qv = np.zeros(port.context.embedder.dim, dtype=np.float32)
    qv[0] = 1.0
    return port, qv


def _at(cos: float) -> list[float]:
    return [cos, float(np.sqrt(max(0.0, 1 - cos * cos)))]


def test_port_safety_nets_broad_top20_instruction_prefetch_and_global_floor():
    rows = [(f"f{i}", "fact", f"fact {i}", None, None, _at(round(0.9 - 0.04 * i, 2))) for i in range(22)]
    rows.append(("i0", "instruction", "use the ledger", None, 0.5, _at(0.05)))
    rows.append(("g0", "instruction", "cite every source", None, 0.9, _at(0.16)))
    port, qv = _port_with(rows)
    ranked = port.rank_safety_nets(port.graphs["ns"], qv)
    ids = [n.id for n, _ in ranked]
    # broad top 20 = f0..f18 and g0 (0.16 > f19's 0.14); i0 only by the instruction pre-fetch; g0 floored at 0.6
    assert ids == [f"f{i}" for i in range(8)] + ["g0"] + [f"f{i}" for i in range(8, 19)] + ["i0"]
    assert dict((n.id, s) for n, s in ranked)["g0"] == 0.6 and ranked[-1][1] == 0.05


def test_port_safety_nets_zero_is_left_out_negative_reads_as_half():
    port, qv = _port_with([("a", "fact", "a", None, None, _at(0.5)), ("b", "fact", "b", None, None, [0.0, 1.0]),
                           ("c", "fact", "c", None, None, [-0.3, 0.954])])
    assert [(n.id, s) for n, s in port.rank_safety_nets(port.graphs["ns"], qv)] == [("a", 0.5), ("c", 0.5)]


def test_port_safety_nets_template_dedup_keeps_two_per_pattern():
    rows = [(f"f{i}", "fact", f"fact {i}", None, None, _at(round(0.9 - 0.02 * i, 2))) for i in range(20)]
    for j, (name, cos) in enumerate((("Alice", 0.40), ("Bob", 0.38), ("Carol", 0.36), ("Dave", 0.34))):
        rows.append((f"i{j}", "instruction", f"Ask {name} about billing.", None, 0.5, _at(cos)))
    port, qv = _port_with(rows)
    ids = {n.id for n, _ in port.rank_safety_nets(port.graphs["ns"], qv)}
    assert {"i0", "i1"} <= ids and not {"i2", "i3"} & ids  # "_ about billing." twice at most
    assert port.template_key("Ask Alice about billing.") == "_ about billing."


# ------------------------------------------------------------------ availability
def test_missing_or_changed_source_is_named(tmp_path, monkeypatch):
    monkeypatch.setenv("MEMRIG_OCTYBOT_SRC", str(tmp_path / "nowhere"))
    a = availability()
    assert not a.ok and "nowhere" in a.reason
    src = tmp_path / "octy"
    (src / "src/memory/hooks").mkdir(parents=True)
    (src / "src/memory/hooks/on-stop.ts").write_text("// not Octybot's\n")
    monkeypatch.setenv("MEMRIG_OCTYBOT_SRC", str(src))
    a = availability()
    assert not a.ok and "is not commit 9d0d070" in a.reason


async def test_unavailable_octybot_fails_start_with_the_reason(tmp_path, monkeypatch):
    monkeypatch.setenv("MEMRIG_OCTYBOT_SRC", str(tmp_path / "nowhere"))
    b = B.OctybotRealBackend({}, BackendContext(embedder_name="hash", data_dir=tmp_path))
    with pytest.raises(B.OctybotError, match="nowhere"):
        await b.start()


# ------------------------------------------------------------------ Octybot's own hooks (Bun)
needs_octybot = pytest.mark.skipif(not AVAIL.ok, reason=f"[requires:octybot] octybot-real unavailable: {AVAIL.reason}")


@pytest.fixture
async def rig(tmp_path, monkeypatch):
    runner, port = await start_mock(MockConfig(port=0), CollectorRegistry())
    monkeypatch.setenv("MEMRIG_LLM_BASE_URL", f"http://127.0.0.1:{port}/v1")
    yield tmp_path
    await runner.cleanup()


async def _real(tmp_path: Path, **cfg) -> B.OctybotRealBackend:
    b = B.OctybotRealBackend(cfg, BackendContext(embedder_name="hash", data_dir=tmp_path / "data"))
    await b.start()
    return b


CONVO = _session(("m1", "user", "Caroline works at Brightwell as the lead designer. She moved to Lisbon last year."),
                 ("m2", "assistant", "Noted: Caroline designs for Brightwell in Lisbon."),
                 ("m3", "user", "Always use the staging server for demos."), ("m4", "assistant", "Understood."),
                 ("m5", "user", "Thanks!"))


@pytest.mark.slow
@needs_octybot
async def test_stop_hook_stores_the_user_sentences_with_their_evidence_and_the_prompt_hook_finds_them(rig):
    b = await _real(rig)
    try:
        await b.ingest("ns", IngestBatch(sessions=(CONVO,)))
        rows = {r[2]: (r[1], b.evidence_of("ns")[r[0]]) for r in b.store_rows("ns")}
        assert rows == {"Caroline works at Brightwell as the lead designer.": ("fact", ["m1"]),
                        "She moved to Lisbon last year.": ("event", ["m1"]),
                        "Always use the staging server for demos.": ("instruction", ["m3"])}
        assert b.n["stop_hooks"] == 3  # m1, m3, m5 (m5 "Thanks!" stores nothing); the replies are context only
        before = len(b.store_rows("ns"))
        r = await b.retrieve("ns", RetrieveQuery("Caroline works at Brightwell as the lead designer.", 3))
        assert r.formatted_context.startswith("<memory>") and r.formatted_context.rstrip().endswith("</memory>")
        assert r.memories[0].text == "Caroline works at Brightwell as the lead designer."
        assert r.memories[0].score == 1.0 and r.memories[0].evidence_ids == ["m1"]
        assert len(b.store_rows("ns")) == before  # the prompt hook stored the statement in a discarded copy
    finally:
        await b.close()


@pytest.mark.slow
@needs_octybot
async def test_claude_codes_own_transcript_lines_give_octybots_stop_hook_nothing(rig):
    b = await _real(rig, transcript="claude-code")
    try:
        await b.ingest("ns", IngestBatch(sessions=(CONVO,)))
        assert b.store_rows("ns") == [] and b.n["stop_hooks"] == 3
    finally:
        await b.close()


@pytest.mark.slow
@needs_octybot
async def test_query_writes_keep_lets_the_prompt_hook_store_into_the_namespace(rig):
    b = await _real(rig, query_writes="keep")
    try:
        await b.ingest("ns", IngestBatch(sessions=(CONVO,)))
        n = len(b.store_rows("ns"))
        await b.retrieve("ns", RetrieveQuery("Maya lives in Porto with her two cats.", 3))
        stored = {r[2]: b.evidence_of("ns").get(r[0]) for r in b.store_rows("ns")}
        assert len(stored) == n + 1 and stored["Maya lives in Porto with her two cats."] is None
    finally:
        await b.close()


@pytest.mark.slow
@needs_octybot
async def test_port_safety_nets_agree_with_the_real_hook_on_its_store(rig):
    b = await _real(rig)
    more = Session("s2", T0, tuple(Message(f"x{i}", "user", t, T0) for i, t in enumerate((
        "Caroline plays the cello in a quartet.", "The Brightwell office is near the river.",
        "Never deploy on Fridays without a rollback plan.", "Caroline likes hiking in Sintra on weekends."))))
    port = OctybotBackend({"plan": "safety-nets"}, BackendContext(embedder_name="hash"))
    try:
        await b.ingest("ns", IngestBatch(sessions=(CONVO, more)))
        port.adopt_nodes("ns", b.store_rows("ns"), b.evidence_of("ns"))
        for q in ("Where does Caroline work?", "What does Caroline do on weekends?", "When can we deploy?"):
            real = (await b.retrieve("ns", RetrieveQuery(q, 50))).memories
            mine = (await port.retrieve("ns", RetrieveQuery(q, 50))).memories
            assert [(m.text, m.score) for m in mine] == [(m.text, m.score) for m in real], q
            assert [m.evidence_ids for m in mine] == [m.evidence_ids for m in real]
    finally:
        await b.close()


def test_fidelity_compare_topk_agreement_top1_score_diff_and_cause():
    from services.studies.fidelity_octybot import compare, summarise

    port = [("a", 0.9), ("b", 0.8), ("c", 0.7), ("d", 0.2)]
    real = [("a", 0.9), ("c", 0.75), ("e", 0.6)]
    r = compare("s", "p1", "q", port, real, 2)
    assert r.agreement_top_k == 0.5  # {a,b} vs {a,c}
    assert r.agreement_all == 0.5  # {a,b,c,d} vs {a,c,e}: 2 shared of 4
    assert r.same_top1 and r.max_score_diff == pytest.approx(0.05) and r.cause == "score"
    same = compare("s", "p2", "q", [("a", 0.5), ("b", 0.4)], [("a", 0.5), ("b", 0.4)], 6)
    assert (same.agreement_top_k, same.cause) == (1.0, None)
    order = compare("s", "p3", "q", [("a", 0.5), ("b", 0.5)], [("b", 0.5), ("a", 0.5)], 1)
    assert (order.agreement_top_k, order.same_top1, order.cause) == (0.0, False, "order")
    empty = compare("s", "p4", "q", [], [("a", 0.1)], 3)
    assert (empty.agreement_top_k, empty.cause) == (0.0, "selection")
    s = summarise("s", [r, same, order, empty], 9)
    assert s.agreement_top_k == pytest.approx((0.5 + 1 + 0 + 0) / 4) and s.same_top1 == 0.5
    assert s.causes == {"score": 1, "order": 1, "selection": 1} and not s.passes and s.empty_port == 0.25
