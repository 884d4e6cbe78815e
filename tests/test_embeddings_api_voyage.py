"""Voyage's embeddings API shape on the rig's embeddings service (services/embeddings_api/voyage.py): the request
Octybot's `src/memory/voyage.ts` sends (input list, model, input_type, output_dimension 1024) and what it reads back
(`data[].embedding`, `data[].index`, `usage.total_tokens`), and bad input naming the field."""

from __future__ import annotations

import base64

import numpy as np
import pytest
from aiohttp import ClientSession
from prometheus_client import CollectorRegistry

from services.common.embeddings import HashEmbedder
from services.common.tokens import count_tokens
from services.embeddings_api.app import EmbeddingsConfig, start_server

PATH = "/voyage/v1/embeddings"


@pytest.fixture
async def server():
    emb = HashEmbedder(None, dim=16)
    runner, port = await start_server(EmbeddingsConfig(models=(), preloaded={"hash": emb}), "127.0.0.1", 0,
                                      CollectorRegistry())
    yield f"http://127.0.0.1:{port}", emb
    await runner.cleanup()


async def _post(base: str, body) -> tuple[int, dict]:
    async with ClientSession() as s, s.post(base + PATH, json=body) as r:
        return r.status, await r.json()


async def test_octybots_request_is_answered_in_voyages_shape_zero_padded_to_1024(server):
    base, emb = server
    texts = ["Caroline works at Brightwell", "always use pnpm"]
    status, out = await _post(base, {"input": texts, "model": "hash", "input_type": "document",
                                     "output_dimension": 1024})
    assert status == 200
    assert set(out) == {"object", "data", "model", "usage"}
    assert out["object"] == "list" and out["model"] == "hash"
    assert out["usage"] == {"total_tokens": sum(count_tokens(t) for t in texts)}
    assert [d["index"] for d in out["data"]] == [0, 1] and {d["object"] for d in out["data"]} == {"embedding"}
    vecs = np.array([d["embedding"] for d in out["data"]], np.float32)
    assert vecs.shape == (2, 1024)
    np.testing.assert_array_equal(vecs[:, :16], emb.encode(texts))
    assert not vecs[:, 16:].any()  # the padding is zeros, so every cosine is the model's own
    cos_padded = vecs[0] @ vecs[1] / (np.linalg.norm(vecs[0]) * np.linalg.norm(vecs[1]))
    raw = emb.encode(texts)
    assert cos_padded == pytest.approx(raw[0] @ raw[1] / (np.linalg.norm(raw[0]) * np.linalg.norm(raw[1])), abs=1e-6)


async def test_query_input_type_single_string_native_dimension_and_base64(server):
    base, emb = server
    status, out = await _post(base, {"input": "where does Caroline work", "model": "hash", "input_type": "query"})
    assert status == 200 and len(out["data"][0]["embedding"]) == 16
    np.testing.assert_array_equal(np.array(out["data"][0]["embedding"], np.float32),
                                  emb.encode(["where does Caroline work"])[0])
    status, out = await _post(base, {"input": ["x y"], "model": "hash", "encoding_format": "base64",
                                     "output_dimension": 16, "truncation": True, "output_dtype": "float"})
    assert status == 200
    got = np.frombuffer(base64.b64decode(out["data"][0]["embedding"]), dtype="<f4")
    np.testing.assert_array_equal(got, emb.encode(["x y"])[0])


@pytest.mark.parametrize("body,status,needle", [
    ({"input": "x"}, 400, "model"),
    ({"model": "voyage-4", "input": "x"}, 404, "voyage-4"),
    ({"model": "hash"}, 400, "input"),
    ({"model": "hash", "input": 7}, 400, "input"),
    ({"model": "hash", "input": []}, 400, "input"),
    ({"model": "hash", "input": ["ok", 3]}, 400, "input[1]"),
    ({"model": "hash", "input": ["ok", " "]}, 400, "input[1]"),
    ({"model": "hash", "input": ["x"] * 1001}, 400, "1000"),
    ({"model": "hash", "input": "x", "input_type": "passage"}, 400, "input_type"),
    ({"model": "hash", "input": "x", "output_dimension": 8}, 400, "output_dimension"),
    ({"model": "hash", "input": "x", "output_dimension": "1024"}, 400, "output_dimension"),
    ({"model": "hash", "input": "x", "output_dtype": "int8"}, 400, "output_dtype"),
    ({"model": "hash", "input": "x", "encoding_format": "float"}, 400, "encoding_format"),
    ({"model": "hash", "input": "x", "truncation": "yes"}, 400, "truncation"),
])
async def test_bad_input_names_the_field_in_voyages_detail(server, body, status, needle):
    base, _ = server
    got, out = await _post(base, body)
    assert got == status
    assert list(out) == ["detail"] and needle in out["detail"]


async def test_openai_route_beside_it_is_unchanged(server):
    base, emb = server
    async with ClientSession() as s, s.post(base + "/v1/embeddings", json={"input": "x", "model": "hash"}) as r:
        out = await r.json()
    assert r.status == 200 and out["usage"]["prompt_tokens"] == count_tokens("x")
