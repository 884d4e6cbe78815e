"""The OpenAI-compatible embeddings endpoint, through the official `openai` SDK and raw HTTP."""

from __future__ import annotations

import asyncio
import base64
import json

import numpy as np
import pytest
from aiohttp import ClientSession
from prometheus_client import CollectorRegistry

from services.common.embeddings import HashEmbedder
from services.common.tokens import count_tokens
from services.embeddings_api.app import EmbeddingsConfig, start_server

openai = pytest.importorskip("openai", reason="the openai SDK is a dev dependency (pip install -e .[dev])")


@pytest.fixture
async def server():
    emb = HashEmbedder(None, dim=16)
    runner, port = await start_server(EmbeddingsConfig(models=(), preloaded={"hash": emb}), "127.0.0.1", 0,
                                      CollectorRegistry())
    yield f"http://127.0.0.1:{port}/v1", emb
    await runner.cleanup()


def _client(base: str):
    return openai.AsyncOpenAI(base_url=base, api_key="unused", max_retries=0)


async def test_sdk_embeddings_create_returns_the_rig_embedders_vectors(server):
    base, emb = server
    texts = ["The dev server runs on port 3001.", "We use pnpm."]
    r = await _client(base).embeddings.create(model="hash", input=texts)  # the SDK asks for base64 and decodes it
    assert [d.index for d in r.data] == [0, 1]
    got = np.array([d.embedding for d in r.data], dtype=np.float32)
    assert got.shape == (2, 16)
    np.testing.assert_array_equal(got, emb.encode(texts))
    assert r.model == "hash"
    assert r.usage.prompt_tokens == r.usage.total_tokens == count_tokens(texts[0]) + count_tokens(texts[1])


async def test_float_and_base64_formats_carry_the_same_numbers(server):
    base, emb = server
    async with ClientSession() as s:
        out = {}
        for fmt in ("float", "base64"):
            async with s.post(f"{base}/embeddings", json={"model": "hash", "input": "port 3001",
                                                          "encoding_format": fmt}) as r:
                assert r.status == 200
                out[fmt] = (await r.json())["data"][0]["embedding"]
    as_float = np.array(out["float"], dtype=np.float32)
    from_b64 = np.frombuffer(base64.b64decode(out["base64"]), dtype="<f4")
    np.testing.assert_array_equal(as_float, from_b64)
    np.testing.assert_array_equal(as_float, emb.encode(["port 3001"])[0])


@pytest.mark.parametrize("body, status, param", [
    ({"model": "hash"}, 400, "input"),
    ({"model": "hash", "input": []}, 400, "input"),
    ({"model": "hash", "input": ["ok", 7]}, 400, "input[1]"),
    ({"model": "hash", "input": ["ok", "  "]}, 400, "input[1]"),
    ({"model": "hash", "input": [[1, 2, 3]]}, 400, "input[0]"),
    ({"input": "x"}, 400, "model"),
    ({"model": "text-embedding-3-small", "input": "x"}, 404, "model"),
    ({"model": "hash", "input": "x", "encoding_format": "int8"}, 400, "encoding_format"),
    ({"model": "hash", "input": "x", "dimensions": 8}, 400, "dimensions"),
    ({"model": "hash", "input": ["x"] * 2049}, 400, "input"),
])
async def test_bad_input_names_the_field(server, body, status, param):
    base, _ = server
    async with ClientSession() as s, s.post(f"{base}/embeddings", json=body) as r:
        assert r.status == status
        err = (await r.json())["error"]
    assert err["param"] == param
    assert err["type"] == "invalid_request_error"
    assert param.split("[")[0] in err["message"]


async def test_sdk_raises_with_the_param_on_bad_input(server):
    base, _ = server
    with pytest.raises(openai.BadRequestError) as e:
        await _client(base).embeddings.create(model="hash", input=["fine", ""])
    assert e.value.param == "input[1]"
    with pytest.raises(openai.NotFoundError) as e:
        await _client(base).embeddings.create(model="nope", input="x")
    assert e.value.param == "model"


async def test_non_json_and_lone_surrogates_are_400_not_500(server):
    base, _ = server
    async with ClientSession() as s:
        async with s.post(f"{base}/embeddings", data=b"{not json") as r:
            assert r.status == 400
        raw = json.dumps({"model": "hash", "input": ["ok", "\ud800"]}).encode()  # \\ud800 stays escaped in JSON
        async with s.post(f"{base}/embeddings", data=raw, headers={"content-type": "application/json"}) as r:
            assert r.status == 400
            assert (await r.json())["error"]["param"] == "input[1]"
        deep = b"[" * 100_000 + b"]" * 100_000
        async with s.post(f"{base}/embeddings", data=deep) as r:
            assert r.status == 400
        async with s.get(f"{base}/nowhere") as r:
            assert r.status == 404
            assert "error" in await r.json()


async def test_concurrent_requests_all_answer(server):
    base, emb = server
    c = _client(base)
    rs = await asyncio.gather(*(c.embeddings.create(model="hash", input=f"text {i}") for i in range(20)))
    for i, r in enumerate(rs):
        np.testing.assert_array_equal(np.array(r.data[0].embedding, np.float32), emb.encode([f"text {i}"])[0])


async def test_two_services_in_one_process_share_the_collectors():
    reg = CollectorRegistry()
    runners = [await start_server(EmbeddingsConfig(models=(), preloaded={"hash": HashEmbedder(None, dim=8)}),
                                  "127.0.0.1", 0, reg) for _ in range(2)]
    for r, _ in runners:
        await r.cleanup()


@pytest.mark.slow  # starts a server process
def test_service_starts_as_a_process_and_stops_on_sigterm(tmp_path):
    import signal
    import subprocess
    import sys

    p = subprocess.Popen([sys.executable, "-m", "services.embeddings_api", "--port", "0", "--models", "hash",
                          "--cache", str(tmp_path / "c.sqlite")], stdout=subprocess.PIPE, text=True)
    try:
        line = p.stdout.readline()
        assert line.startswith("READY http=") and f"pid={p.pid}" in line
        port = int(line.split("http=")[1].split()[0])
        import urllib.request

        body = json.dumps({"model": "hash", "input": "port 3001"}).encode()
        req = urllib.request.Request(f"http://127.0.0.1:{port}/v1/embeddings", body,
                                     {"content-type": "application/json"})
        with urllib.request.urlopen(req, timeout=30) as r:
            assert len(json.loads(r.read())["data"][0]["embedding"]) == 384
    finally:
        p.send_signal(signal.SIGTERM)
        assert p.wait(timeout=30) == 0


async def test_remote_embedder_reads_an_openai_compatible_endpoint(server, tmp_path):
    """`embedder: "remote"` (MEMRIG_EMBED_BASE_URL) gets the endpoint's vectors, normalised, in input order,
    through the shared cache; its name says which model at which host."""
    from services.common.embeddings import EmbeddingCache, RemoteEmbedder

    base, emb = server
    cache = EmbeddingCache(tmp_path / "c.sqlite")
    r = await asyncio.to_thread(RemoteEmbedder, cache, base, "hash", "", 2)
    assert r.dim == 16 and r.name.startswith("remote:hash@127.0.0.1:")
    texts = ["a b", "port 3001", "pnpm", "a b"]
    got = await r.aencode(texts)
    np.testing.assert_allclose(got, emb.encode(texts), atol=1e-6)
    assert cache.misses == 3 and cache.hits == 1  # the repeated text came from the cache
    bad = RemoteEmbedder.__new__(RemoteEmbedder)
    bad.base_url, bad.model, bad.api_key, bad.timeout_s, bad.name = base, "nope", "", 5.0, "remote:nope"
    with pytest.raises(RuntimeError, match="HTTP 404"):
        await asyncio.to_thread(bad._encode_uncached, ["x"])


def test_remote_embedder_needs_a_base_url(monkeypatch):
    from services.common.embeddings import RemoteEmbedder

    monkeypatch.delenv("MEMRIG_EMBED_BASE_URL", raising=False)
    with pytest.raises(ValueError, match="MEMRIG_EMBED_BASE_URL"):
        RemoteEmbedder(None)
