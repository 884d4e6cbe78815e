"""Bad HTTP input against the rig's three aiohttp services, through real HTTP (issue 37): every case answers a 4xx
whose body names the field, and nothing is stored. Before, four were accepted (whitespace-only query and text,
an empty message, a zero-rate fault) and the rest named nothing ("Malformed JSON body ... column 25", "nested
deeper than 1024 levels", aiohttp's "Got more than 8190 bytes").

Each service's rule lives in its validation module (cortex_mock/validation.py, fault_proxy/fault_types.py and
faults.py, llm_mock/validation.py); what no field check sees (URL and header sizes, nesting, NaN) is located by
services/common/http_input.py.

Issue 49: a request line or header past what the parser reads at all (a 100 kB query string) was still aiohttp's
raw 400 "Got more than 65536 bytes"; every aiohttp app now answers it 414 / 431 naming the limit.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import aiohttp
import pytest

from services.common.http_input import FIELD_LIMIT, LINE_LIMIT, past_parser_limit
from services.common.metrics_http import start_metrics_server
from services.cortex_mock.app import make_app as cortex_app
from services.cortex_mock.config import MockConfig as CortexConfig
from services.embeddings_api.app import EmbeddingsConfig
from services.embeddings_api.app import start_server as start_embeddings
from services.llm_mock.app import make_app as llm_app
from services.llm_mock.config import MockConfig as LlmConfig
from tests.fixtures_proxy import running_proxy, serve_app

A = {"x-api-key": "key-a", "Content-Type": "application/json"}
LONG = "u" * 9000  # past aiohttp's 8,190-byte line and field limits
DEEP = "[" * 100_000 + "]" * 100_000


def deep_in(field: str, rest: str = "") -> bytes:
    return ('{"' + field + '": ' + DEEP + rest + "}").encode()


# (name, method, path, raw body or None, extra headers, the field the answer must name)
CORTEX: list[tuple[str, str, str, bytes | None, dict[str, str], str]] = [
    ("top_k Infinity", "POST", "/v1/retrieve", b'{"query": "x", "top_k": Infinity}', {}, "top_k"),
    ("top_k NaN", "POST", "/v1/retrieve", b'{"query": "x", "top_k": NaN}', {}, "top_k"),
    ("min_confidence NaN", "POST", "/v1/recall", b'{"query": "x", "min_confidence": NaN}', {}, "min_confidence"),
    ("min_confidence -Infinity", "POST", "/v1/recall", b'{"query": "x", "min_confidence": -Infinity}', {},
     "min_confidence"),
    ("whitespace query", "POST", "/v1/retrieve", b'{"query": "  \\n\\t "}', {}, "query"),
    ("whitespace recall query", "POST", "/v1/recall", b'{"query": "   "}', {}, "query"),
    ("whitespace ingest text", "POST", "/v1/ingest", b'{"text": " \\n "}', {}, "text"),
    ("empty message content", "POST", "/v1/ingest/conversation",
     b'{"messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": ""}]}', {}, "content"),
    ("whitespace message content", "POST", "/v1/ingest/conversation",
     b'{"messages": [{"role": "user", "content": "   "}]}', {}, "content"),
    ("deep query", "POST", "/v1/retrieve", deep_in("query"), {}, "query"),
    ("deep body", "POST", "/v1/retrieve", DEEP.encode(), {}, "body"),
    ("9 kB user_id in the URL", "DELETE", f"/v1/forget/user/{LONG}?confirm=true", None, {}, "user_id"),
    ("9 kB query parameter", "GET", f"/v1/knowledge?user_id={LONG}", None, {}, "user_id"),
    ("9 kB header", "POST", "/v1/retrieve", b'{"query": "x"}', {"X-Trace": LONG}, "X-Trace"),
]

PROXY: list[tuple[str, str, str, bytes | None, dict[str, str], str]] = [
    ("zero rate", "POST", "/__admin/faults",
     b'{"name": "r", "type": "rate_limit", "attributes": {"rate_per_s": 0}}', {}, "attributes.rate_per_s"),
    ("negative rate", "POST", "/__admin/faults",
     b'{"name": "r", "type": "rate_limit", "attributes": {"rate_per_s": -1}}', {}, "attributes.rate_per_s"),
    ("rate NaN", "POST", "/__admin/faults",
     b'{"name": "r", "type": "rate_limit", "attributes": {"rate_per_s": NaN}}', {}, "attributes.rate_per_s"),
    ("latency Infinity", "POST", "/__admin/faults",
     b'{"name": "l", "type": "latency", "attributes": {"latency_ms": Infinity}}', {}, "attributes.latency_ms"),
    ("deep attributes", "POST", "/__admin/faults", deep_in("attributes"), {}, "attributes"),
    ("deep body", "POST", "/__admin/faults", DEEP.encode(), {}, "body"),
    ("9 kB fault name in the URL", "GET", f"/__admin/faults/{LONG}", None, {}, "name"),
    ("9 kB header", "GET", "/__admin/faults", None, {"X-Trace": LONG}, "X-Trace"),
    ("9 kB URL through the proxy", "GET", f"/v1/knowledge?user_id={LONG}", None, {}, "user_id"),
]

CHAT = {"model": "memrig-llm-mock", "messages": [{"role": "user", "content": "hi"}]}
LLM: list[tuple[str, str, str, bytes | None, dict[str, str], str]] = [
    ("temperature NaN", "POST", "/v1/chat/completions", json.dumps({**CHAT, "temperature": float("nan")}).encode(),
     {}, "temperature"),
    ("top_p Infinity", "POST", "/v1/chat/completions", json.dumps({**CHAT, "top_p": float("inf")}).encode(), {},
     "top_p"),
    ("NaN inside a schema", "POST", "/v1/chat/completions", json.dumps({**CHAT, "response_format": {
        "type": "json_schema", "json_schema": {"name": "s", "schema": {"maximum": float("nan")}}}}).encode(), {},
     "response_format.json_schema.schema.maximum"),
    ("deep messages", "POST", "/v1/chat/completions", deep_in("messages"), {}, "messages"),
    ("9 kB model in the URL", "GET", f"/v1/models/{LONG}", None, {}, "model"),
    ("9 kB header", "POST", "/v1/chat/completions", json.dumps(CHAT).encode(), {"X-Trace": LONG}, "X-Trace"),
]


def names(body: Any, field: str) -> bool:
    """The answer names the field: in a `loc` (cortex-mock), `field` (fault-proxy) or `error.param` (llm-mock)."""
    if isinstance(body, dict):
        if isinstance(body.get("detail"), list):
            return any(field in [str(x) for x in d.get("loc", [])] or d.get("loc", [None])[-1] == field
                       for d in body["detail"])
        if "field" in body:
            return body["field"] == field or body["field"].endswith("." + field)
        err = body.get("error")
        if isinstance(err, dict):
            p = err.get("param") or ""
            return p == field or p.endswith("." + field)
    return False


async def call(s: aiohttp.ClientSession, base: str, method: str, path: str, raw: bytes | None,
               headers: dict[str, str]) -> tuple[int, Any]:
    async with s.request(method, base + path, data=raw, headers={**A, **headers}) as r:
        text = await r.text()
        try:
            return r.status, json.loads(text)
        except ValueError:
            return r.status, text


@pytest.fixture
async def services(tmp_path):
    runners = []
    cortex, cport = await serve_app(cortex_app(CortexConfig(data_dir=str(tmp_path / "data"), embedder="hash",
                                                            api_keys=["key-a"])))
    runners.append(cortex)
    llm, lport = await serve_app(llm_app(LlmConfig()))
    runners.append(llm)
    async with running_proxy(f"http://127.0.0.1:{cport}") as proxy, aiohttp.ClientSession() as s:
        yield s, {"cortex": f"http://127.0.0.1:{cport}", "proxy": proxy.url, "llm": f"http://127.0.0.1:{lport}"}
    for r in runners:
        await r.cleanup()


@pytest.mark.slow
async def test_every_bad_input_is_a_4xx_naming_the_field_and_stores_nothing(services):
    s, base = services
    failures = []
    for service, cases in (("cortex", CORTEX), ("proxy", PROXY), ("llm", LLM)):
        for name, method, path, raw, headers, field in cases:
            status, body = await call(s, base[service], method, path, raw, headers)
            if not (400 <= status < 500 and names(body, field)):
                failures.append(f"{service} {name}: {status} {str(body)[:300]}")
    assert not failures, "\n".join(failures)
    # nothing stored: no memory, no job, no fault
    status, body = await call(s, base["cortex"], "POST", "/v1/retrieve", b'{"query": "hi", "top_k": 5}', {})
    assert status == 200 and body["results"] == [], body
    status, faults = await call(s, base["proxy"], "GET", "/__admin/faults", None, {})
    assert status == 200 and faults == []


@pytest.mark.slow
async def test_the_limits_refuse_only_past_them(services):
    """A URL and a header just under 8,190 bytes still pass; the answers' statuses are 414 and 431."""
    s, base = services
    status, _ = await call(s, base["cortex"], "GET", f"/v1/knowledge?user_id=u1&pad={'p' * 7000}", None,
                           {"X-Trace": "t" * 7000})
    assert status == 200
    status, body = await call(s, base["cortex"], "DELETE", f"/v1/forget/user/{LONG}?confirm=true", None, {})
    assert status == 414 and body["detail"][0]["loc"] == ["path", "user_id"], body
    assert "9000 characters" in body["detail"][0]["msg"]
    status, body = await call(s, base["llm"], "POST", "/v1/chat/completions", json.dumps(CHAT).encode(),
                              {"X-Trace": LONG})
    assert status == 431 and body["error"]["param"] == "header.X-Trace" and body["error"]["code"] == "header_too_large"


def test_whitespace_and_nan_rules_live_in_the_validation_modules():
    from services.cortex_mock.validation import RequestInvalid, parse_ingest_conversation, parse_retrieve
    from services.fault_proxy.faults import FaultError, parse_fault

    with pytest.raises(RequestInvalid) as e:
        parse_retrieve({"query": " \t"})
    assert e.value.errors[0]["loc"] == ["body", "query"] and e.value.errors[0]["type"] == "string_blank"
    with pytest.raises(RequestInvalid) as e:
        parse_ingest_conversation({"messages": [{"role": "user", "content": ""}]})
    assert e.value.errors[0]["loc"] == ["body", "messages", 0, "content"]
    with pytest.raises(FaultError) as e2:
        parse_fault({"type": "rate_limit", "attributes": {"rate_per_s": 0}})
    assert e2.value.field == "attributes.rate_per_s"
    assert parse_fault({"type": "rate_limit", "attributes": {"rate_per_s": 0.5}}).attributes["rate_per_s"] == 0.5


def test_deepest_field_and_nonfinite_path():
    from services.common.http_input import deepest_field, dotted, nonfinite_path

    assert deepest_field(b'{"a": 1, "b": "[[[[", "c": [[[1]]], "d": [1]}') == ("c", 4)
    assert deepest_field(b"[[[]]]") == (None, 3)
    assert nonfinite_path({"a": [1, {"b": float("nan")}]}) == ["a", 1, "b"]
    assert nonfinite_path({"a": 1e308}) is None
    assert dotted(["messages", 2, "content"]) == "messages[2].content"


# ------------------------------------------------------------------------------------------ past the parser's limits
async def raw_http(port: int, head: bytes) -> tuple[int, Any]:
    """Send `head` over a plain socket and read the answer to EOF: (status, JSON body)."""
    r, w = await asyncio.open_connection("127.0.0.1", port)
    try:
        w.write(head)
        await w.drain()
        answer = await asyncio.wait_for(r.read(), 30)
    finally:
        w.close()
    status_line, _, rest = answer.partition(b"\r\n")
    return int(status_line.split()[1]), json.loads(rest.partition(b"\r\n\r\n")[2])


URL_MSG = "url: the request line is longer than 65536 bytes, more than this server reads"
HEADER_MSG = "header: a header line is longer than 32768 bytes, more than this server reads for one header"


@pytest.mark.slow
async def test_a_request_line_or_header_past_what_the_parser_reads_is_414_or_431_naming_the_limit(services):
    """A 100 kB query string (past the 64 KiB the parser reads of a request line) is a 414 and a 40 kB header (past
    32 KiB) a 431 from every aiohttp service, in its error shape, naming the limit; before, aiohttp's raw 400
    "Got more than 65536 bytes when reading: ..." (and an error log with a traceback)."""
    assert (LINE_LIMIT, FIELD_LIMIT) == (65536, 32768)
    _, base = services
    long_url = b"GET /v1/knowledge?user_id=" + b"u" * 100_000 + b" HTTP/1.1\r\nHost: x\r\nx-api-key: key-a\r\n\r\n"
    long_header = b"GET /health HTTP/1.1\r\nHost: x\r\nX-Trace: " + b"t" * 40_000 + b"\r\n\r\n"
    emb, emb_port = await start_embeddings(EmbeddingsConfig(models=("hash",)))
    met, met_port = await start_metrics_server()
    try:
        ports = {k: int(v.rsplit(":", 1)[1]) for k, v in base.items()} | {"embeddings": emb_port, "metrics": met_port}
        got = {k: (await raw_http(port, long_url), await raw_http(port, long_header)) for k, port in ports.items()}
    finally:
        await emb.cleanup()
        await met.cleanup()
    detail = {"type": "too_long", "msg": URL_MSG, "loc": ["url"]}
    assert got["cortex"] == ((414, {"detail": [detail]}),
                             (431, {"detail": [{**detail, "msg": HEADER_MSG, "loc": ["header"]}]}))
    plain = ((414, {"error": URL_MSG, "field": "url", "status": 414}),
             (431, {"error": HEADER_MSG, "field": "header", "status": 431}))
    assert got["proxy"] == got["metrics"] == plain
    openai = ((414, {"error": {"message": URL_MSG, "type": "invalid_request_error", "param": "url",
                               "code": "url_too_long"}}),
              (431, {"error": {"message": HEADER_MSG, "type": "invalid_request_error", "param": "header",
                               "code": "header_too_large"}}))
    assert got["llm"] == got["embeddings"] == openai
    # the service still serves (the refusal closed only its own connection)
    s, _ = services
    status, body = await call(s, base["proxy"], "GET", "/v1/knowledge?user_id=u1", None, {})
    assert status == 200, body


def test_which_limit_a_line_passed_is_read_from_the_parsers_error():
    from aiohttp.http_exceptions import BadHttpMessage, LineTooLong

    def hit(line: bytes | bytearray, limit: int):
        return past_parser_limit(LineTooLong(line[:100] + b"...", limit), 65536, 32768)

    # aiohttp's C parser: the request target alone, a header's name or value alone
    assert hit(bytearray(b"/v1/knowledge?user_id=" + b"u" * 200), 65536) == (414, "url", URL_MSG)
    assert hit(b"t" * 200, 32768) == (431, "header", HEADER_MSG)
    assert hit(b"/a-value-that-looks-like-a-path", 32768) == (431, "header", HEADER_MSG)
    # the pure-Python parser: the whole line; an unfinished header line is checked against the line limit
    assert hit(b"GET /v1/knowledge?user_id=" + b"u" * 200, 65536) == (414, "url", URL_MSG)
    assert hit(b"X-Trace: " + b"t" * 200, 65536) == (431, "header", HEADER_MSG)
    # anything else is aiohttp's to answer: another limit, another error, equal limits (which one is unknowable)
    assert hit(b"/x", 8190) is None
    assert past_parser_limit(BadHttpMessage("Too many headers received"), 65536, 32768) is None
    assert past_parser_limit(LineTooLong(b"/x...", 8190), 8190, 8190) is None
