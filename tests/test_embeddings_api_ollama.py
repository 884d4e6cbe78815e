"""Ollama's embedding API shapes on the rig's embeddings service (services/embeddings_api/ollama.py): what Quaid's
`OllamaEmbeddingsProvider` sends and reads, the older `/api/embeddings`, `/api/tags`, and bad input naming the field."""

from __future__ import annotations

import numpy as np
import pytest
from aiohttp import ClientSession
from prometheus_client import CollectorRegistry

from services.common.embeddings import HashEmbedder
from services.common.tokens import count_tokens
from services.embeddings_api.app import EmbeddingsConfig, start_server


@pytest.fixture
async def server():
    emb = HashEmbedder(None, dim=16)
    runner, port = await start_server(EmbeddingsConfig(models=(), preloaded={"hash": emb}), "127.0.0.1", 0,
                                      CollectorRegistry())
    yield f"http://127.0.0.1:{port}", emb
    await runner.cleanup()


async def _post(base: str, path: str, body) -> tuple[int, dict]:
    async with ClientSession() as s, s.post(base + path, json=body) as r:
        return r.status, await r.json()


async def test_api_embed_with_quaids_request_returns_embeddings_list(server):
    base, emb = server
    # Quaid's provider body, verbatim in shape: model, one string input, keep_alive -1.
    status, out = await _post(base, "/api/embed", {"model": "hash", "input": "Maya lives in Lisbon", "keep_alive": -1})
    assert status == 200
    assert set(out) == {"model", "embeddings", "total_duration", "load_duration", "prompt_eval_count"}
    assert out["model"] == "hash"
    assert len(out["embeddings"]) == 1 and len(out["embeddings"][0]) == 16
    np.testing.assert_array_equal(np.array(out["embeddings"][0], np.float32), emb.encode(["Maya lives in Lisbon"])[0])
    assert out["prompt_eval_count"] == count_tokens("Maya lives in Lisbon")
    assert isinstance(out["total_duration"], int) and out["total_duration"] >= 0


async def test_api_embed_batch_keeps_order_and_latest_tag_resolves(server):
    base, emb = server
    texts = ["one fact", "another fact", "third"]
    status, out = await _post(base, "/api/embed", {"model": "hash:latest", "input": texts})
    assert status == 200
    assert out["model"] == "hash:latest"
    np.testing.assert_array_equal(np.array(out["embeddings"], np.float32), emb.encode(texts))
    assert out["prompt_eval_count"] == sum(count_tokens(t) for t in texts)


async def test_api_embeddings_legacy_shape(server):
    base, emb = server
    status, out = await _post(base, "/api/embeddings", {"model": "hash", "prompt": "port 3001"})
    assert status == 200
    assert list(out) == ["embedding"]
    np.testing.assert_array_equal(np.array(out["embedding"], np.float32), emb.encode(["port 3001"])[0])


async def test_api_tags_lists_served_models_with_latest_tag(server):
    base, _ = server
    async with ClientSession() as s, s.get(base + "/api/tags") as r:
        assert r.status == 200
        out = await r.json()
    names = [m["name"] for m in out["models"]]
    assert names == ["hash:latest"]
    m = out["models"][0]
    assert m["model"] == "hash:latest" and len(m["digest"]) == 64 and m["details"]["family"] == "hash"


@pytest.mark.parametrize("path,body,status,param,needle", [
    ("/api/embed", {"input": "x"}, 400, "model", "model"),
    ("/api/embed", {"model": "nomic-embed-text", "input": "x"}, 404, "model", "nomic-embed-text"),
    ("/api/embed", {"model": "hash"}, 400, "input", "input"),
    ("/api/embed", {"model": "hash", "input": 5}, 400, "input", "string"),
    ("/api/embed", {"model": "hash", "input": []}, 400, "input", "empty"),
    ("/api/embed", {"model": "hash", "input": ["ok", 3]}, 400, "input[1]", "input[1]"),
    ("/api/embed", {"model": "hash", "input": ["ok", "  "]}, 400, "input[1]", "non-empty"),
    ("/api/embed", {"model": "hash", "input": "x", "dimensions": 8}, 400, "dimensions", "16"),
    ("/api/embed", ["not", "an", "object"], 400, None, "JSON object"),
    ("/api/embeddings", {"model": "hash"}, 400, "prompt", "prompt"),
    ("/api/embeddings", {"model": "hash", "prompt": ["a"]}, 400, "prompt", "string"),
    ("/api/embeddings", {"model": "hash", "prompt": ""}, 400, "prompt", "non-empty"),
    ("/api/embeddings", {"prompt": "x"}, 400, "model", "model"),
])
async def test_bad_input_names_the_field_in_ollamas_error_shape(server, path, body, status, param, needle):
    base, _ = server
    got_status, out = await _post(base, path, body)
    assert got_status == status
    assert set(out) == {"error", "param"}
    assert out["param"] == param
    assert needle in out["error"]
    if param:
        assert out["error"].startswith(param) or f"'{param}'" in out["error"]


async def test_invalid_json_body_is_a_400_in_ollamas_shape(server):
    base, _ = server
    async with ClientSession() as s, s.post(base + "/api/embed", data=b"{nope") as r:
        assert r.status == 400
        assert "not valid JSON" in (await r.json())["error"]
