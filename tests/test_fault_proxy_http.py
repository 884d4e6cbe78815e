"""The fault proxy over HTTP: every fault type, the admin API (toxiproxy errors), populate, reset, the seeded
decision log, header faults, flush-on-removal, metrics, the token, the CLI and Redis-shared state.

Everything runs in-process on loopback port 0 against a tiny aiohttp upstream; no assertion is about time.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time

import aiohttp
import pytest
from aiohttp import web

from services.fault_proxy.admin_client import AdminError, FaultProxyAdmin
from tests.fixtures_proxy import running_proxy, serve_app

RESULTS = {"results": [{"node_id": f"n{i}", "content": f"memory {i}", "score": 0.9 - i / 10} for i in range(6)],
           "coverage": "high"}


class Upstream:
    """Counts what reached it; /v1/retrieve answers RESULTS, /echo echoes headers."""

    def __init__(self):
        self.hits: list[tuple[str, str]] = []
        self.headers: list[dict[str, str]] = []

    def app(self) -> web.Application:
        app = web.Application()

        async def retrieve(request):
            self.hits.append((request.method, request.path))
            self.headers.append(dict(request.headers))
            return web.json_response(RESULTS)

        async def other(request):
            self.hits.append((request.method, request.path))
            self.headers.append(dict(request.headers))
            body = await request.read()
            return web.json_response({"path": request.path_qs, "len": len(body)})

        app.router.add_post("/v1/retrieve", retrieve)
        app.router.add_route("*", "/{tail:.*}", other)
        return app


class Clock:
    def __init__(self, t: float = 1000.0):
        self.t = t

    def __call__(self) -> float:
        return self.t


@pytest.fixture
async def upstream():
    up = Upstream()
    runner, port = await serve_app(up.app())
    up.url = f"http://127.0.0.1:{port}"
    yield up
    await runner.cleanup()


@pytest.fixture
async def proxy(upstream):
    clock = Clock()
    async with running_proxy(upstream.url, seed=7, clock=clock) as p:
        p.clock = clock
        p.admin = FaultProxyAdmin(p.url)
        async with aiohttp.ClientSession() as s:
            p.http = s
            yield p
        await p.admin.close()


async def post(p, path="/v1/retrieve", body=None, timeout=10.0, headers=None):
    async with p.http.post(p.url + path, json=body or {"query": "q", "mode": "full"}, headers=headers,
                           timeout=aiohttp.ClientTimeout(total=timeout)) as r:
        return r.status, dict(r.headers), await r.read()


# -- admin API -------------------------------------------------------------------------------------------------


async def test_admin_status_codes(proxy):
    a, s = proxy.admin, proxy.http
    created = await a.add_fault("e1", "http_error", attributes={"status": 500})
    assert created["name"] == "e1" and created["attributes"] == {"status": 500}
    with pytest.raises(AdminError) as e:
        await a.add_fault("e1", "http_error")
    assert e.value.status == 409 and e.value.field == "name"
    for body, field in [({"type": "nope"}, "type"), ({"type": "latency"}, "attributes.latency_ms")]:
        async with s.post(proxy.url + "/__admin/faults", json=body) as r:
            assert r.status == 400 and (await r.json())["field"] == field
    async with s.post(proxy.url + "/__admin/faults", data=b"{not json") as r:
        assert r.status == 400 and (await r.json())["field"] == "body"
    for method in ("GET", "PATCH", "DELETE"):
        async with s.request(method, proxy.url + "/__admin/faults/ghost", json={}) as r:
            assert r.status == 404, method
    async with s.post(proxy.url + "/__admin/faults", json={"type": "reset", "name": "r1"}) as r:
        assert r.status == 201
    async with s.delete(proxy.url + "/__admin/faults/r1") as r:
        assert r.status == 204
    async with s.post(proxy.url + "/__admin/reset") as r:
        assert r.status == 204
    assert await a.list_faults() == []
    async with s.get(proxy.url + "/__admin/nothing") as r:
        assert r.status == 404  # the admin prefix is never forwarded upstream


async def test_patch_merges_and_bumps_generation(proxy):
    a = proxy.admin
    f = await a.add_fault("lat", "latency", attributes={"latency_ms": 10, "jitter_ms": 5})
    g = await a.update("lat", attributes={"jitter_ms": 1}, toxicity=0.5)
    assert g["attributes"] == {"distribution": "uniform", "latency_ms": 10.0, "jitter_ms": 1.0}
    assert g["toxicity"] == 0.5 and g["generation"] > f["generation"] and g["created_at"] == f["created_at"]
    with pytest.raises(AdminError) as e:
        await a.update("lat", name="other")
    assert e.value.status == 400 and e.value.field == "name"
    with pytest.raises(AdminError) as e:
        await a.update("lat", toxicity=3)
    assert e.value.field == "toxicity"


async def test_populate_is_idempotent(proxy):
    a = proxy.admin
    faults = [{"name": "slow", "type": "latency", "attributes": {"latency_ms": 1}},
              {"name": "down", "type": "outage", "attributes": {"duration_s": 5}}]
    first = await a.populate(faults)
    proxy.clock.t += 3
    second = await a.populate(faults)
    assert first == second  # nothing replaced: same generation, same outage start
    changed = await a.populate([faults[0], {**faults[1], "attributes": {"duration_s": 9}}])
    assert changed[0] == first[0] and changed[1]["generation"] > first[1]["generation"]
    assert changed[1]["created_at"] == first[1]["created_at"]
    assert [f["name"] for f in await a.list_faults()] == ["slow", "down"]
    async with proxy.http.post(proxy.url + "/__admin/populate", json=[{"type": "latency"}]) as r:
        assert r.status == 400 and (await r.json())["field"] == "faults[0].attributes.latency_ms"
    assert len(await a.list_faults()) == 2  # a bad list changes nothing


async def test_token_required_when_set(upstream):
    async with running_proxy(upstream.url, admin_token="s3cret") as p, aiohttp.ClientSession() as s:
        async with s.get(p.url + "/__admin/faults") as r:
            assert r.status == 401
        async with s.get(p.url + "/__admin/faults", headers={"Authorization": "Bearer wrong"}) as r:
            assert r.status == 401
        async with FaultProxyAdmin(p.url, token="s3cret") as a:
            assert await a.list_faults() == []
        async with s.get(p.url + "/__admin/metrics") as r:
            assert r.status == 200


# -- fault types over HTTP ---------------------------------------------------------------------------------------


async def test_passthrough_and_log(proxy, upstream):
    st, _, body = await post(proxy, "/v1/other?x=1", {"a": 1})
    assert st == 200 and json.loads(body) == {"path": "/v1/other?x=1", "len": 8}
    (e,) = await proxy.admin.log()
    assert e["seq"] == 1 and e["outcome"] == "forwarded" and e["upstream"] and e["faults"] == []


async def test_http_error_never_reaches_upstream(proxy, upstream):
    await proxy.admin.add_fault("e", "http_error", attributes={"status": 503, "retry_after_s": 2},
                                match={"method": "POST", "path_regex": "^/v1/retrieve$"})
    st, h, body = await post(proxy)
    assert st == 503 and h["Retry-After"] == "2" and json.loads(body)["fault"] == "e"
    assert upstream.hits == []
    assert (await post(proxy, "/v1/knowledge"))[0] == 200  # path does not match
    log = await proxy.admin.log()
    assert [e["outcome"] for e in log] == ["injected", "forwarded"]


async def test_response_stage_error_reaches_upstream(proxy, upstream):
    await proxy.admin.add_fault("e", "http_error", stage="response", attributes={"status": 500})
    assert (await post(proxy))[0] == 500
    assert len(upstream.hits) == 1


async def test_latency_logs_drawn_delay(proxy):
    await proxy.admin.add_fault("lat", "latency", attributes={"latency_ms": 20, "jitter_ms": 10})
    assert (await post(proxy))[0] == 200
    (e,) = await proxy.admin.log()
    assert e["outcome"] == "delayed" and 10 <= e["faults"][0]["drawn"]["delay_ms"] <= 30


async def test_reset_aborts_transport(proxy, upstream):
    await proxy.admin.add_fault("rst", "reset")
    with pytest.raises(aiohttp.ClientError):
        await post(proxy)
    assert upstream.hits == []
    await proxy.admin.update("rst", stage="response", attributes={"after_bytes": 5})
    with pytest.raises(aiohttp.ClientError):
        await post(proxy)
    assert len(upstream.hits) == 1
    assert [e["outcome"] for e in await proxy.admin.log()] == ["aborted", "aborted"]


async def test_blackhole_client_deadline_then_removal_flushes(proxy, upstream):
    await proxy.admin.add_fault("bh", "blackhole")
    with pytest.raises(asyncio.TimeoutError):
        await post(proxy, timeout=0.3)
    assert upstream.hits == []
    pending = asyncio.create_task(post(proxy, timeout=30))
    for _ in range(200):  # wait until the second request is held (by the log count, not by time)
        if proxy.engine.requests_seen >= 2:
            break
        await asyncio.sleep(0.01)
    await proxy.admin.remove("bh")
    st, _, body = await pending
    assert st == 200 and json.loads(body) == RESULTS and len(upstream.hits) == 1
    entries = await proxy.admin.log()
    assert entries[-1]["faults"][0]["note"] == "released" and entries[-1]["upstream"]


async def test_latency_removal_releases(proxy, upstream):
    await proxy.admin.add_fault("lat", "latency", attributes={"latency_ms": 60_000})
    pending = asyncio.create_task(post(proxy, timeout=30))
    for _ in range(200):
        if proxy.engine.requests_seen >= 1:
            break
        await asyncio.sleep(0.01)
    await proxy.admin.reset()
    assert (await pending)[0] == 200 and len(upstream.hits) == 1


async def test_timeout_after_504(proxy, upstream):
    await proxy.admin.add_fault("t", "timeout_after", attributes={"timeout_ms": 30})
    assert (await post(proxy))[0] == 504 and upstream.hits == []


async def test_slow_body_delivers_everything(proxy):
    await proxy.admin.add_fault("slow", "slow_body", attributes={"bytes_per_s": 20_000, "chunk_bytes": 100})
    st, h, body = await post(proxy)
    assert st == 200 and json.loads(body) == RESULTS and int(h["Content-Length"]) == len(body)
    (e,) = await proxy.admin.log()
    assert e["outcome"] == "modified"


async def test_truncate_keeps_content_length(proxy):
    await proxy.admin.add_fault("cut", "truncate", attributes={"after_bytes": 10})
    with pytest.raises(aiohttp.ClientPayloadError):
        await post(proxy)


async def test_corrupt_body_modes(proxy):
    await proxy.admin.add_fault("bad", "corrupt_body", attributes={"mode": "invalid_json"})
    st, _, body = await post(proxy)
    assert st == 200
    with pytest.raises(ValueError):
        json.loads(body)
    await proxy.admin.update("bad", attributes={"mode": "drop_items", "probability": 1.0})
    assert json.loads((await post(proxy))[2]) == {"results": [], "coverage": "high"}
    await proxy.admin.update("bad", attributes={"mode": "null_items", "probability": 1.0})
    assert json.loads((await post(proxy))[2])["results"] == [None] * 6


async def test_rate_limit_429(proxy, upstream):
    await proxy.admin.add_fault("rl", "rate_limit", attributes={"rate_per_s": 1, "burst": 2})
    statuses = [(await post(proxy))[0] for _ in range(3)]
    assert statuses == [200, 200, 429]
    proxy.clock.t += 1.0  # the engine clock refills one token
    assert (await post(proxy))[0] == 200
    assert len(upstream.hits) == 3


async def test_concurrency_limit_503(proxy, upstream):
    await proxy.admin.add_fault("cap", "concurrency_limit", attributes={"max_in_flight": 1})
    await proxy.admin.add_fault("hold", "blackhole")
    first = asyncio.create_task(post(proxy, timeout=30))
    for _ in range(200):
        if proxy.engine.requests_seen >= 1:
            break
        await asyncio.sleep(0.01)
    assert (await post(proxy))[0] == 503  # the first is in flight (held)
    await proxy.admin.remove("hold")
    assert (await first)[0] == 200
    assert (await post(proxy))[0] == 200  # released its slot


async def test_outage_down_then_up(proxy, upstream):
    await proxy.admin.add_fault("down", "outage", attributes={"duration_s": 30})
    st, h, _ = await post(proxy)
    assert st == 503 and h["Retry-After"] == "30"
    proxy.clock.t += 29.5
    assert (await post(proxy))[0] == 503
    proxy.clock.t += 1
    assert (await post(proxy))[0] == 200
    assert len(upstream.hits) == 1


async def test_one_shot_fault_for_full_mode_only(proxy, upstream):
    await proxy.admin.add_fault("full503", "http_error", max_hits=1,
                                match={"path_regex": "^/v1/retrieve$", "body_regex": '"mode": "full"'})
    assert (await post(proxy, body={"query": "q", "mode": "fast"}))[0] == 200
    assert (await post(proxy, body={"query": "q", "mode": "full"}))[0] == 503
    assert (await post(proxy, body={"query": "q", "mode": "full"}))[0] == 200
    assert (await proxy.admin.log())[-1]["faults"][0]["note"] == "exhausted"


# -- header faults -------------------------------------------------------------------------------------------------


async def test_header_faults_off_by_default(proxy, upstream):
    st, _, _ = await post(proxy, headers={"x-fault-abort": "503"})
    assert st == 200 and upstream.headers[0].get("x-fault-abort") == "503"


async def test_header_faults_when_allowed(upstream):
    async with running_proxy(upstream.url, allow_header_faults=True) as p, aiohttp.ClientSession() as s:
        p.http = s
        assert (await post(p, headers={"x-fault-abort": "503"}))[0] == 503
        assert upstream.hits == []
        st, _, _ = await post(p, headers={"x-fault-delay-ms": "5"})
        assert st == 200 and "x-fault-delay-ms" not in {k.lower() for k in upstream.headers[0]}
        log = (await FaultProxyAdmin(p.url).log())
        assert log[0]["header_faults"] == {"abort": 503} and log[1]["header_faults"] == {"delay_ms": 5.0}


# -- determinism ----------------------------------------------------------------------------------------------------

FAULTS = [
    {"name": "lat", "type": "latency", "toxicity": 0.5,
     "attributes": {"latency_ms": 1, "distribution": "lognormal", "sigma": 0.8, "max_ms": 3}},
    {"name": "err", "type": "http_error", "toxicity": 0.3, "attributes": {"statuses": {"500": 1, "503": 2}}},
    {"name": "drop", "type": "corrupt_body", "toxicity": 0.5,
     "attributes": {"mode": "drop_items", "probability": 0.4}},
]


async def _run_sequence(p, seed: int, n: int = 40):
    await p.admin.reset(seed=seed)
    await p.admin.populate(FAULTS)
    out = []
    for i in range(n):
        st, _, body = await post(p, "/v1/retrieve" if i % 3 else "/v1/jobs/x")
        out.append((st, body))
    log = [{k: e[k] for k in ("seq", "method", "path", "faults", "outcome", "status")} for e in await p.admin.log()]
    return out, log


async def test_same_seed_same_decisions(proxy, upstream):
    a_resp, a_log = await _run_sequence(proxy, seed=123)
    b_resp, b_log = await _run_sequence(proxy, seed=123)
    assert a_log == b_log and a_resp == b_resp
    assert {"injected", "modified", "forwarded"} <= {e["outcome"] for e in a_log}
    c_resp, c_log = await _run_sequence(proxy, seed=124)
    assert c_log != a_log
    # a second proxy process with the same seed makes the same decisions too
    async with running_proxy(upstream.url, seed=0) as p2, aiohttp.ClientSession() as s:
        p2.http, p2.admin = s, FaultProxyAdmin(p2.url)
        d_resp, d_log = await _run_sequence(p2, seed=123)
        await p2.admin.close()
    assert d_log == a_log


# -- metrics ----------------------------------------------------------------------------------------------------------


async def test_metrics_names(proxy):
    await proxy.admin.add_fault("lat", "latency", attributes={"latency_ms": 1})
    await post(proxy)
    text = await proxy.admin.metrics()
    for name in ("memrig_proxy_requests_total{outcome=\"delayed\"}",
                 "memrig_proxy_faults_injected_total{fault=\"lat\",type=\"latency\"}",
                 "memrig_proxy_upstream_request_duration_seconds_bucket",
                 "memrig_proxy_injected_delay_seconds_bucket"):
        assert name in text, name


async def test_upstream_down_is_502(proxy):
    async with running_proxy("http://127.0.0.1:9", seed=1) as p, aiohttp.ClientSession() as s:
        p.http = s
        st, _, body = await post(p)
        assert st == 502 and b"upstream failed" in body


# -- the CLI --------------------------------------------------------------------------------------------------------


def _start_cli(args, env=None):
    p = subprocess.Popen([sys.executable, "-m", "services.fault_proxy", *args], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True, env=env, cwd=os.path.dirname(os.path.dirname(__file__)))
    return p


@pytest.mark.slow  # starts a server process
async def test_cli_ready_line_and_sigterm(upstream):
    p = _start_cli(["--upstream", upstream.url, "--port", "0", "--seed", "5"])
    try:
        line = await asyncio.to_thread(p.stdout.readline)
        parts = dict(kv.split("=") for kv in line.split()[1:])
        assert line.startswith("READY http=") and int(parts["pid"]) == p.pid
        url = f"http://127.0.0.1:{parts['http']}"
        async with FaultProxyAdmin(url) as a, aiohttp.ClientSession() as s:
            assert (await a.status())["seed"] == 5
            async with s.post(url + "/v1/retrieve", json={"query": "q"}) as r:
                assert r.status == 200
    finally:
        p.send_signal(signal.SIGTERM)
        assert await asyncio.to_thread(p.wait, 10) == 0


@pytest.mark.slow  # starts a server process
async def test_cli_separate_admin_port(upstream):
    p = _start_cli(["--upstream", upstream.url, "--port", "0", "--admin-port", "0"])
    try:
        line = await asyncio.to_thread(p.stdout.readline)
        parts = dict(kv.split("=") for kv in line.split()[1:])
        async with FaultProxyAdmin(f"http://127.0.0.1:{parts['admin']}") as a, aiohttp.ClientSession() as s:
            await a.add_fault("e", "http_error")
            async with s.get(f"http://127.0.0.1:{parts['http']}/__admin/faults") as r:
                assert r.status == 404
            async with s.get(f"http://127.0.0.1:{parts['http']}/x") as r:
                assert r.status == 503
    finally:
        p.send_signal(signal.SIGTERM)
        assert await asyncio.to_thread(p.wait, 10) == 0


def test_cli_refuses_public_admin_without_token():
    env = {k: v for k, v in os.environ.items() if k != "MEMRIG_PROXY_ADMIN_TOKEN"}
    p = _start_cli(["--upstream", "http://127.0.0.1:1", "--host", "0.0.0.0", "--port", "0"], env=env)
    _, err = p.communicate(timeout=30)
    assert p.returncode == 2 and "--admin-token" in err


# -- Redis-shared fault state -----------------------------------------------------------------------------------------


@pytest.fixture
def redis_url():
    exe = shutil.which("redis-server")
    if not exe:
        pytest.skip("[requires:redis] redis-server not installed (apt-get install redis-server)")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    p = subprocess.Popen([exe, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"],
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                break
        time.sleep(0.05)
    yield f"redis://127.0.0.1:{port}/0"
    p.terminate()
    p.wait(10)


async def test_redis_state_shared_by_replicas(upstream, redis_url):
    from services.fault_proxy.store import RedisStore

    async with running_proxy(upstream.url, store=RedisStore(redis_url, "t")) as a, \
            running_proxy(upstream.url, store=RedisStore(redis_url, "t")) as b, aiohttp.ClientSession() as s:
        a.http = b.http = s
        admin_a, admin_b = FaultProxyAdmin(a.url), FaultProxyAdmin(b.url)
        await admin_a.reset()
        await admin_a.add_fault("e", "http_error", attributes={"status": 502})
        assert (await post(b))[0] == 502
        with pytest.raises(AdminError) as e:
            await admin_b.add_fault("e", "http_error")
        assert e.value.status == 409
        await admin_b.update("e", attributes={"status": 501})
        assert (await post(a))[0] == 501
        # a blackhole held in B is released by a removal through A
        await admin_a.add_fault("bh", "blackhole")
        pending = asyncio.create_task(post(b, timeout=30))
        for _ in range(200):
            if b.engine.requests_seen >= 2:
                break
            await asyncio.sleep(0.01)
        await admin_a.remove("bh")
        await admin_a.remove("e")
        assert (await pending)[0] in (200, 501)  # released; e may or may not be gone when it goes on
        assert (await post(b))[0] == 200
        assert [f["name"] for f in await admin_b.list_faults()] == []
        await admin_a.close()
        await admin_b.close()
