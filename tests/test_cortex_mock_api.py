"""cortex-mock HTTP API in-process (aiohttp test server, in-process job queue, hash embedder): every endpoint
with good and bad input, tenant isolation, the job lifecycle, supersession, settle delay, reflection,
persistence across restarts, metrics."""

from __future__ import annotations

import asyncio

import pytest
from aiohttp.test_utils import TestClient, TestServer

from services.cortex_mock import ranking
from services.cortex_mock.app import make_app
from services.cortex_mock.config import MockConfig

A = {"x-api-key": "key-a"}
B = {"x-api-key": "key-b"}
T0 = "2026-02-01T10:00:00Z"
CONV = {
    "session_id": "s1", "reference_date": T0, "user_id": "u1",
    "messages": [
        {"role": "user", "id": "m1", "content": "We use Redis for the session cache. The cache TTL is 300s."},
        {"role": "assistant", "id": "m2", "content": "Noted: Redis holds sessions and Postgres stores the orders."},
        {"role": "user", "id": "m3", "content": "Thanks!"},
    ],
}


@pytest.fixture
async def make_client(tmp_path):
    clients: list[TestClient] = []

    async def _make(clock=None, **kw) -> TestClient:
        kw.setdefault("data_dir", str(tmp_path / "data"))
        kw.setdefault("embedder", "hash")
        client = TestClient(TestServer(make_app(MockConfig(**kw), clock=clock)))
        await client.start_server()
        clients.append(client)
        return client

    yield _make
    for c in clients:
        await c.close()


@pytest.fixture
async def client(make_client):
    return await make_client()


async def post(client, path, body, headers=A):
    resp = await client.post(path, json=body, headers=headers)
    return resp.status, await resp.json()


async def wait_job(client, job_id, headers=A, statuses=None, timeout_s=30.0):
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout_s
    while loop.time() < deadline:
        resp = await client.get(f"/v1/jobs/{job_id}", headers=headers)
        assert resp.status == 200
        body = await resp.json()
        if statuses is not None and (not statuses or statuses[-1] != body["status"]):
            statuses.append(body["status"])
        if body["status"] in ("completed", "failed"):
            return body
        await asyncio.sleep(0.02)
    raise AssertionError(f"job {job_id} did not finish")


# -- health, auth -------------------------------------------------------------------------------------------
async def test_health_needs_no_key(client):
    resp = await client.get("/health")
    assert resp.status == 200 and (await resp.json())["status"] == "ok"


async def test_missing_key_401_and_wrong_key_403(make_client):
    c = await make_client(api_keys=["good"])
    assert (await post(c, "/v1/retrieve", {"query": "x"}, headers={}))[0] == 401
    assert (await post(c, "/v1/retrieve", {"query": "x"}, headers={"x-api-key": ""}))[0] == 401
    status, body = await post(c, "/v1/retrieve", {"query": "x"}, headers={"x-api-key": "bad"})
    assert status == 403 and "key" in body["detail"].lower()
    assert (await post(c, "/v1/retrieve", {"query": "x"}, headers={"x-api-key": "good"}))[0] == 200
    assert (await c.get("/v1/stats", headers={"x-api-key": "bad"})).status == 403


# -- validation ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("path,body,loc", [
    ("/v1/retrieve", {}, ["body", "query"]),
    ("/v1/retrieve", {"query": 5}, ["body", "query"]),
    ("/v1/retrieve", {"query": "q", "top_k": "5"}, ["body", "top_k"]),
    ("/v1/retrieve", {"query": "q", "mode": "turbo"}, ["body", "mode"]),
    ("/v1/retrieve", {"query": "x" * 2001}, ["body", "query"]),
    ("/v1/recall", {"query": "x" * 2001}, ["body", "query"]),
    ("/v1/recall", {"query": "q", "limit": "ten"}, ["body", "limit"]),
    ("/v1/ingest", {"session_id": "s"}, ["body", "text"]),
    ("/v1/ingest", {"text": ["a"]}, ["body", "text"]),
    ("/v1/ingest/conversation", {"messages": "hello"}, ["body", "messages"]),
    ("/v1/ingest/conversation", {"messages": [{"role": "user", "content": 3}]}, ["body", "messages", 0, "content"]),
    ("/v1/jobs/ingest", {}, ["body", "text"]),
    ("/v1/jobs/ingest/conversation", {"messages": []}, ["body", "messages"]),
    ("/v1/jobs/ingest/conversation", {"messages": [{"content": "x"}]}, ["body", "messages", 0, "role"]),
    ("/v1/reflect", {"session_id": 1}, ["body", "session_id"]),
])
async def test_validation_422_names_the_field(client, path, body, loc):
    status, out = await post(client, path, body)
    assert status == 422
    assert loc in [e["loc"] for e in out["detail"]]
    assert all({"loc", "msg", "type"} <= set(e) for e in out["detail"])


@pytest.mark.parametrize("path", ["/v1/retrieve", "/v1/recall", "/v1/ingest", "/v1/ingest/conversation",
                                  "/v1/jobs/ingest", "/v1/jobs/ingest/conversation", "/v1/jobs/reflect",
                                  "/v1/warmup"])
async def test_malformed_json_400(client, path):
    resp = await client.post(path, data=b'{"query": ', headers={**A, "Content-Type": "application/json"})
    assert resp.status == 400
    assert "json" in (await resp.json())["detail"].lower()


async def test_query_of_exactly_2000_chars_is_accepted(client):
    assert (await post(client, "/v1/retrieve", {"query": "q" * 2000}))[0] == 200


# -- ingest, retrieve, recall -------------------------------------------------------------------------------
async def test_ingest_conversation_shape_and_provenance(client):
    status, res = await post(client, "/v1/ingest/conversation", CONV)
    assert status == 200
    assert {"nodes_created", "edges_created", "duplicates_merged", "facts", "entities"} <= set(res)
    cores = [f["core"] for f in res["facts"]]
    assert cores == ["We use Redis for the session cache.", "The cache TTL is 300s.",
                     "Noted: Redis holds sessions and Postgres stores the orders."]  # "Thanks!" filtered
    for f in res["facts"]:
        assert set(f) >= {"core", "fact_type", "occurred_at", "entity_refs", "speaker"}
        assert f["occurred_at"] == T0
    assert [f["speaker"] for f in res["facts"]] == ["user", "user", "assistant"]
    names = {e["name"]: e for e in res["entities"]}
    assert {"Redis", "TTL", "Postgres"} <= set(names) and names["Redis"]["type"] == "tool"
    # 3 facts + entities; MENTIONS per (fact, entity)
    assert res["nodes_created"] == 3 + len(res["entities"])
    assert res["edges_created"] == sum(len(f["entity_refs"]) for f in res["facts"])
    assert res["duplicates_merged"] == 0

    resp = await client.post("/v1/retrieve", json={"query": "what is the cache TTL", "top_k": 3}, headers=A)
    assert resp.status == 200
    assert resp.headers["X-Cortex-Pipeline-Mode"] == "full"
    assert int(resp.headers["X-Cortex-Processing-Ms"]) >= 0
    assert set(resp.headers["X-Cortex-Channels-Used"].split(",")) == {"bm25", "semantic", "question", "graph"}
    body = await resp.json()
    top = body["results"][0]
    # full mode labels coverage from the top reranked score (thresholds 0.6 / 0.35 / 0.15)
    assert body["coverage"] == ranking.coverage_label(top["score"]) and body["coverage"] != "none"
    assert top["content"] == "The cache TTL is 300s."
    assert {"node_id", "type", "content", "score", "source", "confidence", "metadata"} <= set(top)
    md = top["metadata"]
    assert md["message_ids"] == ["m1"] and md["session_id"] == "s1" and md["speaker"] == "user"
    assert md["occurred_at"] == T0 and "TTL" in md["entity_refs"] and md["fact_type"]
    assert not {"source_origin", "derivation_mode", "source_app"} & set(md)  # not given: absent, never null
    assert "_debug" not in body and len(body["results"]) <= 3


async def test_retrieve_fast_mode_and_debug(client):
    await post(client, "/v1/ingest/conversation", CONV)
    resp = await client.post("/v1/retrieve", headers=A, json={
        "query": "Redis sessions last week", "mode": "fast", "debug": True, "reference_date": "2026-02-10"})
    body = await resp.json()
    assert resp.headers["X-Cortex-Pipeline-Mode"] == "fast"
    assert resp.headers["X-Cortex-Channels-Used"] == "bm25,semantic,question,temporal"
    dbg = body["_debug"]
    assert set(dbg["channels"]) == {"bm25", "semantic", "question", "temporal"}
    assert dbg["channels"]["bm25"]["candidates"] >= 1 and dbg["channels"]["bm25"]["top"][0]["rank"] == 1
    assert dbg["fusion"]["method"] == "rrf" and dbg["fusion"]["k"] == 60
    assert dbg["temporal"]["start"] == "2026-02-02T00:00:00Z" and dbg["temporal"]["end"] == "2026-02-09T00:00:00Z"
    assert {"bm25", "semantic", "question", "temporal", "fusion", "packing", "total"} <= set(dbg["timings_ms"])
    assert dbg["rerank"]["applied"] is False


async def test_empty_tenant_retrieve(client):
    status, body = await post(client, "/v1/retrieve", {"query": "anything at all"})
    assert status == 200 and body == {"results": [], "coverage": "none"}


async def test_recall_shape(client):
    await post(client, "/v1/ingest/conversation", CONV)
    resp = await client.post("/v1/recall", json={"query": "Which database stores the orders?", "limit": 2},
                             headers=A)
    body = await resp.json()
    assert resp.status == 200 and body["coverage"] in ("high", "partial", "low")
    assert 1 <= len(body["memories"]) <= 2
    m = body["memories"][0]
    assert {"node_id", "content", "confidence", "relevance", "when", "session_id", "entities", "type"} <= set(m)
    assert "Postgres" in m["content"] and m["when"] == T0 and m["session_id"] == "s1"
    # filters
    _, none = await post(client, "/v1/recall", {"query": "Postgres orders", "session_filter": "other"})
    assert none["memories"] == []


async def test_ingest_text_with_message_ids(client):
    status, res = await post(client, "/v1/ingest", {
        "text": "Deploys go through GitHub Actions. We pin Node to version 20.", "session_id": "doc-1",
        "message_ids": ["D1:3"], "source_origin": "file_sync", "reference_date": None})
    assert status == 200 and len(res["facts"]) == 2
    _, body = await post(client, "/v1/retrieve", {"query": "Node version", "top_k": 1})
    md = body["results"][0]["metadata"]
    assert md["message_ids"] == ["D1:3"] and md["source_origin"] == "file_sync"
    assert body["results"][0]["source"] == "text"


async def test_conversation_message_ids_list(client):
    body = {"messages": [{"role": "user", "content": "The deploy window is Friday at 16:00 UTC."}],
            "message_ids": ["D7:1"], "session_id": "s7"}
    await post(client, "/v1/ingest/conversation", body)
    _, out = await post(client, "/v1/retrieve", {"query": "deploy window", "top_k": 1})
    assert out["results"][0]["metadata"]["message_ids"] == ["D7:1"]


async def test_duplicates_merged(client):
    _, first = await post(client, "/v1/ingest/conversation", CONV)
    again = dict(CONV, session_id="s2")
    _, second = await post(client, "/v1/ingest/conversation", again)
    assert second["duplicates_merged"] == 3 and second["nodes_created"] == 0 and second["edges_created"] == 0
    _, body = await post(client, "/v1/retrieve", {"query": "cache TTL", "top_k": 1})
    md = body["results"][0]["metadata"]
    assert md["mention_count"] == 2 and md["session_ids"] == ["s1", "s2"]
    _, st = await get(client, "/v1/stats")
    assert st["nodes"]["FACT"] == 3


async def get(client, path, headers=A):
    resp = await client.get(path, headers=headers)
    return resp.status, await resp.json()


# -- supersession -------------------------------------------------------------------------------------------
async def test_supersession_ttl_300_then_600(client):
    await post(client, "/v1/ingest/conversation", {"session_id": "s1", "reference_date": "2026-02-01",
                                                   "messages": [{"role": "user", "content": "The cache TTL is 300s."}]})
    _, res = await post(client, "/v1/ingest/conversation", {
        "session_id": "s2", "reference_date": "2026-02-08",
        "messages": [{"role": "user", "content": "We raised the cache TTL to 600s because of load."}]})
    assert res["supersessions"] == 1 and res["edges_created"] == 2  # MENTIONS(TTL) + SUPERSEDES
    _, body = await post(client, "/v1/retrieve", {"query": "current cache TTL", "reference_date": "2026-02-09"})
    results = body["results"]
    assert "600s" in results[0]["content"] and results[0]["metadata"]["superseded"] is False
    old = next(r for r in results if "300s" in r["content"])
    assert old["metadata"]["superseded"] is True and old["metadata"]["superseded_by"] == results[0]["node_id"]
    assert old["score"] < results[0]["score"]
    _, st = await get(client, "/v1/stats")
    assert st["edges"]["SUPERSEDES"] == 1


async def test_a_returned_fact_shows_its_later_supersession_and_mentions(client):
    """Results' metadata is built once per stored fact (search._result): a fact already returned must show what a
    later ingest changed (superseded, superseded_by, mention_count), never the first answer's copy."""
    first = {"session_id": "s1", "reference_date": "2026-02-01",
             "messages": [{"role": "user", "content": "The cache TTL is 300s."}]}
    await post(client, "/v1/ingest/conversation", first)
    _, body = await post(client, "/v1/retrieve", {"query": "cache TTL", "reference_date": "2026-02-02"})
    (old,) = [r for r in body["results"] if "300s" in r["content"]]
    assert old["metadata"]["superseded"] is False and old["metadata"]["mention_count"] == 1
    await post(client, "/v1/ingest/conversation", {**first, "session_id": "s1b"})  # the same fact again: merged
    await post(client, "/v1/ingest/conversation", {
        "session_id": "s2", "reference_date": "2026-02-08",
        "messages": [{"role": "user", "content": "We raised the cache TTL to 600s because of load."}]})
    _, body = await post(client, "/v1/retrieve", {"query": "cache TTL", "reference_date": "2026-02-09"})
    (old,) = [r for r in body["results"] if "300s" in r["content"]]
    (new,) = [r for r in body["results"] if "600s" in r["content"]]
    assert old["metadata"]["superseded"] is True and old["metadata"]["superseded_by"] == new["node_id"]
    assert old["metadata"]["mention_count"] == 2 and old["metadata"]["session_ids"] == ["s1", "s1b"]


async def test_explicit_switch_supersedes_and_contradiction(client):
    await post(client, "/v1/ingest", {"text": "We store orders in MySQL. The dashboard uses Grafana.",
                                      "reference_date": "2026-01-10"})
    _, res = await post(client, "/v1/ingest", {"text": "We migrated from MySQL to Postgres for the orders.",
                                               "reference_date": "2026-02-10"})
    assert res["supersessions"] == 1
    _, body = await post(client, "/v1/retrieve", {"query": "orders database", "top_k": 5})
    by = {r["content"]: r["metadata"]["superseded"] for r in body["results"]}
    assert by["We store orders in MySQL."] is True
    assert by.get("The dashboard uses Grafana.", False) is False
    await post(client, "/v1/ingest", {"text": "We use feature flags for billing.", "reference_date": "2026-01-01"})
    _, res = await post(client, "/v1/ingest", {"text": "We don't use feature flags for billing.",
                                               "reference_date": "2026-01-05"})
    assert res["contradictions"] == 1
    _, st = await get(client, "/v1/stats")
    assert st["edges"]["CONTRADICTS"] == 1


# -- jobs ---------------------------------------------------------------------------------------------------
async def test_job_lifecycle(make_client):
    c = await make_client(workers=1, job_delay_ms=150)
    s1, j1 = await post(c, "/v1/jobs/ingest/conversation", CONV)
    s2, j2 = await post(c, "/v1/jobs/ingest", {"text": "The staging cluster runs on Fargate.", "session_id": "s9"})
    assert (s1, j1["status"], s2, j2["status"]) == (200, "pending", 200, "pending")
    seen: list[str] = []
    done = await wait_job(c, j2["job_id"], statuses=seen)
    assert seen[0] == "pending" and seen[-1] == "completed"
    assert seen == [s for s in ("pending", "running", "completed") if s in seen]  # only forward transitions
    first = await wait_job(c, j1["job_id"])
    assert first["status"] == "completed" and first["attempts"] == 1
    assert first["facts_extracted"] == 3 and first["nodes_created"] == first["result"]["nodes_created"] > 0
    assert first["edges_created"] > 0 and first["processing_ms"] >= 0
    assert done["result"]["facts"][0]["core"] == "The staging cluster runs on Fargate."


async def test_unknown_job_404_and_other_tenant_404(client):
    assert (await client.get("/v1/jobs/does-not-exist", headers=A)).status == 404
    _, j = await post(client, "/v1/jobs/ingest", {"text": "The CI pipeline uses GitHub Actions runners."})
    assert (await client.get(f"/v1/jobs/{j['job_id']}", headers=B)).status == 404
    assert (await wait_job(client, j["job_id"]))["status"] == "completed"


# -- reflection, knowledge, stats, forget, warmup -----------------------------------------------------------
REDIS_FACTS = ["We use Redis for the session cache.", "Redis runs with 2 replicas in production.",
               "The Redis eviction policy is allkeys-lru.", "Redis persistence is disabled for the cache."]


async def test_reflect_sync_and_job(client):
    for i, t in enumerate(REDIS_FACTS):
        await post(client, "/v1/ingest", {"text": t, "session_id": f"s{i}", "reference_date": f"2026-02-0{i + 1}"})
    status, res = await post(client, "/v1/reflect", {})
    assert status == 200
    assert res["synthesized_count"] == 1 and res["nodes_created"] == 1
    assert res["entities_processed"] == 1
    cl = next(x for x in res["clusters"] if x["entity"] == "Redis")
    assert cl == {"entity": "Redis", "facts_analyzed": 4, "observations_created": 1}
    _, body = await post(client, "/v1/retrieve", {"query": "what do we know about Redis", "top_k": 10})
    obs = [r for r in body["results"] if r["source"] == "reflection"]
    assert len(obs) == 1 and obs[0]["metadata"]["fact_type"] == "observation"
    assert obs[0]["content"].startswith("Observation about Redis (4 facts across 4 sessions")
    # unchanged cluster: skipped; through the job endpoint this time
    _, j = await post(client, "/v1/jobs/reflect", {})
    assert j["status"] == "pending"
    done = await wait_job(client, j["job_id"])
    assert done["result"]["synthesized_count"] == 0 and done["result"]["entities_skipped"] >= 1


async def test_knowledge_stats_forget(client):
    await post(client, "/v1/ingest/conversation", CONV)
    await post(client, "/v1/ingest", {"text": "Postgres backups run nightly at 02:00.", "session_id": "s2"})
    _, k = await get(client, "/v1/knowledge")
    assert k["total_memories"] == 4 and k["total_sessions"] == 2 and k["maturity"] == "cold"
    ents = {e["name"]: e for e in k["entities"]}
    assert ents["Postgres"]["memory_count"] == 2 and ents["Redis"]["memory_count"] == 2
    assert {"name", "memory_count", "last_seen"} == set(ents["Postgres"])
    _, st = await get(client, "/v1/stats")
    assert st["pipeline_tier"] == 1 and st["pipeline_maturity"] == "cold"
    assert st["nodes"]["FACT"] == 4 and st["nodes"]["ENTITY"] == len(k["entities"])
    assert st["edges"]["MENTIONS"] == sum(e["memory_count"] for e in k["entities"])
    resp = await client.delete("/v1/forget/session/s1", headers=A)
    assert resp.status == 200 and await resp.json() == {"memories_removed": 3}
    _, k2 = await get(client, "/v1/knowledge")
    assert k2["total_memories"] == 1 and {e["name"] for e in k2["entities"]} == {"Postgres"}
    resp = await client.delete("/v1/forget/session/nope", headers=A)
    assert await resp.json() == {"memories_removed": 0}


async def test_user_scoping_and_forget_user(client):
    await post(client, "/v1/ingest", {"text": "The release train leaves every Tuesday.", "user_id": "ns:a"})
    await post(client, "/v1/ingest", {"text": "The release train leaves every Tuesday.", "user_id": "ns:b"})
    _, ka = await get(client, "/v1/knowledge?user_id=ns:a")
    assert ka["total_memories"] == 1  # same text, different users: not merged
    _, r = await post(client, "/v1/retrieve", {"query": "release train", "user_id": "ns:b"})
    assert len(r["results"]) == 1
    assert (await client.delete("/v1/forget/user/ns:a", headers=A)).status == 422  # confirm=true required
    resp = await client.delete("/v1/forget/user/ns:a?confirm=true", headers=A)
    body = await resp.json()
    assert body["user_id"] == "ns:a" and body["deleted"]["engraved_memories"] == 1
    _, k = await get(client, "/v1/knowledge")
    assert k["total_memories"] == 1


async def test_warmup(client):
    s1, w1 = await post(client, "/v1/warmup", {})
    resp = await client.post("/v1/warmup", headers=A)  # no body at all is fine
    w2 = await resp.json()
    assert s1 == 200 and w1["already_warm"] is False and w2["already_warm"] is True
    assert w1["tenant_id"] == w2["tenant_id"]


async def test_tenant_isolation(client):
    await post(client, "/v1/ingest/conversation", CONV)
    _, rb = await post(client, "/v1/retrieve", {"query": "cache TTL"}, headers=B)
    assert rb["results"] == [] and rb["coverage"] == "none"
    _, kb = await get(client, "/v1/knowledge", headers=B)
    assert kb["total_memories"] == 0 and kb["entities"] == []
    _, w = await post(client, "/v1/warmup", {}, headers=B)
    _, wa = await post(client, "/v1/warmup", {}, headers=A)
    assert w["tenant_id"] != wa["tenant_id"]
    resp = await client.delete("/v1/forget/session/s1", headers=B)
    assert await resp.json() == {"memories_removed": 0}
    _, ra = await post(client, "/v1/retrieve", {"query": "cache TTL"})
    assert ra["results"]


# -- settle delay, persistence, latency, metrics ------------------------------------------------------------
async def test_settle_delay_hides_mentions_until_it_passes(make_client):
    """On the mock's injected clock (still while the job runs): MENTIONS edges and entities stay hidden for exactly
    settle_delay_ms after the ingest, then all appear."""
    t = [1_000_000.0]
    c = await make_client(settle_delay_ms=400, clock=lambda: t[0])
    _, j = await post(c, "/v1/jobs/ingest/conversation", CONV)
    done = await wait_job(c, j["job_id"])
    assert done["status"] == "completed" and done["edges_created"] > 0
    _, st = await get(c, "/v1/stats")
    _, k = await get(c, "/v1/knowledge")
    assert st["pending_edges"] == done["edges_created"]
    assert "MENTIONS" not in st["edges"] and k["entities"] == [] and k["total_memories"] == 3
    t[0] += 0.399
    _, st = await get(c, "/v1/stats")
    assert st["pending_edges"] == done["edges_created"]  # 1 ms before the delay ends
    t[0] += 0.002
    _, st = await get(c, "/v1/stats")
    assert st["pending_edges"] == 0 and st["edges"]["MENTIONS"] == done["edges_created"]
    _, k = await get(c, "/v1/knowledge")
    assert {e["name"] for e in k["entities"]} >= {"Redis", "TTL", "Postgres"}


async def test_persistence_across_restart(make_client, tmp_path):
    data = str(tmp_path / "persist")
    c1 = await make_client(data_dir=data)
    await post(c1, "/v1/ingest/conversation", CONV)
    await c1.close()
    c2 = await make_client(data_dir=data)
    _, body = await post(c2, "/v1/retrieve", {"query": "cache TTL", "top_k": 1})
    assert body["results"][0]["content"] == "The cache TTL is 300s."
    _, k = await get(c2, "/v1/knowledge")
    assert k["total_memories"] == 3
    c3 = await make_client(data_dir=str(tmp_path / "fresh"))
    _, empty = await post(c3, "/v1/retrieve", {"query": "cache TTL"})
    assert empty["results"] == []


async def test_added_latency_headers(make_client):
    c = await make_client(latency_fast_ms=30, latency_full_ms=60)
    resp = await c.post("/v1/retrieve", json={"query": "x", "mode": "fast"}, headers=A)
    assert resp.headers["X-Cortex-Added-Latency-Ms"] == "30"
    assert int(resp.headers["X-Cortex-Processing-Ms"]) >= 30  # the delay is inside the server-side time
    resp = await c.post("/v1/retrieve", json={"query": "x", "debug": True}, headers=A)
    assert resp.headers["X-Cortex-Added-Latency-Ms"] == "60"
    assert (await resp.json())["_debug"]["timings_ms"]["added_latency"] == 60


async def test_metrics(client):
    await post(client, "/v1/ingest/conversation", CONV)
    await post(client, "/v1/retrieve", {"query": "cache", "mode": "fast"})
    await post(client, "/v1/retrieve", {}, headers={})
    _, j = await post(client, "/v1/jobs/ingest", {"text": "The linter is Ruff with line length 110."})
    await wait_job(client, j["job_id"])
    text = await (await client.get("/metrics")).text()
    assert 'memrig_cortex_mock_requests_total{endpoint="/v1/retrieve",method="POST",status="200"} 1.0' in text
    assert 'memrig_cortex_mock_requests_total{endpoint="/v1/retrieve",method="POST",status="401"} 1.0' in text
    assert 'memrig_cortex_mock_retrieve_duration_seconds_count{mode="fast"} 1.0' in text
    assert "memrig_cortex_mock_job_queue_depth 0.0" in text
    assert 'memrig_cortex_mock_jobs_total{status="completed"} 1.0' in text
    assert 'memrig_cortex_mock_nodes{type="FACT"} 4.0' in text
    assert "memrig_cortex_mock_open_tenants 1.0" in text
    assert "tenant=" not in text  # no tenant ids (derived from API keys) on a public endpoint


class _FakeLLM:
    """Stands in for LLMClient: returns fixed fact lines (or fails like an unreachable endpoint)."""

    def __init__(self, text: str = "", fail: bool = False):
        self.text, self.fail, self.calls = text, fail, []

    async def chat(self, messages, **kw):
        from services.common.llm_client import LLMError

        self.calls.append(messages)
        if self.fail:
            raise LLMError("LLM call failed: 503 — down", 503)
        return type("R", (), {"text": self.text})()

    async def close(self):
        return None


async def test_llm_extractor(make_client):
    from services.common.prompts import FACT_EXTRACTION_SYSTEM
    from services.cortex_mock.app import ENGINE_KEY

    c = await make_client(extractor="llm")
    fake = _FakeLLM("- The session cache runs on Redis.\n- Orders are stored in Postgres.\n")
    c.server.app[ENGINE_KEY]._llm = fake
    status, res = await post(c, "/v1/ingest/conversation", CONV)
    assert status == 200
    assert [f["core"] for f in res["facts"]] == ["The session cache runs on Redis.", "Orders are stored in Postgres."]
    assert fake.calls[0][0] == {"role": "system", "content": FACT_EXTRACTION_SYSTEM}
    _, body = await post(c, "/v1/retrieve", {"query": "where are orders stored", "top_k": 1})
    assert body["results"][0]["metadata"]["message_ids"] == ["m2"]  # attributed to the overlapping message
    c.server.app[ENGINE_KEY]._llm = _FakeLLM(fail=True)
    status, err = await post(c, "/v1/ingest", {"text": "Anything at all here."})
    assert status == 502 and "LLM" in err["detail"]
