"""A search query is embedded every time, never through the shared embedding cache: each backend's query time then
includes embedding its query, whether or not an earlier run or another backend asked the same question. Each
backend test plants a wrong vector (the true one negated) under the query's cache key between two identical
searches: a backend that read its query vector from the cache would rank (or drop) differently the second time."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import numpy as np
import pytest

from services.adapters.base import BackendContext
from services.adapters.ir_baselines.backend import IRBaselineBackend
from services.adapters.mem0.backend import Mem0Backend
from services.adapters.memory_hook.backend import MemoryHookBackend
from services.adapters.openclaw.backend import OpenClawBackend
from services.adapters.quaid.backend import QuaidBackend
from services.common.embeddings import EmbeddingCache, HashEmbedder
from services.common.types import IngestBatch, Message, RetrieveQuery, Session
from tests.inprocess_llm import InProcessMockLLM

T0 = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)
QUERY = "Which port does the API listen on?"
TEXTS = ["The API listens on port 3001 behind nginx.",
         "We always use Zod for request validation because of TypeScript inference.",
         "We decided to cache sessions in Redis with a TTL of 300 seconds.",
         "The dashboard API now averages 250 ms per request on port 3001."]


def test_encode_query_neither_reads_nor_writes_the_cache(tmp_path):
    cache = EmbeddingCache(tmp_path / "c.sqlite")
    e = HashEmbedder(cache)
    true = HashEmbedder(None).encode([QUERY])[0]
    np.testing.assert_array_equal(e.encode_query(QUERY), true)
    assert e.query_encodes == 1
    assert cache.get_many(e.name, [EmbeddingCache.key(QUERY)]) == {}  # nothing written
    assert (cache.hits, cache.misses) == (0, 0)  # nor looked up
    cache.put_many(e.name, {EmbeddingCache.key(QUERY): -true})
    np.testing.assert_array_equal(e.encode(["x", QUERY])[1], -true)  # encode() reads the planted row...
    np.testing.assert_array_equal(e.encode_query(QUERY), true)  # ...encode_query() does not
    assert e.query_encodes == 2
    with pytest.raises(Exception, match="text"):
        e.encode_query(None)  # type: ignore[arg-type]


def _batch() -> IngestBatch:
    return IngestBatch(sessions=(Session("s1", T0, tuple(
        Message(f"s1-m{i}", "user" if i % 2 == 0 else "assistant", t) for i, t in enumerate(TEXTS))),))


def _with_llm(b):
    b.context._llm = InProcessMockLLM()
    return b


# (backend, query): Quaid's recall keeps only close matches (min_similarity), and its access tracking would change
# the second search's scores by itself, so it is asked one stored fact with tracking off.
BACKENDS = {
    "dense": (lambda: IRBaselineBackend({"method": "dense"}, BackendContext(embedder_name="hash")), QUERY),
    "hybrid": (lambda: IRBaselineBackend({"method": "hybrid"}, BackendContext(embedder_name="hash")), QUERY),
    "mem0": (lambda: Mem0Backend({"infer": False}, BackendContext(embedder_name="hash")), QUERY),
    "memory-hook": (lambda: _with_llm(MemoryHookBackend({}, BackendContext(embedder_name="hash"))), QUERY),
    "quaid": (lambda: _with_llm(QuaidBackend({"track_access": False}, BackendContext(embedder_name="hash"))),
              TEXTS[0]),
    "openclaw": (lambda: _with_llm(OpenClawBackend({}, BackendContext(embedder_name="hash"))), QUERY),
    "mem0-oss": (lambda: _mem0_oss(), QUERY),  # Mem0's own library (services/adapters/mem0_oss/library.searching)
}


def _mem0_oss():
    from services.adapters.mem0_oss.backend import Mem0OssBackend

    return Mem0OssBackend({}, BackendContext(embedder_name="hash"))


def _ranked(res) -> list[tuple[str, float]]:
    return [(m.id, round(float(m.score), 6)) for m in res.memories]


@pytest.mark.parametrize("name", [pytest.param(n, marks=pytest.mark.slow) if n == "mem0-oss" else n
                                  for n in sorted(BACKENDS)])  # importing Mem0's library takes seconds
async def test_a_backend_embeds_its_query_at_every_search(name):
    make, text = BACKENDS[name]
    b = make()
    await b.start()
    try:
        await b.ingest("ns", _batch())
        await b.settle("ns", timeout_s=30.0)
        emb = b.context.embedder
        q = RetrieveQuery(text, top_k=4, reference_time=T0 + timedelta(days=1))
        before = emb.query_encodes
        first = await b.retrieve("ns", q)
        assert first.memories, f"{name} found nothing: the test could not tell a cached query vector apart"
        assert emb.query_encodes == before + 1
        true = HashEmbedder(None).encode([text])[0]
        emb.cache.put_many(emb.name, {EmbeddingCache.key(text): -true})
        again = await b.retrieve("ns", q)
        assert _ranked(again) == _ranked(first)
        assert emb.query_encodes == before + 2
    finally:
        await b.close()


def test_cortex_mock_embeds_each_new_query(tmp_path):
    from services.cortex_mock.config import MockConfig
    from services.cortex_mock.engine import CortexEngine
    from services.cortex_mock.quantized import QueryCodes

    e = CortexEngine(MockConfig(data_dir=tmp_path / "d", embedder="hash", embed_cache=True))
    emb = e.embedder
    assert emb.cache is not None
    before = emb.query_encodes  # the embedder is the process's: other tests may have used it
    true = HashEmbedder(None).encode([QUERY])[0]
    emb.cache.put_many(emb.name, {EmbeddingCache.key(QUERY): -true})
    got = e.query_codes(QUERY)
    np.testing.assert_array_equal(got.q32, QueryCodes.of(true).q32)
    assert emb.query_encodes == before + 1
    assert e.query_codes(QUERY) is got  # a repeat within the process is the engine's own LRU (load tests)
    assert emb.query_encodes == before + 1


# ---------------------------------------------------------------------------------------------- the embeddings API
# What a real system inside a backend calls (services/adapters/external/embeddings.py): one cache with a wrong vector
# planted under "q"'s and "d"'s keys; the answer says which texts came through the cache.
async def _serve(tmp_path, single_text_is_query: bool):
    from prometheus_client import CollectorRegistry

    from services.embeddings_api.app import EmbeddingsConfig, start_server

    emb = HashEmbedder(EmbeddingCache(tmp_path / "c.sqlite"), dim=16)
    true = HashEmbedder(None, dim=16).encode(["q", "d"])
    emb.cache.put_many(emb.name, {EmbeddingCache.key("q"): -true[0], EmbeddingCache.key("d"): -true[1]})
    runner, port = await start_server(EmbeddingsConfig(models=(), preloaded={"hash": emb},
                                                       single_text_is_query=single_text_is_query),
                                      "127.0.0.1", 0, CollectorRegistry())
    return runner, f"http://127.0.0.1:{port}", emb, true


async def _vectors(url: str, path: str, body: dict) -> np.ndarray:
    from aiohttp import ClientSession

    async with ClientSession() as s, s.post(url + path, json=body) as r:
        assert r.status == 200, await r.text()
        data = await r.json()
    rows = data["embeddings"] if "embeddings" in data else [d["embedding"] for d in data["data"]]
    return np.asarray(rows, dtype=np.float32)[:, :16]  # Voyage's answer is zero-padded to 1,024


@pytest.mark.parametrize("single_text_is_query", [True, False])
async def test_the_embeddings_api_embeds_a_query_anew(tmp_path, single_text_is_query):
    runner, url, emb, true = await _serve(tmp_path, single_text_is_query)
    try:
        one = {"model": "hash", "input": ["q"]}
        openai_one = await _vectors(url, "/v1/embeddings", one)
        ollama_one = await _vectors(url, "/api/embed", one)
        expect_one = true[:1] if single_text_is_query else -true[:1]  # one text: a query only when so configured
        np.testing.assert_array_equal(openai_one, expect_one)
        np.testing.assert_array_equal(ollama_one, expect_one)
        two = {"model": "hash", "input": ["q", "d"]}  # a batch is documents: through the cache
        np.testing.assert_array_equal(await _vectors(url, "/v1/embeddings", two), -true)
        np.testing.assert_array_equal(await _vectors(url, "/api/embed", two), -true)
        # input_type decides whenever it is sent (Voyage's field; Octybot sends it), whatever the count
        np.testing.assert_array_equal(await _vectors(url, "/v1/embeddings", {**two, "input_type": "query"}), true)
        np.testing.assert_array_equal(await _vectors(url, "/v1/embeddings", {**one, "input_type": "document"}),
                                      -true[:1])
        voyage = {"model": "hash", "input": ["q", "d"], "input_type": "query"}
        np.testing.assert_array_equal(await _vectors(url, "/voyage/v1/embeddings", voyage), true)
        np.testing.assert_array_equal(
            await _vectors(url, "/voyage/v1/embeddings", {**voyage, "input": ["q"], "input_type": "document"}),
            -true[:1])
        assert emb.query_encodes == (2 if single_text_is_query else 0) + 2 + 2
    finally:
        await runner.cleanup()
