"""The fault proxy's admin API under bad input (issue 14): each answer is a 400 naming the field and nothing
is stored — unknown attribute keys, a PATCH that changes the type without the new attributes, NaN weights,
1xx statuses, absurd delays, negative log limits, lone surrogates, 100k-deep JSON, non-finite header
faults; and a catastrophic body_regex cannot stall the proxy (matching has a timeout)."""

from __future__ import annotations

import aiohttp
import pytest
from aiohttp import web

from services.fault_proxy.faults import REGEX_TIMEOUTS, FaultError, header_faults, parse_fault
from tests.fixtures_proxy import running_proxy, serve_app


@pytest.fixture
async def proxy():
    app = web.Application()

    async def ok(request):
        await request.read()
        return web.json_response({"ok": True})

    app.router.add_route("*", "/{tail:.*}", ok)
    runner, port = await serve_app(app)
    async with running_proxy(f"http://127.0.0.1:{port}") as p, aiohttp.ClientSession() as s:
        yield p, s
    await runner.cleanup()


async def admin(s, p, method, path, body=None, raw: bytes | None = None):
    kw = {"data": raw, "headers": {"Content-Type": "application/json"}} if raw is not None else {"json": body}
    async with s.request(method, f"{p.url}/__admin{path}", **kw) as r:
        return r.status, (await r.json() if r.content_type == "application/json" else None)


@pytest.mark.parametrize("body,field", [
    ({"type": "http_error", "attributes": {"staus": 500}}, "attributes.staus"),
    ({"type": "latency", "attributes": {"latency_ms": 10, "jiter_ms": 5}}, "attributes.jiter_ms"),
    ({"type": "http_error", "attributes": {"statuses": {"503": float("nan")}}}, "attributes.statuses"),
    ({"type": "http_error", "attributes": {"status": 101}}, "attributes.status"),
    ({"type": "http_error", "attributes": {"statuses": {"101": 1}}}, "attributes.statuses"),
    ({"type": "latency", "attributes": {"latency_ms": 1e300}}, "attributes.latency_ms"),
    ({"type": "timeout_after", "attributes": {"timeout_ms": 1e12}}, "attributes.timeout_ms"),
    ({"type": "outage", "attributes": {"duration_s": 1e9}}, "attributes.duration_s"),
    ({"type": "blackhole", "attributes": {"status": 503}}, "attributes.status"),
    ({"type": "slow_body", "attributes": {"bytes_per_s": 1e-300}}, "attributes.bytes_per_s"),
])
def test_parse_fault_refuses(body, field):
    with pytest.raises(FaultError) as e:
        parse_fault(body)
    assert e.value.field == field


async def test_admin_400s_name_the_field_and_store_nothing(proxy):
    p, s = proxy
    st, b = await admin(s, p, "POST", "/faults", {"name": "e", "type": "http_error", "attributes": {"staus": 500}})
    assert st == 400 and b["field"] == "attributes.staus"
    st, b = await admin(s, p, "POST", "/faults", raw=b'{"name": "e", "type": "http_error", "attributes": '
                                                   b'{"statuses": {"503": NaN}}}')
    assert st == 400 and b["field"] == "attributes.statuses"
    st, b = await admin(s, p, "POST", "/faults", raw=b'{"name": "x", "type": "http_error", "attributes": '
                                                   b'{"body": "bad \\ud800"}}')
    assert st == 400 and b["field"] == "attributes.body"
    st, b = await admin(s, p, "POST", "/faults", raw=b"[" * 100_000 + b"]" * 100_000)
    assert st == 400 and b["field"] == "body"
    st, b = await admin(s, p, "POST", "/faults", raw=b'{"a":' * 100 + b"1" + b"}" * 100)
    assert st == 400 and "deeper" in b["error"]
    st, faults = await admin(s, p, "GET", "/faults")
    assert faults == []
    for q, field in (("limit=-5", "limit"), ("since=-1", "since"), ("limit=x", "limit")):
        st, b = await admin(s, p, "GET", f"/faults/log?{q}")
        assert st == 400 and b["field"] == field


async def test_patch_changing_type_needs_the_new_attributes(proxy):
    p, s = proxy
    st, _ = await admin(s, p, "POST", "/faults", {"name": "f", "type": "latency", "attributes": {"latency_ms": 50}})
    assert st == 201
    st, b = await admin(s, p, "PATCH", "/faults/f", {"type": "http_error"})
    assert st == 400 and b["field"] == "attributes"
    st, b = await admin(s, p, "PATCH", "/faults/f", {"attributes": {"latncy_ms": 5}})
    assert st == 400 and b["field"] == "attributes.latncy_ms"
    st, b = await admin(s, p, "PATCH", "/faults/f", {"type": "http_error", "attributes": {"status": 502}})
    assert st == 200 and b["type"] == "http_error" and b["attributes"] == {"status": 502}
    async with s.get(f"{p.url}/v1/anything") as r:
        assert r.status == 502


def test_header_faults_refuse_non_finite_values():
    for v in ("nan", "inf", "-1", "1e300"):
        actions, seen = header_faults({"x-fault-delay-ms": v})
        assert actions == [] and seen == {"bad": "x-fault-delay-ms"}
    actions, seen = header_faults({"x-fault-abort": "101"})
    assert actions == [] and seen["bad"] == "x-fault-abort"


async def test_catastrophic_body_regex_gives_up_instead_of_blocking(proxy):
    p, s = proxy
    st, _ = await admin(s, p, "POST", "/faults", {"name": "redos", "type": "http_error",
                                                  "match": {"body_regex": "(a|aa)+$"},
                                                  "attributes": {"status": 500}})
    assert st == 201
    REGEX_TIMEOUTS.clear()
    async with s.post(f"{p.url}/v1/retrieve", data=b"a" * 5000 + b"b") as r:
        assert r.status == 200  # the match timed out: treated as no match, the request went through
    assert REGEX_TIMEOUTS == ["(a|aa)+$"]
    async with s.post(f"{p.url}/v1/retrieve", data=b"aaaa") as r:
        assert r.status == 500  # an ordinary body still matches


def test_admin_token_from_a_file(tmp_path):
    from services.fault_proxy.__main__ import parse_args

    f = tmp_path / "token"
    f.write_text("s3cret\n")
    a = parse_args(["--upstream", "http://127.0.0.1:1", "--admin-token-file", str(f), "--host", "0.0.0.0"])
    assert a.admin_token == "s3cret"
    (tmp_path / "empty").write_text("")
    with pytest.raises(SystemExit):
        parse_args(["--upstream", "http://127.0.0.1:1", "--admin-token-file", str(tmp_path / "empty")])


async def test_admin_token_checked(tmp_path):
    app = web.Application()
    runner, port = await serve_app(app)
    async with running_proxy(f"http://127.0.0.1:{port}", admin_token="tok") as p, aiohttp.ClientSession() as s:
        async with s.get(f"{p.url}/__admin/faults", headers={"Authorization": "Bearer nope"}) as r:
            assert r.status == 401
        async with s.get(f"{p.url}/__admin/faults", headers={"Authorization": "Bearer tok"}) as r:
            assert r.status == 200
    await runner.cleanup()
