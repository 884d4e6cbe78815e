"""Tenant sharding in the fault proxy (services/fault_proxy/shards.py) and the Redis password the rig's Redis
clients take (services/common/redis_client.py).

The owners below are computed by hand from the rule: weight(name, key) = first 8 bytes of
SHA-256(name + "\\n" + key), big-endian; the largest weight owns. For shards s0..s3 the weights are (hex, first
4 digits): tenant-a e6e7 8d0d b9fe 948b -> s0; tenant-b 1e4e f85f d8ea b323 -> s1; tenant-c 389d 7405 f471 16eb
-> s2; tenant-d f463 6c0b 1903 5eda -> s0; "" (no key) 7254 c165 b4a7 890a -> s1.
"""

from __future__ import annotations

import hashlib
import signal
import socket
import subprocess
import time

import aiohttp
import pytest
from aiohttp import web

from services.common.redis_client import async_redis, redis_password
from services.fault_proxy.__main__ import parse_args
from services.fault_proxy.app import ProxyConfig, make_proxy_app
from services.fault_proxy.engine import FaultEngine
from services.fault_proxy.shards import Shard, parse_shard_map, shard_owner, weight
from tests.fixtures_proxy import serve_app

NAMES = ["s0", "s1", "s2", "s3"]


def test_weight_is_the_first_eight_bytes_of_sha256():
    assert weight("s0", "tenant-a") == int(hashlib.sha256(b"s0\ntenant-a").hexdigest()[:16], 16)
    assert hex(weight("s0", "tenant-a")) == "0xe6e703c0da7a4e87"


def test_hand_computed_owners():
    assert [shard_owner(k, NAMES) for k in ("tenant-a", "tenant-b", "tenant-c", "tenant-d", "")] == [0, 1, 2, 0, 1]
    # two shards: tenant-c's s1 weight 7405 beats s0's 389d
    assert [shard_owner(k, NAMES[:2]) for k in ("tenant-a", "tenant-b", "tenant-c", "tenant-d")] == [0, 1, 1, 0]
    # the key is stripped as cortex-mock strips it; no key routes like the empty key
    assert shard_owner("  tenant-b ", NAMES) == 1 and shard_owner(None, NAMES) == 1
    assert shard_owner("anything", ["only"]) == 0


def test_removing_a_shard_moves_only_its_tenants():
    without_s2 = ["s0", "s1", "s3"]
    before = {k: NAMES[shard_owner(k, NAMES)] for k in ("tenant-a", "tenant-b", "tenant-c", "tenant-d")}
    after = {k: without_s2[shard_owner(k, without_s2)] for k in before}
    assert before == {"tenant-a": "s0", "tenant-b": "s1", "tenant-c": "s2", "tenant-d": "s0"}
    assert after == {"tenant-a": "s0", "tenant-b": "s1", "tenant-c": "s1", "tenant-d": "s0"}  # c: 7405 > 389d > 16eb


def test_shard_map_parsing_and_errors():
    assert parse_shard_map("a=http://h0:8791/, b=http://h1:8791") == (Shard("a", "http://h0:8791"),
                                                                     Shard("b", "http://h1:8791"))
    assert parse_shard_map("http://h0:1") == (Shard("http://h0:1", "http://h0:1"),)
    for bad, said in (("", "no shard"), ("a=ftp://x", "'a=ftp://x'"), ("a=http://x,a=http://y", "['a']"),
                      ("=http://x", "empty shard name")):
        with pytest.raises(ValueError, match=said.replace("[", r"\[").replace("]", r"\]")):
            parse_shard_map(bad)


def test_cli_takes_a_shard_map_instead_of_an_upstream(capsys):
    a = parse_args(["--shard-map", "s0=http://a:1,s1=http://b:2"])
    assert [s.name for s in a.shards] == ["s0", "s1"]
    for argv, said in ((["--shard-map", "s0=http://a:1", "--upstream", "http://c:3"], "exclude each other"),
                       (["--shard-map", "s0=mailto:x"], "--shard-map: shard map entry"),
                       ([], "--upstream is required")):
        with pytest.raises(SystemExit):
            parse_args(argv)
        assert said in capsys.readouterr().err


async def test_the_proxy_sends_each_tenant_to_its_owner_only():
    hits: dict[int, list[str]] = {0: [], 1: [], 2: [], 3: []}
    runners = []
    shards = []
    for i in range(4):
        app = web.Application()

        async def any_path(request, i=i):
            hits[i].append(request.headers.get("x-api-key", ""))
            return web.json_response({"shard": i, "path": request.path})

        app.router.add_route("*", "/{tail:.*}", any_path)
        runner, port = await serve_app(app)
        runners.append(runner)
        shards.append(Shard(NAMES[i], f"http://127.0.0.1:{port}"))
    proxy = make_proxy_app(ProxyConfig(upstream="", shards=tuple(shards)), FaultEngine(seed=0))
    prunner, pport = await serve_app(proxy)
    try:
        async with aiohttp.ClientSession() as s:
            for _ in range(3):
                for key in ("tenant-a", "tenant-b", "tenant-c", "tenant-d"):
                    async with s.post(f"http://127.0.0.1:{pport}/v1/retrieve", json={"query": "q"},
                                      headers={"x-api-key": key}) as r:
                        assert r.status == 200
            async with s.get(f"http://127.0.0.1:{pport}/v1/jobs/j1") as r:  # no key: the empty key's owner
                assert (await r.json())["shard"] == 1
            async with s.get(f"http://127.0.0.1:{pport}/__admin/status") as r:
                st = await r.json()
            async with s.get(f"http://127.0.0.1:{pport}/__admin/faults/log") as r:
                log = (await r.json())["entries"]
        assert hits == {0: ["tenant-a", "tenant-d"] * 3, 1: ["tenant-b"] * 3 + [""], 2: ["tenant-c"] * 3, 3: []}
        assert [x["name"] for x in st["shards"]] == NAMES
        assert [e["shard"] for e in log[:4]] == ["s0", "s1", "s2", "s0"]
    finally:
        await prunner.cleanup()
        for r in runners:
            await r.cleanup()


# ------------------------------------------------------------------------------------------------- Redis password

def test_redis_password_from_the_environment_unless_the_url_has_one():
    assert redis_password("redis://redis:6379/0", {"REDIS_PASSWORD": "pw"}) == "pw"
    assert redis_password("redis://:inurl@redis:6379/0", {"REDIS_PASSWORD": "pw"}) is None
    assert redis_password("redis://redis:6379/0", {"REDIS_PASSWORD": ""}) is None
    assert redis_password("redis://redis:6379/0", {}) is None


def test_the_clients_send_the_password(monkeypatch):
    monkeypatch.setenv("REDIS_PASSWORD", "s3cret")
    from services.cortex_mock.jobs import RedisJobs
    from services.fault_proxy.store import RedisStore

    assert async_redis("redis://redis:6379/0").connection_pool.connection_kwargs["password"] == "s3cret"
    assert RedisStore("redis://redis:6379/0")._r.connection_pool.connection_kwargs["password"] == "s3cret"
    assert RedisJobs("redis://redis:6379/0").r.connection_pool.connection_kwargs["password"] == "s3cret"
    assert async_redis("redis://:u@redis:6379/0").connection_pool.connection_kwargs["password"] == "u"


@pytest.mark.slow
async def test_a_protected_redis_refuses_without_the_password_and_serves_with_it(tmp_path, monkeypatch):
    import shutil

    from services.fault_proxy.store import RedisStore

    if not shutil.which("redis-server"):
        pytest.skip("[requires:redis] redis-server binary not installed (apt-get install -y redis-server)")
    with socket.socket() as so:
        so.bind(("127.0.0.1", 0))
        port = so.getsockname()[1]
    conf = tmp_path / "redis.conf"
    conf.write_text("requirepass s3cret\nprotected-mode yes\n")
    p = subprocess.Popen(["redis-server", str(conf), "--port", str(port), "--bind", "127.0.0.1", "--dir",
                          str(tmp_path), "--save", "", "--appendonly", "no"], stdout=subprocess.DEVNULL,
                         stderr=subprocess.DEVNULL)
    try:
        url = f"redis://127.0.0.1:{port}/0"
        deadline = time.time() + 10
        while time.time() < deadline:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                break
            except OSError:
                time.sleep(0.05)
        monkeypatch.delenv("REDIS_PASSWORD", raising=False)
        import redis.exceptions

        with pytest.raises(redis.exceptions.AuthenticationError):
            await RedisStore(url).version()
        monkeypatch.setenv("REDIS_PASSWORD", "s3cret")
        store = RedisStore(url)
        assert await store.version() == 0
        await store.close()
    finally:
        p.send_signal(signal.SIGTERM)
        p.wait(timeout=10)
