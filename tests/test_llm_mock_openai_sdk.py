"""llm-mock through the official `openai` Python SDK (AsyncOpenAI against the server on port 0): streaming,
structured output, unknown models, and bad input that used to be a 500 (lone surrogates, 100k-deep JSON)."""

from __future__ import annotations

import json

import aiohttp
import pytest
from prometheus_client import CollectorRegistry

from services.common import prompts
from services.common.tokens import count_messages_tokens, count_tokens
from services.llm_mock import streaming
from services.llm_mock.app import start_server
from services.llm_mock.config import MockConfig

openai = pytest.importorskip("openai", reason="the openai SDK is a dev dependency (pip install -e .[dev])")

MODEL = "memrig-llm-mock"
PORT_Q = "What port does the dev server run on?"
FACT = "The dev server runs on port 3001."
ANSWER_MSGS = [{"role": "system", "content": prompts.ANSWER_SYSTEM},
               {"role": "user", "content": prompts.answer_user(PORT_Q, [f"user: {FACT}"])}]


@pytest.fixture
async def sdk():
    """(AsyncOpenAI client, raw base url) against a fresh llm-mock; extra config via request.param."""
    runners, clients = [], []

    async def make(**cfg):
        runner, port = await start_server(MockConfig(port=0, **cfg), registry=CollectorRegistry())
        runners.append(runner)
        base = f"http://127.0.0.1:{port}/v1"
        clients.append(openai.AsyncOpenAI(base_url=base, api_key="unused", max_retries=0))
        return clients[-1], base

    yield make
    for c in clients:
        await c.close()
    for r in runners:
        await r.cleanup()


async def test_stream_chunks_rebuild_the_text(sdk):
    client, _ = await sdk()
    stream = await client.chat.completions.create(model=MODEL, messages=ANSWER_MSGS, stream=True)
    chunks = [c async for c in stream]
    assert all(c.object == "chat.completion.chunk" and c.id == chunks[0].id for c in chunks)
    assert chunks[0].choices[0].delta.role == "assistant" and chunks[0].choices[0].delta.content == ""
    # "The dev server runs on port 3001." -> 7 words -> 7 content deltas, then the finish chunk.
    deltas = [c.choices[0].delta.content for c in chunks[1:-1]]
    assert deltas == ["The ", "dev ", "server ", "runs ", "on ", "port ", "3001."]
    assert chunks[-1].choices[0].finish_reason == "stop" and chunks[-1].choices[0].delta.content is None
    assert all(c.choices[0].finish_reason is None for c in chunks[:-1])
    assert all(c.usage is None for c in chunks)
    assert len(chunks) == 9


async def test_stream_include_usage_last_chunk(sdk):
    client, _ = await sdk()
    stream = await client.chat.completions.create(model=MODEL, messages=ANSWER_MSGS, stream=True,
                                                  stream_options={"include_usage": True}, max_tokens=3)
    chunks = [c async for c in stream]
    last = chunks[-1]
    assert last.choices == []
    assert last.usage.prompt_tokens == count_messages_tokens(ANSWER_MSGS)
    assert last.usage.completion_tokens == 3 and last.usage.total_tokens == last.usage.prompt_tokens + 3
    assert chunks[-2].choices[0].finish_reason == "length"
    text = "".join(c.choices[0].delta.content or "" for c in chunks[:-1])
    assert FACT.startswith(text) and count_tokens(text) == 3


async def test_stream_raw_sse_ends_with_done(sdk):
    _, base = await sdk()
    async with aiohttp.ClientSession() as s:
        async with s.post(f"{base}/chat/completions", json={"model": MODEL, "messages": ANSWER_MSGS,
                                                            "stream": True, "n": 2}) as r:
            assert r.status == 200 and r.headers["Content-Type"].startswith("text/event-stream")
            body = (await r.read()).decode()
    events = [e for e in body.split("\n\n") if e]
    assert all(e.startswith("data: ") for e in events)
    assert events[-1] == "data: [DONE]"
    parsed = [json.loads(e[6:]) for e in events[:-1]]
    # two choices, each: role chunk + 7 words + finish chunk
    assert len(parsed) == 18 and [p["choices"][0]["index"] for p in parsed] == [0] * 9 + [1] * 9
    for i in (0, 1):
        assert "".join(p["choices"][0]["delta"].get("content", "") for p in parsed
                       if p["choices"][0]["index"] == i) == FACT


def test_content_pieces_concatenate_exactly():
    for text in ["", "  lead", "a  b\n\nc ", "single", "tail   "]:
        assert "".join(streaming.content_pieces(text)) == text
    assert streaming.content_pieces(" a b") == [" ", "a ", "b"]


async def test_stream_injected_error_before_stream(sdk):
    client, _ = await sdk(error_rate=1.0, error_status=503)
    with pytest.raises(openai.InternalServerError) as ei:
        await client.chat.completions.create(model=MODEL, messages=ANSWER_MSGS, stream=True)
    assert ei.value.status_code == 503


async def test_json_object_wraps_plain_text_and_keeps_json(sdk):
    client, _ = await sdk()
    msgs = [{"role": "system", "content": "Answer in JSON. " + prompts.ANSWER_SYSTEM}, ANSWER_MSGS[1]]
    r = await client.chat.completions.create(model=MODEL, messages=msgs, response_format={"type": "json_object"})
    assert json.loads(r.choices[0].message.content) == {"content": FACT}
    judge = [{"role": "system", "content": prompts.JUDGE_SYSTEM},
             {"role": "user", "content": prompts.judge_user(PORT_Q, "3001", FACT)}]
    r = await client.chat.completions.create(model=MODEL, messages=judge, response_format={"type": "json_object"})
    assert json.loads(r.choices[0].message.content)["score"] == 3  # the judge's own JSON is kept


async def test_json_object_needs_the_word_json(sdk):
    client, _ = await sdk()
    with pytest.raises(openai.BadRequestError) as ei:
        await client.chat.completions.create(model=MODEL, messages=[{"role": "user", "content": "hi"}],
                                             response_format={"type": "json_object"})
    assert ei.value.body["param"] == "messages" and "json" in ei.value.body["message"]


async def test_json_schema_instance(sdk):
    client, _ = await sdk()
    schema = {
        "type": "object",
        "properties": {
            "answer": {"type": "string"},
            "confidence": {"type": "number"},
            "kind": {"type": "string", "enum": ["fact", "guess"]},
            "sources": {"type": "array", "items": {"$ref": "#/$defs/src"}},
            "note": {"anyOf": [{"type": "null"}, {"type": "string"}]},
            "ok": {"type": "boolean"},
        },
        "required": ["answer", "confidence", "kind", "sources", "note", "ok"],
        "additionalProperties": False,
        "$defs": {"src": {"type": "object", "properties": {"line": {"type": "integer", "minimum": 1}}}},
    }
    r = await client.chat.completions.create(
        model=MODEL, messages=ANSWER_MSGS,
        response_format={"type": "json_schema", "json_schema": {"name": "answer", "schema": schema, "strict": True}})
    # first string slot gets the reply; later strings are ""; enum -> first value; array -> one item.
    assert json.loads(r.choices[0].message.content) == {
        "answer": FACT, "confidence": 0, "kind": "fact", "sources": [{"line": 1}], "note": "", "ok": False}


async def test_json_schema_takes_typed_values_from_a_json_reply(sdk):
    client, _ = await sdk()
    judge = [{"role": "system", "content": prompts.JUDGE_SYSTEM},
             {"role": "user", "content": prompts.judge_user(PORT_Q, "3001", FACT)}]
    schema = {"type": "object", "properties": {"score": {"type": "integer"}, "verdict": {"type": "string"}}}
    r = await client.chat.completions.create(
        model=MODEL, messages=judge,
        response_format={"type": "json_schema", "json_schema": {"name": "grade", "schema": schema}})
    out = json.loads(r.choices[0].message.content)
    assert out["score"] == 3 and set(out) == {"score", "verdict"}


@pytest.mark.parametrize("rf, param", [
    ({"type": "yaml"}, "response_format.type"),
    ({}, "response_format.type"),
    ({"type": "json_schema"}, "response_format.json_schema"),
    ({"type": "json_schema", "json_schema": {"schema": {}}}, "response_format.json_schema.name"),
    ({"type": "json_schema", "json_schema": {"name": "a b"}}, "response_format.json_schema.name"),
    ({"type": "json_schema", "json_schema": {"name": "a", "schema": []}}, "response_format.json_schema.schema"),
])
async def test_bad_response_format_names_param(sdk, rf, param):
    client, _ = await sdk()
    with pytest.raises(openai.BadRequestError) as ei:
        await client.chat.completions.create(model=MODEL, messages=ANSWER_MSGS, response_format=rf)
    assert ei.value.body["param"] == param


async def test_stream_options_without_stream_is_400(sdk):
    client, _ = await sdk()
    with pytest.raises(openai.BadRequestError) as ei:
        await client.chat.completions.create(model=MODEL, messages=ANSWER_MSGS,
                                             stream_options={"include_usage": True})
    assert ei.value.body["param"] == "stream_options"


async def test_unknown_model_404_everywhere(sdk):
    client, _ = await sdk()
    with pytest.raises(openai.NotFoundError) as ei:
        await client.chat.completions.create(model="gpt-4o", messages=ANSWER_MSGS)
    assert ei.value.body["code"] == "model_not_found" and ei.value.body["param"] == "model"
    with pytest.raises(openai.NotFoundError) as ei:
        await client.chat.completions.create(model="gpt-4o", messages=ANSWER_MSGS, stream=True)
    with pytest.raises(openai.NotFoundError) as ei:
        await client.models.retrieve("gpt-4o")
    assert ei.value.body["code"] == "model_not_found"
    assert [m.id async for m in client.models.list()] == [MODEL]
    assert (await client.models.retrieve(MODEL)).id == MODEL


async def test_model_aliases(sdk):
    client, _ = await sdk(model_aliases=("gpt-4o-mini", "gpt-4o-mini"))
    assert [m.id async for m in client.models.list()] == [MODEL, "gpt-4o-mini"]
    r = await client.chat.completions.create(model="gpt-4o-mini", messages=ANSWER_MSGS)
    assert r.choices[0].message.content == FACT and r.model == "gpt-4o-mini"
    with pytest.raises(openai.NotFoundError):
        await client.chat.completions.create(model="gpt-4o", messages=ANSWER_MSGS)
    client, _ = await sdk(model_aliases=("*",))
    assert (await client.models.retrieve("anything")).id == "anything"
    assert (await client.chat.completions.create(model="anything", messages=ANSWER_MSGS)).choices


async def test_lone_surrogate_is_400_naming_the_field(sdk):
    _, base = await sdk()
    raw = (b'{"model": "memrig-llm-mock", "messages": [{"role": "user", "content": "ok"}, '
           b'{"role": "user", "content": "bad \\ud800 text"}]}')
    async with aiohttp.ClientSession() as s:
        async with s.post(f"{base}/chat/completions", data=raw, headers={"Content-Type": "application/json"}) as r:
            assert r.status == 400
            err = (await r.json())["error"]
        assert err["param"] == "messages[1].content" and "surrogate" in err["message"]
        # a valid pair (U+1F600 as \\ud83d\\ude00) is fine
        ok = (b'{"model": "memrig-llm-mock", "messages": [{"role": "user", "content": "smile \\ud83d\\ude00"}]}')
        async with s.post(f"{base}/chat/completions", data=ok, headers={"Content-Type": "application/json"}) as r:
            assert r.status == 200


async def test_deep_json_is_400_naming_the_field(sdk):
    _, base = await sdk()
    deep = b'{"model": "' + MODEL.encode() + b'", "messages": ' + b"[" * 100_000 + b"]" * 100_000 + b"}"
    async with aiohttp.ClientSession() as s:
        async with s.post(f"{base}/chat/completions", data=deep, headers={"Content-Type": "application/json"}) as r:
            assert r.status == 400
            err = (await r.json())["error"]
    assert err["param"] == "messages" and "100001 levels" in err["message"]  # the object + 100k arrays
    assert err["code"] == "nesting_too_deep"


def test_nesting_error_ignores_brackets_in_strings():
    from services.llm_mock.body_checks import nesting_error

    e = nesting_error(b'{"a": "[[[[{{{{", "b": [[[1]]], "c": [1]}')
    assert e.param == "b"  # the brackets inside "a"'s string do not count
    assert "4 levels" in e.message  # the object itself is level 1, then three arrays
    assert nesting_error(b"[[[[]]]]").param is None  # no field to name at the top level
